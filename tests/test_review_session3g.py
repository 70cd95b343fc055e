"""Review of the optimizers' update rules (session 3g).

Each rule is checked step by step against float64 reference code written from the documented
MindSpore formulas (nn.SGD, ops.ApplyMomentum, ops.Adam, nn.AdamWeightDecay), and the fused native
step against the NumPy path on extreme inputs."""
import math
import warnings

import numpy
import pytest

import minigrad
from minigrad import nn
from minigrad import _native

F16, F32 = numpy.float16, numpy.float32
NAMES = ("fc.weight", "bn.gamma", "bn.beta", "fc.bias")
SHAPES = ((5,), (3,), (3,), (7,))


def _init():
    rng = numpy.random.default_rng(7)
    return [rng.standard_normal(s).astype(F32) for s in SHAPES]


def _grad_steps(steps=5):
    rng = numpy.random.default_rng(8)
    out = [[rng.standard_normal(s).astype(F32) for s in SHAPES] for _ in range(steps)]
    out[1][3] = None  # fc.bias has no gradient on step 1
    out[0][1] = None  # bn.gamma's first gradient comes on step 1 (SGD's accum starts there)
    return out


def _params(dtype=F32):
    return [minigrad.Parameter(a.astype(dtype), name=n) for a, n in zip(_init(), NAMES)]


def _run(optimizer, steps, fused=True):
    if not fused:
        optimizer._fused_rule = lambda: None
    for grads in steps:
        optimizer([None if g is None else minigrad.Tensor(g) for g in grads])
    return [p.data.astype(numpy.float64) for p in optimizer.parameters]


# ---- float64 references of the documented formulas ----------------------------------------------
def _ref(steps, lr, rule, wd=0.0, decay=None, loss_scale=1.0):
    """Run ``rule(i, t, w, g, lr, state)`` -> new w over ``steps``; g already unscaled and (for L2
    rules) decayed: g = g / loss_scale + wd * w on the parameters ``decay`` selects."""
    ws = [a.astype(numpy.float64) for a in _init()]
    states = [dict() for _ in ws]
    for t, grads in enumerate(steps):
        for i, g in enumerate(grads):
            if g is None:
                continue
            g = g.astype(numpy.float64) / loss_scale
            if wd and (decay is None or decay[i]):
                g = g + wd * ws[i]
            ws[i] = rule(i, t, ws[i], g, lr(t, i), states[i])
    return ws


def _sgd(momentum, dampening, nesterov):
    def rule(i, t, w, g, lr, s):  # MindSpore nn.SGD; accum = gradient on the first step
        if momentum > 0:
            s["v"] = g.copy() if "v" not in s else momentum * s["v"] + (1 - dampening) * g
            g = g + momentum * s["v"] if nesterov else s["v"]
        return w - lr * g
    return rule


def _momentum(momentum, nesterov):
    def rule(i, t, w, g, lr, s):  # ApplyMomentum
        s["v"] = momentum * s.get("v", 0.0) + g
        return w - (lr * g + lr * momentum * s["v"] if nesterov else lr * s["v"])
    return rule


def _adam(b1, b2, eps, nesterov):
    def rule(i, t, w, g, lr, s):  # ops.Adam: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), t = optimizer step
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        lr_t = lr * math.sqrt(1 - b2 ** (t + 1)) / (1 - b1 ** (t + 1))
        numerator = b1 * s["m"] + (1 - b1) * g if nesterov else s["m"]
        return w - lr_t * numerator / (numpy.sqrt(s["v"]) + eps)
    return rule


def _adam_weight_decay(b1, b2, eps, wd, decay):
    def rule(i, t, w, g, lr, s):  # nn.AdamWeightDecay: decoupled decay, no bias correction
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        update = s["m"] / (numpy.sqrt(s["v"]) + eps)
        if wd and decay[i]:
            update = update + wd * w
        return w - lr * update
    return rule


NO_BETA_GAMMA = [("beta" not in n and "gamma" not in n) for n in NAMES]
GROUPED = [True, True, False, False]
LR_LIST = [0.1, 0.05, 0.02, 0.01]
SCHEDULE = nn.CosineDecayLR(0.001, 0.1, 4)


