"""The Optimizer base: argument checks, parameter groups, learning-rate forms, Torch-style calls
and state_dict round trips (bit-identical continuation, validation before any change)."""
import math

import numpy
import pytest

import minigrad
from helpers.optim import NAMES, NO_BETA_GAMMA, make_params, numpy_path
from minigrad import Parameter, Tensor, nn
from minigrad.optim import (
    SGD,
    Adam,
    AdamWeightDecay,
    CosineDecayLR,
    Momentum,
    Optimizer,
    WarmUpLR,
    piecewise_constant_lr,
)

F32 = numpy.float32
LR_LIST = [0.1, 0.05, 0.02, 0.01]


def params(*shapes, dtype=numpy.float32, names=None):
    names = names or [f"p{i}" for i in range(len(shapes))]
    rng = numpy.random.default_rng(0)
    return [Parameter(rng.standard_normal(s).astype(dtype), name=n) for s, n in zip(shapes, names)]


def ones_like(ps):
    return tuple(numpy.ones(p.shape, p.dtype) for p in ps)


A = "Adam.load_state_dict: "
G = "['params', 'lr', 'weight_decay', 'grad_centralization', 'order_params']"


# ---- bad arguments -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda ps: SGD(ps, learning_rate=-0.1), ValueError, ["learning_rate", "-0.1"]),
        (lambda ps: SGD(ps, learning_rate=[0.1, -0.2]), ValueError, ["learning_rate[1]", "-0.2"]),
        (
            lambda ps: SGD(ps, learning_rate=Tensor(numpy.ones((2, 2), numpy.float32))),
            ValueError,
            ["learning_rate", "(2, 2)"],
        ),
        (lambda ps: SGD(ps, learning_rate="fast"), TypeError, ["learning_rate", "str"]),
        (lambda ps: SGD(ps, learning_rate=[]), ValueError, ["learning_rate", "empty"]),
        (lambda ps: Momentum(ps, 0.1, momentum=-0.9), ValueError, ["momentum", "-0.9"]),
        (lambda ps: Momentum(ps, 0.1, momentum="0.9"), TypeError, ["momentum", "str"]),
        (lambda ps: Momentum(ps, 0.1, 0.9, use_nesterov=1), TypeError, ["use_nesterov"]),
        (lambda ps: SGD(ps, momentum=-1.0), ValueError, ["momentum", "-1.0"]),
        (lambda ps: SGD(ps, dampening=-1.0), ValueError, ["dampening", "-1.0"]),
        (lambda ps: SGD(ps, momentum=0.0, nesterov=True), ValueError, ["nesterov", "momentum=0.0"]),
        (
            lambda ps: SGD(ps, momentum=0.9, dampening=0.1, nesterov=True),
            ValueError,
            ["dampening=0.1"],
        ),
        (lambda ps: SGD(ps, loss_scale=0.0), ValueError, ["loss_scale", "0.0"]),
        (lambda ps: SGD(ps, loss_scale="1"), TypeError, ["loss_scale", "str"]),
        (lambda ps: SGD(ps, weight_decay=-0.01), ValueError, ["weight_decay", "-0.01"]),
        (lambda ps: SGD(ps, weight_decay=None), TypeError, ["weight_decay", "NoneType"]),
        (lambda ps: Adam(ps, beta1=1.0), ValueError, ["beta1", "1.0"]),
        (lambda ps: Adam(ps, beta2=0.0), ValueError, ["beta2", "0.0"]),
        (lambda ps: Adam(ps, eps=0.0), ValueError, ["eps", "0.0"]),
        (lambda ps: Adam(ps, beta1=1), ValueError, ["beta1", "1.0"]),
        (lambda ps: AdamWeightDecay(ps, eps=-1e-6), ValueError, ["eps"]),
        (lambda ps: Adam(ps, use_locking="no"), TypeError, ["use_locking"]),
        (
            lambda ps: SGD(None),
            ValueError,
            ["SGD: parameters must be an iterable of Parameters or group dicts, got None"],
        ),
        (lambda ps: SGD([]), ValueError, ["SGD: parameters must be non-empty, got []"]),
        (
            lambda ps: SGD(ps[0]),
            TypeError,
            ["SGD: parameters must be an iterable of Parameters or group dicts, got Parameter(",
             "(Parameter)"],
        ),
        (
            lambda ps: SGD([ps[0], numpy.zeros(3)]),
            TypeError,
            ["SGD: parameters[1] must be a Parameter or a group dict, got array([0., 0., 0.]) "
             "(ndarray)"],
        ),
        (
            lambda ps: SGD([ps[0], {"params": ps[1:]}]),
            TypeError,
            ["SGD: parameters must be all Parameters or all group dicts, got ['Parameter', "
             "'dict'] (list)"],
        ),
        (
            lambda ps: SGD([ps[0], ps[0]]),
            ValueError,
            ["SGD: parameters[1] must be a Parameter not given before, got 'p0'"],
        ),
        (
            lambda ps: SGD([{"params": ps, "momentum": 0.9}]),
            KeyError,
            [f"SGD: the keys of group 0 must be a subset of {G} (unknown ['momentum']), "
             "got ['params', 'momentum']"],
        ),
        (
            lambda ps: SGD([{"lr": 0.1}]),
            ValueError,
            ["SGD: the keys of group 0 must be a list including 'params', got ['lr']"],
        ),
        (
            lambda ps: SGD([{"params": [ps[0], 3]}]),
            TypeError,
            ["SGD: group 0 'params'[1] must be a Parameter, got 3 (int)"],
        ),
        (lambda ps: SGD([{"params": ps, "lr": -1.0}]), ValueError, ["group 0 'lr'", "-1.0"]),
        (
            lambda ps: SGD([{"params": ps[:1]}, {"params": ps[:1]}]),
            ValueError,
            ["SGD: the groups' parameters[1] must be a Parameter not given before, got 'p0'"],
        ),
        (
            lambda ps: SGD([{"params": ps}, {"order_params": ps[:1]}]),
            ValueError,
            ["SGD: order_params must be the 2 parameters of the groups, each once "
             "(['p0', 'p1']), got ['p0']"],
        ),
        (
            lambda ps: SGD([{"params": ps}, {"order_params": [ps[0], ps[0]]}]),
            ValueError,
            ["SGD: order_params must be the 2 parameters of the groups, each once "
             "(['p0', 'p1']), got ['p0', 'p0']"],
        ),
        (
            lambda ps: SGD([{"params": ps}, {"order_params": [ps[0], 3]}]),
            TypeError,
            ["SGD: order_params[1] must be a Parameter, got 3 (int)"],
        ),
        (
            lambda ps: SGD([{"params": ps}, {"order_params": 5}]),
            TypeError,
            ["SGD: order_params must be an iterable of Parameters, got 5 (int)"],
        ),
        (
            lambda ps: SGD([{"params": ps}, {"order_params": ps, "lr": 0.1}]),
            ValueError,
            ["SGD: the keys of group 1 must be ['order_params'] alone, got ['order_params', "
             "'lr']"],
        ),
        (
            lambda ps: SGD([{"order_params": ps}]),
            ValueError,
            ["SGD: the number of Parameters in the groups must be >= 1, got 0"],
        ),
        (
            lambda ps: SGD([{"params": ps, "grad_centralization": 1}]),
            TypeError,
            ["grad_centralization"],
        ),
        (
            lambda ps: Optimizer(0.1, ps, decay_filter="beta"),
            TypeError,
            ["Optimizer: decay_filter must be callable, got 'beta' (str)"],
        ),
    ],
)
def test_bad_arguments_name_argument_and_value(make, error, words):
    with pytest.raises(error) as info:
        make(params((2, 3), (3,)))
    for word in words:
        assert word in str(info.value)


