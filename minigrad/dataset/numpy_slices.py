"""In-memory datasets, MindSpore style: ``NumpySlicesDataset(data).shuffle(n).batch(32)``.

A dataset is a small pipeline of nodes. The source slices its columns along the first axis into
rows; ``shuffle``, ``map`` and ``batch`` each return a new node wrapping the previous one (the
original stays usable). A row is a tuple of NumPy arrays, one per column; after ``batch`` a "row"
is a batch.

Shuffling is seeded: each shuffling node owns a ``numpy.random.Generator`` created from the
dataset seed (``minigrad.dataset.config.set_seed`` or ``minigrad.set_seed``) when it first
shuffles, so a seed set after building the pipeline but before iterating it still counts. Every
pass over the data draws a new permutation from it, so the sequence of epoch orders is the same
in every run with the same seed, and epochs differ from one another.
"""
import itertools
import math

import numpy

from minigrad import communication, random as mg_random
from minigrad.tensor import Tensor


class _Config:
    """Dataset-wide settings (``minigrad.dataset.config``); MindSpore's ``dataset.config``."""

    def __init__(self):
        self._seed = None

    def set_seed(self, seed):
        """Seed the shuffling of datasets built from now on (``None``: fresh entropy each time).

        Raises:
            ValueError: if ``seed`` is not a non-negative int.
        """
        if seed is not None and (not isinstance(seed, (int, numpy.integer)) or isinstance(seed, bool)
                                 or seed < 0):
            raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
        self._seed = None if seed is None else int(seed)

    def get_seed(self):
        return self._seed


config = _Config()


def _new_generator():
    """A Generator for one shuffling node: from the dataset seed, else ``minigrad.set_seed``'s."""
    seed = config.get_seed()
    return numpy.random.default_rng(mg_random.get_seed() if seed is None else seed)


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