def _groups(params):
    return [{"params": params[:2], "lr": 0.2, "weight_decay": 0.1}, {"params": params[2:], "weight_decay": 0.0}]


CASES = {
    "sgd": (lambda ps: nn.SGD(ps, 0.1), lambda: _ref(_grad_steps(), lambda t, i: 0.1, _sgd(0, 0, False))),
    "sgd-momentum-dampening-wd-loss-scale": (
        lambda ps: nn.SGD(ps, 0.1, momentum=0.9, dampening=0.3, weight_decay=0.05, loss_scale=4.0),
        # MindSpore's SGD decays every parameter (no beta/gamma filter)
        lambda: _ref(_grad_steps(), lambda t, i: 0.1, _sgd(0.9, 0.3, False), 0.05, None, 4.0)),
    "sgd-nesterov-list-lr": (
        lambda ps: nn.SGD(ps, LR_LIST, momentum=0.9, nesterov=True, weight_decay=0.01),
        lambda: _ref(_grad_steps(), lambda t, i: LR_LIST[min(t, 3)], _sgd(0.9, 0, True), 0.01)),
    "sgd-groups": (
        lambda ps: nn.SGD(_groups(ps), 0.01, momentum=0.5, weight_decay=0.3),
        lambda: _ref(_grad_steps(), lambda t, i: 0.2 if i < 2 else 0.01, _sgd(0.5, 0, False), 0.1, GROUPED)),
    "momentum-wd-filter": (
        lambda ps: nn.Momentum(ps, 0.1, 0.9, weight_decay=0.05),
        lambda: _ref(_grad_steps(), lambda t, i: 0.1, _momentum(0.9, False), 0.05, NO_BETA_GAMMA)),
    "momentum-nesterov-loss-scale-schedule": (
        lambda ps: nn.Momentum(ps, SCHEDULE, 0.9, weight_decay=0.05, use_nesterov=True, loss_scale=2.0),
        lambda: _ref(_grad_steps(), lambda t, i: SCHEDULE(t), _momentum(0.9, True), 0.05, NO_BETA_GAMMA, 2.0)),
    "momentum-groups": (
        lambda ps: nn.Momentum(_groups(ps), 0.1, 0.9, weight_decay=0.3),
        lambda: _ref(_grad_steps(), lambda t, i: 0.2 if i < 2 else 0.1, _momentum(0.9, False), 0.1, GROUPED)),
    "adam-defaults": (
        lambda ps: nn.Adam(ps, 0.01),
        lambda: _ref(_grad_steps(), lambda t, i: 0.01, _adam(0.9, 0.999, 1e-8, False))),
    "adam-list-lr-wd-loss-scale": (
        lambda ps: nn.Adam(ps, LR_LIST, weight_decay=0.05, loss_scale=8.0),
        lambda: _ref(_grad_steps(), lambda t, i: LR_LIST[min(t, 3)], _adam(0.9, 0.999, 1e-8, False), 0.05,
                     NO_BETA_GAMMA, 8.0)),
    "adam-nesterov-large-eps": (  # a large eps shows where it enters: outside the bias correction
        lambda ps: nn.Adam(ps, 0.01, beta1=0.8, beta2=0.95, eps=1e-1, use_nesterov=True),
        lambda: _ref(_grad_steps(), lambda t, i: 0.01, _adam(0.8, 0.95, 1e-1, True))),
    "adam-groups": (
        lambda ps: nn.Adam(_groups(ps), 0.01, weight_decay=0.3),
        lambda: _ref(_grad_steps(), lambda t, i: 0.2 if i < 2 else 0.01, _adam(0.9, 0.999, 1e-8, False), 0.1,
                     GROUPED)),
    "adamw-schedule": (
        lambda ps: nn.AdamWeightDecay(ps, SCHEDULE, weight_decay=0.1, eps=1e-1),
        lambda: _ref(_grad_steps(), lambda t, i: SCHEDULE(t), _adam_weight_decay(0.9, 0.999, 1e-1, 0.1, NO_BETA_GAMMA))),
    "adamw-groups": (
        lambda ps: nn.AdamWeightDecay(_groups(ps), 0.01, weight_decay=0.3),
        lambda: _ref(_grad_steps(), lambda t, i: 0.2 if i < 2 else 0.01,
                     _adam_weight_decay(0.9, 0.999, 1e-6, 0.1, GROUPED))),
}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "numpy"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_matches_float64_reference_of_documented_formula(case, fused):
    make, reference = CASES[case]
    got = _run(make(_params()), _grad_steps(), fused)
    for g, w, name in zip(got, reference(), NAMES):
        numpy.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6, err_msg=f"{case}: {name}")


