"""Review session 3m: run-time behaviour of callbacks, checkpoints and dataset iterators."""
import os

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.dataset import NumpySlicesDataset
from minigrad.train import (Callback, CheckpointConfig, LossMonitor, Model, ModelCheckpoint,
                            load_checkpoint)


def _data(n=20):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = rng.integers(0, 3, n).astype(np.int32)
    return x, y


def _model(level="O0"):
    net = nn.Dense(4, 3)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return net, opt, Model(net, loss, opt, amp_level=level)


def _ds(batch=5):
    return NumpySlicesDataset(_data(), column_names=["x", "y"], shuffle=False).batch(batch)


# ---- ModelCheckpoint ------------------------------------------------------------------------------
def test_reused_modelcheckpoint_saves_the_final_step_of_every_train_call(tmp_path):
    # the docstring: a final checkpoint is written at the end of training unless the last step
    # was just saved. A callback reused for a second train() of the same length used to remember
    # the first run's last saved step number and skip the second run's final save, leaving the
    # first run's weights in the file.
    net, _, model = _model()
    ckpt = ModelCheckpoint("A", str(tmp_path), CheckpointConfig(save_checkpoint_steps=100))
    model.train(1, _ds(), callbacks=[ckpt])
    model.train(1, _ds(), callbacks=[ckpt])
    saved = load_checkpoint(ckpt.latest_ckpt_file_name)
    np.testing.assert_array_equal(saved["weight"].asnumpy(), net.weight.asnumpy())
    np.testing.assert_array_equal(saved["bias"].asnumpy(), net.bias.asnumpy())


# ---- Dataset.map ------------------------------------------------------------------------------------
def _ab():
    return NumpySlicesDataset({"a": np.arange(4.0), "b": np.arange(4.0) * 10, "c": -np.arange(4.0)},
                              shuffle=False)


def test_map_passes_all_input_columns_to_the_first_operation_together():
    # MindSpore: "The first operation will be passed the columns specified in input_columns as
    # input"; the outputs of one operation are the inputs of the next. minigrad called each
    # operation once per column (op(a), then op(b)), so a two-argument function failed.
    ds = _ab().map([lambda a, b: (a + b, a * b), lambda s, p: (s, p + 1)], input_columns=["a", "b"])
    assert ds.get_col_names() == ["a", "b", "c"]
    rows = list(ds.create_tuple_iterator(output_numpy=True))
    assert [tuple(float(v) for v in r) for r in rows] == [
        (0.0, 1.0, 0.0), (11.0, 11.0, -1.0), (22.0, 41.0, -2.0), (33.0, 91.0, -3.0)]


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
    x, = next(iter(two.batch(4).create_tuple_iterator(columns=["s"], output_numpy=True)))
    np.testing.assert_array_equal(x, [0.0, 11.0, 22.0, 33.0])
    with pytest.raises(ValueError, match="output_columns"):
        list(_ab().map(lambda a, b: a + b, input_columns=["a", "b"]))  # 1 output, 2 names


# ---- load_param_into_net -------------------------------------------------------------------------
class _TwoDense(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(2, 2)
        self.head = nn.SequentialCell([nn.Dense(2, 2)])


def test_one_checkpoint_entry_never_loads_into_two_parameters():
    # the dotted-suffix fallback matched each parameter against the entries separately, so the
    # single entry 'weight' went into both fc.weight and head.0.weight, silently; an entry that
    # several parameters (or one exactly-named parameter and another by suffix) would share is
    # ambiguous: it is loaded into none of the suffix matches; when that leaves the whole
    # checkpoint unmatched, loading raises and the network is unchanged
    net = _TwoDense()
    before = {n: p.asnumpy().copy() for n, p in net.parameters_and_names()}
    with pytest.raises(ValueError, match=r"no parameter of the network matches the checkpoint: "
                                         r"the network has \['fc.weight', 'fc.bias', "
                                         r"'head.0.weight', 'head.0.bias'\]"):
        mg.train.load_param_into_net(net, {"weight": np.full((2, 2), 7, np.float32)})
    for n, p in net.parameters_and_names():
        np.testing.assert_array_equal(p.asnumpy(), before[n])

    class Nested(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(2, 2)
            self.inner = _TwoDense()
    net = Nested()
    old_inner = net.inner.fc.weight.asnumpy().copy()
    with pytest.warns(UserWarning, match="not loaded"):
        not_loaded, _ = mg.train.load_param_into_net(net, {"fc.weight": np.full((2, 2), 3, np.float32)})
    np.testing.assert_array_equal(net.fc.weight.asnumpy(), np.full((2, 2), 3))
    np.testing.assert_array_equal(net.inner.fc.weight.asnumpy(), old_inner)
    assert "inner.fc.weight" in not_loaded
    # a unique renamed entry still loads by suffix
    net = _TwoDense()
    with pytest.warns(UserWarning, match="not loaded"):
        mg.train.load_param_into_net(net, {"net.head.0.bias": np.full(2, 5, np.float32)})
    np.testing.assert_array_equal(net.head[0].bias.asnumpy(), [5, 5])


def test_create_dict_iterator_takes_do_copy_like_create_tuple_iterator():
    # MindSpore: create_dict_iterator(num_epochs=-1, output_numpy=False, do_copy=True); the
    # keyword was a TypeError here while create_tuple_iterator accepted it
    ds = NumpySlicesDataset({"v": np.arange(3.0)}, shuffle=False)
    it = ds.create_dict_iterator(num_epochs=1, output_numpy=True, do_copy=False)
    assert [float(r["v"]) for r in it] == [0.0, 1.0, 2.0]
    assert list(it) == []  # past num_epochs
