"""The fused native optimizer step (minigrad.optim._fused, kernels/optim_host.cpp) against the
NumPy path it replaces: bit for bit, for every variant it covers, and falling back cleanly."""
import warnings

import numpy
import pytest
from hypothesis import given, settings, strategies as st

import minigrad
from minigrad import nn
from minigrad import _native
from minigrad.optim import _fused

pytestmark = pytest.mark.skipif(_native.host_library() is None, reason="no host library")

F16, F32 = numpy.float16, numpy.float32
SHAPES = [(3,), (37, 5), (1025,), (2, 1030)]  # tails, and more than one 1024-element block


def _params(dtype, seed):
    rng = numpy.random.default_rng(seed)
    return [minigrad.Parameter(rng.standard_normal(s).astype(dtype), name=f"p{k}") for k, s in enumerate(SHAPES)]


def _grads(dtype, seed, scale=1.0):
    rng = numpy.random.default_rng(seed + 1000)
    return [(rng.standard_normal(s) * scale).astype(dtype) for s in SHAPES]


def _numpy_path(optimizer):
    optimizer._fused_rule = lambda: None  # the instance attribute hides the class's rule
    return optimizer


def _bits(a):
    a = numpy.ascontiguousarray(a)
    return a.view(numpy.uint16 if a.dtype == F16 else numpy.uint32)


def _assert_same(fused, reference):
    for p, q in zip(fused.parameters, reference.parameters):
        numpy.testing.assert_array_equal(_bits(p.data), _bits(q.data), err_msg=p.name)
    assert fused.state_dict().keys() == reference.state_dict().keys()
    for key, value in fused.state_dict().items():
        numpy.testing.assert_array_equal(numpy.asarray(value), numpy.asarray(reference.state_dict()[key]),
                                         err_msg=key)


def _run(make, param_dtype, grad_dtype, scale, seed, steps=3):
    fused, reference = make(_params(param_dtype, seed)), _numpy_path(make(_params(param_dtype, seed)))
    calls = []
    original = _fused.apply

    def spy(*args):
        calls.append(original(*args))
        return calls[-1]
    _fused.apply = spy
    try:
        for step in range(steps):
            with numpy.errstate(all="ignore"):  # large scales overflow some fp16 gradients: same bits
                grads = _grads(grad_dtype, seed + step, scale or 1.0)
                fused.apply_gradients(grads, scale=scale)
                reference.apply_gradients([g.copy() for g in grads], scale=scale)
    finally:
        _fused.apply = original
    assert calls and all(calls), "the fused path was not taken"
    _assert_same(fused, reference)


OPTIMIZERS = {
    "sgd": lambda ps: nn.SGD(ps, 0.05),
    "sgd-wd-loss-scale": lambda ps: nn.SGD(ps, 0.05, weight_decay=0.01, loss_scale=8.0),
    "sgd-momentum": lambda ps: nn.SGD(ps, 0.05, momentum=0.9),
    "sgd-dampening": lambda ps: nn.SGD(ps, 0.05, momentum=0.8, dampening=0.1, weight_decay=0.003),
    "sgd-nesterov": lambda ps: nn.SGD(ps, [0.05, 0.02, 0.01], momentum=0.9, nesterov=True),
    "momentum": lambda ps: nn.Momentum(ps, 0.05, 0.9),
    "momentum-nesterov-wd": lambda ps: nn.Momentum(ps, 0.03, 0.9, weight_decay=0.01, use_nesterov=True),
    "momentum-groups": lambda ps: nn.Momentum([{"params": ps[:2], "lr": 0.1, "weight_decay": 0.02},
                                               {"params": ps[2:]}], 0.01, 0.5),
    "adam": lambda ps: nn.Adam(ps, 1e-2),
    "adam-nesterov-wd-loss-scale": lambda ps: nn.Adam(ps, 3e-3, beta1=0.8, beta2=0.99, eps=1e-6,
                                                      use_nesterov=True, weight_decay=0.01, loss_scale=4.0),
    "adam-groups": lambda ps: nn.Adam([{"params": ps[:1], "lr": 0.05, "weight_decay": 0.1},
                                       {"params": ps[1:]}], [1e-2, 5e-3, 1e-3]),
    "adamw": lambda ps: nn.AdamWeightDecay(ps, 1e-2, weight_decay=0.05),
    "adamw-groups": lambda ps: nn.AdamWeightDecay([{"params": ps[:3], "weight_decay": 0.2},
                                                   {"params": ps[3:]}], 2e-2, beta1=0.5, eps=1e-3),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("param_dtype,grad_dtype", [(F16, F16), (F16, F32), (F32, F32), (F32, F16)])
@pytest.mark.parametrize("scale", [None, 1024.0])
def test_fused_step_is_bit_identical_to_numpy(name, param_dtype, grad_dtype, scale):
    _run(OPTIMIZERS[name], param_dtype, grad_dtype, scale, seed=len(name))


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(sorted(OPTIMIZERS)), seed=st.integers(0, 2**16),
       scale=st.sampled_from([None, 1.0, 3.0, 2.0**15, 1e-3]), half=st.booleans())