class Dataset:
    """Base of the pipeline nodes: iteration, iterators and the chaining methods."""

    _rng = None  # a shuffling node's Generator, made by _generator() at its first shuffle

    def __init__(self, parent=None):
        self.parent = parent

    def _generator(self):
        if self._rng is None:
            self._rng = _new_generator()
        return self._rng

    # ---- what each node defines -------------------------------------------------------------
    def _rows(self):
        """Yield this node's rows for one pass (one epoch)."""
        raise NotImplementedError

    def _source_order(self):
        """Source indices for one pass if this node only reorders the source, else None."""
        return None

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
            ValueError: if ``buffer_size`` is not an int ≥ 2.
        """
        return ShuffleDataset(self, buffer_size)

    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None):
        """Stack ``batch_size`` consecutive rows into one batch per column.

        Args:
            batch_size: rows per batch (int ≥ 1).
            drop_remainder: drop the last batch if it has fewer than ``batch_size`` rows.
            num_parallel_workers: accepted for MindSpore compatibility; ignored.

        Raises:
            ValueError: if ``batch_size`` is not a positive int.
        """
        return BatchDataset(self, batch_size, drop_remainder)

    def repeat(self, count=None):
        """Repeat the dataset ``count`` times (None or -1: without end).

        Each repetition is a fresh pass over the nodes before it, so ``shuffle(...).repeat(n)``
        shuffles every repetition anew, while ``repeat(n).shuffle(...)`` shuffles the n passes as
        one dataset; ``repeat(n).batch(b)`` lets batches span repetitions (MindSpore's order
        semantics). ``get_dataset_size()`` is the parent's size times ``count``; None without end.

        Raises:
            ValueError: if ``count`` is not a positive int, -1 or None.
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
            num_parallel_workers: accepted for MindSpore compatibility; ignored.

        Raises:
            ValueError: for an unknown or repeated column name, or output names that clash with
                the columns kept; while iterating, when the last operation returns a number of
                values other than the number of output columns. TypeError for a non-callable
                operation.
        """
        return MapDataset(self, operations, input_columns, output_columns)

    # ---- iteration --------------------------------------------------------------------------
    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False, do_copy=True):
        """An iterator over rows as tuples of Tensors (NumPy arrays with ``output_numpy=True``).

        Each ``for`` loop over the iterator runs one epoch; the iterator serves ``num_epochs``
        epochs (``-1``: no limit)::

            it = ds.create_tuple_iterator(num_epochs=2)
            for epoch in range(2):
                for x, y in it: ...
        """
        return _Iterator(self, columns, num_epochs, output_numpy, as_dict=False)

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=True):
        """Like ``create_tuple_iterator`` but each row is a dict ``{column name: value}``.

        ``do_copy`` is accepted for MindSpore compatibility (rows are always fresh Tensors)."""
        return _Iterator(self, None, num_epochs, output_numpy, as_dict=True)

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


class NumpySlicesDataset(Dataset):
    """Rows sliced along the first axis of in-memory arrays.

    Args:
        data: one array (one column); a tuple of arrays (one column each); a dict ``{column
            name: array}``; or a list, which is one column, ``numpy.array(data)``, as in MindSpore
            (a list of equal-shape arrays stacks into one). Tensors are copied to the host.
        column_names: names of the columns; default the dict keys, else ``column_0``, ``column_1``...
        num_samples: use only the first ``num_samples`` rows of the (sampled) order.
        num_parallel_workers: accepted for MindSpore compatibility; ignored.
        shuffle: shuffle the rows each epoch. ``None`` (default) means True unless a sampler is
            given — MindSpore's rule.
        sampler: an iterable of row indices (e.g. a list) that fixes the order; not with
            ``shuffle=True``.
        num_shards, shard_id: read only shard ``shard_id`` of ``num_shards``: the rows at
            positions ``shard_id, shard_id + num_shards, ...`` of each pass's order, the order
            first padded by wrapping to a multiple of ``num_shards`` so that every shard has
            ``ceil(rows / num_shards)`` rows (data-parallel ranks must take the same number of
            steps); ``num_samples`` then counts per shard. Give both or neither. Default: in
            data-parallel mode, the communication group's size and this process's rank, else
            no sharding. When shuffling across a group, rank 0 draws the shuffle seed for all
            ranks (every shard cuts the same permutation).

    Raises:
        ValueError: columns of different lengths, a list whose entries do not stack, a wrong
            number of column names, an empty dataset, both ``shuffle=True`` and a sampler, only
            one of ``num_shards`` / ``shard_id``, or a ``shard_id`` outside ``[0, num_shards)``.
    """

    def __init__(self, data, column_names=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None):
        super().__init__()
        names, columns = _columns(data)
        if column_names is not None:
            column_names = [column_names] if isinstance(column_names, str) else list(column_names)
            if len(column_names) != len(columns):
                raise ValueError(f"column_names has {len(column_names)} names {column_names} but "
                                 f"data has {len(columns)} columns")
            names = column_names
        lengths = [len(c) for c in columns]
        if len(set(lengths)) != 1:
            raise ValueError(f"all columns must have the same length along axis 0, got "
                             f"{dict(zip(names, lengths))}")
        if lengths[0] == 0:
            raise ValueError("data has no rows")
        if shuffle and sampler is not None:
            raise ValueError("give either shuffle=True or a sampler, not both")
        self.columns = columns
        self.column_names = names
        self.sampler = None if sampler is None else numpy.asarray(list(sampler), dtype=numpy.int64)
        if self.sampler is not None and self.sampler.size and (
                self.sampler.min() < -lengths[0] or self.sampler.max() >= lengths[0]):
            raise ValueError(f"sampler indices must lie in [0, {lengths[0]}), got "
                             f"[{self.sampler.min()}, {self.sampler.max()}]")
        self.shuffled = sampler is None if shuffle is None else bool(shuffle)
        self.num_samples = _check_positive_int(num_samples, "num_samples", allow_none=True)
        self.num_shards, self.shard_id = _shards(num_shards, shard_id)
        if self.num_shards > 1 and self.shuffled and communication.get_group_size() > 1:
            # every shard cuts the same permutation: rank 0 draws the seed for all
            seed = int(_new_generator().integers(2 ** 63)) if communication.get_rank() == 0 else 0
            self._rng = numpy.random.default_rng(communication.broadcast_object(seed))

    def _source(self):
        return self

    def _source_order(self):
        if self.sampler is not None:
            order = self.sampler
        elif self.shuffled:
            order = self._generator().permutation(len(self.columns[0]))
        else:
            order = numpy.arange(len(self.columns[0]))
        if self.num_shards > 1:
            padded = math.ceil(len(order) / self.num_shards) * self.num_shards
            order = numpy.resize(order, padded)[self.shard_id::self.num_shards]  # resize wraps
        return order if self.num_samples is None else order[:self.num_samples]

    def take(self, indices):
        """The rows at ``indices`` (an int or an index array), one array per column."""
        return tuple(column[indices] for column in self.columns)

    def _rows(self):
        for i in self._source_order():
            yield self.take(i)

    def get_dataset_size(self):
        n = len(self.sampler) if self.sampler is not None else len(self.columns[0])
        n = math.ceil(n / self.num_shards)
        return n if self.num_samples is None else min(n, self.num_samples)

    def get_batch_size(self):
        return 1

    def get_col_names(self):
        return list(self.column_names)


class ShuffleDataset(Dataset):
    """``dataset.shuffle(buffer_size)``: see ``Dataset.shuffle``."""

    def __init__(self, parent, buffer_size):
        super().__init__(parent)
        if _check_positive_int(buffer_size, "buffer_size") < 2:
            raise ValueError(f"buffer_size must be an int >= 2, got {buffer_size!r}")
        self.buffer_size = buffer_size

    def _source_order(self):
        order = self.parent._source_order()
        if order is None:
            return None
        return numpy.fromiter(_buffer_shuffle(order, self.buffer_size, self._generator()), numpy.int64,
                              len(order))

    def _rows(self):
        order = self._source_order()
        if order is not None:  # shuffle indices, not rows: no per-row copies
            source = self._source()
            return (source.take(i) for i in order)
        return _buffer_shuffle(self.parent._rows(), self.buffer_size, self._generator())


class RepeatDataset(Dataset):
    """``dataset.repeat(count)``: see ``Dataset.repeat``."""

    def __init__(self, parent, count=None):
        super().__init__(parent)
        endless = count is None or (type(count) in (int, numpy.int32, numpy.int64) and count == -1)
        if not endless and (not isinstance(count, (int, numpy.integer)) or isinstance(count, bool) or count < 1):
            raise ValueError(f"count must be a positive int, -1 or None (without end), got {count!r}")
        self.count = None if endless else int(count)

    def _passes(self):
        return itertools.repeat(None) if self.count is None else range(self.count)

    def _source_order(self):
        if self.count is None:
            return None
        orders = [self.parent._source_order() for _ in self._passes()]
        return None if orders[0] is None else numpy.concatenate(orders)

    def _rows(self):
        order = self._source_order()
        if order is not None:
            source = self._source()
            return (source.take(i) for i in order)
        return itertools.chain.from_iterable(self.parent._rows() for _ in self._passes())

    def get_dataset_size(self):
        if self.count is None:
            return None
        size = self.parent.get_dataset_size()
        return None if size is None else size * self.count


class MapDataset(Dataset):
    """``dataset.map(operations, input_columns, output_columns)``: see ``Dataset.map``."""

    def __init__(self, parent, operations, input_columns=None, output_columns=None):
        super().__init__(parent)
        operations = list(operations) if isinstance(operations, (list, tuple)) else [operations]
        for op in operations:
            if not callable(op):
                raise TypeError(f"operations must be callables, got {op!r}")
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
        super().__init__(parent)
        self.batch_size = _check_positive_int(batch_size, "batch_size")
        self.drop_remainder = bool(drop_remainder)

    def _rows(self):
        order = self.parent._source_order()
        size = self.batch_size
        if order is not None:  # gather each batch with one fancy index per column
            source = self._source()
            stop = len(order) - len(order) % size if self.drop_remainder else len(order)
            for start in range(0, stop, size):
                yield source.take(order[start:start + size])
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


class _Iterator:
    """The object returned by ``create_tuple_iterator`` / ``create_dict_iterator``."""

    def __init__(self, dataset, columns, num_epochs, output_numpy, as_dict):
        if not isinstance(num_epochs, int) or (num_epochs < 1 and num_epochs != -1):
            raise ValueError(f"num_epochs must be a positive int or -1, got {num_epochs!r}")
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
        self.output_numpy = output_numpy
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
            raise ValueError(f"data is a list, which is one column (numpy.array(data)), but its entries "
                             f"do not stack into one array ({error}); pass a tuple or a dict for one "
                             f"column per entry") from None
        names = None
    else:
        raise TypeError(f"data must be an array, a list, a tuple or a dict of arrays, "
                        f"got {type(data).__name__}")
    if not columns:
        raise ValueError("data has no columns")
    columns = [c.asnumpy() if isinstance(c, Tensor) else numpy.asarray(c) for c in columns]
    for name, c in zip(names or itertools.count(), columns):
        if c.ndim == 0:
            raise ValueError(f"column {name} is a scalar; data needs a first axis to slice")
    if names is None:
        names = [f"column_{i}" for i in range(len(columns))]
    return names, columns


def _column_list(columns, name, default):
    """``columns`` (None, a name or a list of names) as a non-empty list without repeats."""
    if columns is None:
        return list(default)
    columns = [columns] if isinstance(columns, str) else list(columns)
    if not columns or not all(isinstance(c, str) for c in columns) or len(set(columns)) != len(columns):
        raise ValueError(f"{name} must be a column name or a non-empty list of distinct names, "
                         f"got {columns!r}")
    return columns


def _shards(num_shards, shard_id):
    """``(num_shards, shard_id)`` checked; both None: the data-parallel group's, else (1, 0)."""
    if num_shards is None and shard_id is None:
        if communication.is_data_parallel():
            return communication.get_group_size(), communication.get_rank()
        return 1, 0
    if num_shards is None or shard_id is None:
        raise ValueError(f"num_shards and shard_id must be given together, got num_shards="
                         f"{num_shards!r} and shard_id={shard_id!r}")
    num_shards = _check_positive_int(num_shards, "num_shards")
    if isinstance(shard_id, bool) or not isinstance(shard_id, (int, numpy.integer)) \
            or not 0 <= shard_id < num_shards:
        raise ValueError(f"shard_id must be an int in [0, {num_shards}) for num_shards="
                         f"{num_shards}, got {shard_id!r}")
    return num_shards, int(shard_id)


def _check_positive_int(value, name, allow_none=False):
    if value is None and allow_none:
        return None
    if not isinstance(value, (int, numpy.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


