"""Dataset.repeat: MindSpore's sizes and order semantics, with and without end."""
import itertools

import numpy
import pytest

from minigrad.dataset import NumpySlicesDataset


def _values(dataset):
    return [int(row[0]) for row in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True)]


def test_sizes_follow_mindspore():
    data = NumpySlicesDataset(numpy.arange(10), shuffle=False)
    assert data.repeat(50).get_dataset_size() == 500
    assert (
        data.batch(20, drop_remainder=True).repeat(6).get_dataset_size() == 0
    )  # the seed's example
    assert data.repeat(6).batch(20, drop_remainder=True).get_dataset_size() == 3
    assert len(data.repeat(3).batch(4)) == 8


def test_repeat_then_batch_spans_repetitions():
    data = NumpySlicesDataset(numpy.arange(5), shuffle=False).repeat(2).batch(3)
    batches = [b[0].tolist() for b in data.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    assert batches == [[0, 1, 2], [3, 4, 0], [1, 2, 3], [4]]


def test_shuffle_then_repeat_shuffles_each_pass_and_repeat_then_shuffle_mixes_them():
    base = NumpySlicesDataset(numpy.arange(20), shuffle=False)
    each = _values(base.shuffle(20).repeat(3))
    passes = [each[i : i + 20] for i in (0, 20, 40)]
    assert all(sorted(p) == list(range(20)) for p in passes)
    assert passes[0] != passes[1] or passes[1] != passes[2]
    mixed = _values(base.repeat(3).shuffle(60))
    assert sorted(mixed) == sorted(list(range(20)) * 3)
    assert any(sorted(mixed[i : i + 20]) != list(range(20)) for i in (0, 20, 40))


def test_repeat_after_map_goes_row_by_row():
    data = NumpySlicesDataset(numpy.arange(4), shuffle=False).map(lambda x: x * 10).repeat(2)
    assert _values(data) == [0, 10, 20, 30] * 2


@pytest.mark.parametrize("count", [None, -1])
def test_without_end(count):
    data = NumpySlicesDataset(numpy.arange(3), shuffle=False).repeat(count)
    assert data.get_dataset_size() is None and data.batch(2).get_dataset_size() is None
    with pytest.raises(TypeError, match="no length"):
        len(data)
    rows = data.batch(2).create_tuple_iterator(num_epochs=1, output_numpy=True)
    assert [b[0].tolist() for b in itertools.islice(rows, 4)] == [[0, 1], [2, 0], [1, 2], [0, 1]]


@pytest.mark.parametrize(
    "count, error",
    [
        (0, ValueError),
        (-2, ValueError),
        (1.5, TypeError),
        (-1.0, TypeError),
        ("2", TypeError),
        (True, TypeError),
    ],
)
def test_bad_count(count, error):
    with pytest.raises(error, match="count"):
        NumpySlicesDataset(numpy.arange(3)).repeat(count)
