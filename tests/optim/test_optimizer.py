"""The Optimizer base: parameter groups, learning-rate forms, Torch-style calls and the
floating-point error state of a step."""
import math

import numpy
import pytest

import minigrad
from helpers.optim import NAMES, NO_BETA_GAMMA, make_params, numpy_path, ones_like, params
from minigrad import Parameter, Tensor, nn
from minigrad.optim import (
    SGD,
    CosineDecayLR,
    Momentum,
    Optimizer,
    WarmUpLR,
    piecewise_constant_lr,
)

F32 = numpy.float32
LR_LIST = [0.1, 0.05, 0.02, 0.01]


def test_default_decay_filter_skips_beta_and_gamma_and_can_be_replaced():
    ps = params((2,), (2,), (2,), names=["fc.weight", "bn.gamma", "bn.beta"])
    assert Momentum(ps, 0.1, 0.9, weight_decay=0.1).decay_flags == (True, False, False)
    assert SGD(ps, weight_decay=0.1).decay_flags == (True, True, True)  # MindSpore SGD decays all
    assert Optimizer(
        0.1, ps, weight_decay=0.1, decay_filter=lambda p: "bn" in p.name
    ).decay_flags == (False, True, True)
    assert Momentum(ps, 0.1, 0.9).decay_flags == (False, False, False)  # weight_decay 0


def test_groups_have_their_own_lr_and_weight_decay_and_order():
    a, b, c = params((2,), (2,), (2,), names=["conv.weight", "bn.gamma", "fc.weight"])
    groups = [
        {"params": [a, b], "lr": 0.5, "weight_decay": 0.1},
        {"params": [c]},
        {"order_params": [c, a, b]},
    ]
    opt = SGD(groups, learning_rate=0.1, weight_decay=0.0)
    assert opt.parameters == (c, a, b)
    assert opt.get_lr() == (pytest.approx(0.1), 0.5, 0.5)
    assert opt.decay_flags == (False, True, True)  # grouped: every parameter of a decaying group
    before = [p.data.astype(numpy.float64) for p in opt.parameters]
    opt(ones_like(opt.parameters))
    for p, w, lr, wd in zip(opt.parameters, before, (0.1, 0.5, 0.5), (0.0, 0.1, 0.1)):
        numpy.testing.assert_allclose(p.data, w - lr * (1 + wd * w), rtol=1e-6)
    assert float(opt.get_lr_parameter(a).data) == 0.5
    assert [float(x.data) for x in opt.get_lr_parameter([c, b])] == pytest.approx([0.1, 0.5])
    with pytest.raises(
        ValueError,
        match=r"^SGD.get_lr_parameter: param must be a parameter this optimizer updates, got "
        r"Parameter\(name='other'",
    ):
        opt.get_lr_parameter(Parameter(numpy.zeros(2), name="other"))


def test_fixed_learning_rate_is_a_parameter_that_can_be_changed_in_place():
    ps = params((3,))
    opt = SGD(ps, learning_rate=0.1)
    assert isinstance(opt.learning_rate, Parameter) and not opt.dynamic_lr
    opt.learning_rate.set_data(numpy.array(0.5, numpy.float32))
    before = ps[0].data.copy()
    opt(ones_like(ps))
    numpy.testing.assert_allclose(ps[0].data, before - 0.5)


@pytest.mark.parametrize("native", [pytest.param(True, marks=pytest.mark.requires_native), False])
def test_fixed_group_rates_changed_in_place_apply_at_the_next_step(native):
    """Every rate fixed: each step reads the rates' Parameters, on both paths."""
    a, b = params((3,), (2,), dtype=numpy.float16)
    opt = nn.Momentum([{"params": [a], "lr": 0.25}, {"params": [b]}], 0.5, 0.0)
    assert not opt.dynamic_lr and opt.get_lr() == (0.25, 0.5)
    opt.get_lr_parameter(a).set_data(numpy.array(0.125, numpy.float32))
    opt.learning_rate[1].set_data(numpy.array(1.0, numpy.float32))
    assert opt.get_lr() == (0.125, 1.0)
    before = [p.data.astype(numpy.float32) for p in (a, b)]
    with numpy_path(not native):
        opt(ones_like([a, b]))
    assert opt.last_step_fused == native
    for p, w, lr in zip((a, b), before, (0.125, 1.0)):
        numpy.testing.assert_array_equal(p.data, (w - numpy.float32(lr)).astype(numpy.float16))


def lrs_used(learning_rate, steps):
    """The learning rate of each of ``steps`` SGD steps (gradient 1 moves w by exactly -lr)."""
    w = Parameter(numpy.zeros(1, numpy.float64), name="w")
    opt = SGD([w], learning_rate=learning_rate)
    used = []
    for _ in range(steps):
        before = float(w.data[0])
        opt((numpy.ones(1),))
        used.append(before - float(w.data[0]))
    return used


