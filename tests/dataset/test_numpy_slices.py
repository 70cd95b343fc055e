"""minigrad.dataset: NumpySlicesDataset (columns, batch, shuffle, map, iterators) and
load_digits."""

import importlib.util
import os
import subprocess
import sys

import numpy
import numpy as np
import pytest

import minigrad
from helpers import REPO_ROOT
from minigrad import Tensor
from minigrad.dataset import NumpySlicesDataset, config, load_digits


@pytest.fixture(autouse=True)
def _restore_seeds(monkeypatch):
    """Leave the dataset seed and minigrad's global seed as they were."""
    from minigrad import random as mg_random

    monkeypatch.setattr(mg_random, "_seed", mg_random._seed)
    monkeypatch.setattr(mg_random, "_generators", {})
    saved = config.get_seed()
    yield
    config.set_seed(saved)


def _labels(dataset, num_epochs=1):
    it = dataset.create_tuple_iterator(num_epochs=num_epochs, output_numpy=True)
    return [numpy.concatenate([numpy.atleast_1d(row[-1]) for row in it]) for _ in range(num_epochs)]


# ---- columns ------------------------------------------------------------------------------------
def test_dict_tuple_array_and_list_inputs():
    x, y = numpy.arange(12.0).reshape(6, 2), numpy.arange(6)
    ds = NumpySlicesDataset({"x": x, "y": y}, shuffle=False)
    assert ds.get_col_names() == ["x", "y"] and ds.get_dataset_size() == 6
    row = next(iter(ds))
    assert isinstance(row[0], Tensor) and row[0].shape == (2,) and int(row[1]) == 0

    assert NumpySlicesDataset((x, y)).get_col_names() == ["column_0", "column_1"]
    assert NumpySlicesDataset((x, y), column_names=["a", "b"]).get_col_names() == ["a", "b"]
    with pytest.raises(ValueError, match="a list, which is one column.*pass a tuple"):
        NumpySlicesDataset(
            [x, y], column_names=["a", "b"]
        )  # MindSpore stacks a list: (6, 2) with (6,)
    single = NumpySlicesDataset(x, column_names="data", shuffle=False)
    assert single.get_col_names() == ["data"]
    plain_list = NumpySlicesDataset([1, 2, 3], shuffle=False)  # a plain list is one column
    assert plain_list.get_col_names() == ["column_0"] and _labels(plain_list)[0].tolist() == [
        1,
        2,
        3,
    ]
    from_tensor = NumpySlicesDataset({"t": Tensor(x)}, shuffle=False)
    assert numpy.array_equal(next(iter(from_tensor))[0].asnumpy(), x[0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(data=(numpy.zeros(3), numpy.zeros(4))), "same length"),
        (dict(data=(numpy.zeros(3),), column_names=["a", "b"]), "column_names"),
        (dict(data=numpy.zeros((0, 2))),
         r"NumpySlicesDataset: data must be columns of at least one row, got array\(\[\], "),
        (dict(data=[]), r"data must be columns of at least one row, got \[\]"),
        (dict(data={}), r"data must be an array, a list, a tuple or a dict of at least one column, "
                        r"got \{\}"),
        (dict(data=numpy.array(2.0)), r"data must be columns with a first axis to slice \(column "
                                      r"0 is a scalar\), got array\(2\.\)"),
        (dict(data=numpy.zeros(3), sampler=[]), r"sampler must be a non-empty sequence of row "
                                                r"indices in \[-3, 2\], got \[\]"),
        (dict(data=numpy.zeros(3), num_parallel_workers=0),
         "num_parallel_workers must be a positive int or None, got 0"),
        (dict(data=numpy.zeros(3), shuffle=True, sampler=[0, 1]), "sampler"),
        (dict(data=numpy.zeros(3), sampler=[0, 5]), "sampler must be a tuple or list of ints in"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NumpySlicesDataset(**kwargs)


@pytest.mark.parametrize("kwargs, words", [
    (dict(column_names=3),
     "column_names must be a str or a tuple or list of non-empty strs, got 3"),
    (dict(column_names=[1]), "column_names must be a str or a tuple or list"),
    (dict(sampler=3), "sampler must be a tuple or list of ints in [-3, 2], got 3 (int)"),
    (dict(sampler="a"), "sampler must be a tuple or list of ints in [-3, 2], got 'a' (str)"),
    (dict(sampler=[0.5]), "sampler must be a tuple or list of ints in [-3, 2], got [0.5]"),
])
def test_column_names_and_sampler_of_the_wrong_kind_are_type_errors(kwargs, words):
    with pytest.raises(TypeError) as info:
        NumpySlicesDataset(numpy.zeros(3), **kwargs)
    assert words in str(info.value)


def test_a_sampler_may_be_a_range_or_an_int_array():
    for sampler in (range(2, -1, -1), numpy.array([2, 1, 0])):
        rows = [int(r[0]) for r in NumpySlicesDataset(numpy.arange(3), sampler=sampler)]
        assert rows == [2, 1, 0]


def test_bad_batch_shuffle_map_arguments():
    ds = NumpySlicesDataset({"x": numpy.zeros(4)})
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        ds.batch(0)
    with pytest.raises(ValueError, match="buffer_size"):
        ds.shuffle(1)
    with pytest.raises(ValueError, match=r"\['nope'\]"):
        ds.map(abs, input_columns="nope")
    with pytest.raises(TypeError, match=r"operations\[0\] must be callable"):
        ds.map(3)
    with pytest.raises(TypeError, match=r"MapDataset: input_columns must be a str or a tuple or "
                                        r"list of non-empty strs, got True \(bool\)"):
        ds.map(abs, input_columns=True)
    with pytest.raises(ValueError, match=r"MapDataset: output_columns must be a column name or a "
                                         r"non-empty list of names, got \[\]"):
        ds.map(abs, output_columns=[])
    with pytest.raises(TypeError, match=r"data must be columns of numbers, bools or strs \(column "
                                        r"0 has dtype object\), got \[None\]"):
        NumpySlicesDataset([None])
    with pytest.raises(ValueError, match="num_epochs"):
        ds.create_tuple_iterator(num_epochs=0)


# ---- batching -----------------------------------------------------------------------------------
@pytest.mark.parametrize("drop, sizes", [(False, [4, 4, 2]), (True, [4, 4])])
def test_batch_sizes_and_drop_remainder(drop, sizes):
    ds = NumpySlicesDataset(
        {"x": numpy.arange(20.0).reshape(10, 2), "y": numpy.arange(10)}, shuffle=False
    ).batch(4, drop_remainder=drop)
    assert (
        ds.get_dataset_size() == len(sizes) and ds.get_batch_size() == 4 and len(ds) == len(sizes)
    )
    batches = list(ds)
    assert [b[1].shape[0] for b in batches] == sizes
    assert batches[0][0].shape == (4, 2) and batches[0][1].dtype == numpy.int64
    assert numpy.array_equal(batches[1][1].asnumpy(), [4, 5, 6, 7])


def test_dict_iterator_and_output_numpy():
    ds = NumpySlicesDataset(
        {"x": numpy.ones((5, 3), numpy.float32), "y": numpy.arange(5)}, shuffle=False
    ).batch(2)
    rows = list(ds.create_dict_iterator(num_epochs=1))
    assert [sorted(r) for r in rows] == [["x", "y"]] * 3
    assert isinstance(rows[0]["x"], Tensor) and rows[0]["x"].dtype == numpy.float32
    rows = list(ds.create_dict_iterator(num_epochs=1, output_numpy=True))
    assert isinstance(rows[2]["y"], numpy.ndarray) and rows[2]["y"].tolist() == [4]
    only_y = list(ds.create_tuple_iterator(columns=["y"], num_epochs=1, output_numpy=True))
    assert [len(r) for r in only_y] == [1, 1, 1]


def test_iterator_serves_num_epochs_then_stops():
    ds = NumpySlicesDataset(numpy.arange(3), shuffle=False)
    it = ds.create_tuple_iterator(num_epochs=2, output_numpy=True)
    assert [int(r[0]) for r in it] == [0, 1, 2]
    assert [int(r[0]) for r in it] == [0, 1, 2]
    assert list(it) == []
    endless = ds.create_tuple_iterator(output_numpy=True)  # num_epochs=-1
    assert sum(len(list(endless)) for _ in range(5)) == 15


# ---- map ----------------------------------------------------------------------------------------
def test_map_before_and_after_batch():
    ds = NumpySlicesDataset({"x": numpy.arange(6.0), "y": numpy.arange(6)}, shuffle=False)
    per_row = ds.map([lambda v: v * 2, lambda v: v + 1], input_columns="x").batch(3)
    assert [b[0].asnumpy().tolist() for b in per_row] == [[1, 3, 5], [7, 9, 11]]
    shapes = []
    per_batch = ds.batch(4).map(lambda v: shapes.append(v.shape) or v, input_columns=["y"])
    assert [b[1].asnumpy().tolist() for b in per_batch] == [[0, 1, 2, 3], [4, 5]]
    assert shapes == [(4,), (2,)]


# ---- shuffling ----------------------------------------------------------------------------------
def test_default_is_shuffled_and_sampler_fixes_the_order():
    config.set_seed(3)
    ds = NumpySlicesDataset(numpy.arange(50))  # MindSpore: shuffle=None means shuffled
    order = _labels(ds)[0]
    assert sorted(order.tolist()) == list(range(50)) and order.tolist() != list(range(50))
    fixed = NumpySlicesDataset(numpy.arange(5), sampler=[4, 2, 0])
    assert _labels(fixed, 2)[1].tolist() == [4, 2, 0] and fixed.get_dataset_size() == 3


@pytest.mark.parametrize(
    "make",
    [
        lambda: NumpySlicesDataset(numpy.arange(40), shuffle=True).batch(8),
        lambda: NumpySlicesDataset(numpy.arange(40), shuffle=False).shuffle(10).batch(8),
        lambda: (
            NumpySlicesDataset(numpy.arange(40), shuffle=False)
            .map(lambda v: v)
            .shuffle(64)
            .batch(8)
        ),
    ],
    ids=["source", "buffer", "buffer-after-map"],
)
@pytest.mark.parametrize(
    "set_seed", [config.set_seed, minigrad.set_seed], ids=["dataset", "global"]
)
def test_seeded_epochs_are_permutations_repeatable_and_different(make, set_seed):
    config.set_seed(None)
    set_seed(7)
    first = _labels(make(), num_epochs=3)
    set_seed(7)
    again = _labels(make(), num_epochs=3)
    for epoch, repeat in zip(first, again):
        assert sorted(epoch.tolist()) == list(range(40))  # every row exactly once per epoch
        assert numpy.array_equal(epoch, repeat)  # same seed, same sequence of orders
    assert not numpy.array_equal(first[0], first[1])  # a new order each epoch
    set_seed(8)
    assert not numpy.array_equal(_labels(make())[0], first[0])


def test_small_shuffle_buffer_keeps_rows_local():
    config.set_seed(0)
    order = _labels(NumpySlicesDataset(numpy.arange(100), shuffle=False).shuffle(2))[0]
    assert sorted(order.tolist()) == list(range(100))
    assert all(order[i] <= i + 1 for i in range(100))  # a buffer of 2 delays or advances by one


def test_config_set_seed_validates():
    with pytest.raises(ValueError, match="non-negative int"):
        config.set_seed(-1)


# ---- digits -------------------------------------------------------------------------------------
def test_load_digits_split_is_normalised_stratified_and_seeded():
    pytest.importorskip("sklearn")
    (x_train, y_train), (x_test, y_test) = load_digits(split=0.2, seed=1)
    assert x_train.shape == (1438, 64) and x_test.shape == (359, 64)
    assert x_train.dtype == numpy.float32 and y_train.dtype == numpy.int32
    assert x_train.min() == 0.0 and x_train.max() == 1.0
    assert numpy.all(numpy.abs(numpy.bincount(y_test, minlength=10) - 36) <= 1)  # 20% of each class
    (x2, _), _ = load_digits(split=0.2, seed=1)
    assert numpy.array_equal(x_train, x2)
    (images, _), _ = load_digits(flatten=False)
    assert images.shape[1:] == (1, 8, 8)
    with pytest.raises(ValueError, match="split"):
        load_digits(split=1.5)


def test_load_digits_without_sklearn_says_what_to_install(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sklearn" else real_find_spec(name, *a),
    )
    with pytest.raises(ImportError, match=r"pip install minigrad\[datasets\]"):
        load_digits()


_SHUFFLE = """
import numpy, minigrad
from minigrad.dataset import NumpySlicesDataset
ds = NumpySlicesDataset({"x": numpy.arange(64)}, shuffle=True)
minigrad.set_seed(4)   # seeded after building the pipeline, before iterating it
print([int(row[0].asnumpy()) for row in ds.create_tuple_iterator(num_epochs=1)])
"""


def test_set_seed_after_building_a_dataset_still_seeds_its_shuffle():
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    runs = [
        subprocess.run(
            [sys.executable, "-c", _SHUFFLE], capture_output=True, text=True, env=env, check=True
        ).stdout
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


def test_a_list_of_arrays_is_one_column_as_in_mindspore():
    ds = NumpySlicesDataset([numpy.arange(4), numpy.arange(4) * 10], shuffle=False)
    assert ds.get_col_names() == ["column_0"] and ds.get_dataset_size() == 2
    assert [row[0].asnumpy().tolist() for row in ds] == [[0, 1, 2, 3], [0, 10, 20, 30]]


def _ab():
    return NumpySlicesDataset(
        {"a": np.arange(4.0), "b": np.arange(4.0) * 10, "c": -np.arange(4.0)}, shuffle=False
    )


def test_map_passes_all_input_columns_to_the_first_operation_together():
    # MindSpore: "The first operation will be passed the columns specified in input_columns as
    # input"; the outputs of one operation are the inputs of the next. minigrad called each
    # operation once per column (op(a), then op(b)), so a two-argument function failed.
    ds = _ab().map([lambda a, b: (a + b, a * b), lambda s, p: (s, p + 1)], input_columns=["a", "b"])
    assert ds.get_col_names() == ["a", "b", "c"]
    rows = list(ds.create_tuple_iterator(output_numpy=True))
    assert [tuple(float(v) for v in r) for r in rows] == [
        (0.0, 1.0, 0.0),
        (11.0, 11.0, -1.0),
        (22.0, 41.0, -2.0),
        (33.0, 91.0, -3.0),
    ]


def test_map_output_columns_rename_and_change_the_column_count():
    renamed = _ab().map(lambda b: b / 10, input_columns="b", output_columns="b_scaled")
    assert renamed.get_col_names() == ["a", "b_scaled", "c"]
    row = next(iter(renamed.create_dict_iterator(output_numpy=True)))
    assert set(row) == {"a", "b_scaled", "c"}
    two = _ab().map(lambda a, b: a + b, input_columns=["a", "b"], output_columns=["s"])
    assert sorted(two.get_col_names()) == ["c", "s"]
    rows = list(two.create_dict_iterator(output_numpy=True))
    assert [float(r["s"]) for r in rows] == [0.0, 11.0, 22.0, 33.0]
    assert [float(r["c"]) for r in rows] == [0.0, -1.0, -2.0, -3.0]
    assert two.batch(3).get_dataset_size() == 2
    (x,) = next(iter(two.batch(4).create_tuple_iterator(columns=["s"], output_numpy=True)))
    np.testing.assert_array_equal(x, [0.0, 11.0, 22.0, 33.0])
    with pytest.raises(ValueError, match="output_columns"):
        list(_ab().map(lambda a, b: a + b, input_columns=["a", "b"]))  # 1 output, 2 names


def test_create_dict_iterator_takes_do_copy_like_create_tuple_iterator():
    # MindSpore: create_dict_iterator(num_epochs=-1, output_numpy=False, do_copy=True); the
    # keyword is accepted as create_tuple_iterator accepts it
    ds = NumpySlicesDataset({"v": np.arange(3.0)}, shuffle=False)
    it = ds.create_dict_iterator(num_epochs=1, output_numpy=True, do_copy=False)
    assert [float(r["v"]) for r in it] == [0.0, 1.0, 2.0]
    assert list(it) == []  # past num_epochs
