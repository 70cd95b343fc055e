"""Review of session 2 (b): the fused step's IEEE reporting (underflow, where its warnings point),
amp.plots at fp16's edges and its argument errors, ScaleCore's float32 scale."""
import inspect
import warnings

import numpy
import pytest

import minigrad
from minigrad import nn
from minigrad.amp import ScaleCore, plots
from minigrad import _native

F32 = numpy.float32
needs_host = pytest.mark.skipif(_native.host_library() is None, reason="no host library")


def _numpy_path(optimizer):
    optimizer._fused_rule = lambda: None
    return optimizer


# ---- optim._fused: underflow is NumPy's to report ----------------------------------------------
@pytest.mark.parametrize("fused", [True, False])
def test_errstate_under_raise_stops_the_step_as_numpy_does(fused):
    """g * g underflows in Adam's second moment: NumPy raises under errstate(under='raise');
    the fused kernel does not report underflow, so the step must not run there."""
    param = minigrad.Parameter(numpy.ones(64, F32), name="w")
    opt = nn.Adam([param], 0.1)
    if not fused:
        _numpy_path(opt)
    with numpy.errstate(under="raise"), pytest.raises(FloatingPointError, match="underflow"):
        opt.apply_gradients([numpy.full(64, 1e-30, F32)])


def test_errstate_under_warn_warns_as_numpy_does():
    param = minigrad.Parameter(numpy.ones(64, F32), name="w")
    opt = nn.Adam([param], 0.1)
    with numpy.errstate(under="warn"), pytest.warns(RuntimeWarning, match="underflow"):
        opt.apply_gradients([numpy.full(64, 1e-30, F32)])


# ---- optim._fused: the warning points at the user's call ---------------------------------------
def _inf_adam():
    param = minigrad.Parameter(numpy.ones(8, F32), name="w")
    return nn.Adam([param], 0.1), param, numpy.full(8, numpy.inf, F32)


@needs_host
@pytest.mark.parametrize("how", ["call", "step", "apply_gradients"])
def test_the_fused_warning_points_at_the_users_call(how):
    opt, param, grad = _inf_adam()
    param.grad = minigrad.Tensor(grad)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        opt([grad]) if how == "call" else opt.step() if how == "step" else opt.apply_gradients([grad])
    fused = [w for w in record if "fused" in str(w.message)]
    assert fused, [str(w.message) for w in record]
    assert all((w.filename, w.lineno) == (__file__, line) for w in fused), [(w.filename, w.lineno) for w in fused]


# ---- amp.plots ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value,verdict", [
    (2.0**-25, "flushed"),                               # the tie with 0 rounds to even: 0
    (2.0**-25 + 2.0**-60, "subnormal"),                  # above the tie (float64: no detour via fp32)
    (float(numpy.nextafter(2.0**-24, 0)), "subnormal"),  # rounds to 2**-24
    (float(numpy.nextafter(2.0**-14, 0)), "normal"),     # rounds up to the smallest normal
    (65504.0, "normal"), (65519.99, "normal"), (float(numpy.nextafter(65520.0, 0)), "normal"),
    (65520.0, "overflow"),
])
def test_fp16_verdicts_at_the_boundaries(value, verdict):
    for sign in (1.0, -1.0):
        shares = plots.gradient_exponents(numpy.array([sign * value]))["fp16"]
        assert shares[verdict] == 1.0, (value, shares)


def test_float64_values_that_overflow_or_vanish_only_once_scaled():
    """Finite inputs whose float64 product with the scale is inf (or 0) are fp16 overflow (or
    flushed), not 'nonfinite' (or exact zeros), and no NumPy warning escapes."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = plots.gradient_exponents(numpy.array([1e300, numpy.inf, numpy.nan, 1.0]), scale=1e10)
        assert (h["total"], h["zero"], h["nonfinite"]) == (4, 0, 2)
        assert h["fp16"] == pytest.approx({"flushed": 0.0, "subnormal": 0.0, "overflow": 0.5, "normal": 0.0})
        tiny = plots.gradient_exponents(numpy.array([1e-300, 0.0]), scale=1e-300)
        assert (tiny["zero"], tiny["nonfinite"]) == (1, 0)
        assert tiny["fp16"] == pytest.approx({"flushed": 0.5, "subnormal": 0.0, "overflow": 0.0, "normal": 0.5})


@pytest.mark.parametrize("gradients", [[], {}, ()])
def test_no_gradients_at_all_names_the_argument(gradients):
    with pytest.raises(ValueError, match="'gradients'"):
        plots.gradient_exponents(gradients)


@pytest.mark.parametrize("scale", ["x", None, [2.0]])
def test_a_scale_that_is_not_a_number_names_the_argument(scale):
    with pytest.raises(TypeError, match="'scale'"):
        plots.gradient_exponents(numpy.ones(3, F32), scale=scale)


# ---- ScaleCore: the scale must be a positive finite float32 --------------------------------------
@pytest.mark.parametrize("scale", [1e39, 1e-46])
def test_a_scale_outside_float32_is_refused_not_turned_into_inf_or_0(scale):
    with pytest.raises(ValueError, match="'scale'"):
        ScaleCore(scale)
    core = ScaleCore(256.0, growth_interval=4)
    before = core.state_dict()
    with pytest.raises(ValueError, match="'scale'"):
        core.load_state_dict(dict(before, scale=scale))
    assert core.state_dict() == before
