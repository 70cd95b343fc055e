"""``NumpySlicesDataset``: the in-memory source, rows sliced along the first axis of arrays."""
import itertools
import math

import numpy

from minigrad import _checks, communication
from minigrad._checks import check_bool, check_positive_int
from minigrad.dataset.pipeline import Dataset
from minigrad.dataset.settings import new_generator
from minigrad.tensor import Tensor


class NumpySlicesDataset(Dataset):
    """Rows sliced along the first axis of in-memory arrays.

    Args:
        data: one array (one column); a tuple of arrays (one column each); a dict ``{column
            name: array}``; or a list, which is one column, ``numpy.array(data)``, as in MindSpore
            (a list of equal-shape arrays stacks into one). Tensors are copied to the host.
        column_names: names of the columns; default the dict keys, else ``column_0``,
            ``column_1``...
        num_samples: use only the first ``num_samples`` rows of the (sampled) order.
        num_parallel_workers: accepted for MindSpore compatibility; ignored.
        shuffle: shuffle the rows each epoch. ``None`` (default) means True unless a sampler is
            given — MindSpore's rule.
        sampler: an iterable of row indices (e.g. a list) that fixes the order; not with
            ``shuffle=True``.
        num_shards: the number of shards (see ``shard_id``).
        shard_id: read only shard ``shard_id`` of ``num_shards``: the rows at
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
            one of ``num_shards`` / ``shard_id``, ``num_shards`` < 1, or a ``shard_id`` outside
            ``[0, num_shards - 1]``.
        TypeError: a ``shuffle`` that is neither a bool nor None; a ``num_samples``,
            ``num_shards`` or ``shard_id`` that is not an int.
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
        if shuffle is not None:
            check_bool("shuffle", shuffle, owner="NumpySlicesDataset")
        if shuffle and sampler is not None:
            raise ValueError("give either shuffle=True or a sampler, not both")
        self.columns = columns
        self.column_names = names
        self.sampler = None if sampler is None else numpy.asarray(list(sampler), dtype=numpy.int64)
        if self.sampler is not None and self.sampler.size and (
                self.sampler.min() < -lengths[0] or self.sampler.max() >= lengths[0]):
            raise ValueError(f"sampler indices must lie in [0, {lengths[0]}), got "
                             f"[{self.sampler.min()}, {self.sampler.max()}]")
        self.shuffled = sampler is None if shuffle is None else shuffle
        self.num_samples = check_positive_int("num_samples", num_samples, allow_none=True)
        self.num_shards, self.shard_id = _shards(num_shards, shard_id)
        if self.num_shards > 1 and self.shuffled and communication.get_group_size() > 1:
            # every shard cuts the same permutation: rank 0 draws the seed for all
            seed = int(new_generator().integers(2 ** 63)) if communication.get_rank() == 0 else 0
            self._rng = numpy.random.default_rng(communication.broadcast_object(seed))

    def _source(self):
        return self

    def _index_chunks(self):
        return iter([self._order()])

    def _order(self):
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
        for i in self._order():
            yield self.take(i)

    def get_dataset_size(self):
        n = len(self.sampler) if self.sampler is not None else len(self.columns[0])
        n = math.ceil(n / self.num_shards)
        return n if self.num_samples is None else min(n, self.num_samples)

    def get_batch_size(self):
        return 1

    def get_col_names(self):
        return list(self.column_names)


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


def _shards(num_shards, shard_id):
    """``(num_shards, shard_id)`` checked; both None: the data-parallel group's, else (1, 0)."""
    if num_shards is None and shard_id is None:
        if communication.is_data_parallel():
            return communication.get_group_size(), communication.get_rank()
        return 1, 0
    if num_shards is None or shard_id is None:
        raise ValueError(f"num_shards and shard_id must be given together, got num_shards="
                         f"{num_shards!r} and shard_id={shard_id!r}")
    num_shards = _checks.check_positive_int("num_shards", num_shards)
    return num_shards, _checks.check_int("shard_id", shard_id, low=0, high=num_shards - 1)