def test_learning_rate_forms():
    assert lrs_used(0.25, 3) == pytest.approx([0.25] * 3)
    assert lrs_used(Tensor(numpy.float32(0.25)), 2) == pytest.approx([0.25] * 2)
    assert lrs_used([0.3, 0.2, 0.1], 5) == pytest.approx([0.3, 0.2, 0.1, 0.1, 0.1])  # last repeats
    assert lrs_used(Tensor(numpy.array([0.5, 0.25], numpy.float32)), 3) == pytest.approx(
        [0.5, 0.25, 0.25]
    )
    assert lrs_used(piecewise_constant_lr([1, 3], [0.5, 0.25]), 4) == pytest.approx(
        [0.5, 0.25, 0.25, 0.25]
    )
    assert lrs_used(WarmUpLR(0.4, 4), 6) == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.4])
    schedule = CosineDecayLR(0.0, 1.0, 2)
    assert lrs_used(schedule, 3) == pytest.approx([1.0, 0.5, 0.0])


def test_get_lr_follows_global_step_without_changing_it():
    opt = SGD(params((1,)), learning_rate=[0.3, 0.2])
    assert (
        opt.dynamic_lr and opt.get_lr() == pytest.approx(0.3) and opt.get_lr() == pytest.approx(0.3)
    )
    with pytest.warns(UserWarning, match="no parameter was updated"):
        opt.step()  # no .grad anywhere: nothing moves, the step still counts
    assert opt.global_step == 1 and opt.get_lr() == pytest.approx(0.2)


def test_step_and_zero_grad_use_grad_from_backward():
    w = Parameter(numpy.array([1.0, 2.0], numpy.float32), name="w")
    unused = Parameter(numpy.array([5.0], numpy.float32), name="unused")
    opt = SGD([w, unused], learning_rate=0.1)
    x = Tensor(numpy.array([3.0, 4.0], numpy.float32))
    loss = (w * x).sum()
    loss.backward()
    assert unused.grad is None
    opt.step()
    numpy.testing.assert_allclose(w.data, [0.7, 1.6], rtol=1e-6)
    numpy.testing.assert_array_equal(unused.data, [5.0])
    opt.zero_grad()
    assert w.grad is None and unused.grad is None