def test_bad_gradients_name_parameter_and_shapes_and_change_nothing():
    ps = params((2, 3), (3,))
    before = [p.data.copy() for p in ps]
    opt = Momentum(ps, 0.1, 0.9)
    with pytest.raises(
        ValueError, match=r"^Momentum: len\(grads\) must be 2, one per parameter, got 1$"
    ):
        opt((numpy.ones((2, 3), numpy.float32),))
    with pytest.raises(
        ValueError,
        match=r"^Momentum: the shape of grads\[1\] \(of parameter 'p1'\) must be the "
        r"parameter's \(3,\), got \(4,\)$",
    ):
        opt((numpy.ones((2, 3), numpy.float32), numpy.ones(4, numpy.float32)))
    with pytest.raises(
        TypeError,
        match=r"^Momentum: grads\[1\] \(of parameter 'p1'\) must be a float Tensor or array, "
        r"got array\(\[1, 1, 1\]\) \(ndarray\)$",
    ):
        opt((numpy.ones((2, 3), numpy.float32), numpy.ones(3, numpy.int64)))
    with pytest.raises(
        TypeError, match=r"^Momentum: grads\[0\] \(of parameter 'p0'\) must be a float Tensor or "
        r"array, got \[1, 2\] \(list\)$"
    ):
        opt(([1, 2], None))
    with pytest.raises(
        TypeError,
        match=r"^Momentum: grads must be a tuple or list with one gradient per parameter, "
        r"got array\((?s:.*)\(ndarray\)$",
    ):
        opt(numpy.ones((2, 3), numpy.float32))
    for p, b in zip(ps, before):
        numpy.testing.assert_array_equal(p.data, b)
    assert opt.global_step == 0 and opt.state_dict() == {
        "global_step": 0,
        "learning_rate": numpy.float32(0.1),
    }