def test_fused_step_property(name, seed, scale, half):
    _run(OPTIMIZERS[name], F16 if half else F32, F16 if half else F32, scale, seed, steps=2)


def test_non_finite_gradients_give_the_same_bits():
    """Applied without a scaler, inf and NaN (NaN payloads included) reach the weights as in NumPy."""
    for dtype in (F16, F32):
        grads = _grads(dtype, 7)
        grads[1][0, 0], grads[1][1, 1], grads[2][5] = numpy.inf, -numpy.inf, numpy.nan
        grads[3].reshape(-1)[7:9] = numpy.array([0x7C01, 0xFE00], numpy.uint16).view(F16) if dtype == F16 else \
            numpy.array([0x7F800001, 0xFFC00000], numpy.uint32).view(F32)
        fused = nn.SGD(_params(F16, 3), 0.1, momentum=0.9)
        reference = _numpy_path(nn.SGD(_params(F16, 3), 0.1, momentum=0.9))
        with numpy.errstate(invalid="ignore", over="ignore"):
            fused.apply_gradients(grads)
            reference.apply_gradients([g.copy() for g in grads])
        _assert_same(fused, reference)


def test_fp16_overflow_in_the_write_back_warns_like_numpy():
    p = minigrad.Parameter(numpy.full(5000, 60000, F16), name="w")
    opt = nn.SGD([p], 1.0)
    with pytest.warns(RuntimeWarning, match="overflow"):
        opt.apply_gradients([numpy.full(5000, -10000, F16)])
    assert numpy.isinf(p.data).all()
    assert opt._masters[0][0] == 70000  # the fp32 master keeps the value fp16 cannot hold


def test_gradients_are_not_written():
    grads = _grads(F32, 1)
    kept = [g.copy() for g in grads]
    nn.SGD(_params(F16, 1), 0.1, momentum=0.9, weight_decay=0.1, loss_scale=4.0).apply_gradients(grads, scale=8.0)
    for g, k in zip(grads, kept):
        numpy.testing.assert_array_equal(g, k)


def test_uncovered_steps_fall_back_unchanged():
    """A strided gradient, a float64 parameter or no host library: the NumPy path, same results."""
    strided = [numpy.asfortranarray(g) if g.ndim == 2 else g for g in _grads(F32, 2)]
    fused, reference = nn.SGD(_params(F32, 2), 0.1), _numpy_path(nn.SGD(_params(F32, 2), 0.1))
    assert not _fused.apply(fused, fused._fused_rule(), strided, [0.1] * 4, 1.0)
    fused.apply_gradients(strided)
    reference.apply_gradients(strided)
    _assert_same(fused, reference)

    wide = nn.SGD(_params(numpy.float64, 2), 0.1)
    assert not _fused.apply(wide, wide._fused_rule(), _grads(numpy.float64, 2), [0.1] * 4, 1.0)

    with _native.numpy_fallback():
        opt = nn.SGD(_params(F32, 2), 0.1)
        assert not _fused.apply(opt, opt._fused_rule(), _grads(F32, 2), [0.1] * 4, 1.0)
        opt.apply_gradients(_grads(F32, 2))


