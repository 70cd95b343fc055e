"""Model (train / eval / predict, construction rules), callbacks and metrics on a tiny problem."""
import math
import os

import numpy
import numpy as np
import pytest

import minigrad
from minigrad import Model, Tensor, nn
from minigrad import dtype as mstype
from minigrad.amp import DynamicLossScaleManager, FixedLossScaleManager
from minigrad.dataset import NumpySlicesDataset
from minigrad.optim import Momentum
from minigrad.train import (
    Accuracy,
    Callback,
    CheckpointConfig,
    History,
    Loss,
    LossMonitor,
    LossScaleMonitor,
    ModelCheckpoint,
    ProgressBar,
    TimeMonitor,
    Top1CategoricalAccuracy,
    load_checkpoint,
)
from minigrad.train import callback as ms_callback_module


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 16, weight_init="he_uniform")
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(16, 3, weight_init="he_uniform")

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def _blobs(n=96, seed=0):
    """Three well separated Gaussian blobs in 4-D."""
    rng = numpy.random.default_rng(seed)
    y = rng.integers(0, 3, size=n).astype(numpy.int32)
    centers = numpy.eye(3, 4, dtype=numpy.float32) * 3
    x = centers[y] + rng.normal(scale=0.5, size=(n, 4)).astype(numpy.float32)
    return x, y


def _dataset(batch_size=16, seed=0, n=96):
    x, y = _blobs(n, seed)
    return NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(batch_size)


def _model(metrics=None, **kwargs):
    minigrad.set_seed(0)
    net = Net()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = Momentum(net.trainable_params(), 0.05, 0.9)
    return Model(net, loss, optimizer, metrics=metrics, **kwargs), net, optimizer


class Recorder(Callback):
    """Logs every hook call (new names) and the older names where a subclass overrides them."""

    def __init__(self):
        self.calls = []

    def _log(self, name, run_context):
        p = run_context.original_args()
        self.calls.append((name, p.get("cur_epoch_num"), p.get("cur_step_num")))

    for _hook in (
        "on_train_begin",
        "on_train_epoch_begin",
        "on_train_step_begin",
        "on_train_step_end",
        "on_train_epoch_end",
        "on_train_end",
        "on_eval_begin",
        "on_eval_step_end",
        "on_eval_end",
    ):
        locals()[_hook] = (lambda name: lambda self, ctx: self._log(name, ctx))(_hook)
    del _hook


# ---- training -----------------------------------------------------------------------------------
def test_train_converges_and_eval_reports_metrics():
    model, net, _ = _model(metrics={"acc": Accuracy(), "loss": Loss()})
    history = History()
    before = model.eval(_dataset())
    model.train(8, _dataset(), callbacks=[history])
    after = model.eval(_dataset(seed=1))
    assert after["acc"] >= 0.95 and after["loss"] < before["loss"] / 3
    assert history.epoch == list(range(1, 9)) and len(history.step_losses) == 8 * 6
    assert history.epoch_losses[-1] < history.epoch_losses[0] / 3
    assert history.history["net_output"][-1] == history.step_losses[-1]
    assert not net.training  # eval left the network in eval mode


def test_callbacks_run_in_order_with_cb_params():
    model, net, optimizer = _model()
    rec, second = Recorder(), Recorder()
    seen = {}

    class Check(Callback):
        def on_train_step_end(self, run_context):
            p = run_context.original_args()
            seen.update(
                batch_num=p.batch_num,
                epoch_num=p.epoch_num,
                optimizer=p.optimizer,
                train_network=p.train_network,
                network=p.network,
                training=net.training,
                loss=p.net_outputs,
            )

    model.train(2, _dataset(batch_size=48), callbacks=[rec, Check(), second])
    assert rec.calls == [
        ("on_train_begin", 0, 0),
        ("on_train_epoch_begin", 1, 0),
        ("on_train_step_begin", 1, 1),
        ("on_train_step_end", 1, 1),
        ("on_train_step_begin", 1, 2),
        ("on_train_step_end", 1, 2),
        ("on_train_epoch_end", 1, 2),
        ("on_train_epoch_begin", 2, 2),
        ("on_train_step_begin", 2, 3),
        ("on_train_step_end", 2, 3),
        ("on_train_step_begin", 2, 4),
        ("on_train_step_end", 2, 4),
        ("on_train_epoch_end", 2, 4),
        ("on_train_end", 2, 4),
    ]
    assert second.calls == rec.calls
    assert seen["batch_num"] == 2 and seen["epoch_num"] == 2 and seen["optimizer"] is optimizer
    assert (
        seen["train_network"] is model.train_network and seen["network"] is net and seen["training"]
    )
    assert isinstance(seen["loss"], Tensor) and seen["loss"].shape == ()