def test_int_hyperparameters_are_converted():
    opt = Momentum(params((2,)), learning_rate=1, momentum=0, weight_decay=0, loss_scale=2)
    assert opt.get_lr() == 1.0 and opt.momentum == 0.0 and opt.loss_scale == 2.0


# ---- weight decay filter and groups --------------------------------------------------------------
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


# ---- learning-rate forms -------------------------------------------------------------------------
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


# ---- Torch style ---------------------------------------------------------------------------------
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


# ---- state_dict ----------------------------------------------------------------------------------
def run(opt, steps, seed):
    rng = numpy.random.default_rng(seed)
    for _ in range(steps):
        opt(tuple(rng.standard_normal(p.shape).astype(p.dtype) for p in opt.parameters))


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: Adam(ps, learning_rate=[0.01, 0.02, 0.005], weight_decay=0.01, loss_scale=8.0),
        lambda ps: Momentum(ps, 0.1, 0.9, use_nesterov=True),
        lambda ps: SGD(ps, 0.1, momentum=0.5, dampening=0.1),
        lambda ps: AdamWeightDecay(ps, 0.01, weight_decay=0.1),
    ],
    ids=["Adam", "Momentum", "SGD", "AdamWeightDecay"],
)
def test_state_dict_round_trip_continues_bit_identically(make):
    ps = params((3, 2), (2,), names=["fc.weight", "fc.bias"])
    ps.append(Parameter(numpy.linspace(-1, 1, 4).astype(numpy.float16), name="half.weight"))
    opt = make(ps)
    run(opt, 3, seed=1)
    saved_state, saved_params = opt.state_dict(), [p.data.copy() for p in ps]
    assert saved_state["global_step"] == 3 and "master.half.weight" in saved_state
    assert all(isinstance(v, (int, numpy.ndarray)) for v in saved_state.values())
    run(opt, 3, seed=2)

    fresh = [Parameter(d.copy(), name=p.name) for d, p in zip(saved_params, ps)]
    resumed = make(fresh)
    resumed.load_state_dict(saved_state)
    run(resumed, 3, seed=2)
    for p, q in zip(ps, fresh):
        numpy.testing.assert_array_equal(p.data, q.data)
    for key, value in opt.state_dict().items():
        numpy.testing.assert_array_equal(resumed.state_dict()[key], value)


def test_state_dict_is_a_copy():
    ps = params((2,))
    opt = Momentum(ps, 0.1, 0.9)
    run(opt, 1, seed=0)
    saved = opt.state_dict()
    copy = saved["moments.p0"].copy()
    run(opt, 1, seed=1)
    numpy.testing.assert_array_equal(saved["moments.p0"], copy)


def _good_state():
    ps = params((3, 2), (2,), names=["fc.weight", "fc.bias"])
    ps.append(Parameter(numpy.ones(2, numpy.float16), name="h"))
    opt = Adam(ps)
    run(opt, 2, seed=0)
    return ps, opt, opt.state_dict()