def test_a_subclass_that_changes_the_rule_is_not_fused():
    class Clipped(nn.SGD):
        def update(self, state, weight, grad, lr):
            super().update(state, weight, numpy.clip(grad, -0.01, 0.01), lr)

    class Preconditioned(nn.Momentum):
        def _prepare_gradient(self, i, grad, weight):
            return super()._prepare_gradient(i, grad, weight) * 2

    class CoupledDecay(nn.AdamWeightDecay):
        decoupled_weight_decay = False

    assert Clipped(_params(F32, 0), 0.1)._fused_rule() is None
    assert Preconditioned(_params(F32, 0), 0.1, 0.9)._fused_rule() is None
    assert CoupledDecay(_params(F32, 0), 0.1)._fused_rule() is None
    assert all(make(_params(F32, 0))._fused_rule() is not None for make in OPTIMIZERS.values())


@pytest.mark.parametrize("scale,error", [(0.0, ValueError), (-2.0, ValueError), (float("inf"), ValueError),
                                         (float("nan"), ValueError), ("8", TypeError), (True, TypeError)])
def test_bad_scale_is_rejected_before_any_change(scale, error):
    params = _params(F16, 4)
    before = [p.data.copy() for p in params]
    with pytest.raises(error, match="'scale'"):
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
        opt.apply_gradients = lambda grads, scale=None: seen.append(scale) or original(grads, scale)
        rng = numpy.random.default_rng(0)
        for _ in range(12):
            x = minigrad.Tensor(rng.standard_normal((8, 20)).astype(F32))
            y = minigrad.Tensor(rng.integers(0, 4, 8).astype(numpy.int32))
            cell(x, y)
            reports.append(str(cell.last_report))
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
    opt.apply_gradients(grads)              # the buffer holds inf after the first step
    grads[0][0] = -numpy.inf
    return opt, grads


@pytest.mark.parametrize("name", ["sgd-momentum", "adam"])
def test_ieee_exceptions_warn_as_numpy_does(name):
    """inf - inf in the update: NumPy warns 'invalid value'; so does the fused step."""
    with numpy.errstate(all="ignore"):
        fused, grads = _inf_step(OPTIMIZERS[name])
        reference, _ = _inf_step(lambda ps: _numpy_path(OPTIMIZERS[name](ps)))
    with pytest.warns(RuntimeWarning, match="invalid value") as record:
        fused.apply_gradients(grads)
    assert any("fused" in str(w.message) for w in record)
    with pytest.warns(RuntimeWarning, match="invalid value"):
        reference.apply_gradients(grads)
    _assert_same(fused, reference)
    with numpy.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        fused.apply_gradients(grads)        # ignored: no warning


def test_errstate_raise_takes_the_numpy_path_which_raises():
    opt, grads = _inf_step(OPTIMIZERS["sgd-momentum"])
    with numpy.errstate(invalid="raise"):
        assert not _fused.apply(opt, opt._fused_rule(), grads, [0.05] * 4, 1.0)
        with pytest.raises(FloatingPointError):
            opt.apply_gradients(grads)


@pytest.mark.parametrize("fused", [True, False])
def test_a_read_only_parameter_fails_the_step_before_any_change(fused):
    params = _params(F16, 5)
    params[2].data.flags.writeable = False
    opt = nn.SGD(params, 0.1, momentum=0.9)
    if not fused:
        _numpy_path(opt)
    before = [p.data.copy() for p in params]
    with pytest.raises(ValueError, match=r"parameter 'p2' is read-only"):
        opt.apply_gradients(_grads(F16, 5))
    for p, b in zip(params, before):
        numpy.testing.assert_array_equal(_bits(p.data), _bits(b))
    assert opt.global_step == 0 and all(s is None for s in opt._states)
