"""The fused native optimizer step (minigrad.optim.slots.fused_step, kernels/optim_host.cpp)
against the NumPy path it replaces: bit for bit, for every variant it covers, and falling back
cleanly."""
import inspect
import re
import warnings

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad
from helpers.optim import NAMES, numpy_path
from minigrad import nn

pytestmark = pytest.mark.requires_native

F16, F32 = numpy.float16, numpy.float32
SHAPES = [(3,), (37, 5), (1025,), (2, 1030)]  # tails, and more than one 1024-element block


def _params(dtype, seed):
    rng = numpy.random.default_rng(seed)
    return [
        minigrad.Parameter(rng.standard_normal(s).astype(dtype), name=f"p{k}")
        for k, s in enumerate(SHAPES)
    ]


def _grads(dtype, seed, scale=1.0):
    rng = numpy.random.default_rng(seed + 1000)
    return [(rng.standard_normal(s) * scale).astype(dtype) for s in SHAPES]


def _bits(a):
    a = numpy.ascontiguousarray(a)
    return a.view(numpy.uint16 if a.dtype == F16 else numpy.uint32)


def _assert_same(fused, reference):
    for p, q in zip(fused.parameters, reference.parameters):
        numpy.testing.assert_array_equal(_bits(p.data), _bits(q.data), err_msg=p.name)
    assert fused.state_dict().keys() == reference.state_dict().keys()
    for key, value in fused.state_dict().items():
        numpy.testing.assert_array_equal(
            numpy.asarray(value), numpy.asarray(reference.state_dict()[key]), err_msg=key
        )


def _run(make, param_dtype, grad_dtype, scale, seed, steps=3):
    fused, reference = make(_params(param_dtype, seed)), make(_params(param_dtype, seed))
    for step in range(steps):
        with numpy.errstate(all="ignore"):  # large scales overflow some fp16 gradients: same bits
            grads = _grads(grad_dtype, seed + step, scale or 1.0)
            fused.apply_gradients(grads, scale=scale)
            with numpy_path():
                reference.apply_gradients([g.copy() for g in grads], scale=scale)
            assert fused.last_step_fused, f"step {step}: the fused path was not taken"
            assert not reference.last_step_fused
    _assert_same(fused, reference)


OPTIMIZERS = {
    "sgd": lambda ps: nn.SGD(ps, 0.05),
    "sgd-wd-loss-scale": lambda ps: nn.SGD(ps, 0.05, weight_decay=0.01, loss_scale=8.0),
    "sgd-momentum": lambda ps: nn.SGD(ps, 0.05, momentum=0.9),
    "sgd-dampening": lambda ps: nn.SGD(ps, 0.05, momentum=0.8, dampening=0.1, weight_decay=0.003),
    "sgd-nesterov": lambda ps: nn.SGD(ps, [0.05, 0.02, 0.01], momentum=0.9, nesterov=True),
    "momentum": lambda ps: nn.Momentum(ps, 0.05, 0.9),
    "momentum-nesterov-wd": lambda ps: nn.Momentum(
        ps, 0.03, 0.9, weight_decay=0.01, use_nesterov=True
    ),
    "momentum-groups": lambda ps: nn.Momentum(
        [{"params": ps[:2], "lr": 0.1, "weight_decay": 0.02}, {"params": ps[2:]}], 0.01, 0.5
    ),
    "adam": lambda ps: nn.Adam(ps, 1e-2),
    "adam-nesterov-wd-loss-scale": lambda ps: nn.Adam(
        ps,
        3e-3,
        beta1=0.8,
        beta2=0.99,
        eps=1e-6,
        use_nesterov=True,
        weight_decay=0.01,
        loss_scale=4.0,
    ),
    "adam-groups": lambda ps: nn.Adam(
        [{"params": ps[:1], "lr": 0.05, "weight_decay": 0.1}, {"params": ps[1:]}],
        [1e-2, 5e-3, 1e-3],
    ),
    "adamw": lambda ps: nn.AdamWeightDecay(ps, 1e-2, weight_decay=0.05),
    "adamw-groups": lambda ps: nn.AdamWeightDecay(
        [{"params": ps[:3], "weight_decay": 0.2}, {"params": ps[3:]}], 2e-2, beta1=0.5, eps=1e-3
    ),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("param_dtype,grad_dtype", [(F16, F16), (F16, F32), (F32, F32), (F32, F16)])
@pytest.mark.parametrize("scale", [None, 1024.0])
def test_fused_step_is_bit_identical_to_numpy(name, param_dtype, grad_dtype, scale):
    _run(OPTIMIZERS[name], param_dtype, grad_dtype, scale, seed=len(name))


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(sorted(OPTIMIZERS)),
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([None, 1.0, 3.0, 2.0**15, 1e-3]),
    half=st.booleans(),
)
def test_fused_step_property(name, seed, scale, half):
    _run(OPTIMIZERS[name], F16 if half else F32, F16 if half else F32, scale, seed, steps=2)