def test_old_hook_names_and_request_stop():
    calls = []

    class OldStyle(Callback):
        def begin(self, ctx):
            calls.append("begin")

        def epoch_begin(self, ctx):
            calls.append("epoch_begin")

        def step_end(self, ctx):
            calls.append("step_end")
            if ctx.original_args().cur_step_num == 3:
                ctx.request_stop()

        def epoch_end(self, ctx):
            calls.append("epoch_end")

        def end(self, ctx):
            calls.append("end")

    model, _, optimizer = _model()
    model.train(5, _dataset(batch_size=48), callbacks=OldStyle())
    assert calls == [
        "begin",
        "epoch_begin",
        "step_end",
        "step_end",
        "epoch_end",
        "epoch_begin",
        "step_end",
        "epoch_end",
        "end",
    ]
    assert optimizer.global_step == 3


def test_initial_epoch_and_plain_iterables():
    model, _, optimizer = _model()
    rec = Recorder()
    x, y = _blobs(32)
    batches = [(Tensor(x[i : i + 16]), Tensor(y[i : i + 16])) for i in (0, 16)]
    model.train(3, batches, callbacks=rec, initial_epoch=1)
    assert [c for c in rec.calls if c[0] == "on_train_epoch_begin"] == [
        ("on_train_epoch_begin", 2, 2),
        ("on_train_epoch_begin", 3, 4),
    ]
    assert optimizer.global_step == 4
    with pytest.raises(ValueError, match="initial_epoch"):
        model.train(3, batches, initial_epoch=3)
    with pytest.raises(ValueError, match="epoch must be a positive int, got 0"):
        model.train(0, batches)
    with pytest.warns(UserWarning, match="dataset_sink_mode"):
        model.train(1, batches, dataset_sink_mode=True)


def test_network_with_loss_and_prebuilt_train_cell():
    minigrad.set_seed(0)
    net = Net()
    loss_net = nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"))
    optimizer = Momentum(net.trainable_params(), 0.05, 0.9)
    Model(loss_net, optimizer=optimizer).train(1, _dataset())
    assert optimizer.global_step == 6
    train_cell = nn.TrainOneStepCell(loss_net, optimizer)
    model = Model(train_cell)
    assert model.train_network is train_cell
    model.train(1, _dataset())
    assert optimizer.global_step == 12


# ---- eval and predict ---------------------------------------------------------------------------
def test_predict_runs_in_eval_mode_without_a_graph():
    model, net, _ = _model()
    net.set_train(True)
    out = model.predict(Tensor(_blobs(5)[0]))
    assert out.shape == (5, 3) and not out.requires_grad and not net.training


def test_metric_names_and_custom_eval_network():
    model, net, _ = _model(metrics={"accuracy", "loss"})
    result = model.eval(_dataset())
    assert sorted(result) == ["accuracy", "loss"] and 0 <= result["accuracy"] <= 1

    class Eval(nn.Cell):
        def __init__(self, network):
            super().__init__(auto_prefix=False)
            self.network = network

        def construct(self, x, y):
            return self.network(x), y

    custom = Model(net, metrics={"top1": Top1CategoricalAccuracy()}, eval_network=Eval(net))
    assert custom.eval(_dataset())["top1"] == pytest.approx(result["accuracy"])
    with pytest.raises(ValueError, match="eval_indexes"):
        Model(net, metrics={"acc": Accuracy()}, eval_network=Eval(net), eval_indexes=[0, 1])


