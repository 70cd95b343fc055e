"""The dataset pipeline: the ``Dataset`` base and its nodes (shuffle, repeat, map, batch).

A dataset is a small pipeline of nodes. A source (``NumpySlicesDataset``) slices its columns
along the first axis into rows; ``shuffle``, ``repeat``, ``map`` and ``batch`` each return a new
node wrapping the previous one (the original stays usable). A row is a tuple of NumPy arrays, one
per column; after ``batch`` a "row" is a batch.

Shuffling is seeded: each shuffling node owns a ``numpy.random.Generator`` created from the
dataset seed (``minigrad.dataset.config.set_seed`` or ``minigrad.set_seed``) when it first
shuffles, so a seed set after building the pipeline but before iterating it still counts. Every
pass over the data draws a new permutation from it, so the sequence of epoch orders is the same
in every run with the same seed, and epochs differ from one another.
"""
import itertools
import math

import numpy

from minigrad.dataset.settings import new_generator
from minigrad._checks import (
    check_bool,
    check_callable,
    check_int,
    check_positive_int,
    check_relation,
    check_str_tuple,
    check_type,
    is_int,
)
from minigrad.dataset.iterator import RowIterator


def _buffer_shuffle(items, buffer_size, rng):
    """MindSpore's shuffle buffer: keep ``buffer_size`` items, emit a random one, refill.

    With ``buffer_size`` at least the number of items this is a uniform shuffle.
    """
    buffer = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        slot = int(rng.integers(buffer_size))
        yield buffer[slot]
        buffer[slot] = item
    rng.shuffle(buffer)
    yield from buffer


_CHUNK = 1 << 16  # indices per array of a shuffled index stream


def _chunked(indices):
    """Group a stream of indices into int64 arrays of at most ``_CHUNK``."""
    iterator = iter(indices)
    while True:
        chunk = numpy.fromiter(itertools.islice(iterator, _CHUNK), numpy.int64)
        if not len(chunk):
            return
        yield chunk


def _batches_of(chunks, size, drop_remainder):
    """Index arrays of ``size`` from a stream of index arrays; batches span chunk boundaries."""
    pending, count = [], 0
    for chunk in chunks:
        start = 0
        while start < len(chunk):
            piece = chunk[start:start + size - count]
            pending.append(piece)
            count += len(piece)
            start += len(piece)
            if count == size:
                yield pending[0] if len(pending) == 1 else numpy.concatenate(pending)
                pending, count = [], 0
    if count and not drop_remainder:
        yield numpy.concatenate(pending)