def test_non_finite_gradients_give_the_same_bits():
    """Applied without a scaler, inf and NaN (NaN payloads included) reach the weights as in
    NumPy."""
    for dtype in (F16, F32):
        grads = _grads(dtype, 7)
        grads[1][0, 0], grads[1][1, 1], grads[2][5] = numpy.inf, -numpy.inf, numpy.nan
        grads[3].reshape(-1)[7:9] = (
            numpy.array([0x7C01, 0xFE00], numpy.uint16).view(F16)
            if dtype == F16
            else numpy.array([0x7F800001, 0xFFC00000], numpy.uint32).view(F32)
        )
        fused = nn.SGD(_params(F16, 3), 0.1, momentum=0.9)
        reference = nn.SGD(_params(F16, 3), 0.1, momentum=0.9)
        with numpy.errstate(invalid="ignore", over="ignore"):
            fused.apply_gradients(grads)
            with numpy_path():
                reference.apply_gradients([g.copy() for g in grads])
        assert fused.last_step_fused and not reference.last_step_fused
        _assert_same(fused, reference)


def test_fp16_overflow_in_the_write_back_warns_like_numpy():
    p = minigrad.Parameter(numpy.full(5000, 60000, F16), name="w")
    opt = nn.SGD([p], 1.0)
    with pytest.warns(RuntimeWarning, match="overflow"):
        opt.apply_gradients([numpy.full(5000, -10000, F16)])
    assert numpy.isinf(p.data).all()
    assert opt.slots.masters[0][0] == 70000  # the fp32 master keeps the value fp16 cannot hold


def test_gradients_are_not_written():
    grads = _grads(F32, 1)
    kept = [g.copy() for g in grads]
    nn.SGD(_params(F16, 1), 0.1, momentum=0.9, weight_decay=0.1, loss_scale=4.0).apply_gradients(
        grads, scale=8.0
    )
    for g, k in zip(grads, kept):
        numpy.testing.assert_array_equal(g, k)


def test_uncovered_steps_fall_back_unchanged():
    """A strided gradient, a float64 parameter or no host library: the NumPy path, same results."""
    strided = [numpy.asfortranarray(g) if g.ndim == 2 else g for g in _grads(F32, 2)]
    fused, reference = nn.SGD(_params(F32, 2), 0.1), nn.SGD(_params(F32, 2), 0.1)
    assert fused.fused_rule is not None and not fused.takes_scaled_gradients(strided)
    fused.apply_gradients(strided)
    with numpy_path():
        reference.apply_gradients(strided)
    assert not fused.last_step_fused
    _assert_same(fused, reference)
    fused.apply_gradients(_grads(F32, 2))
    assert fused.last_step_fused  # the same optimizer on dense gradients

    wide = nn.SGD(_params(numpy.float64, 2), 0.1)
    wide.apply_gradients(_grads(numpy.float64, 2))
    assert wide.fused_rule is not None and not wide.last_step_fused

    with numpy_path():
        opt = nn.SGD(_params(F32, 2), 0.1)
        assert not opt.takes_scaled_gradients(_grads(F32, 2))
        opt.apply_gradients(_grads(F32, 2))
        assert not opt.last_step_fused


def test_a_subclass_that_changes_the_rule_is_not_fused():
    class Clipped(nn.SGD):
        def update(self, state, weight, grad, lr):
            super().update(state, weight, numpy.clip(grad, -0.01, 0.01), lr)

    class Preconditioned(nn.Momentum):
        def _prepare_gradient(self, i, grad, weight):
            return super()._prepare_gradient(i, grad, weight) * 2

    class CoupledDecay(nn.AdamWeightDecay):
        decoupled_weight_decay = False

    assert Clipped(_params(F32, 0), 0.1).fused_rule is None
    assert Preconditioned(_params(F32, 0), 0.1, 0.9).fused_rule is None
    assert CoupledDecay(_params(F32, 0), 0.1).fused_rule is None
    assert all(make(_params(F32, 0)).fused_rule is not None for make in OPTIMIZERS.values())


