"""dataset.GeneratorDataset: MindSpore's three kinds of source (random accessible, generator
function, iterable), its order arguments and errors, and the pipeline after it."""
import numpy as np
import pytest

import minigrad
from minigrad.dataset import GeneratorDataset


def _rows(n=10):
    return [(np.full((2,), i, np.float32), np.int32(i % 3)) for i in range(n)]


def _collect(ds):
    return [tuple(v.asnumpy() for v in row) for row in ds.create_tuple_iterator(num_epochs=1)]


def test_a_list_is_random_accessible_and_shuffled_by_default():
    minigrad.set_seed(3)
    ds = GeneratorDataset(_rows(), column_names=["data", "label"])
    assert ds.get_dataset_size() == 10 and ds.get_col_names() == ["data", "label"]
    labels = [int(r[0][0]) for r in _collect(ds)]
    assert sorted(labels) == list(range(10)) and labels != list(range(10))
    ordered = GeneratorDataset(_rows(), ["data", "label"], shuffle=False)
    assert [int(r[0][0]) for r in _collect(ordered)] == list(range(10))


class _Indexed:
    """A random-accessible source whose rows are read on request."""

    def __init__(self):
        self.reads = []

    def __getitem__(self, i):
        self.reads.append(i)
        return np.arange(3, dtype=np.float32) + i, np.array([i], np.int64)

    def __len__(self):
        return 6


def test_rows_are_read_when_reached_and_batched_with_their_dtypes():
    source = _Indexed()
    ds = GeneratorDataset(source, ["x", "y"], shuffle=False).batch(4)
    assert source.reads == []
    batches = _collect(ds)
    assert source.reads == list(range(6))
    assert [b[0].shape for b in batches] == [(4, 3), (2, 3)]
    assert batches[0][0].dtype == np.float32 and batches[0][1].dtype == np.int64
    assert ds.get_dataset_size() == 2


def test_sampler_num_samples_and_shards_of_a_random_accessible_source():
    ds = GeneratorDataset(_rows(), ["data", "label"], sampler=[9, 0, 4])
    assert [int(r[0][0]) for r in _collect(ds)] == [9, 0, 4]
    ds = GeneratorDataset(_rows(), ["data", "label"], shuffle=False, num_samples=3)
    assert [int(r[0][0]) for r in _collect(ds)] == [0, 1, 2] and ds.get_dataset_size() == 3
    ds = GeneratorDataset(_rows(), ["data", "label"], shuffle=False, num_shards=3, shard_id=1)
    assert [int(r[0][0]) for r in _collect(ds)] == [1, 4, 7, 0]


def test_a_generator_function_is_called_for_each_pass():
    calls = []

    def source():
        calls.append(1)
        for i in range(5):
            yield np.array([i, i], np.float64), i

    ds = GeneratorDataset(source, ["x", "y"], column_types=[minigrad.float32, minigrad.int32])
    assert ds.get_dataset_size() == 5 and len(calls) == 1  # counted once, by one pass
    it = ds.create_tuple_iterator(num_epochs=2)
    for _ in range(2):
        rows = [tuple(v.asnumpy() for v in row) for row in it]
        assert [int(r[1]) for r in rows] == list(range(5))
        assert rows[0][0].dtype == np.float32 and rows[0][1].dtype == np.int32
    assert len(calls) == 3
    assert GeneratorDataset(source, ["x", "y"], num_samples=2).get_dataset_size() == 2


def test_an_iterable_and_a_single_column():
    class Numbers:
        def __iter__(self):
            return iter(range(4))

    ds = GeneratorDataset(Numbers(), "n").batch(2)
    assert [list(b[0]) for b in _collect(ds)] == [[0, 1], [2, 3]]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(shuffle=True), ValueError, "shuffle=True needs a random-accessible source"),
    (dict(sampler=[0, 1]), ValueError, "a sampler needs a random-accessible source"),
    (dict(num_shards=2, shard_id=0), ValueError, "num_shards needs a random-accessible"),
    (dict(column_names=None), TypeError, "column_names' is required"),
    (dict(column_names=["a", "a"]), ValueError, "each once"),
    (dict(column_types=[minigrad.float32]), ValueError, "1 column_types for 2 column_names"),
    (dict(schema="schema.json"), TypeError, "schema"),
])
def test_stream_source_errors(kwargs, error, match):
    def source():
        yield 1, 2

    args = dict(column_names=["a", "b"]) | kwargs
    with pytest.raises(error, match=match):
        GeneratorDataset(source, **args)


def test_source_and_row_errors():
    with pytest.raises(TypeError, match="'source' must be random accessible"):
        GeneratorDataset(3, ["a"])
    with pytest.raises(ValueError, match="give either shuffle=True or a sampler"):
        GeneratorDataset(_rows(), ["a", "b"], shuffle=True, sampler=[1])
    ds = GeneratorDataset(_rows(), ["a", "b", "c"], shuffle=False)
    with pytest.raises(ValueError, match="a row of 2 values for 3 columns"):
        _collect(ds)
    with pytest.raises(ValueError, match="no rows"):
        GeneratorDataset([], ["a"])
