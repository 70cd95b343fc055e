"""``NumpySlicesDataset``: the in-memory source, rows sliced along the first axis of arrays."""
import itertools

import numpy

from minigrad._checks import (INT64_MAX, INT64_MIN, IndexRangeError, check_positive_int,
                              check_relation, check_str_tuple, check_type, is_int)
from minigrad.dataset.sampling import IndexedSource
from minigrad.tensor import Tensor


class NumpySlicesDataset(IndexedSource):
    """Rows sliced along the first axis of in-memory arrays.

    Args:
        data: one array (one column); a tuple of arrays (one column each); a dict ``{column
            name: array}``; or a list, which is one column, ``numpy.array(data)``, as in MindSpore
            (a list of equal-shape arrays stacks into one). Tensors are copied to the host.
        column_names: names of the columns (a str, or a tuple or list of distinct non-empty
            strs); default the dict keys, else ``column_0``, ``column_1``...
        num_samples: rows per pass (see ``IndexedSource``).
        num_parallel_workers: a positive int or None, accepted for MindSpore compatibility;
            ignored.
        shuffle: shuffle each pass (see ``IndexedSource``: True by default unless a sampler is
            given, MindSpore's rule).
        sampler: row indices that fix the order (see ``IndexedSource``).
        num_shards: the number of shards (see ``IndexedSource``; by default the data-parallel
            group's size).
        shard_id: the shard this process reads (see ``IndexedSource``).

    Raises:
        ValueError: columns of different lengths, a list whose entries do not stack, a scalar
            column, a wrong number of column names, an empty dataset, a ``num_parallel_workers``
            below 1 (and ``IndexedSource``'s checks).
        TypeError: ``column_names`` that are not strs, a column of objects (``[None]``), a
            ``num_parallel_workers`` that is not an int, and as ``IndexedSource``.
    """

    def __init__(self, data, column_names=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None):
        names, columns = _columns(data)
        check_positive_int("num_parallel_workers", num_parallel_workers, allow_none=True,
                           owner="NumpySlicesDataset")
        if column_names is not None:
            column_names = list(check_str_tuple("column_names", column_names,
                                                owner="NumpySlicesDataset"))
            if len(column_names) != len(columns):
                raise ValueError(f"column_names has {len(column_names)} names {column_names} but "
                                 f"data has {len(columns)} columns")
            names = column_names
        lengths = [len(c) for c in columns]
        if len(set(lengths)) != 1:
            raise ValueError(f"all columns must have the same length along axis 0, got "
                             f"{dict(zip(names, lengths))}")
        check_relation("data", data, lengths[0] > 0, "columns of at least one row",
                       owner="NumpySlicesDataset")
        super().__init__(lengths[0], num_samples, shuffle, sampler, num_shards, shard_id,
                         owner="NumpySlicesDataset")
        self.columns = columns
        self.column_names = names

    def take(self, indices):
        """The rows at ``indices`` (an int, or an array or a list of ints: a batch), one array per
        column; negative indices count from the end.

        Raises:
            TypeError: for indices of another kind (None, a bool, a float, a str...).
            IndexError: for an index outside the rows (an ``IndexRangeError``, a ValueError too).
        """
        # the iterator's every row or batch: an int or an int array passes on one type test
        given = indices
        if not ((isinstance(indices, numpy.ndarray) and indices.dtype.kind in "iu")
                or is_int(indices)):
            indices = _index_array(indices)
        try:
            return tuple(column[indices] for column in self.columns)
        except (IndexError, OverflowError):  # OverflowError: an int beyond int64
            check_relation("indices", given, False, f"indices of the {self.length} rows "
                           f"(in [-{self.length}, {self.length - 1}])", error=IndexRangeError,
                           owner="NumpySlicesDataset.take")

    def get_col_names(self):
        return list(self.column_names)


def _index_array(indices):
    """``indices`` (a list or a tuple of ints) as an int array, or a TypeError naming it."""
    if (isinstance(indices, (list, tuple)) and indices
            and all(is_int(i) and INT64_MIN <= i <= INT64_MAX for i in indices)):
        return numpy.asarray(indices, dtype=numpy.int64)
    check_relation("indices", indices, False, "an int, or a non-empty array or list of ints",
                   error=TypeError, owner="NumpySlicesDataset.take")


def _columns(data):
    """Split ``data`` into (default column names, list of NumPy arrays)."""
    if isinstance(data, dict):
        names = [str(k) for k in data]
        columns = list(data.values())
    elif isinstance(data, tuple):
        columns = list(data)
        names = None
    elif isinstance(data, (numpy.ndarray, Tensor)):
        columns = [data]
        names = None
    elif isinstance(data, list):  # MindSpore: a list is one column, numpy.array(data)
        try:
            columns = [numpy.array([d.asnumpy() if isinstance(d, Tensor) else d for d in data])]
        except ValueError as error:
            raise ValueError(f"data is a list, which is one column (numpy.array(data)), but its "
                             f"entries do not stack into one array ({error}); pass a tuple or a "
                             f"dict for one column per entry") from None
        names = None
    else:
        check_type("data", data, (), expected="an array, a list, a tuple or a dict of arrays",
                   owner="NumpySlicesDataset")
    owner = "NumpySlicesDataset"
    check_relation("data", data, len(columns) > 0, "an array, a list, a tuple or a dict of at "
                   "least one column", owner=owner)
    columns = [c.asnumpy() if isinstance(c, Tensor) else numpy.asarray(c) for c in columns]
    for name, c in zip(names or itertools.count(), columns):
        check_relation("data", data, c.ndim > 0, f"columns with a first axis to slice (column "
                       f"{name} is a scalar)", owner=owner)
        check_relation("data", data, c.dtype.kind in "biufcUS", f"columns of numbers, bools or "
                       f"strs (column {name} has dtype {c.dtype})", error=TypeError, owner=owner)
    if names is None:
        names = [f"column_{i}" for i in range(len(columns))]
    return names, columns