@pytest.mark.parametrize(
    "scale,error",
    [
        (0.0, ValueError),
        (-2.0, ValueError),
        (float("inf"), ValueError),
        (float("nan"), ValueError),
        ("8", TypeError),
        (True, TypeError),
    ],
)
def test_bad_scale_is_rejected_before_any_change(scale, error):
    params = _params(F16, 4)
    before = [p.data.copy() for p in params]
    shown = repr(scale) + (f" ({type(scale).__name__})" if error is TypeError else "")
    words = f"SGD: scale must be a finite float in (0.0, inf), got {shown}"
    with pytest.raises(error, match=f"^{re.escape(words)}$"):
        nn.SGD(params, 0.1).apply_gradients(_grads(F16, 4), scale=scale)
    for p, b in zip(params, before):
        numpy.testing.assert_array_equal(p.data, b)


def test_loss_scale_cell_hands_scaled_gradients_to_a_fused_optimizer():
    """TrainOneStepWithLossScaleCell: the optimizer divides the scale out (no fp32 gradient copies),
    and the trajectory is bit-identical to unscaling first (forced by a grad_reducer)."""
    from minigrad import amp

    def run(unscale_first):
        minigrad.set_seed(0)
        net = nn.SequentialCell([nn.Dense(20, 16), nn.ReLU(), nn.Dense(16, 4)])
        opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
        loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        manager = amp.DynamicLossScaleManager(2.0**20, 2, scale_window=3)  # early steps overflow
        cell = amp.build_train_network(net, opt, loss, level="O2", loss_scale_manager=manager)
        if unscale_first:
            cell.grad_reducer = lambda grads: grads
        seen, reports = [], []
        original = opt.apply_gradients

        def apply_gradients(grads, scale=None):
            seen.append(scale)
            original(grads, scale)
            fused.append(opt.last_step_fused)

        opt.apply_gradients = apply_gradients
        fused = []
        rng = numpy.random.default_rng(0)
        for _ in range(12):
            x = minigrad.Tensor(rng.standard_normal((8, 20)).astype(F32))
            y = minigrad.Tensor(rng.integers(0, 4, 8).astype(numpy.int32))
            cell(x, y)
            reports.append(str(cell.last_report))
        assert len(fused) == len(seen) and all(fused)  # every applied step ran natively
        return [p.data.copy() for p in net.trainable_params()], seen, reports

    deferred, scales, reports = run(False)
    eager, eager_scales, eager_reports = run(True)
    assert 0 < len(scales) < 12 and all(s is not None for s in scales)  # some steps skipped
    assert len(eager_scales) == len(scales) and all(s is None for s in eager_scales)
    assert reports == eager_reports
    for a, b in zip(deferred, eager):
        numpy.testing.assert_array_equal(_bits(a), _bits(b))


def _inf_step(make):
    grads = _grads(F32, 9)
    grads[0][0] = numpy.inf
    opt = make(_params(F32, 9))
    opt.apply_gradients(grads)  # the buffer holds inf after the first step
    grads[0][0] = -numpy.inf
    return opt, grads


@pytest.mark.parametrize("name", ["sgd-momentum", "adam"])
def test_ieee_exceptions_warn_as_numpy_does(name):
    """inf - inf in the update: NumPy warns 'invalid value'; so does the fused step."""
    with numpy.errstate(all="ignore"):
        fused, grads = _inf_step(OPTIMIZERS[name])
        with numpy_path():
            reference, _ = _inf_step(OPTIMIZERS[name])
    with pytest.warns(RuntimeWarning, match="invalid value") as record:
        fused.apply_gradients(grads)
    assert any("fused" in str(w.message) for w in record)
    with numpy_path(), pytest.warns(RuntimeWarning, match="invalid value"):
        reference.apply_gradients(grads)
    assert fused.last_step_fused and not reference.last_step_fused
    _assert_same(fused, reference)
    with numpy.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        fused.apply_gradients(grads)  # ignored: no warning


def test_errstate_raise_takes_the_numpy_path_which_raises():
    opt, grads = _inf_step(OPTIMIZERS["sgd-momentum"])
    assert opt.last_step_fused  # covered: the step before ran natively
    with numpy.errstate(invalid="raise"), pytest.raises(FloatingPointError):
        opt.apply_gradients(grads)  # the fused step only warns for inf - inf; NumPy raises