@pytest.mark.parametrize(
    "corrupt, error, words",
    [
        (lambda d: d.pop("global_step"), ValueError, ["global_step"]),
        (lambda d: d.update(global_step=1.5), TypeError, ["global_step", "1.5"]),
        (lambda d: d.update(global_step=-1), ValueError, ["global_step", "-1"]),
        (
            lambda d: d.update({"moment1.fc.bias": numpy.zeros(3, numpy.float32)}),
            ValueError,
            [A + "the shape and dtype of state_dict['moment1.fc.bias'] must be ((2,), 'float32') "
             "(for parameter 'fc.bias'), got ((3,), 'float32')"],
        ),
        (
            lambda d: d.update({"moment2.fc.weight": numpy.zeros((3, 2), numpy.float64)}),
            ValueError,
            [A + "the shape and dtype of state_dict['moment2.fc.weight'] must be ((3, 2), "
             "'float32') (for parameter 'fc.weight'), got ((3, 2), 'float64')"],
        ),
        (
            lambda d: d.update({"moments.fc.bias": numpy.zeros(2, numpy.float32)}),
            ValueError,
            ["'moments.fc.bias'"],
        ),
        (
            lambda d: d.update({"moment1.nope": numpy.zeros(2, numpy.float32)}),
            ValueError,
            ["'moment1.nope'"],
        ),
        (
            lambda d: d.pop("moment2.fc.bias"),
            ValueError,
            [A + "the state entries of parameter 'fc.bias' must be none or all of "
             "['moment1.fc.bias', 'moment2.fc.bias'], got ['moment1.fc.bias']"],
        ),
        (
            lambda d: d.update({"master.fc.bias": numpy.zeros(2, numpy.float32)}),
            ValueError,
            [A + "state_dict key must be the master of a float16 parameter ('fc.bias' is "
             "float32), got 'master.fc.bias'"],
        ),
        (
            lambda d: d.update({"master.h": numpy.zeros(2, numpy.float16)}),
            ValueError,
            [A + "the shape and dtype of state_dict['master.h'] must be ((2,), 'float32') (for "
             "parameter 'h'), got ((2,), 'float16')"],
        ),
    ],
)
def test_load_state_dict_validates_everything_before_changing_anything(corrupt, error, words):
    ps, opt, good = _good_state()
    run(opt, 1, seed=5)
    current = opt.state_dict()
    bad = dict(good)
    corrupt(bad)
    with pytest.raises(error) as info:
        opt.load_state_dict(bad)
    for word in words:
        assert word in str(info.value)
    after = opt.state_dict()
    assert after.keys() == current.keys()
    for key in current:
        numpy.testing.assert_array_equal(after[key], current[key])


def test_load_state_dict_rejects_non_dicts_and_resets_absent_state():
    ps, opt, good = _good_state()
    with pytest.raises(TypeError, match=r"Adam.load_state_dict: state_dict must be a dict, got "
                                        r"\[\('global_step', 1\)\] \(list\)"):
        opt.load_state_dict([("global_step", 1)])
    opt.load_state_dict({"global_step": 7})  # the rate, absent, keeps its value
    assert opt.state_dict() == {"global_step": 7, "learning_rate": numpy.float32(opt.get_lr())}


def test_duplicate_names_are_reported_by_state_dict():
    ps = params((2,), (2,), names=["w", "w"])
    with pytest.raises(
        ValueError,
        match=r"^SGD: the name of parameter #1 must be unique \(state_dict keys the state by "
        r"parameter name\), got 'w'$",
    ):
        SGD(ps).state_dict()


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


@pytest.mark.parametrize(
    "make, error, words",
    [
        (
            lambda w: nn.SGD(w, momentum=-0.1),
            ValueError,
            ["momentum must be", "-0.1", "[0.0, inf)"],
        ),
        (lambda w: nn.SGD(w, momentum="0.9"), TypeError, ["momentum must be", "'0.9'", "float"]),
        (
            lambda w: nn.SGD(w, momentum=0.9, dampening=-1.0),
            ValueError,
            ["dampening must be", "-1.0"],
        ),
        (
            lambda w: nn.SGD(w, momentum=0.0, nesterov=True),
            ValueError,
            ["SGD: nesterov must be False unless momentum > 0 and dampening == 0",
             "momentum=0.0", "got True"],
        ),
        (
            lambda w: nn.SGD(w, momentum=0.9, dampening=0.1, nesterov=True),
            ValueError,
            ["dampening=0.1"],
        ),
        (lambda w: nn.Momentum(w, 0.1, -0.5), ValueError, ["momentum must be", "-0.5"]),
        (
            lambda w: nn.Momentum(w, 0.1, 0.9, use_nesterov=1),
            TypeError,
            ["use_nesterov must be", "bool"],
        ),
        (lambda w: nn.Adam(w, beta1=1.0), ValueError, ["beta1 must be", "1.0", "(0.0, 1.0)"]),
        (lambda w: nn.Adam(w, beta2=0.0), ValueError, ["beta2 must be", "0.0", "(0.0, 1.0)"]),
        (lambda w: nn.Adam(w, eps=0.0), ValueError, ["eps must be", "0.0", "(0.0, inf)"]),
        (lambda w: nn.AdamWeightDecay(w, eps=-1e-6), ValueError, ["eps must be", "-1e-06"]),
        (lambda w: nn.AdamWeightDecay(w, beta1=float("nan")), ValueError, ["beta1 must be", "nan"]),
        (lambda w: nn.Adam(w, weight_decay=-1e-4), ValueError, ["weight_decay must be", "-0.0001"]),
        (
            lambda w: nn.Adam(w, loss_scale=0.0),
            ValueError,
            ["loss_scale must be", "0.0", "(0.0, inf)"],
        ),
        (lambda w: nn.Adam(w, learning_rate=-1.0), ValueError, ["learning_rate must be", "-1.0"]),
    ],
)
def test_bad_arguments_name_argument_value_and_expectation(make, error, words):
    with pytest.raises(error) as info:
        make([minigrad.Parameter(numpy.zeros(2, F32), name="w")])
    for word in words:
        assert word in str(info.value)


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


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: nn.Momentum(ps, float("inf"), 0.9),
        lambda ps: nn.Momentum(ps, 0.1, float("inf")),
        lambda ps: nn.SGD(ps, 0.1, loss_scale=float("inf")),
        lambda ps: nn.Adam(ps, 0.1, eps=float("inf")),
        lambda ps: nn.AdamWeightDecay(ps, 0.1, weight_decay=float("inf")),
    ],
)
def test_infinite_hyperparameters_are_refused(make):
    """An inf learning rate, momentum, eps, weight decay or loss scale only yields inf, NaN or
    zero updates (loss_scale=inf would zero every gradient without a word): a ValueError naming
    it."""
    ps = [minigrad.Parameter(numpy.ones(2, numpy.float32), name="w")]
    with pytest.raises(ValueError, match="must be a finite float"):
        make(ps)


