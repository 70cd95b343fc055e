"""``IndexedSource``: the order in which a source with numbered rows serves them each pass.

``NumpySlicesDataset`` and a random-accessible ``GeneratorDataset`` read row ``i`` on request;
both take MindSpore's ``shuffle``, ``sampler``, ``num_samples``, ``num_shards`` and ``shard_id``
arguments, which decide the order of each pass, here.
"""
import math

import numpy

from minigrad import _checks, communication
from minigrad._checks import check_bool, check_positive_int
from minigrad.dataset.pipeline import Dataset
from minigrad.dataset.settings import new_generator


class IndexedSource(Dataset):
    """A source of ``length`` numbered rows: subclasses define ``take(indices)``.

    Args:
        length: the number of rows.
        num_samples: use only the first ``num_samples`` rows of the (sampled) order.
        shuffle: shuffle the rows each epoch. ``None`` means True unless a sampler is given —
            MindSpore's rule.
        sampler: the row indices that fix the order: a tuple, list or range of ints, or a 1-d
            int array, each in ``[-length, length - 1]`` (negative counts from the end); not
            with ``shuffle=True``.
        num_shards: the number of shards (see ``shard_id``).
        shard_id: read only shard ``shard_id`` of ``num_shards``: the rows at
            positions ``shard_id, shard_id + num_shards, ...`` of each pass's order, the order
            first padded by wrapping to a multiple of ``num_shards`` so that every shard has
            ``ceil(rows / num_shards)`` rows (data-parallel ranks must take the same number of
            steps); ``num_samples`` then counts per shard. Give both or neither. Default: in
            data-parallel mode, the communication group's size and this process's rank, else
            no sharding. When shuffling across a group, rank 0 draws the shuffle seed for all
            ranks (every shard cuts the same permutation).
        owner: the class name for messages.

    Raises:
        ValueError: no rows, both ``shuffle=True`` and a sampler, an empty sampler, sampler
            indices outside the rows, only one of ``num_shards`` / ``shard_id``, ``num_shards``
            < 1, or a ``shard_id`` outside ``[0, num_shards - 1]``.
        TypeError: a ``shuffle`` that is neither a bool nor None; a ``sampler`` that is not a
            sequence of ints; a ``num_samples``,
            ``num_shards`` or ``shard_id`` that is not an int.
    """

    def __init__(self, length, num_samples=None, shuffle=None, sampler=None, num_shards=None,
                 shard_id=None, owner="dataset"):
        super().__init__()
        if length == 0:
            raise ValueError(f"{owner}: the data has no rows")
        if shuffle is not None:
            check_bool("shuffle", shuffle, owner=owner)
        if shuffle and sampler is not None:
            raise ValueError(f"{owner}: give either shuffle=True or a sampler, not both")
        self.length = length
        self.sampler = None if sampler is None else _sampler(sampler, length, owner)
        self.shuffled = sampler is None if shuffle is None else shuffle
        self.num_samples = check_positive_int("num_samples", num_samples, allow_none=True,
                                              owner=owner)
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
            order = self._generator().permutation(self.length)
        else:
            order = numpy.arange(self.length)
        if self.num_shards > 1:
            padded = math.ceil(len(order) / self.num_shards) * self.num_shards
            order = numpy.resize(order, padded)[self.shard_id::self.num_shards]  # resize wraps
        return order if self.num_samples is None else order[:self.num_samples]

    def take(self, indices):
        """The rows at ``indices`` (an int, or an index array: a batch), one array per column."""
        raise NotImplementedError

    def _rows(self):
        for i in self._order():
            yield self.take(i)

    def get_dataset_size(self):
        n = len(self.sampler) if self.sampler is not None else self.length
        n = math.ceil(n / self.num_shards)
        return n if self.num_samples is None else min(n, self.num_samples)

    def get_batch_size(self):
        return 1


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


def _sampler(sampler, length, owner):
    """``sampler`` as an int64 index array: the sequence-of-ints rule (``check_int_tuple``), with
    a range and a 1-d int array (``numpy.arange(n)[::-1]``) taken as the sequences they are."""
    if isinstance(sampler, range) or (isinstance(sampler, numpy.ndarray) and sampler.ndim == 1
                                      and sampler.dtype.kind in "iu"):
        sampler = list(sampler) if isinstance(sampler, range) else sampler.tolist()
    indices = _checks.check_int_tuple("sampler", sampler, low=-length, high=length - 1,
                                      scalar=False, owner=owner)
    _checks.check_relation("sampler", sampler, len(indices) > 0,
                           f"a non-empty sequence of row indices in [{-length}, {length - 1}]",
                           owner=owner)
    return numpy.asarray(indices, dtype=numpy.int64)
