"""``NumpySlicesDataset(..., num_shards, shard_id)``: each shard a strided slice of each pass's
order, padded by wrapping so that every shard has the same size."""
import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from minigrad.dataset import NumpySlicesDataset


def rows(ds):
    return [int(r[0]) for r in ds]


@given(st.integers(1, 40), st.integers(1, 6), st.booleans())
def test_shards_cover_every_row_with_equal_sizes(n, shards, shuffle):
    minigrad.dataset.config.set_seed(5)
    try:
        parts = [rows(NumpySlicesDataset(numpy.arange(n), shuffle=shuffle, num_shards=shards,
                                         shard_id=i)) for i in range(shards)]
    finally:
        minigrad.dataset.config.set_seed(None)
    size = -(-n // shards)
    assert [len(p) for p in parts] == [size] * shards
    every = sorted(row for part in parts for row in part)
    assert sorted(set(every)) == list(range(n))          # every row is read
    assert len(every) - n == size * shards - n           # only the padding repeats rows
    assert NumpySlicesDataset(numpy.arange(n), num_shards=shards,
                              shard_id=shards - 1).get_dataset_size() == size


def test_shard_order_and_num_samples_per_shard():
    ds = NumpySlicesDataset(numpy.arange(7), shuffle=False, num_shards=3, shard_id=1)
    assert rows(ds) == [1, 4, 0]  # 0..6 padded to 0..6,0,1 (wrapping); positions 1, 4, 7
    ds = NumpySlicesDataset(numpy.arange(7), shuffle=False, num_shards=3, shard_id=1, num_samples=2)
    assert rows(ds) == [1, 4] and ds.get_dataset_size() == 2
    batches = list(NumpySlicesDataset(numpy.arange(8), shuffle=False, num_shards=2,
                                      shard_id=0).batch(2))
    assert [b[0].tolist() for b in batches] == [[0, 2], [4, 6]]


def test_no_sharding_by_default_in_one_process():
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel")
    try:
        ds = NumpySlicesDataset(numpy.arange(5), shuffle=False)
        assert (ds.num_shards, ds.shard_id) == (1, 0) and rows(ds) == [0, 1, 2, 3, 4]
    finally:
        minigrad.reset_auto_parallel_context()


@pytest.mark.parametrize("kwargs, error, text", [
    ({"num_shards": 2}, ValueError, "num_shards and shard_id must be given together"),
    ({"shard_id": 0}, ValueError, "num_shards and shard_id must be given together"),
    ({"num_shards": 0, "shard_id": 0}, ValueError, "num_shards must be a positive int, got 0"),
    ({"num_shards": 2, "shard_id": 2}, ValueError, r"shard_id must be an int in \[0, 1\], got 2"),
    ({"num_shards": 2, "shard_id": True}, TypeError, r"shard_id must be an int in \[0, 1\]"),
])
def test_bad_shards_are_refused(kwargs, error, text):
    with pytest.raises(error, match=text):
        NumpySlicesDataset(numpy.arange(4), **kwargs)