def _param():
    return Parameter(Tensor(numpy.ones(3, numpy.float32)), name="w")


@pytest.mark.parametrize(
    "rate",
    [
        numpy.array([numpy.inf, 0.1]),
        numpy.array(numpy.inf),
        Tensor(numpy.array([0.1, numpy.inf], numpy.float32)),
    ],
)
def test_optimizer_rejects_inf_learning_rate_array(rate):
    # optim/optimizer.py Optimizer: learning_rate must be finite (a float or a list with inf is
    # refused); a Tensor/array holding inf too, which would make every step inf/NaN
    with pytest.raises(ValueError, match="learning_rate.*inf"):
        SGD([_param()], learning_rate=rate)


def test_optimizer_rejects_inf_group_learning_rate_array():
    with pytest.raises(ValueError, match="group 0 'lr'.*inf"):
        SGD([{"params": [_param()], "lr": numpy.array([0.1, numpy.inf])}])


def test_a_state_dict_replaces_the_whole_state_matched_by_name():
    """PyTorch's semantics (``load_state_dict`` replaces the state; minigrad matches parameters by
    name, as MindSpore's checkpoints do): Adam's moments load into AdamWeightDecay (a legitimate
    switch), and a parameter absent from the dict starts afresh. Unknown slots are refused."""
    ps = [
        Parameter(numpy.ones(3, numpy.float32), name="a"),
        Parameter(numpy.ones(2, numpy.float32), name="b"),
    ]
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
    with pytest.raises(ValueError, match=r"Momentum.load_state_dict: state_dict key must be "
                                         r"'global_step', .*, got 'moment1.a'"):
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
    ps = [
        Parameter(numpy.ones(2, numpy.float32), name="w"),
        Parameter(numpy.ones(2, numpy.float32), name="b"),
    ]
    groups = [{"params": ps[:1], "lr": 0.5}, {"params": ps[1:]}]
    trained = Momentum(groups, 0.1, 0.9)
    trained.learning_rate[0].set_data(numpy.array(0.25, numpy.float32))
    resumed = Momentum(groups, 0.1, 0.9)
    resumed.load_state_dict(trained.state_dict())
    assert [float(r.data) for r in resumed.get_lr_parameter(ps)] == [
        0.25,
        float(numpy.float32(0.1)),
    ]
    for bad in (
        numpy.array(-1.0, numpy.float32),
        numpy.array([0.1], numpy.float32),
        numpy.array(numpy.nan),
    ):
        state = dict(trained.state_dict(), global_step=9)
        state[next(k for k in state if k.startswith("learning_rate"))] = bad
        with pytest.raises(ValueError, match="must be a finite float >= 0 of shape"):
            resumed.load_state_dict(state)
        assert resumed.global_step == 0 and float(resumed.learning_rate[0].data) == 0.25


@pytest.mark.parametrize(
    "scale", [3, 3.0, numpy.float32(3.0), numpy.float64(3.0), Tensor(numpy.float32(3.0))]
)
def test_every_spelling_of_a_scale_divides_by_the_same_fp32_inverse(scale):
    ps = params((5,))
    expected = ps[0].data - numpy.float32(0.5) * (numpy.float32(6.0) * numpy.float32(1.0 / 3.0))
    SGD(ps, 0.5).apply_gradients([numpy.full(5, 6.0, numpy.float32)], scale=scale)
    numpy.testing.assert_array_equal(ps[0].data, expected)