# ---- construction rules -------------------------------------------------------------------------
def test_construction_errors():
    net = Net()
    optimizer = Momentum(net.trainable_params(), 0.1, 0.9)
    with pytest.raises(ValueError, match="'metrics' need either 'loss_fn' or 'eval_network'"):
        Model(net, optimizer=optimizer, metrics={"acc": Accuracy()})
    with pytest.raises(ValueError, match="amp_level='O2' needs an 'optimizer'"):
        Model(net, nn.MSELoss(), amp_level="O2")
    with pytest.raises(ValueError, match="'optimizer' can not be None"):
        Model(net, nn.MSELoss(), loss_scale_manager=FixedLossScaleManager())
    with pytest.raises(ValueError, match="amp_level must be one of"):
        Model(net, nn.MSELoss(), optimizer, amp_level="O4")
    with pytest.raises(TypeError, match=r"amp_level must be one of .*got 2 \(int\)"):
        Model(net, nn.MSELoss(), optimizer, amp_level=2)
    with pytest.raises(ValueError, match="unsupported argument 'foo'"):
        Model(net, nn.MSELoss(), optimizer, foo=1)
    with pytest.raises(TypeError, match="Model: network must be a Cell, got "):
        Model(lambda x: x)
    with pytest.raises(ValueError, match="Model.eval needs metrics"):
        Model(net, nn.MSELoss(), optimizer).eval(_dataset())


# ---- mixed precision ----------------------------------------------------------------------------
def test_amp_o2_trains_with_loss_scaling_and_monitors_take_the_loss():
    manager = DynamicLossScaleManager(init_loss_scale=2.0**10, scale_window=4)
    model, net, _ = _model(metrics={"acc": Accuracy()}, amp_level="O2", loss_scale_manager=manager)
    monitor, history = LossScaleMonitor(), History()
    model.train(6, _dataset(), callbacks=[monitor, history, LossMonitor(per_print_times=0)])
    assert net.fc1.weight.dtype == numpy.float16
    assert len(monitor.scales) == 36 and monitor.scales[0] == 2.0**10
    assert max(monitor.scales) > 2.0**10  # clean windows grew the scale
    assert (
        manager.get_loss_scale() == model.train_network.scale_sense.asnumpy().item()
    )  # host copy fed
    assert all(math.isfinite(v) for v in history.step_losses)
    assert model.eval(_dataset(seed=1))["acc"] >= 0.9


