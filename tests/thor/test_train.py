"""THOR in training: fp16 under O2 (fixed and dynamic loss scales), skipped overflow steps,
checkpoints that resume bit-identically, Model and its callbacks, ConvertModelUtils."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, amp, nn
from minigrad.amp import DynamicLossScaleManager, FixedLossScaleManager
from minigrad.dataset import NumpySlicesDataset
from minigrad.train import (
    ConvertModelUtils,
    LossMonitor,
    Model,
    ProgressBar,
    load_checkpoint,
    save_checkpoint,
)

LR, DAMP = Tensor(numpy.float32(0.05)), Tensor(numpy.float32(0.01))


def make(seed=0, **options):
    minigrad.set_seed(seed)
    net = nn.SequentialCell([nn.Dense(6, 16, activation="tanh"), nn.Dense(16, 3)])
    opt = nn.thor(net, LR, DAMP, 0.9, frequency=3, **options)
    return net, opt


def batch(seed=0, n=32, scale=1.0):
    rng = numpy.random.default_rng(seed)
    return (Tensor(rng.standard_normal((n, 6)).astype(numpy.float32)),
            Tensor((scale * rng.standard_normal((n, 3))).astype(numpy.float32)))


def snapshot(net, opt):
    """Every bit of state a step may change (parameters, masters, momenta, THOR state)."""
    state = opt.state_dict()
    arrays = {f"param.{p.name}": p.asnumpy().copy() for p in net.trainable_params()}
    for key, value in state.items():
        if key != "thor":  # the rest, with fisher="mc" the sampling seed
            arrays[key] = numpy.array(value)
    for layer, fields in state["thor"].items():
        for key, value in fields.items():
            arrays[f"thor.{layer}.{key}"] = numpy.array(value)
    arrays["records"] = numpy.array([str(b.layer.thor_record) for b in opt.blocks])
    return arrays


def assert_identical(a, b):
    assert a.keys() == b.keys()
    for key in a:
        nan = a[key].dtype.kind == "f"
        assert a[key].dtype == b[key].dtype, key
        assert numpy.array_equal(a[key], b[key], equal_nan=nan), key


def g_after_first_step(level, manager, loss_scale):
    net, opt = make(loss_scale=loss_scale)
    train = amp.build_train_network(net, opt, nn.MSELoss(), level=level, loss_scale_manager=manager)
    train(*batch())
    return [b.G.copy() for b in opt.blocks], opt


@pytest.mark.parametrize("manager, loss_scale", [
    (FixedLossScaleManager(128.0, drop_overflow_update=False), 128.0),
    (DynamicLossScaleManager(2.0 ** 12, 2, 50), 1.0)], ids=["fixed128", "dynamic"])
def test_o2_factors_match_fp32(manager, loss_scale):
    reference, _ = g_after_first_step("O0", None, 1.0)
    fp16, opt = g_after_first_step("O2", manager, loss_scale)
    assert opt.parameters[0].dtype == minigrad.float16
    for g32, g16 in zip(reference, fp16):
        assert g16.dtype == numpy.float32                  # second-order state stays fp32
        assert numpy.abs(g16 - g32).max() <= 2e-2 * numpy.abs(g32).max()
    for block in opt.blocks:
        assert block.A.dtype == block.A_inv.dtype == block.G_inv.dtype == numpy.float32


@pytest.mark.parametrize("manager, loss_scale", [
    (FixedLossScaleManager(128.0, drop_overflow_update=False), 128.0),
    (DynamicLossScaleManager(2.0 ** 12, 2, 50), 1.0)], ids=["fixed128", "dynamic"])
def test_o2_overflow_step_leaves_everything_bit_identical(manager, loss_scale):
    net, opt = make(loss_scale=loss_scale)
    train = amp.build_train_network(net, opt, nn.MSELoss(), level="O2", loss_scale_manager=manager)
    for k in range(4):   # past a refresh, with momentum and master weights in place
        train(*batch(k))
    before = snapshot(net, opt)
    train(*batch(9, scale=1e6))                # the fp16 backward overflows
    after = snapshot(net, opt)
    assert_identical(before, after)
    assert opt.global_step == 4
    train(*batch(5))                           # and training goes on
    assert opt.global_step == 5
    assert all(numpy.isfinite(p.asnumpy()).all() for p in net.trainable_params())


def test_fixed_scale_overflow_is_reported_by_thor():
    net, opt = make(loss_scale=128.0)
    manager = FixedLossScaleManager(128.0, drop_overflow_update=False)
    train = amp.build_train_network(net, opt, nn.MSELoss(), level="O2", loss_scale_manager=manager)
    train(*batch(0, scale=1e6))
    assert not opt.last_report.applied and "non-finite" in opt.last_report.reason


@pytest.mark.parametrize("options", [{}, {"refresh": "trace"}, {"factor_decay": 0.5},
                                     {"fisher": "mc"}, {"fisher": "mc", "refresh": "trace"}],
                         ids=["frequency", "trace", "ema", "mc", "mc-trace"])
def test_checkpoint_resume_is_bit_identical(tmp_path, options):
    net, opt = make(**options)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    for k in range(4):
        train(*batch(k))
    path = str(tmp_path / "thor.ckpt")
    save_checkpoint(net, path, optimizer=opt)
    for k in range(4, 9):
        train(*batch(k))
    expected = snapshot(net, opt)

    net2, opt2 = make(seed=1, **options)     # other initial weights, overwritten by the load
    load_checkpoint(path, net2, optimizer=opt2)
    train2 = nn.TrainOneStepCell(nn.WithLossCell(net2, nn.MSELoss()), opt2)
    for k in range(4, 9):
        train2(*batch(k))
    assert_identical(expected, snapshot(net2, opt2))


def test_checkpoint_load_checks_the_thor_state():
    net, opt = make()
    nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)(*batch())
    state = opt.state_dict()
    state["thor"]["0.weight"]["A"] = numpy.zeros((3, 3), numpy.float32)
    _, opt2 = make()
    with pytest.raises(ValueError, match="layer '0.weight': A has shape"):
        opt2.load_state_dict(state)
    assert opt2.blocks[0].A is None and opt2.global_step == 0
    with pytest.raises(ValueError, match="no 'thor' entry"):
        opt2.load_state_dict({"global_step": 0})


def test_model_with_callbacks_and_convert_to_thor_model(capsys):
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(6, 16, activation="tanh"), nn.Dense(16, 3)])
    loss = nn.MSELoss()
    momentum = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    plain = Model(net, loss, momentum)
    assert ConvertModelUtils.convert_to_thor_model(plain, net, loss, momentum) is plain
    opt = nn.thor(net, LR, DAMP, 0.9, frequency=4)
    model = ConvertModelUtils.convert_to_thor_model(plain, net, loss, opt, amp_level="O0")
    assert isinstance(model, Model) and model is not plain
    x, y = batch(n=64)
    ds = NumpySlicesDataset((x.asnumpy(), y.asnumpy()), shuffle=False).batch(16)
    model.train(2, ds, callbacks=[LossMonitor(1), ProgressBar()])
    assert opt.global_step == 8 and opt.refresh_counts()["0.weight"] == 2
    assert "loss" in capsys.readouterr().out


@pytest.mark.parametrize("use_tqdm", [False, True], ids=["lines", "tqdm"])
def test_progress_bar_and_loss_monitor_show_the_refresh_cost(capsys, use_tqdm):
    if use_tqdm:
        pytest.importorskip("tqdm")
    import io
    net, opt = make()   # frequency 3: steps 0 and 3 refresh
    x, y = batch(n=64)
    ds = NumpySlicesDataset((x.asnumpy(), y.asnumpy()), shuffle=False).batch(8)
    stream = io.StringIO()
    Model(net, nn.MSELoss(), opt).train(1, ds, callbacks=[
        LossMonitor(1), ProgressBar(use_tqdm=use_tqdm, lines_per_epoch=8, file=stream)])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8
    refresh = [k for k, line in enumerate(lines) if "; refresh 2/2 layers, factors " in line]
    assert refresh == [0, 3, 6]
    assert all("inverses" in lines[k] and lines[k].endswith(" ms") for k in refresh)
    assert all(lines[k].endswith("; reuse") for k in (1, 2, 4, 5, 7))
    bar = stream.getvalue()
    assert "refreshes" in bar and "refresh 2/2 layers, factors" in bar and "inverses" in bar
    if not use_tqdm:
        assert bar.splitlines()[-1].endswith("3 refreshes")


def test_monitors_without_a_reporting_optimizer_print_as_before(capsys):
    minigrad.set_seed(0)
    net = nn.Dense(6, 3)
    x, y = batch(n=16)
    ds = NumpySlicesDataset((x.asnumpy(), y.asnumpy()), shuffle=False).batch(8)
    Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.1, 0.9)).train(
        1, ds, callbacks=[LossMonitor(1)])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(";" not in line for line in lines)