@pytest.mark.parametrize("fused", [True, False])
def test_a_read_only_parameter_fails_the_step_before_any_change(fused):
    params = _params(F16, 5)
    params[2].data.flags.writeable = False
    opt = nn.SGD(params, 0.1, momentum=0.9)
    before = [p.data.copy() for p in params]
    words = (r"^SGD: data.flags.writeable of parameter 'p2' must be True \(the update writes it "
             r"in place\), got False$")
    with numpy_path(not fused), pytest.raises(ValueError, match=words):
        opt.apply_gradients(_grads(F16, 5))
    for p, b in zip(params, before):
        numpy.testing.assert_array_equal(_bits(p.data), _bits(b))
    assert opt.global_step == 0 and all(s is None for s in opt.slots.states)


def _inf_adam():
    param = minigrad.Parameter(numpy.ones(8, F32), name="w")
    return nn.Adam([param], 0.1), param, numpy.full(8, numpy.inf, F32)


@pytest.mark.parametrize("how", ["call", "step", "apply_gradients"])
def test_the_fused_warning_points_at_the_users_call(how):
    opt, param, grad = _inf_adam()
    param.grad = minigrad.Tensor(grad)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        opt([grad]) if how == "call" else opt.step() if how == "step" else opt.apply_gradients(
            [grad]
        )
    fused = [w for w in record if "fused" in str(w.message)]
    assert fused, [str(w.message) for w in record]
    assert all((w.filename, w.lineno) == (__file__, line) for w in fused), [
        (w.filename, w.lineno) for w in fused
    ]


@pytest.mark.parametrize("dtype", [F32, F16])
def test_a_read_only_parameter_is_never_written(dtype):
    """The NumPy path refuses to write a read-only parameter; the fused step does not write it
    either."""
    p = minigrad.Parameter(numpy.ones(5000, dtype), name="w")  # >= MIN_SIZE: convert's native path
    p.data.flags.writeable = False
    opt = nn.SGD([p], 0.5, momentum=0.9)
    words = r"^SGD: data.flags.writeable of parameter 'w' must be True"
    with pytest.raises(ValueError, match=words):
        opt.apply_gradients([numpy.ones(5000, F32)])
    numpy.testing.assert_array_equal(p.data, numpy.ones(5000, dtype))


class _HalvedUnscale(nn.SGD):
    def _unscale(self, grad, dtype):
        return super()._unscale(grad, dtype) * numpy.float32(0.5)


class _NoDecay(nn.Momentum):
    def _add_weight_decay(self, i, grad, weight):
        return grad


class _CountingApply(nn.Adam):
    def _apply_one(self, i, grad, lr):
        self.applied = getattr(self, "applied", 0) + 1
        super()._apply_one(i, grad, lr)


class _OnesMoments(nn.Momentum):
    def init_state(self, weight):
        return {"moments": numpy.ones_like(weight)}


@pytest.mark.parametrize(
    "make,expected",
    [
        (lambda ps: _HalvedUnscale(ps, 1.0), 0.5),  # 1 - 1.0 * 0.5
        (lambda ps: _NoDecay(ps, 1.0, 0.0, weight_decay=0.5), 0.0),  # 1 - 1.0 * 1 (no decay)
    ],
)
def test_a_subclass_that_overrides_a_gradient_hook_is_not_fused(make, expected):
    p = minigrad.Parameter(numpy.ones(4, F32), name="w")
    opt = make([p])
    assert opt.fused_rule is None
    opt.apply_gradients([numpy.ones(4, F32)])
    assert not opt.last_step_fused
    numpy.testing.assert_array_equal(p.data, numpy.full(4, expected, F32))


def test_a_subclass_init_state_is_honoured():
    p = minigrad.Parameter(numpy.ones(4, F32), name="w")
    _OnesMoments([p], 1.0, 0.5).apply_gradients([numpy.ones(4, F32)])
    numpy.testing.assert_array_equal(p.data, numpy.full(4, -0.5, F32))  # v = 0.5 * 1 + 1; 1 - 1.5


def test_a_subclass_that_overrides_apply_one_is_not_fused():
    p = minigrad.Parameter(numpy.ones(4, F32), name="w")
    opt = _CountingApply([p], 0.1)
    assert opt.fused_rule is None
    opt.apply_gradients([numpy.ones(4, F32)])
    assert not opt.last_step_fused
    assert opt.applied == 1


