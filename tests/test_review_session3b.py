"""Review of the training infrastructure (session 3b): Model, callbacks, metrics, checkpoints,
dataset, learning-rate schedules and optimizer state. Each test pins one discrepancy found against
MindSpore's behaviour or the project's rules."""
import contextlib
import io
import os

import numpy
import pytest

import minigrad
from minigrad import Model, Tensor, nn
from minigrad.dataset import NumpySlicesDataset
from minigrad.optim import Adam, AdamWeightDecay, Momentum
from minigrad.optim import lr_schedule
from minigrad.parameter import Parameter
from minigrad.train import (Accuracy, Callback, CheckpointConfig, LossMonitor, ModelCheckpoint,
                            load_checkpoint, load_param_into_net, save_checkpoint)


class DropNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 8)
        self.drop = nn.Dropout(keep_prob=0.5)
        self.fc2 = nn.Dense(8, 3)

    def construct(self, x):
        return self.fc2(self.drop(self.fc1(x)))


def _data(n=20, batch=4):
    rng = numpy.random.default_rng(0)
    x = rng.standard_normal((n, 4)).astype(numpy.float32)
    y = rng.integers(0, 3, n).astype(numpy.int32)
    return NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(batch)


def _model(**kwargs):
    minigrad.set_seed(0)
    net = DropNet()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = Momentum(net.trainable_params(), 0.01, 0.9)
    return Model(net, loss, optimizer, **kwargs), net, optimizer


# ---- Model.train: every step runs in train mode -----------------------------------------------
def test_train_steps_run_in_train_mode_after_an_eval_inside_a_callback():
    """MindSpore checks the train network's mode before every step (_check_network_mode), so an
    eval run by a callback (the usual 'evaluate at epoch end') does not leave Dropout/BatchNorm in
    inference mode for the rest of training."""
    model, net, _ = _model(metrics={"acc": Accuracy()})
    data = _data()

    class EvalAtEpochEnd(Callback):
        def on_train_epoch_end(self, run_context):
            model.eval(data)

    modes = []  # Dropout's mode in every forward pass (train steps and eval batches)
    net.drop.register_forward_hook(lambda cell, inputs, output: modes.append(cell.training))
    model.train(2, data, callbacks=[EvalAtEpochEnd()])
    assert modes == [True] * 5 + [False] * 5 + [True] * 5 + [False] * 5
    modes.clear()
    model.predict(Tensor(numpy.zeros((1, 4), numpy.float32)))  # predict also switches to eval
    model.train(1, data)
    assert modes == [False] + [True] * 5


# ---- LossMonitor: the period counts global steps ------------------------------------------------
def test_loss_monitor_period_counts_steps_over_all_epochs():
    """MindSpore prints when cur_step_num - last printed step >= per_print_times (global steps),
    showing the step within the epoch; with 5 steps per epoch and a period of 2 the prints are at
    global steps 2, 4, 6, 8, 10 = epoch 1 steps 2, 4 and epoch 2 steps 1, 3, 5."""
    model, _, _ = _model()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model.train(2, _data(), callbacks=[LossMonitor(2)])
    printed = [line.split(",")[0] for line in out.getvalue().splitlines()]
    assert printed == ["epoch: 1 step: 2", "epoch: 1 step: 4", "epoch: 2 step: 1",
                       "epoch: 2 step: 3", "epoch: 2 step: 5"]
    # the same monitor in a second train() (steps counted from 1 again) keeps the period
    monitor, out = LossMonitor(3), io.StringIO()
    with contextlib.redirect_stdout(out):
        model.train(2, _data(), callbacks=[monitor])
        model.train(1, _data(), callbacks=[monitor])
    printed = [line.split(",")[0] for line in out.getvalue().splitlines()]
    assert printed == ["epoch: 1 step: 3", "epoch: 2 step: 1", "epoch: 2 step: 4", "epoch: 1 step: 3"]