def test_fp16_parameters_follow_the_fp32_master_rule():
    """fp16 parameters: the rule runs on an fp32 master; the parameter is the master rounded."""
    steps = _grad_steps()
    master = _run(nn.Adam(_params(F32), 0.01, weight_decay=0.05), steps)
    half = nn.Adam(_params(F16), 0.01, weight_decay=0.05)
    # the fp16 start rounds the weights: compare with a run from the rounded fp32 values
    rounded = [minigrad.Parameter(a.astype(F16).astype(F32), name=n) for a, n in zip(_init(), NAMES)]
    reference = _run(nn.Adam(rounded, 0.01, weight_decay=0.05), steps)
    got = _run(half, steps)
    for g, r in zip(got, reference):
        numpy.testing.assert_array_equal(g, r.astype(F16).astype(numpy.float64))
    assert any(not numpy.array_equal(g, m) for g, m in zip(got, master))  # the test can tell them apart


def test_global_step_counts_every_call_and_drives_list_lr_and_bias_correction():
    opt = nn.Adam(_params(), LR_LIST)
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
    lr_t = 0.1 * math.sqrt(1 - 0.999 ** 2) / (1 - 0.9 ** 2)
    expected = 1 - lr_t * 0.1 / (math.sqrt(0.001) + 1e-8)
    numpy.testing.assert_allclose(p.data, expected, rtol=1e-6)


# ---- learning_rate: MindSpore takes any Iterable as a per-step list ------------------------------
@pytest.mark.parametrize("rates", [numpy.array([0.3, 0.2, 0.1]), numpy.array([0.3, 0.2, 0.1], F32),
                                   range(3, 0, -1), (x for x in (0.3, 0.2, 0.1))],
                         ids=["ndarray", "ndarray-f32", "range", "generator"])
