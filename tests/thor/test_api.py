"""THOR's arguments (one test per line of the seed's Raises list), schedules, refresh rules and
report."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.optim import THOR

T = Tensor(numpy.float32(0.1))


def mlp(seed=0):
    minigrad.set_seed(seed)
    # small initial weights (σ = 0.01, zero biases): the factors' traces settle in a few steps
    return nn.SequentialCell([nn.Dense(6, 8, "normal", "zeros", activation="tanh"),
                              nn.Dense(8, 3, "normal", "zeros")])


def data(seed=0, n=16):
    rng = numpy.random.default_rng(seed)
    return (Tensor(rng.standard_normal((n, 6)).astype(numpy.float32)),
            Tensor(rng.standard_normal((n, 3)).astype(numpy.float32)))


def trainer(opt, net):
    return nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)


# ---- the seed's Raises list, line by line ----------------------------------------------------
def test_learning_rate_not_a_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="learning_rate must be a Tensor"):
        nn.thor(mlp(), 0.1, T, 0.9)


@pytest.mark.parametrize("name, kwargs", [
    ("loss_scale", {"loss_scale": "128"}), ("momentum", {"momentum": 1}),
    ("momentum", {"momentum": "0.9"}), ("frequency", {"frequency": 2.0})])
def test_loss_scale_momentum_frequency_not_float_are_type_errors(name, kwargs):
    args = {"momentum": 0.9, **kwargs}
    with pytest.raises(TypeError, match=name):
        nn.thor(mlp(), T, T, **args)


@pytest.mark.parametrize("value", ["0.1", None, True])
def test_weight_decay_neither_float_nor_int_is_a_type_error(value):
    with pytest.raises(TypeError, match="weight_decay"):
        nn.thor(mlp(), T, T, 0.9, weight_decay=value)


def test_use_nesterov_not_bool_is_a_type_error():
    with pytest.raises(TypeError, match="use_nesterov must be a bool, got 1"):
        nn.thor(mlp(), T, T, 0.9, use_nesterov=1)


def test_frequency_not_int_is_a_type_error():
    with pytest.raises(TypeError, match=r"frequency must be an int >= 2, got 10.0 \(float\)"):
        nn.thor(mlp(), T, T, 0.9, frequency=10.0)


@pytest.mark.parametrize("value", [0.0, -1.0, -1])
def test_loss_scale_not_positive_is_a_value_error(value):
    with pytest.raises(ValueError, match="loss_scale"):
        nn.thor(mlp(), T, T, 0.9, loss_scale=value)


@pytest.mark.parametrize("name", ["weight_decay", "momentum"])
def test_weight_decay_or_momentum_negative_is_a_value_error(name):
    kwargs = {"momentum": 0.9, name: -0.1}
    with pytest.raises(ValueError, match=name):
        nn.thor(mlp(), T, T, **kwargs)


def test_frequency_below_two_is_a_value_error():
    with pytest.raises(ValueError, match="frequency must be an int >= 2, got 1"):
        nn.thor(mlp(), T, T, 0.9, frequency=1)


def test_int_loss_scale_is_converted_and_checks_come_before_the_conversion():
    net = mlp()
    with pytest.raises(TypeError):
        nn.thor(net, 0.1, T, 0.9)
    assert type(net.cells()[0]) is nn.Dense           # a refused call changed nothing
    opt = nn.thor(net, T, T, 0.9, loss_scale=128)
    assert opt.loss_scale == 128.0 and isinstance(opt.loss_scale, float)
    assert type(net.cells()[0]) is nn.DenseThor


@pytest.mark.parametrize("kwargs, error, match", [
    ({"split_dim": 0}, ValueError, "split_dim"), ({"refresh": "sometimes"}, ValueError, "refresh"),
    ({"omega1": 0.01, "omega2": 0.1}, ValueError, "omega2"),
    ({"factor_decay": 1.0}, ValueError, "factor_decay"), ({"kl_clip": 0.0}, ValueError, "kl_clip"),
    ({"split_indices": [1, 0]}, ValueError, "increasing"),
    ({"split_indices": [5]}, ValueError, "split_indices"),
    ({"split_indices": []}, ValueError,
     r"thor: split_indices must be a non-empty, strictly increasing list of layer indices or "
     r"None, got \[\]"),
    ({"split_indices": "0"}, TypeError, r"split_indices must be a list of ints or None, got '0'"),
    ({"loss_scale": -10 ** 30}, ValueError,
     r"loss_scale must be a finite float in \(0.0, inf\), got -1000000000000000000000000000000$"),
    ({"enable_clip_grad": "yes"}, TypeError, "enable_clip_grad"),
    ({"batch_size": 0}, ValueError, "batch_size")])
def test_options_are_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        nn.thor(mlp(), T, T, 0.9, **kwargs)


def test_net_without_thor_layers():
    with pytest.raises(ValueError, match="no THOR layer"):
        THOR(nn.SequentialCell([nn.ReLU(), nn.BatchNorm1d(3)]), T, T, 0.9)
    with pytest.raises(TypeError, match="net must be a Cell"):
        nn.thor([1, 2], T, T, 0.9)


def test_importable_everywhere():
    assert nn.thor is minigrad.optim.thor
    assert nn.THOR is THOR


# ---- schedules ----------------------------------------------------------------------------------
def test_per_step_tensors_and_callables():
    lrs = Tensor(numpy.array([0.1, 0.05, 0.02], numpy.float32))
    net = mlp()
    opt = nn.thor(net, lrs, lambda step: 0.1 / (1 + step), 0.9, frequency=2)
    train = trainer(opt, net)
    x, y = data()
    seen = []
    for _ in range(5):
        train(x, y)
        seen.append((opt.last_report.learning_rate, opt.last_report.damping))
    assert [s[0] for s in seen] == pytest.approx([0.1, 0.05, 0.02, 0.02, 0.02])  # last repeats
    assert [s[1] for s in seen] == pytest.approx([0.1 / (1 + k) for k in range(5)])


def test_bad_damping():
    with pytest.raises(TypeError, match="damping must be a Tensor"):
        nn.thor(mlp(), T, 0.1, 0.9)
    with pytest.raises(ValueError, match="damping must be a 0-d or 1-D"):
        nn.thor(mlp(), T, Tensor(numpy.ones((2, 2), numpy.float32)), 0.9)
    net = mlp()
    opt = nn.thor(net, T, lambda step: -1.0, 0.9)
    with pytest.raises(ValueError, match="damping schedule returned -1.0 at step 0"):
        trainer(opt, net)(*data())


# ---- refresh rules -------------------------------------------------------------------------
def test_frequency_reuses_the_inverses():
    net = mlp()
    opt = nn.thor(net, T, T, 0.9, frequency=4)
    train = trainer(opt, net)
    x, y = data()
    refreshed = []
    for _ in range(10):
        inverse_before = opt.blocks[0].A_inv
        train(x, y)
        refreshed.append(opt.last_report.refresh)
        if not opt.last_report.refresh:
            assert opt.blocks[0].A_inv is inverse_before       # the stored inverse, reused
            assert net.cells()[0].thor_pending is None
    assert refreshed == [True, False, False, False] * 2 + [True, False]
    assert opt.refresh_counts() == {"0.weight": 3, "1.weight": 3}
    assert opt.last_report.reused == ("0.weight", "1.weight")


def test_reuse_steps_record_nothing():
    net = mlp()
    opt = nn.thor(net, T, T, 0.9, frequency=3)
    train = trainer(opt, net)
    x, y = data()
    train(x, y)
    assert net.cells()[0].thor_record is None and not net.cells()[0].thor


def test_separate_factor_and_inverse_periods_with_running_average():
    net = mlp()
    opt = nn.thor(net, T, T, 0.9, factor_frequency=1, inverse_frequency=3, factor_decay=0.5)
    train = trainer(opt, net)
    actions = []
    for k in range(6):
        train(*data(k))
        actions.append(opt.last_report.layers["0.weight"].action)
    assert actions == ["refresh", "record", "record", "refresh", "record", "record"]


def test_trace_rule_skips_refreshes_once_factors_settle_and_freezes():
    net = mlp()
    opt = nn.thor(net, T, T, 0.9, refresh="trace", omega1=0.05, omega2=0.0)
    train = trainer(opt, net)
    x, y = data()
    actions, formed = [], []
    for _ in range(12):
        factor = opt.blocks[0].A
        train(x, y)  # one batch: the factors barely change after the first steps
        actions.append(opt.last_report.layers["0.weight"].action)
        formed.append(opt.blocks[0].A is not factor)
    assert actions[0] == "refresh"
    assert actions.count("refresh") <= 3 and actions[-1] == "reuse"  # traces tested only
    assert formed == [a == "refresh" for a in actions]  # factors formed only to refresh
    assert opt.last_report.layers["0.weight"].delta < 0.05
    assert net.cells()[0].thor_record == "factors"  # the empirical G may refresh at any step

    net = mlp()
    opt = nn.thor(net, T, T, 0.9, refresh="trace", omega1=0.5, omega2=0.5)
    train = trainer(opt, net)
    train(x, y)
    train(x, y)
    assert opt.last_report.layers["0.weight"].action == "frozen"
    counts = opt.refresh_counts()
    for _ in range(3):
        train(*data(7))   # new data: a frozen layer still never refreshes
    assert opt.refresh_counts() == counts
    assert net.cells()[0].thor_record is None


def test_trace_rule_refreshes_when_the_data_changes():
    net = mlp()
    opt = nn.thor(net, T, T, 0.9, refresh="trace", omega1=0.01)
    train = trainer(opt, net)
    x, y = data()
    for _ in range(4):
        train(x, y)
    assert opt.last_report.layers["0.weight"].action == "reuse"
    train(x * 5.0, y)       # tr(A) jumps: the layer refreshes at once
    assert opt.last_report.layers["0.weight"].delta > 0.5
    assert opt.last_report.layers["0.weight"].action == "refresh"


# ---- report --------------------------------------------------------------------------------
def test_last_report_says_what_happened():
    net = mlp()
    opt = nn.thor(net, T, T, 0.9, frequency=2)
    train = trainer(opt, net)
    train(*data())
    report = opt.last_report
    assert report.applied and report.refresh and report.step == 1  # 1-based, as amp's report
    assert report.summary().startswith("step 1: refresh 2/2 layers")
    train(*data())
    assert opt.last_report.step == 2 == opt.global_step
    layer = report.layers["0.weight"]
    assert layer.action == "refresh" and layer.trace_a > 0 and layer.trace_g > 0
    assert layer.damping_a == pytest.approx(0.1 ** 0.5)
    assert set(report.seconds) == {"factors", "inverses", "precondition", "update"}
    text = str(report)
    assert "0.weight" in text and "refresh" in text


def test_non_finite_gradient_skips_the_whole_step():
    net = mlp()
    opt = nn.thor(net, T, T, 0.9, frequency=2)
    grads = [numpy.zeros(p.shape, numpy.float32) for p in opt.parameters]
    grads[1][0] = numpy.inf
    before = [p.asnumpy().copy() for p in opt.parameters]
    assert opt(grads) is True
    assert not opt.last_report.applied and "0.bias" in opt.last_report.reason
    assert opt.global_step == 0 and opt.last_report.step == 1  # the step it would have been
    assert opt.last_report.summary().startswith("step 1: skipped")
    assert all((p.asnumpy() == b).all() for p, b in zip(opt.parameters, before))


def test_non_finite_factor_keeps_the_inverses():
    net = mlp()
    opt = nn.thor(net, T, T, 0.9, frequency=2)
    train = trainer(opt, net)
    x, y = data()
    train(x, y)
    train(x, y)
    inverse = opt.blocks[0].A_inv.copy()
    layer = net.cells()[0]
    assert layer.thor_record == "factors"
    net(x)                                            # a forward pass records the factors ...
    layer.thor_pending["a_rows"][0, 0] = numpy.nan    # ... which are broken here
    layer.thor_pending["g_rows"] = numpy.eye(8, dtype=numpy.float32)
    layer.thor_pending["g_trace"] = 8.0
    opt([numpy.zeros(p.shape, numpy.float32) for p in opt.parameters])
    assert opt.last_report.layers["0.weight"].action == "kept"
    assert (opt.blocks[0].A_inv == inverse).all()


def test_layernorm_takes_the_diagonal_rule_and_biases_the_plain_gradient():
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(6, 4), nn.LayerNorm((4,)), nn.Dense(4, 3)])
    opt = nn.thor(net, T, T, 0.0, batch_size=16)
    roles = dict(zip((p.name for p in opt.parameters), opt._roles))
    assert roles["1.gamma"] == "diagonal" and roles["1.beta"] == "diagonal"
    assert roles["0.bias"] is None and roles["0.weight"].name == "0.weight"
    gamma = net.cells()[1].gamma
    before = gamma.asnumpy().copy()
    grads = [numpy.full(p.shape, 0.5, numpy.float32) for p in opt.parameters]
    opt(grads)
    expected = before - 0.1 * 0.5 / (0.25 / 16 + 0.1 ** 0.5)
    numpy.testing.assert_allclose(gamma.asnumpy(), expected, rtol=1e-6)


def test_clip_and_kl_clip_and_nesterov():
    x, y = data()
    net = mlp()
    opt = nn.thor(net, Tensor(numpy.float32(100.0)), T, 0.9, kl_clip=1e-3, enable_clip_grad=True,
                  use_nesterov=True)
    w = net.cells()[0].weight.asnumpy().copy()
    trainer(opt, net)(x, y)
    assert opt.last_report.kl_scale < 1.0
    step = w - net.cells()[0].weight.asnumpy()
    # per-tensor clip at norm 1, Nesterov: w -= lr (g + mu v) with v = g on the first step
    assert numpy.linalg.norm(step) <= 100.0 * 1.9 * (1 + 1e-5)


def test_reduce_factors_is_one_all_reduce_per_split_group(monkeypatch):
    from minigrad import communication
    calls = []

    def fake_all_reduce(array, op):
        calls.append((array.size, op))
        return array
    monkeypatch.setattr(communication, "is_data_parallel", lambda: True)
    monkeypatch.setattr(communication, "all_reduce_", fake_all_reduce)
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(6, 8), nn.Dense(8, 5), nn.Dense(5, 3)])
    monkeypatch.setattr(communication, "synchronize_parameters", lambda params: None)
    monkeypatch.setattr(communication, "check_same_model", lambda *a, **k: None, raising=False)
    opt = nn.thor(net, T, T, 0.9, split_indices=[0, 2])
    trainer(opt, net)(*data())
    # after the gradients' all-reduce: group 0 = layer 0 (A 6x6, G 8x8, 2 traces), group 1 =
    # layers 1 and 2
    assert calls[-2:] == [(36 + 64 + 2, "mean"), (64 + 25 + 2 + 25 + 9 + 2, "mean")]
    assert opt.last_report.refresh


def test_trace_rule_reduces_the_traces_then_the_factors_of_refreshing_layers(monkeypatch):
    """Data-parallel trace rule: one all-reduce of the traces per group (every rank then decides
    alike), then one of the factors of the layers that refresh; a reuse step only the first."""
    from minigrad import communication
    calls = []

    def fake_all_reduce(array, op):
        calls.append(array.size)
        return array
    monkeypatch.setattr(communication, "is_data_parallel", lambda: True)
    monkeypatch.setattr(communication, "all_reduce_", fake_all_reduce)
    monkeypatch.setattr(communication, "synchronize_parameters", lambda params: None)
    monkeypatch.setattr(communication, "check_same_model", lambda *a, **k: None, raising=False)
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(6, 8), nn.Dense(8, 3)])
    opt = nn.thor(net, T, T, 0.9, refresh="trace", omega1=0.5)
    train = trainer(opt, net)
    x, y = data()
    for expected in ([2 + 2, 36 + 64 + 64 + 9], [2 + 2]):
        calls.clear()
        train(x, y)
        assert calls == [6 * 8 + 8 + 8 * 3 + 3] + expected  # the gradients', then THOR's
    assert not opt.last_report.refresh