class Dataset:
    """Base of the pipeline nodes: iteration, iterators and the chaining methods."""

    _rng = None  # a shuffling node's Generator, made by _generator() at its first shuffle

    def __init__(self, parent=None):
        self.parent = parent

    def _generator(self):
        if self._rng is None:
            self._rng = new_generator()
        return self._rng

    # ---- what each node defines -------------------------------------------------------------
    def _rows(self):
        """Yield this node's rows for one pass (one epoch)."""
        raise NotImplementedError

    def _index_chunks(self):
        """The source rows of one pass, as a lazy iterator of int64 index arrays, if this node
        only reorders or repeats the source's rows; else None. Lazy, so that ``repeat(n)`` draws
        each pass's order only when the pass is reached."""
        return None

    def _rows_of(self, chunks):
        source = self._source()
        return (source.take(i) for chunk in chunks for i in chunk)

    def get_dataset_size(self):
        """Number of rows per epoch (number of batches after ``batch``)."""
        return self.parent.get_dataset_size()

    def get_batch_size(self):
        return self.parent.get_batch_size()

    def get_col_names(self):
        return self.parent.get_col_names()

    def _source(self):
        return self.parent._source()

    # ---- chaining ---------------------------------------------------------------------------
    def shuffle(self, buffer_size):
        """Shuffle rows through a buffer of ``buffer_size`` (≥ dataset size: a full shuffle).

        Raises:
            TypeError: if ``buffer_size`` is not an int.
            ValueError: if it is below 2.
        """
        return ShuffleDataset(self, buffer_size)

    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None):
        """Stack ``batch_size`` consecutive rows into one batch per column.

        Args:
            batch_size: rows per batch (int ≥ 1).
            drop_remainder: drop the last batch if it has fewer than ``batch_size`` rows.
            num_parallel_workers: a positive int or None, accepted for MindSpore compatibility;
                ignored.

        Raises:
            TypeError: if ``batch_size`` is not an int or ``drop_remainder`` not a bool.
            ValueError: if ``batch_size`` is not positive.
            TypeError / ValueError: for a ``num_parallel_workers`` that is not a positive int or
                None.
        """
        check_positive_int("num_parallel_workers", num_parallel_workers, allow_none=True,
                           owner="batch")
        return BatchDataset(self, batch_size, drop_remainder)

    def repeat(self, count=None):
        """Repeat the dataset ``count`` times (None or -1: without end).

        Each repetition is a fresh pass over the nodes before it, so ``shuffle(...).repeat(n)``
        shuffles every repetition anew, while ``repeat(n).shuffle(...)`` shuffles the n passes as
        one dataset; ``repeat(n).batch(b)`` lets batches span repetitions (MindSpore's order
        semantics). ``get_dataset_size()`` is the parent's size times ``count``; None without end.

        Raises:
            TypeError: if ``count`` is neither an int nor None.
            ValueError: if it is an int other than -1 below 1.
        """
        return RepeatDataset(self, count)

    def map(self, operations, input_columns=None, output_columns=None, num_parallel_workers=None):
        """Apply ``operations`` (a callable or a list applied in order) to columns of each row.

        As in MindSpore, the first operation is called with the ``input_columns`` of a row as its
        arguments (``op(a, b)`` for ``input_columns=["a", "b"]``); each next operation is called
        with the outputs of the one before (a tuple returned is several outputs). The outputs of
        the last operation become the ``output_columns``. With as many outputs as inputs they
        take the input columns' places; otherwise the output columns come first, followed by the
        columns that were not inputs, in their order.

        Args:
            operations: callables taking and returning NumPy arrays (e.g. ``lambda x: x / 255``).
                Before ``batch`` they see single rows, after it batches.
            input_columns: a column name or list of names; default the first column.
            output_columns: names of the last operation's outputs; default ``input_columns``
                (then the last operation must return as many values as there are inputs).
            num_parallel_workers: a positive int or None, accepted for MindSpore compatibility;
                ignored.

        Raises:
            ValueError: for an unknown, empty or repeated column name, no column names, or
                output names that clash with the columns kept; while iterating, when the last
                operation returns a number of values other than the number of output columns.
                TypeError for a non-callable operation, or column names that are not strs.
        """
        check_positive_int("num_parallel_workers", num_parallel_workers, allow_none=True,
                           owner="map")
        return MapDataset(self, operations, input_columns, output_columns)

    # ---- iteration --------------------------------------------------------------------------
    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False, do_copy=True,
                              device=None):
        """An iterator over rows as tuples of Tensors (NumPy arrays with ``output_numpy=True``).

        Each ``for`` loop over the iterator runs one epoch; the iterator serves ``num_epochs``
        epochs (``-1``: no limit)::

            it = ds.create_tuple_iterator(num_epochs=2)
            for epoch in range(2):
                for x, y in it: ...

        ``device`` (``"CPU"`` or ``"GPU"``; default: ``set_context(device_target=...)``) is where
        the Tensors are made. On the GPU each column is copied into a pinned host buffer (two
        per column, used in turn) and from there to the device without waiting for the copy
        (and without reading the device). On the CPU there is nothing to stage: the rows are
        host Tensors, and pinned buffers are never made; with ``output_numpy=True`` the rows
        are NumPy arrays on every device.

        Raises:
            ValueError / RuntimeError: for a ``device`` ``backend.check_device`` refuses.
        """
        check_bool("do_copy", do_copy)
        return RowIterator(self, columns, num_epochs, output_numpy, as_dict=False, device=device)

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=True, device=None):
        """Like ``create_tuple_iterator`` but each row is a dict ``{column name: value}``.

        ``do_copy`` is accepted for MindSpore compatibility (rows are always fresh Tensors)."""
        check_bool("do_copy", do_copy)
        return RowIterator(self, None, num_epochs, output_numpy, as_dict=True, device=device)

    def __iter__(self):
        """One epoch of tuples of Tensors."""
        return iter(self.create_tuple_iterator(num_epochs=1))

    def __len__(self):
        size = self.get_dataset_size()
        if size is None:
            raise TypeError(f"{type(self).__name__} repeats without end: it has no length")
        return size

    def __repr__(self):
        return (f"{type(self).__name__}(columns={self.get_col_names()}, "
                f"size={self.get_dataset_size()}, batch_size={self.get_batch_size()})")


def _parent(parent, owner):
    """``parent`` if it is a Dataset: the node a pipeline operation is applied to."""
    return check_type("parent", parent, Dataset, owner=owner)


class ShuffleDataset(Dataset):
    """``dataset.shuffle(buffer_size)``: see ``Dataset.shuffle``."""

    def __init__(self, parent, buffer_size):
        super().__init__(_parent(parent, "ShuffleDataset"))
        self.buffer_size = check_int("buffer_size", buffer_size, low=2)

    def _index_chunks(self):
        chunks = self.parent._index_chunks()
        if chunks is None:
            return None
        indices = (i for chunk in chunks for i in chunk)
        return _chunked(_buffer_shuffle(indices, self.buffer_size, self._generator()))

    def _rows(self):
        chunks = self._index_chunks()
        if chunks is not None:  # shuffle indices, not rows: no per-row copies
            return self._rows_of(chunks)
        return _buffer_shuffle(self.parent._rows(), self.buffer_size, self._generator())


