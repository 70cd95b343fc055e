"""``GeneratorDataset``: rows from Python code (MindSpore's ``dataset.GeneratorDataset``).

The source is one of MindSpore's three kinds:

* random accessible (has ``__getitem__`` and ``__len__``, e.g. a list of rows or a class with
  both): row ``i`` is ``source[i]``, read when the pipeline reaches it; the order follows
  ``shuffle`` / ``sampler`` / ``num_shards`` like ``NumpySlicesDataset`` (shuffled by default);
* callable (a generator function): each pass iterates ``source()``, in its order;
* iterable (any other object with ``__iter__``): each pass iterates ``iter(source)``.

A row is a tuple (or list) of values, one per column, or a single value for one column; each
value becomes a NumPy array (its dtype kept: Python floats give float64, as in MindSpore; give
``column_types`` to cast).
"""
import itertools

import numpy

from minigrad import dtype as dtypes
from minigrad._checks import check_positive_int, check_relation, check_str_tuple, check_type
from minigrad.dataset.pipeline import Dataset
from minigrad.dataset.sampling import IndexedSource


class GeneratorDataset(Dataset):
    """A dataset whose rows come from Python code (see the module docstring).

    Args:
        source: a random-accessible object, a generator function, or an iterable.
        column_names: a name or a list of names, one per value of a row (required: minigrad has
            no ``schema``).
        column_types: None, or one dtype per column to cast the values to.
        schema: not supported (give ``column_names``).
        num_samples: the number of rows per pass (the first ones of the order).
        num_parallel_workers: accepted for MindSpore compatibility; rows are read in the
            calling thread.
        shuffle: shuffle each pass (a random-accessible source only; see ``IndexedSource``:
            True by default unless a sampler is given).
        sampler: row indices that fix the order (a random-accessible source only).
        num_shards: the number of shards (a random-accessible source only; see
            ``IndexedSource``).
        shard_id: the shard this process reads (a random-accessible source only).
        python_multiprocessing: accepted for MindSpore compatibility.
        max_rowsize: accepted for MindSpore compatibility.

    ``get_dataset_size()`` is ``len(source)`` (with the order's arguments) for a random-accessible
    source; for the others it runs one pass to count the rows, once, as MindSpore does.

    Raises:
        TypeError: a source of none of the three kinds; ``column_names`` not a str or a list of
            str; ``schema`` given.
        ValueError: ``column_names`` empty, with an empty name or a name twice; ``column_types``
            of another length than ``column_names``; ``shuffle=True``,
            a ``sampler`` or shards with a source that is not random accessible (and
            ``IndexedSource``'s checks). While iterating, ValueError for a row with another
            number of values than columns.
    """

    def __new__(cls, source=None, *args, **kwargs):
        if cls is GeneratorDataset:  # the kind of source decides how rows are ordered
            cls = _IndexedGenerator if _random_accessible(source) else _StreamGenerator
        return super().__new__(cls)

    def __init__(self, source, column_names=None, column_types=None, schema=None,
                 num_samples=None, num_parallel_workers=1, shuffle=None, sampler=None,
                 num_shards=None, shard_id=None, python_multiprocessing=True, max_rowsize=6):
        self._set_columns(source, column_names, column_types, schema)
        self._set_order(num_samples, shuffle, sampler, num_shards, shard_id)

    def _set_order(self, num_samples, shuffle, sampler, num_shards, shard_id):
        raise NotImplementedError

    def _set_columns(self, source, column_names, column_types, schema):
        if schema is not None:
            raise TypeError("GeneratorDataset: 'schema' is not supported by minigrad; give "
                            "column_names (and column_types) instead")
        if column_names is None:
            raise TypeError("GeneratorDataset: 'column_names' is required (a name or a list of "
                            "names, one per value of a row)")
        names = check_str_tuple("column_names", column_names, owner="GeneratorDataset")
        check_relation("column_names", column_names, bool(names), "at least one name",
                       owner="GeneratorDataset")
        types = None
        if column_types is not None:
            check_type("column_types", column_types, (tuple, list),
                       expected="a tuple or list of dtypes", owner="GeneratorDataset")
            types = [dtypes.as_dtype(t, "column_types", owner="GeneratorDataset")
                     for t in column_types]
            if len(types) != len(names):
                raise ValueError(f"GeneratorDataset: {len(types)} column_types for "
                                 f"{len(names)} column_names {list(names)}")
        self.source, self.column_names, self.column_types = source, list(names), types

    def _row(self, values):
        """One row as a tuple of NumPy arrays, one per column (cast to ``column_types``)."""
        values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
        if len(values) != len(self.column_names):
            raise ValueError(f"GeneratorDataset: the source gave a row of {len(values)} values "
                             f"for {len(self.column_names)} columns {self.column_names}")
        arrays = [v.asnumpy() if hasattr(v, "asnumpy") else numpy.asarray(v) for v in values]
        if self.column_types is not None:
            arrays = [a.astype(t, copy=False) for a, t in zip(arrays, self.column_types)]
        return tuple(arrays)

    def get_col_names(self):
        return list(self.column_names)


class _IndexedGenerator(GeneratorDataset, IndexedSource):
    """A random-accessible source: row ``i`` is ``source[i]``."""

    def _set_order(self, num_samples, shuffle, sampler, num_shards, shard_id):
        IndexedSource.__init__(self, len(self.source), num_samples, shuffle, sampler, num_shards,
                               shard_id, owner="GeneratorDataset")

    def take(self, indices):
        if numpy.ndim(indices) == 0:
            return self._row(self.source[int(indices)])
        rows = [self._row(self.source[int(i)]) for i in indices]
        return tuple(numpy.stack(column) for column in zip(*rows))


class _StreamGenerator(GeneratorDataset):
    """A callable or iterable source, read in its own order."""

    def _set_order(self, num_samples, shuffle, sampler, num_shards, shard_id):
        Dataset.__init__(self)
        source = self.source
        if not callable(source) and not hasattr(source, "__iter__"):
            raise TypeError(f"GeneratorDataset: 'source' must be random accessible (__getitem__ "
                            f"and __len__), a generator function or an iterable, got "
                            f"{type(source).__name__}")
        for name, value in (("shuffle=True", shuffle is True), ("a sampler", sampler is not None),
                            ("num_shards", num_shards is not None or shard_id is not None)):
            if value:
                raise ValueError(f"GeneratorDataset: {name} needs a random-accessible source "
                                 f"(with __getitem__ and __len__); this one is read in its own "
                                 f"order ({type(source).__name__})")
        self.num_samples = check_positive_int("num_samples", num_samples, allow_none=True,
                                              owner="GeneratorDataset")
        self._size = None

    def _rows(self):
        rows = self.source() if callable(self.source) else iter(self.source)
        return (self._row(values) for values in itertools.islice(rows, self.num_samples))

    def get_dataset_size(self):
        if self._size is None:  # one pass, counted once
            self._size = sum(1 for _ in self._rows())
        return self._size

    def get_batch_size(self):
        return 1


def _random_accessible(source):
    return hasattr(source, "__getitem__") and hasattr(source, "__len__") and not isinstance(
        source, (str, bytes, dict))