# ---- stock callbacks ----------------------------------------------------------------------------
def test_loss_and_time_monitor_output(capsys):
    model, _, _ = _model()
    model.train(
        1, _dataset(batch_size=32), callbacks=[LossMonitor(per_print_times=2), TimeMonitor()]
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("epoch: 1 step: 2, loss is ")
    assert lines[1].startswith("epoch time: ") and "per step time: " in lines[1]
    with pytest.raises(ValueError, match="per_print_times"):
        LossMonitor(-1)


def test_loss_monitor_stops_on_nan():
    class NanLoss(nn.Cell):
        def construct(self, logits, labels):
            return (logits * float("nan")).mean()

    minigrad.set_seed(0)
    net = Net()
    model = Model(net, NanLoss(), Momentum(net.trainable_params(), 0.1, 0.9))
    with pytest.raises(ValueError, match="epoch: 1 step: 1. Invalid loss nan"):
        model.train(1, _dataset(), callbacks=[LossMonitor()])


@pytest.mark.parametrize("use_tqdm", [False, True])
def test_progress_bar(capsys, use_tqdm):
    if use_tqdm:
        pytest.importorskip("tqdm")
    model, _, _ = _model()
    model.train(
        2, _dataset(batch_size=8), callbacks=[ProgressBar(use_tqdm=use_tqdm, lines_per_epoch=3)]
    )
    err = capsys.readouterr().err
    assert "epoch 2/2" in err
    if not use_tqdm:
        lines = err.splitlines()
        assert lines[0].startswith("epoch 1/2 [4/12] loss ")
        assert lines[1].startswith("epoch 1/2 [8/12] loss ")
        assert lines[2].startswith("epoch 1/2 done: 12 steps, mean loss ") and len(lines) == 6


def test_model_checkpoint_keeps_the_newest_files_and_resumes(tmp_path):
    model, net, optimizer = _model()
    config = CheckpointConfig(
        save_checkpoint_steps=4, keep_checkpoint_max=2, append_info=["epoch_num"]
    )
    ckpt = ModelCheckpoint(prefix="net", directory=tmp_path, config=config)
    model.train(
        3, _dataset(batch_size=16), callbacks=[ckpt]
    )  # 18 steps: saves at 4, 8, 12, 16, end
    assert sorted(os.listdir(tmp_path)) == ["net-3_4.ckpt", "net-3_6.ckpt"]
    assert ckpt.latest_ckpt_file_name == os.path.join(tmp_path, "net-3_6.ckpt")

    minigrad.set_seed(5)
    net2 = Net()
    optimizer2 = Momentum(net2.trainable_params(), 0.05, 0.9)
    params = load_checkpoint(ckpt.latest_ckpt_file_name, net=net2, optimizer=optimizer2)
    assert int(params["epoch_num"].asnumpy()) == 3 and optimizer2.global_step == 18
    for p, q in zip(net.get_parameters(), net2.get_parameters()):
        assert numpy.array_equal(p.asnumpy(), q.asnumpy())
    with pytest.raises(ValueError, match="keep_checkpoint_max"):
        CheckpointConfig(keep_checkpoint_max=-1)
    for bad, error in (
        (-1, ValueError),
        (float("inf"), ValueError),
        ("5", TypeError),
        (True, TypeError),
    ):
        with pytest.raises(error, match="keep_checkpoint_per_n_minutes"):
            CheckpointConfig(keep_checkpoint_max=0, keep_checkpoint_per_n_minutes=bad)
    # MindSpore: neither retention set keeps the newest file; the count wins over the minutes
    assert CheckpointConfig(keep_checkpoint_max=0).keep_checkpoint_max == 1
    both = CheckpointConfig(keep_checkpoint_max=3, keep_checkpoint_per_n_minutes=2)
    assert (both.keep_checkpoint_max, both.keep_checkpoint_per_n_minutes) == (3, None)
    with pytest.raises(ValueError, match="save_checkpoint_steps or save_checkpoint_seconds"):
        CheckpointConfig(save_checkpoint_steps=None, save_checkpoint_seconds=0)


def test_mindspore_import_locations():
    assert ms_callback_module.LossMonitor is LossMonitor
    assert minigrad.train.metrics.Accuracy is Accuracy
    assert minigrad.Model is Model


# ---- metrics ------------------------------------------------------------------------------------
def test_accuracy_and_loss_metrics():
    logits = numpy.array([[2.0, 0.1], [0.2, 1.0], [3.0, 0.0], [0.0, 1.0]])
    acc = Accuracy()
    acc.update(Tensor(logits[:2]), Tensor(numpy.array([0, 0])))
    acc.update(logits[2:], numpy.array([[1, 0], [0, 1]]))  # one-hot labels
    assert acc.eval() == 0.75
    acc.clear()
    with pytest.raises(RuntimeError, match="no samples"):
        acc.eval()
    with pytest.raises(ValueError, match=r"y_pred \(4, 2\) and y \(3,\)"):
        acc.update(logits, numpy.zeros(3))
    loss = Loss()
    loss.update(Tensor(numpy.float32(1.0)))  # a batch mean of one sample
    loss.update(numpy.array([2.0, 4.0]))  # two per-sample losses
    assert loss.eval() == 7.0 / 3  # the mean over the three samples
    assert Accuracy()(logits, numpy.array([0, 1, 0, 1])) == 1.0


def test_model_checkpoint_keeps_one_file_per_n_minutes(tmp_path, monkeypatch):
    """keep_checkpoint_per_n_minutes (keep_checkpoint_max off): the newest file and the first of
    each interval, on the callback's clock (here one save every 50 s, intervals of 2 minutes)."""
    from minigrad.train.callback import model_checkpoint

    clock = iter(range(0, 10_000, 50))
    monkeypatch.setattr(model_checkpoint, "_clock", lambda: float(next(clock)))
    model, _, _ = _model()
    config = CheckpointConfig(
        save_checkpoint_steps=1, keep_checkpoint_max=None, keep_checkpoint_per_n_minutes=2
    )
    ckpt = ModelCheckpoint(
        prefix="net", directory=tmp_path, config=config
    )  # reads the clock once: 0
    model.train(
        1, _dataset(batch_size=16), callbacks=[ckpt]
    )  # 6 steps: saves at 50, 100, ..., 300 s
    # intervals from the first save (50 s): [50, 170) -> step 1, [170, 290) -> step 4, then step 6
    assert sorted(os.listdir(tmp_path)) == ["net-1_1.ckpt", "net-1_4.ckpt", "net-1_6.ckpt"]
    assert ckpt.latest_ckpt_file_name == os.path.join(tmp_path, "net-1_6.ckpt")


def test_model_eval_o2_casts_outputs_to_fp32_and_scores_a_short_last_batch():
    from minigrad import Model
    from minigrad.dataset import NumpySlicesDataset

    minigrad.set_seed(0)
    x = numpy.random.rand(10, 4).astype(numpy.float32)
    y = (numpy.arange(10) % 3).astype(numpy.int32)
    net = nn.Dense(4, 3)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(
        net,
        loss_fn,
        nn.Momentum(net.trainable_params(), 0.1, 0.9),
        metrics={"acc": Accuracy(), "loss": Loss()},
        amp_level="O2",
    )
    assert model.eval_network.add_cast_fp32
    ds = NumpySlicesDataset((x, y), column_names=["x", "y"], shuffle=False).batch(4)  # 4, 4, 2
    result = model.eval(ds)
    logits = model.predict(Tensor(x))
    assert logits.dtype == mstype.float16
    assert result["acc"] == pytest.approx(float((logits.asnumpy().argmax(1) == y).mean()))
    batch_losses = [
        float(loss_fn(logits[i : i + 4].astype(mstype.float32), Tensor(y[i : i + 4])).asnumpy())
        for i in (0, 4, 8)
    ]
    # the Loss metric weights each batch mean by its sample count (4, 4, 2)
    assert result["loss"] == pytest.approx(numpy.average(batch_losses, weights=[4, 4, 2]), rel=1e-6)
    assert model.eval(ds) == result  # metrics are cleared between evals


def test_a_failed_o2_build_leaves_the_network_unchanged():
    net = nn.Dense(4, 2)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    with pytest.raises(TypeError):
        Model(net, "mse", opt, amp_level="O2")
    assert net.weight.dtype == np.float32 and net.bias.dtype == np.float32


@pytest.mark.parametrize("level", ["O0", "O2"])
def test_a_loss_class_instead_of_an_instance_is_refused_when_building(level):
    net = nn.Dense(4, 2)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    with pytest.raises(TypeError, match="loss_fn.*MSELoss"):
        Model(net, nn.MSELoss, opt, amp_level=level)


def test_training_on_a_dataset_without_batches_is_an_error():
    net = nn.Dense(4, 2)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    data = NumpySlicesDataset((np.ones((3, 4), np.float32), np.ones((3, 2), np.float32)))
    with pytest.raises(ValueError, match="(?i)empty|no batch|size 0|dataset"):
        Model(net, nn.MSELoss(), opt).train(1, data.batch(8, drop_remainder=True))