class RepeatDataset(Dataset):
    """``dataset.repeat(count)``: see ``Dataset.repeat``."""

    def __init__(self, parent, count=None):
        super().__init__(_parent(parent, "RepeatDataset"))
        endless = count is None or (is_int(count) and count == -1)
        if not endless and not is_int(count):
            check_int("count", count)  # a TypeError naming the value
        if not endless and count < 1:
            check_positive_int("count", count)  # a ValueError naming the value
        # a loop bound only, never stored in an array: counts beyond int64 are fine
        self.count = None if endless else int(count)

    def _passes(self):
        return itertools.repeat(None) if self.count is None else range(self.count)

    def _index_chunks(self):
        first = self.parent._index_chunks()
        if first is None:
            return None

        def passes():  # each pass's order is drawn when the pass begins
            yield from first
            for _ in itertools.islice(self._passes(), 1, None):
                yield from self.parent._index_chunks()
        return passes()

    def _rows(self):
        chunks = self._index_chunks()
        if chunks is not None:
            return self._rows_of(chunks)
        return itertools.chain.from_iterable(self.parent._rows() for _ in self._passes())

    def get_dataset_size(self):
        if self.count is None:
            return None
        size = self.parent.get_dataset_size()
        return None if size is None else size * self.count


class MapDataset(Dataset):
    """``dataset.map(operations, input_columns, output_columns)``: see ``Dataset.map``."""

    def __init__(self, parent, operations, input_columns=None, output_columns=None):
        super().__init__(_parent(parent, "MapDataset"))
        operations = list(operations) if isinstance(operations, (list, tuple)) else [operations]
        for i, op in enumerate(operations):
            check_callable(f"operations[{i}]", op, owner="MapDataset")
        names = self.parent.get_col_names()
        input_columns = _column_list(input_columns, "input_columns", names[:1])
        unknown = [c for c in input_columns if c not in names]
        if unknown:
            raise ValueError(f"input_columns {unknown} are not columns of the dataset {names}")
        output_columns = _column_list(output_columns, "output_columns", input_columns)
        kept = [c for c in names if c not in input_columns]
        self.in_place = len(output_columns) == len(input_columns)
        if self.in_place:  # outputs take the inputs' places
            rename = dict(zip(input_columns, output_columns))
            self.column_names = [rename.get(c, c) for c in names]
        else:  # outputs first, then the columns that were not inputs
            self.column_names = output_columns + kept
        if len(set(self.column_names)) != len(self.column_names):
            raise ValueError(f"output_columns {output_columns} repeat a name of the columns kept "
                             f"{kept}")
        self.operations = operations
        self.input_columns, self.output_columns = input_columns, output_columns
        self.positions = [names.index(c) for c in input_columns]
        self.kept_positions = [names.index(c) for c in kept]

    def get_col_names(self):
        return list(self.column_names)

    def _rows(self):
        for row in self.parent._rows():
            values = tuple(row[p] for p in self.positions)
            for op in self.operations:
                values = op(*values)
                if not isinstance(values, tuple):
                    values = (values,)
            if len(values) != len(self.output_columns):
                raise ValueError(f"map: the last operation returned {len(values)} values but there "
                                 f"are {len(self.output_columns)} output_columns "
                                 f"{self.output_columns}; give output_columns to name the outputs")
            values = [numpy.asarray(v) for v in values]
            if self.in_place:
                row = list(row)
                for p, v in zip(self.positions, values):
                    row[p] = v
                yield tuple(row)
            else:
                yield tuple(values) + tuple(row[p] for p in self.kept_positions)


class BatchDataset(Dataset):
    """``dataset.batch(batch_size, drop_remainder)``: see ``Dataset.batch``."""

    def __init__(self, parent, batch_size, drop_remainder=False):
        super().__init__(_parent(parent, "BatchDataset"))
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.drop_remainder = check_bool("drop_remainder", drop_remainder)

    def _rows(self):
        size = self.batch_size
        chunks = self.parent._index_chunks()
        if chunks is not None:  # gather each batch with one fancy index per column
            source = self._source()
            for indices in _batches_of(chunks, size, self.drop_remainder):
                yield source.take(indices)
            return
        rows = iter(self.parent._rows())
        while True:
            chunk = list(itertools.islice(rows, size))
            if not chunk or (self.drop_remainder and len(chunk) < size):
                return
            yield tuple(numpy.stack(column) for column in zip(*chunk))

    def get_dataset_size(self):
        n = self.parent.get_dataset_size()
        if n is None:  # repeated without end
            return None
        return n // self.batch_size if self.drop_remainder else math.ceil(n / self.batch_size)

    def get_batch_size(self):
        return self.batch_size


def _column_list(columns, name, default):
    """``columns`` (None, a name or a list of names) as a non-empty list without repeats."""
    if columns is None:
        return list(default)
    names = list(check_str_tuple(name, columns, owner="MapDataset"))
    check_relation(name, columns, len(names) > 0, "a column name or a non-empty list of names",
                   owner="MapDataset")
    return names
