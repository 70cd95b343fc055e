"""The iterator that ``create_tuple_iterator`` and ``create_dict_iterator`` return."""
from minigrad._checks import check_bool, check_int, check_positive_int
from minigrad.tensor import Tensor


class RowIterator:
    """The object returned by ``create_tuple_iterator`` / ``create_dict_iterator``."""

    def __init__(self, dataset, columns, num_epochs, output_numpy, as_dict):
        if check_int("num_epochs", num_epochs) != -1:
            check_positive_int("num_epochs", num_epochs)  # or -1: no limit
        self.output_numpy = check_bool("output_numpy", output_numpy)
        names = dataset.get_col_names()
        if columns is not None:
            columns = [columns] if isinstance(columns, str) else list(columns)
            unknown = [c for c in columns if c not in names]
            if unknown:
                raise ValueError(f"columns {unknown} are not columns of the dataset {names}")
        self.dataset = dataset
        self.names = columns or names
        self.positions = [names.index(c) for c in columns] if columns else None
        self.num_epochs = num_epochs
        self.as_dict = as_dict
        self.epoch = 0
        self._rows = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._rows is None:
            if self.num_epochs != -1 and self.epoch >= self.num_epochs:
                raise StopIteration
            self._rows = iter(self.dataset._rows())
        try:
            row = next(self._rows)
        except StopIteration:
            self._rows = None
            self.epoch += 1
            raise
        if self.positions is not None:
            row = tuple(row[p] for p in self.positions)
        if not self.output_numpy:
            row = tuple(Tensor(value) for value in row)
        return dict(zip(self.names, row)) if self.as_dict else row

    def get_next(self):
        return next(self)