# ---- Accuracy: labels that are neither (N,) nor one-hot (N, C) are refused ----------------------
def test_accuracy_refuses_column_labels_instead_of_scoring_them_as_one_hot():
    y_pred = numpy.eye(3)[[0, 1, 2, 1]]
    metric = Accuracy()
    with pytest.raises(ValueError, match=r"\(4, 1\)"):
        metric.update(y_pred, numpy.array([[0], [1], [2], [1]]))  # was 0.25: argmax of a column


def test_accuracy_refuses_one_hot_labels_of_another_class_count():
    metric = Accuracy()
    with pytest.raises(ValueError, match=r"\(4, 5\)"):
        metric.update(numpy.eye(3)[[0, 1, 2, 1]], numpy.eye(5)[[0, 1, 2, 1]])  # was 1.0


def test_accuracy_one_hot_and_class_count_across_updates():
    metric = Accuracy()
    metric.update(numpy.eye(3)[[0, 1, 2, 1]], numpy.eye(3)[[0, 1, 1, 1]])
    assert metric.eval() == 0.75
    with pytest.raises(ValueError, match="3 classes.*4 classes|4.*3"):  # MindSpore's class check
        metric.update(numpy.eye(4)[[0, 1]], numpy.array([0, 1]))
    assert metric.eval() == 0.75  # the refused batch counted nothing
    metric.clear()
    metric.update(numpy.eye(4)[[0, 1]], numpy.array([0, 1]))  # clear() forgets the class count
    assert metric.eval() == 1.0


# ---- ModelCheckpoint: never overwrite another run's files -------------------------------------
def test_model_checkpoint_takes_a_new_prefix_when_files_of_an_earlier_run_exist(tmp_path):
    """MindSpore's ModelCheckpoint renames its prefix (CKP -> CKP_1, CKP_2, ...) when the directory
    already holds <prefix>-*.ckpt files, so a second run never overwrites (or rotates away) the
    first run's checkpoints."""
    old = tmp_path / "CKP-1_5.ckpt"
    old.write_bytes(b"the first run's checkpoint")
    (tmp_path / "CKPX-1_5.ckpt").write_bytes(b"another prefix")
    model, _, _ = _model()
    config = CheckpointConfig(save_checkpoint_steps=5, keep_checkpoint_max=1)
    ckpt = ModelCheckpoint(directory=tmp_path, config=config)
    model.train(2, _data(), callbacks=[ckpt])
    assert old.read_bytes() == b"the first run's checkpoint"
    assert set(os.listdir(tmp_path)) == {"CKPX-1_5.ckpt", "CKP-1_5.ckpt", "CKP_1-2_5.ckpt"}
    assert ckpt.latest_ckpt_file_name == str(tmp_path / "CKP_1-2_5.ckpt")
    # a third run goes on to CKP_2
    ckpt2 = ModelCheckpoint(directory=tmp_path, config=config)
    model.train(1, _data(), callbacks=[ckpt2])
    assert ckpt2.latest_ckpt_file_name == str(tmp_path / "CKP_2-1_5.ckpt")
    assert (tmp_path / "CKP_1-2_5.ckpt").exists()


# ---- learning-rate schedules: a one-element Tensor step ----------------------------------------
@pytest.mark.parametrize("step", [Tensor(numpy.array([2])), numpy.array([2], numpy.int32),
                                  Tensor(numpy.array(2, numpy.int32))])
def test_schedule_accepts_a_one_element_step(step):
    schedule = lr_schedule.CosineDecayLR(0.0, 1.0, 4)
    assert schedule(step) == schedule(2) == pytest.approx(0.5)


def test_schedule_names_a_step_with_several_elements():
    with pytest.raises(ValueError, match=r"'global_step' must be an int or a one-element Tensor.*\(2,\)"):
        lr_schedule.WarmUpLR(0.1, 4)(Tensor(numpy.array([1, 2])))