def test_learning_rate_any_iterable_is_a_per_step_list(rates):
    """MindSpore documents learning_rate as Union[float, int, Tensor, Iterable, LearningRateSchedule]:
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
    with pytest.raises(ValueError, match="learning_rate.*0-d or 1-D.*\\(2, 2\\)"):
        nn.SGD([w], numpy.ones((2, 2)))
    with pytest.raises(ValueError, match="learning_rate.*>= 0.*-0.5"):
        nn.SGD([w], numpy.array([0.1, -0.5]))
    with pytest.raises(TypeError, match="learning_rate"):
        nn.SGD([w], "0.1")
    with pytest.raises(TypeError, match="learning_rate"):
        nn.SGD([w], {"lr": 0.1})
    fixed = nn.SGD([w], numpy.array(0.25))  # 0-d: a fixed rate, as a 0-d Tensor
    assert fixed.get_lr() == 0.25 and not fixed.dynamic_lr


# ---- argument validation: argument, value and what was expected -----------------------------------
@pytest.mark.parametrize("make, error, words", [
    (lambda w: nn.SGD(w, momentum=-0.1), ValueError, ["'momentum'", "-0.1", "[0.0, inf]"]),
    (lambda w: nn.SGD(w, momentum="0.9"), TypeError, ["'momentum'", "'0.9'", "float"]),
    (lambda w: nn.SGD(w, momentum=0.9, dampening=-1.0), ValueError, ["'dampening'", "-1.0"]),
    (lambda w: nn.SGD(w, momentum=0.0, nesterov=True), ValueError, ["'nesterov'", "momentum=0.0"]),
    (lambda w: nn.SGD(w, momentum=0.9, dampening=0.1, nesterov=True), ValueError, ["dampening=0.1"]),
    (lambda w: nn.Momentum(w, 0.1, -0.5), ValueError, ["'momentum'", "-0.5"]),
    (lambda w: nn.Momentum(w, 0.1, 0.9, use_nesterov=1), TypeError, ["'use_nesterov'", "bool"]),
    (lambda w: nn.Adam(w, beta1=1.0), ValueError, ["'beta1'", "1.0", "(0.0, 1.0)"]),
    (lambda w: nn.Adam(w, beta2=0.0), ValueError, ["'beta2'", "0.0", "(0.0, 1.0)"]),
    (lambda w: nn.Adam(w, eps=0.0), ValueError, ["'eps'", "0.0", "(0.0, inf]"]),
    (lambda w: nn.AdamWeightDecay(w, eps=-1e-6), ValueError, ["'eps'", "-1e-06"]),
    (lambda w: nn.AdamWeightDecay(w, beta1=float("nan")), ValueError, ["'beta1'", "nan"]),
    (lambda w: nn.Adam(w, weight_decay=-1e-4), ValueError, ["'weight_decay'", "-0.0001"]),
    (lambda w: nn.Adam(w, loss_scale=0.0), ValueError, ["'loss_scale'", "0.0", "(0.0, inf]"]),
    (lambda w: nn.Adam(w, learning_rate=-1.0), ValueError, ["'learning_rate'", "-1.0"]),
])
def test_bad_arguments_name_argument_value_and_expectation(make, error, words):
    with pytest.raises(error) as info:
        make([minigrad.Parameter(numpy.zeros(2, F32), name="w")])
    for word in words:
        assert word in str(info.value)


def test_default_decay_filter_and_defaults():
    """MindSpore: ungrouped weight_decay skips names containing 'beta' or 'gamma' (Momentum, Adam,
    AdamWeightDecay); nn.SGD decays everything; AdamWeightDecay's eps defaults to 1e-6, Adam's to 1e-8."""
    params = _params()
    assert nn.Momentum(params, 0.1, 0.9, weight_decay=0.1).decay_flags == tuple(NO_BETA_GAMMA)
    assert nn.Adam(params, weight_decay=0.1).decay_flags == tuple(NO_BETA_GAMMA)
    assert nn.AdamWeightDecay(params, weight_decay=0.1).decay_flags == tuple(NO_BETA_GAMMA)
    assert nn.SGD(params, weight_decay=0.1).decay_flags == (True,) * 4
    adam, adamw = nn.Adam(params), nn.AdamWeightDecay(params)
    assert (adam.beta1, adam.beta2, adam.eps) == (0.9, 0.999, 1e-8)
    assert (adamw.beta1, adamw.beta2, adamw.eps) == (0.9, 0.999, 1e-6)
    assert adam.get_lr() == float(F32(1e-3)) == adamw.get_lr()


# ---- the fused native step against the NumPy path --------------------------------------------------
def _special(rng, n, dtype):
    """Values that stress the rules: huge, tiny, subnormal, inf, NaN with payloads, fp16 ties."""
    values = numpy.array([numpy.inf, -numpy.inf, numpy.nan, 0.0, -0.0, 1e-40, -1e-44, 3e38, 65504.0,
                          65520.0, 6e-8, 2.98e-8, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11])
    with numpy.errstate(over="ignore"):
        a = numpy.where(rng.random(n) < 0.5, rng.choice(values, n),
                        rng.standard_normal(n) * 10.0 ** rng.integers(-45, 39, n)).astype(dtype)
    bits = a.view(numpy.uint16 if dtype == F16 else numpy.uint32)
    nan = rng.random(n) < 0.1
    if dtype == F16:
        bits[nan] = 0x7C01 + rng.integers(0, 0x3FE, nan.sum())
    else:
        bits[nan] = 0x7F800001 + rng.integers(0, 0x7FFFFE, nan.sum())
    return a


def _bits_nan_canonical(a):
    """Bits, with every NaN as the default NaN: when two NaNs meet in one operation, which one the
    result carries is not defined (NumPy's own loops pick by array length and position)."""
    a = numpy.ascontiguousarray(a)
    if a.dtype.kind != "f":
        return a
    a = numpy.where(numpy.isnan(a), numpy.array(numpy.nan, a.dtype), a)
    return a.view({2: numpy.uint16, 4: numpy.uint32, 8: numpy.uint64}[a.dtype.itemsize])


FUSED_MAKERS = [
    lambda ps: nn.SGD(ps, 0.1, momentum=0.9, weight_decay=0.01, loss_scale=3.0),
    lambda ps: nn.SGD([{"params": ps[:2], "lr": 0.0, "weight_decay": 0.1}, {"params": ps[2:]}], 0.5,
                      momentum=0.8, dampening=0.25),
    lambda ps: nn.SGD(ps, [0.1, 0.0, 3.0], momentum=0.9, nesterov=True),
    lambda ps: nn.Momentum(ps, 0.1, 0.0, weight_decay=1e-20),
    lambda ps: nn.Momentum(ps, 1e-30, 0.9, use_nesterov=True, weight_decay=0.01, loss_scale=7.0),
    lambda ps: nn.Adam(ps, 0.1, eps=1e-45, weight_decay=0.01, use_nesterov=True),
    lambda ps: nn.Adam(ps, [0.0, 0.1], beta2=0.9999999, loss_scale=5.0),
    lambda ps: nn.AdamWeightDecay(ps, 3.0, beta2=0.5, eps=1e-45, weight_decay=0.01),
    lambda ps: nn.AdamWeightDecay([{"params": ps[1:], "weight_decay": 0.2}, {"params": ps[:1], "lr": 0.0},
                                      {"order_params": ps}], 0.1),
]


@pytest.mark.skipif(_native.host_library() is None, reason="no host library")
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", range(len(FUSED_MAKERS)))
def test_fused_step_matches_numpy_path_on_extreme_values(k, seed):
    """Odd sizes across the 1024-element blocks, fp16/fp32 parameters and gradients, inf/NaN
    payloads/subnormals in gradients (and so in the state), lr 0, momentum 0, weight decay with the
    filter, None gradients and a parameter that gets gradients on only some steps, a loss scale
    still in the gradients: the same bits as the NumPy path (NaNs compared as NaNs)."""
    rng = numpy.random.default_rng(1000 * k + seed)
    sizes, dtypes = (1, 1023, 1025, 2049), (F16, F32, F16, F32)
    if seed % 2:
        dtypes = dtypes[::-1]
    init = [_special(rng, n, d) for n, d in zip(sizes, dtypes)]
    grads = [[None if (i == 3 and step != 1) or rng.random() < 0.15
              else _special(rng, n, rng.choice([F16, F32]) if d == F16 else F32)
              for i, (n, d) in enumerate(zip(sizes, dtypes))] for step in range(3)]
    scales = [None, 1024.0, 3.0]
    results = []
    for fused in (True, False):
        params = [minigrad.Parameter(a.copy(), name=n) for a, n in zip(init, NAMES)]
        opt = FUSED_MAKERS[k](params)
        if not fused:
            opt._fused_rule = lambda: None
        with numpy.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for step, scale in zip(grads, scales):
                opt.apply_gradients([None if g is None else g.copy() for g in step], scale=scale)
        results.append(([p.data for p in params], opt.state_dict()))
    (params_f, state_f), (params_n, state_n) = results
    for p, q, name in zip(params_f, params_n, NAMES):
        numpy.testing.assert_array_equal(_bits_nan_canonical(p), _bits_nan_canonical(q), err_msg=name)
    assert state_f.keys() == state_n.keys()
    for key in state_f:
        numpy.testing.assert_array_equal(_bits_nan_canonical(numpy.asarray(state_f[key])),
                                         _bits_nan_canonical(numpy.asarray(state_n[key])),
                                         err_msg=key)


@pytest.mark.parametrize("make", [
    lambda ps: nn.Momentum(ps, float("inf"), 0.9),
    lambda ps: nn.Momentum(ps, 0.1, float("inf")),
    lambda ps: nn.SGD(ps, 0.1, loss_scale=float("inf")),
    lambda ps: nn.Adam(ps, 0.1, eps=float("inf")),
    lambda ps: nn.AdamWeightDecay(ps, 0.1, weight_decay=float("inf")),
])
def test_infinite_hyperparameters_are_refused(make):
    """An inf learning rate, momentum, eps, weight decay or loss scale only yields inf, NaN or
    zero updates (loss_scale=inf zeroed every gradient silently): a ValueError naming it."""
    ps = [minigrad.Parameter(numpy.ones(2, numpy.float32), name="w")]
    with pytest.raises(ValueError, match="must be finite"):
        make(ps)