def _compare_withnumpy_path(make, first_dtype, then_dtype):
    results = []
    for fused in (True, False):
        p = minigrad.Parameter(numpy.linspace(-1, 1, 2000).astype(first_dtype), name="w")
        opt = make([p])
        with numpy_path(not fused):
            opt.apply_gradients([numpy.full(2000, 0.5, first_dtype)])
            p.data = p.data.astype(then_dtype)  # a dtype change between steps, the state is kept
            opt.apply_gradients([numpy.full(2000, 0.25, then_dtype)])
        results.append(p.data)
    numpy.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: nn.Momentum(ps, 0.1, 0.9),
        lambda ps: nn.Adam(ps, 0.01),
        lambda ps: nn.SGD(ps, 0.1, momentum=0.9),
    ],
)
def test_a_float64_state_kept_after_a_dtype_change_is_not_read_as_float32(make):
    _compare_withnumpy_path(make, numpy.float64, numpy.float32)


class _HalfMoments(nn.Momentum):  # memory-saving fp16 state: the kernel must not write fp32 into it
    def init_state(self, weight):
        return {"moments": numpy.zeros(weight.shape, F16)}


def test_a_state_that_is_not_float32_leaves_the_step_to_numpy():
    _compare_withnumpy_path(lambda ps: _HalfMoments(ps, 0.1, 0.9), F32, F32)


def _special(rng, n, dtype):
    """Values that stress the rules: huge, tiny, subnormal, inf, NaN with payloads, fp16 ties."""
    values = numpy.array(
        [
            numpy.inf,
            -numpy.inf,
            numpy.nan,
            0.0,
            -0.0,
            1e-40,
            -1e-44,
            3e38,
            65504.0,
            65520.0,
            6e-8,
            2.98e-8,
            1.0 + 2**-11,
            1.0 + 3 * 2**-11,
        ]
    )
    with numpy.errstate(over="ignore"):
        a = numpy.where(
            rng.random(n) < 0.5,
            rng.choice(values, n),
            rng.standard_normal(n) * 10.0 ** rng.integers(-45, 39, n),
        ).astype(dtype)
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
    lambda ps: nn.SGD(
        [{"params": ps[:2], "lr": 0.0, "weight_decay": 0.1}, {"params": ps[2:]}],
        0.5,
        momentum=0.8,
        dampening=0.25,
    ),
    lambda ps: nn.SGD(ps, [0.1, 0.0, 3.0], momentum=0.9, nesterov=True),
    lambda ps: nn.Momentum(ps, 0.1, 0.0, weight_decay=1e-20),
    lambda ps: nn.Momentum(ps, 1e-30, 0.9, use_nesterov=True, weight_decay=0.01, loss_scale=7.0),
    lambda ps: nn.Adam(ps, 0.1, eps=1e-45, weight_decay=0.01, use_nesterov=True),
    lambda ps: nn.Adam(ps, [0.0, 0.1], beta2=0.9999999, loss_scale=5.0),
    lambda ps: nn.AdamWeightDecay(ps, 3.0, beta2=0.5, eps=1e-45, weight_decay=0.01),
    lambda ps: nn.AdamWeightDecay(
        [
            {"params": ps[1:], "weight_decay": 0.2},
            {"params": ps[:1], "lr": 0.0},
            {"order_params": ps},
        ],
        0.1,
    ),
]


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
    grads = [
        [
            None
            if (i == 3 and step != 1) or rng.random() < 0.15
            else _special(rng, n, rng.choice([F16, F32]) if d == F16 else F32)
            for i, (n, d) in enumerate(zip(sizes, dtypes))
        ]
        for step in range(3)
    ]
    scales = [None, 1024.0, 3.0]
    results = []
    for fused in (True, False):
        params = [minigrad.Parameter(a.copy(), name=n) for a, n in zip(init, NAMES)]
        opt = FUSED_MAKERS[k](params)
        with numpy_path(not fused), numpy.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for step, scale in zip(grads, scales):
                opt.apply_gradients([None if g is None else g.copy() for g in step], scale=scale)
                assert opt.last_step_fused is fused
        results.append(([p.data for p in params], opt.state_dict()))
    (params_f, state_f), (params_n, state_n) = results
    for p, q, name in zip(params_f, params_n, NAMES):
        numpy.testing.assert_array_equal(
            _bits_nan_canonical(p), _bits_nan_canonical(q), err_msg=name
        )
    assert state_f.keys() == state_n.keys()
    for key in state_f:
        numpy.testing.assert_array_equal(
            _bits_nan_canonical(numpy.asarray(state_f[key])),
            _bits_nan_canonical(numpy.asarray(state_n[key])),
            err_msg=key,
        )