def test_step_closure_returns_the_loss():
    w = Parameter(numpy.array([2.0], numpy.float32), name="w")
    opt = SGD([w], learning_rate=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with minigrad.no_grad():
        loss = opt.step(closure)
    assert float(loss) == 4.0
    numpy.testing.assert_allclose(w.data, [1.0])


def test_train_one_step_cell_with_momentum_reduces_the_loss():
    nn = pytest.importorskip("minigrad.nn")
    minigrad.set_seed(0)
    net = nn.Dense(4, 2)
    train = nn.TrainOneStepCell(
        nn.WithLossCell(net, nn.MSELoss()), Momentum(net.trainable_params(), 0.05, 0.9)
    )
    rng = numpy.random.default_rng(0)
    x = Tensor(rng.standard_normal((16, 4)).astype(numpy.float32))
    y = Tensor(x.asnumpy() @ rng.standard_normal((4, 2)).astype(numpy.float32))  # reachable target
    losses = [float(train(x, y)) for _ in range(30)]
    assert losses[-1] < 0.1 * losses[0]


@pytest.mark.parametrize("fused", [True, False])
def test_errstate_under_raise_stops_the_step_as_numpy_does(fused):
    """g * g underflows in Adam's second moment: NumPy raises under errstate(under='raise');
    the fused kernel does not report underflow, so the step must not run there."""
    param = minigrad.Parameter(numpy.ones(64, F32), name="w")
    opt = nn.Adam([param], 0.1)
    with numpy_path(not fused), numpy.errstate(under="raise"), pytest.raises(
            FloatingPointError, match="underflow"):
        opt.apply_gradients([numpy.full(64, 1e-30, F32)])


def test_errstate_under_warn_warns_as_numpy_does():
    param = minigrad.Parameter(numpy.ones(64, F32), name="w")
    opt = nn.Adam([param], 0.1)
    with numpy.errstate(under="warn"), pytest.warns(RuntimeWarning, match="underflow"):
        opt.apply_gradients([numpy.full(64, 1e-30, F32)])


def test_global_step_counts_every_call_and_drives_list_lr_and_bias_correction():
    opt = nn.Adam(make_params(), LR_LIST)
    seen = []
    for _ in range(6):
        seen.append(opt.get_lr())
        opt([None] * len(NAMES))
    assert seen == LR_LIST + [LR_LIST[-1]] * 2
    assert opt.global_step == 6
    # a parameter whose first gradient arrives at step 6 gets the step-7 bias correction
    p = minigrad.Parameter(numpy.ones(3, F32), name="late")
    late = nn.Adam([p, minigrad.Parameter(numpy.ones(3, F32), name="other")], 0.1)
    late([None, numpy.ones(3, F32)])
    late([numpy.ones(3, F32), numpy.ones(3, F32)])
    lr_t = 0.1 * math.sqrt(1 - 0.999**2) / (1 - 0.9**2)
    expected = 1 - lr_t * 0.1 / (math.sqrt(0.001) + 1e-8)
    numpy.testing.assert_allclose(p.data, expected, rtol=1e-6)


@pytest.mark.parametrize(
    "rates",
    [
        numpy.array([0.3, 0.2, 0.1]),
        numpy.array([0.3, 0.2, 0.1], F32),
        range(3, 0, -1),
        (x for x in (0.3, 0.2, 0.1)),
    ],
    ids=["ndarray", "ndarray-f32", "range", "generator"],
)
def test_learning_rate_any_iterable_is_a_per_step_list(rates):
    """MindSpore documents learning_rate as
    Union[float, int, Tensor, Iterable, LearningRateSchedule]:
    an Iterable (a NumPy array, a range, a generator) gives one rate per step."""
    expected = [float(x) for x in ([3, 2, 1] if isinstance(rates, range) else [0.3, 0.2, 0.1])]
    if isinstance(rates, numpy.ndarray) and rates.dtype == F32:
        expected = [float(F32(x)) for x in expected]
    opt = nn.Momentum([minigrad.Parameter(numpy.zeros(2, F32), name="w")], rates, 0.9)
    seen = []
    for _ in range(4):
        seen.append(opt.get_lr())
        opt([numpy.zeros(2, F32)])
    assert seen == expected + expected[-1:]
    assert opt.dynamic_lr


def test_learning_rate_ndarray_checked_like_a_tensor():
    w = minigrad.Parameter(numpy.zeros(2, F32), name="w")
    with pytest.raises(
        ValueError,
        match=r"^SGD: the shape of learning_rate must be \(\) or \(n,\): a 0-d or 1-D Tensor "
        r"or array, got \(2, 2\)$",
    ):
        nn.SGD([w], numpy.ones((2, 2)))
    with pytest.raises(
        ValueError, match=r"^SGD: learning_rate\[1\] must be a finite float in \[0\.0, inf\), "
        r"got -0\.5$"
    ):
        nn.SGD([w], numpy.array([0.1, -0.5]))
    with pytest.raises(
        ValueError, match=r"^SGD: learning_rate must be a finite float in \[0\.0, inf\), got nan$"
    ):
        nn.SGD([w], numpy.array(numpy.nan))
    kinds = "a float, Tensor, Iterable or LearningRateSchedule"
    with pytest.raises(TypeError, match=rf"^SGD: learning_rate must be {kinds}, got '0.1' \(str"):
        nn.SGD([w], "0.1")
    with pytest.raises(
        TypeError, match=rf"^SGD: learning_rate must be {kinds}, got {{'lr': 0.1}} \(dict\)$"
    ):
        nn.SGD([w], {"lr": 0.1})
    with pytest.raises(TypeError, match=rf"^SGD: learning_rate must be {kinds}, got True \(bool"):
        nn.SGD([w], True)
    with pytest.raises(
        TypeError,
        match=r"^SGD: learning_rate must be a Tensor or array of ints or floats, got "
        r"array\(\[0\.\+1\.j\]\) \(ndarray\)$",
    ):
        nn.SGD([w], numpy.array([1j]))
    with pytest.raises(ValueError, match=r"^SGD: learning_rate must be non-empty, got \[\]$"):
        nn.SGD([w], numpy.array([]))
    fixed = nn.SGD([w], numpy.array(0.25))  # 0-d: a fixed rate, as a 0-d Tensor
    assert fixed.get_lr() == 0.25 and not fixed.dynamic_lr


def test_default_decay_filter_and_defaults():
    """MindSpore: ungrouped weight_decay skips names containing 'beta' or 'gamma' (Momentum, Adam,
    AdamWeightDecay); nn.SGD decays everything; AdamWeightDecay's eps defaults to 1e-6, Adam's
    to 1e-8."""
    params = make_params()
    assert nn.Momentum(params, 0.1, 0.9, weight_decay=0.1).decay_flags == tuple(NO_BETA_GAMMA)
    assert nn.Adam(params, weight_decay=0.1).decay_flags == tuple(NO_BETA_GAMMA)
    assert nn.AdamWeightDecay(params, weight_decay=0.1).decay_flags == tuple(NO_BETA_GAMMA)
    assert nn.SGD(params, weight_decay=0.1).decay_flags == (True,) * 4
    adam, adamw = nn.Adam(params), nn.AdamWeightDecay(params)
    assert (adam.beta1, adam.beta2, adam.eps) == (0.9, 0.999, 1e-8)
    assert (adamw.beta1, adamw.beta2, adamw.eps) == (0.9, 0.999, 1e-6)
    assert adam.get_lr() == float(F32(1e-3)) == adamw.get_lr()
