"""``Dataset.repeat(n)`` is lazy: each pass's order is drawn when the pass begins."""
import time
import tracemalloc

import numpy
import pytest

import minigrad
from minigrad.dataset import NumpySlicesDataset, config


@pytest.fixture(autouse=True)
def _keep_dataset_seed():
    saved = config.get_seed()
    yield
    config.set_seed(saved)


def _data(n=1000):
    return NumpySlicesDataset((numpy.arange(n, dtype=numpy.float32).reshape(n, 1),
                               numpy.arange(n, dtype=numpy.int32)), column_names=["x", "y"])


@pytest.mark.parametrize("build", [
    lambda ds: ds.repeat(2 ** 70),
    lambda ds: ds.repeat(2 ** 70).batch(32),
    lambda ds: ds.repeat(2 ** 70).shuffle(64).batch(32),
    lambda ds: ds.shuffle(100).repeat(2 ** 70).batch(32, drop_remainder=True),
], ids=["repeat", "batch", "shuffle-after", "shuffle-before"])
def test_a_huge_repeat_yields_its_first_batches_at_once(build):
    ds = build(_data())
    start = time.perf_counter()
    iterator = ds.create_tuple_iterator(output_numpy=True)
    rows = [next(iterator) for _ in range(50)]
    assert time.perf_counter() - start < 2.0
    assert len(rows) == 50
    assert ds.get_dataset_size() >= 2 ** 70 // 32


def test_repeat_allocates_one_pass_at_a_time():
    ds = _data().repeat(10 ** 5).batch(100)
    tracemalloc.start()
    iterator = ds.create_tuple_iterator(output_numpy=True)
    for _ in range(30):  # three passes
        next(iterator)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 5 * 1000 * 8 * 4, peak  # a few passes' indices, never 10**5 of them


def test_batches_span_passes_and_shuffled_passes_differ():
    minigrad.dataset.config.set_seed(3)
    ds = _data(10).shuffle(10).repeat(3)
    x, y = zip(*ds.batch(4).create_tuple_iterator(num_epochs=1, output_numpy=True))
    order = numpy.concatenate(y)
    assert [len(b) for b in y] == [4, 4, 4, 4, 4, 4, 4, 2]
    passes = order.reshape(3, 10)
    assert all(sorted(p) == list(range(10)) for p in passes)
    assert not (passes[0] == passes[1]).all() or not (passes[1] == passes[2]).all()
    minigrad.dataset.config.set_seed(3)
    again = numpy.concatenate([b[1] for b in _data(10).shuffle(10).repeat(3).batch(4)
                               .create_tuple_iterator(num_epochs=1, output_numpy=True)])
    assert (again == order).all()
    rows = numpy.array([int(r[1]) for r in _data(10).shuffle(10).repeat(3)
                        .create_tuple_iterator(num_epochs=1, output_numpy=True)])
    assert rows.shape == (30,)


def test_lazy_and_row_paths_give_the_same_rows():
    """A map node (not a pure reorder) takes the row path; both paths give one order."""
    minigrad.dataset.config.set_seed(5)
    indexed = [b[1].tolist() for b in _data(12).shuffle(5).repeat(2).batch(5)
               .create_tuple_iterator(output_numpy=True, num_epochs=1)]
    minigrad.dataset.config.set_seed(5)
    mapped = [b[1].tolist() for b in _data(12).shuffle(5).repeat(2)
              .map(lambda v: v, input_columns="y").batch(5)
              .create_tuple_iterator(output_numpy=True, num_epochs=1)]
    assert indexed == mapped