# ---- checkpoint functions: bad arguments named ------------------------------------------------
def test_checkpoint_functions_name_bad_arguments(tmp_path):
    net = nn.Dense(3, 2)
    with pytest.raises(TypeError, match=r"append_dict must be a dict.*list"):
        save_checkpoint(net, tmp_path / "a", append_dict=[1])
    assert os.listdir(tmp_path) == []
    path = save_checkpoint(net, tmp_path / "b")
    with pytest.raises(TypeError, match=r"filter_prefix must be a str or a list of str.*5"):
        load_checkpoint(path, filter_prefix=5)
    with pytest.raises(TypeError, match=r"filter_prefix must be a str or a list of str.*\[1\]"):
        load_checkpoint(path, filter_prefix=[1])
    with pytest.raises(TypeError, match=r"'net' must be a Cell.*str"):
        load_checkpoint(path, net="net")
    with pytest.raises(TypeError, match=r"'net' must be a Cell.*str"):
        load_param_into_net("net", {})


# ---- optimizer state_dict: the learning rate, and loading into another configuration -------------
def test_a_state_dict_replaces_the_whole_state_matched_by_name():
    """PyTorch's semantics (``load_state_dict`` replaces the state; minigrad matches parameters by
    name, as MindSpore's checkpoints do): Adam's moments load into AdamWeightDecay (a legitimate
    switch), and a parameter absent from the dict starts afresh. Unknown slots are refused."""
    ps = [Parameter(numpy.ones(3, numpy.float32), name="a"), Parameter(numpy.ones(2, numpy.float32), name="b")]
    grads = tuple(numpy.ones(p.shape, numpy.float32) for p in ps)
    adam = Adam(ps)
    adam(grads)
    switched = AdamWeightDecay(ps, 0.1)
    switched.load_state_dict(adam.state_dict())
    for key, value in adam.state_dict().items():
        if key != "learning_rate":
            numpy.testing.assert_array_equal(switched.state_dict()[key], value)
    one = Momentum(ps[:1], 0.1, 0.9)
    one(grads[:1])
    two = Momentum(ps, 0.1, 0.9)
    two(grads)
    two.load_state_dict(one.state_dict())
    assert sorted(two.state_dict()) == ["global_step", "learning_rate", "moments.a"]
    before = two.state_dict()
    with pytest.raises(ValueError, match="unknown key 'moment1.a'"):
        two.load_state_dict(adam.state_dict())
    assert two.state_dict().keys() == before.keys()


def test_optimizer_state_dict_keeps_a_changed_learning_rate():
    ps = [Parameter(numpy.ones(2, numpy.float32), name="w")]
    trained = Momentum(ps, 0.1, 0.9)
    trained.learning_rate.set_data(numpy.array(0.01, numpy.float32))
    resumed = Momentum(ps, 0.1, 0.9)
    resumed.load_state_dict(trained.state_dict())
    assert resumed.get_lr() == trained.get_lr()


def test_group_learning_rates_round_trip_and_bad_rates_change_nothing():
    ps = [Parameter(numpy.ones(2, numpy.float32), name="w"), Parameter(numpy.ones(2, numpy.float32), name="b")]
    groups = [{"params": ps[:1], "lr": 0.5}, {"params": ps[1:]}]
    trained = Momentum(groups, 0.1, 0.9)
    trained.learning_rate[0].set_data(numpy.array(0.25, numpy.float32))
    resumed = Momentum(groups, 0.1, 0.9)
    resumed.load_state_dict(trained.state_dict())
    assert [float(r.data) for r in resumed.get_lr_parameter(ps)] == [0.25, float(numpy.float32(0.1))]
    for bad in (numpy.array(-1.0, numpy.float32), numpy.array([0.1], numpy.float32), numpy.array(numpy.nan)):
        state = dict(trained.state_dict(), global_step=9)
        state[next(k for k in state if k.startswith("learning_rate"))] = bad
        with pytest.raises(ValueError, match="must be a finite float >= 0 of shape"):
            resumed.load_state_dict(state)
        assert resumed.global_step == 0 and float(resumed.learning_rate[0].data) == 0.25


# ---- NumpySlicesDataset: a list is one column (MindSpore) --------------------------------------
def test_a_list_of_arrays_is_one_column_as_in_mindspore():
    ds = NumpySlicesDataset([numpy.arange(4), numpy.arange(4) * 10], shuffle=False)
    assert ds.get_col_names() == ["column_0"] and ds.get_dataset_size() == 2
    assert [row[0].asnumpy().tolist() for row in ds] == [[0, 1, 2, 3], [0, 10, 20, 30]]
