"""Batch norm's native host passes (ops/_norm_host.py) against NumPy and float64.

The elementwise passes (the normalised output, dx) round each operation as NumPy's passes do,
so every bit must match, NaN payloads aside, for values of every kind; the sums (the statistics,
Σ g and Σ g·(x - μ)) are float64 sums, checked against float64 to within float32's rounding.
Where a pass does not apply it writes nothing and returns None; batch norm then runs NumPy.
"""
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.bits import assert_same_values
from helpers.fp16 import F16, F32, ulps
from minigrad import Tensor, _native, nn
from minigrad.ops import _norm_host

pytestmark = pytest.mark.skipif(_native.host_library() is None,
                                reason="needs the native host library")

SPECIALS = numpy.array([0.0, -0.0, numpy.inf, -numpy.inf, numpy.nan, 1e-45, -1e-40, 3e38],
                       F32)


def channels_last(values, shape):
    """``values`` (as many as ``shape`` holds) in an (N, C, ...) array stored channels-last."""
    n, c, *rest = shape
    x = numpy.asarray(values, F32).reshape(n, *rest, c)
    return x.transpose(0, x.ndim - 1, *range(1, x.ndim - 1))


def every_kind(rng, shape):
    """Random fp32 values, with -0, subnormals, infinities, NaNs and huge values mixed in."""
    x = (rng.standard_normal(numpy.prod(shape)) * 10.0 ** rng.integers(-3, 4)).astype(F32)
    where = rng.random(x.size) < 0.1
    x[where] = rng.choice(SPECIALS, int(where.sum()))
    return channels_last(x, shape)


def vector(rng, c, ndim):
    return rng.standard_normal(c).astype(F32).reshape(1, c, *[1] * (ndim - 2))


shapes = st.tuples(st.integers(1, 5), st.one_of(st.integers(1, 40), st.integers(250, 300)),
                   st.lists(st.integers(1, 7), max_size=2)).map(lambda t: (t[0], t[1], *t[2]))


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(0, 2**31), st.booleans())
def test_normalize_and_dx_give_numpy_bits(shape, seed, in_place):
    """Every channel count (a block holds one row from 256 channels), one row or many, in place
    or into a new array."""
    rng = numpy.random.default_rng(seed)
    x, g = every_kind(rng, shape), every_kind(rng, shape)
    m, k, s, a, b = (vector(rng, shape[1], len(shape)) for _ in range(5))
    with numpy.errstate(all="ignore"):
        for fn, args, want in ((_norm_host.normalize, (m, a, b), ((x - m) * a) + b),
                               (_norm_host.dx, (g, m, k, s, a), ((((x - m) * k) + g) - s) * a)):
            source = x.copy(order="K")
            out = source if in_place else numpy.empty_like(x)
            assert fn(source, *args, out) is out
            assert_same_values(out, want)


def float64_moments(x):
    axes = (0, *range(2, x.ndim))
    wide = x.astype(numpy.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    return mean, ((wide - mean) ** 2).mean(axis=axes, keepdims=True)


def assert_rounded_from(got, exact, ulp=1):
    """``got`` (float32) is within ``ulp`` float32 units of the float64 ``exact``."""
    exact32 = exact.astype(F32)
    step = numpy.spacing(numpy.abs(exact32)).astype(numpy.float64)
    assert (numpy.abs(got.astype(numpy.float64) - exact) <= ulp * step).all(), (got, exact)


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(0, 2**31), st.floats(1e-3, 1e3), st.floats(-1e4, 1e4))
def test_moments_are_float64_statistics_rounded_once(shape, seed, scale, offset):
    """μ and the biased σ² to float32's rounding of the float64 values, also where the mean is
    ten thousand times the spread (the sums are shifted by the first row)."""
    rng = numpy.random.default_rng(seed)
    values = offset * scale + scale * rng.standard_normal(numpy.prod(shape))
    x = channels_last(values, shape)
    mean, var = _norm_host.moments(x)
    assert mean.shape == var.shape == (1, shape[1], *[1] * (len(shape) - 2))
    want_mean, want_var = float64_moments(x)
    assert_rounded_from(mean, want_mean)
    assert_rounded_from(var, want_var, ulp=2)


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(0, 2**31))
def test_grad_sums_are_float64_sums(shape, seed):
    """Σ g and Σ g·(x - μ), with x - μ rounded to float32 as dx uses it, summed in float64."""
    rng = numpy.random.default_rng(seed)
    x = channels_last(rng.standard_normal(numpy.prod(shape)) * 3 + 1, shape)
    g = channels_last(rng.standard_normal(numpy.prod(shape)), shape)
    mean = vector(rng, shape[1], len(shape))
    sum_g, sum_gc = _norm_host.grad_sums(x, g, mean)
    axes = (0, *range(2, x.ndim))
    centred = (x - mean).astype(numpy.float64)
    wide_g = g.astype(numpy.float64)
    assert_rounded_from(sum_g, wide_g.sum(axis=axes, keepdims=True))
    assert_rounded_from(sum_gc, (wide_g * centred).sum(axis=axes, keepdims=True))


def test_a_channel_with_an_inf_or_a_nan_gets_a_nan_variance_alone():
    x = channels_last(numpy.arange(24, dtype=F32), (2, 3, 4))
    x[1, 0, 2], x[0, 2, 3] = numpy.inf, numpy.nan
    mean, var = _norm_host.moments(x)
    assert numpy.isinf(mean[0, 0, 0]) and numpy.isnan(var[0, 0, 0])
    assert numpy.isnan(mean[0, 2, 0]) and numpy.isnan(var[0, 2, 0])
    assert_rounded_from(mean[:, 1:2], float64_moments(x[:, 1:2])[0])
    assert_rounded_from(var[:, 1:2], float64_moments(x[:, 1:2])[1])


def test_passes_refuse_what_they_cannot_read_and_write_nothing():
    rng = numpy.random.default_rng(3)
    x = every_kind(rng, (2, 3, 4, 5))
    v = vector(rng, 3, 4)
    nchw = numpy.ascontiguousarray(x)
    out = numpy.full_like(x, 7.0)
    read_only = x.copy(order="K")
    read_only.flags.writeable = False
    refused = {
        "NCHW x": lambda: _norm_host.normalize(nchw, v, v, v, out),
        "float64 x": lambda: _norm_host.moments(x.astype(numpy.float64)),
        "NCHW moments": lambda: _norm_host.moments(nchw),
        "empty x": lambda: _norm_host.moments(numpy.empty((0, 3), F32)),
        "float64 vector": lambda: _norm_host.normalize(x, v.astype(numpy.float64), v, v, out),
        "vector of another size": lambda: _norm_host.normalize(x, v[:, :2], v, v, out),
        "g laid out otherwise": lambda: _norm_host.grad_sums(x, nchw, v),
        "dx into a read-only array": lambda: _norm_host.dx(x, x, v, v, v, v, read_only),
        "output laid out otherwise": lambda: _norm_host.normalize(x, v, v, v, nchw.copy()),
        "output of another shape": lambda: _norm_host.dx(x, x, v, v, v, v, out[:1]),
        "not an array": lambda: _norm_host.moments(x.tolist()),
    }
    for name, call in refused.items():
        assert call() is None, name
    assert (out == 7.0).all()
    assert _norm_host.grad_sums(x, read_only, v) is not None  # g is only read


def run_batch_norm(x, g, native, monkeypatch, calls=None):
    """Output and gradients of a training-mode BatchNorm2d, with or without the native passes;
    ``calls`` collects the names of the native passes that ran."""
    with monkeypatch.context() as mp:
        if not native:
            mp.setattr(_norm_host, "_library", lambda: None)
        for name in ("moments", "normalize", "grad_sums", "dx"):
            def record(*args, _name=name, _fn=getattr(_norm_host, name)):
                result = _fn(*args)
                if calls is not None and result is not None:
                    calls.append(_name)
                return result
            mp.setattr(_norm_host, name, record)
        bn = nn.BatchNorm2d(x.shape[1])
        bn.set_train()
        xt = Tensor(x.copy(order="K"), requires_grad=True)
        y = bn(xt)
        y.backward(Tensor(g))
        return [y.data, xt.grad.data, bn.gamma.grad.data, bn.beta.grad.data,
                bn.moving_mean.asnumpy(), bn.moving_variance.asnumpy()]


@pytest.mark.parametrize("dtype", [F32, F16])
def test_batch_norm_runs_the_native_passes_on_a_channels_last_batch(dtype, monkeypatch):
    """fp32, and fp16 through its widened copy (written in place): the same output and gradients
    as NumPy's passes to within the sums' rounding, and the same layout."""
    rng = numpy.random.default_rng(4)
    shape = (4, 16, 5, 3)
    x = channels_last(rng.standard_normal(numpy.prod(shape)) * 2 + 3, shape).astype(dtype)
    g = channels_last(rng.standard_normal(numpy.prod(shape)), shape).astype(dtype)
    calls = []
    native = run_batch_norm(x, g, True, monkeypatch, calls)
    assert sorted(calls) == ["dx", "grad_sums", "moments", "normalize"]
    plain = run_batch_norm(x, g, False, monkeypatch)
    assert native[0].transpose(0, 2, 3, 1).flags.c_contiguous
    for got, want in zip(native, plain):
        assert got.dtype == want.dtype
        if got.dtype == F16:
            assert (ulps(got, want) <= 1).all()
        else:
            numpy.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_an_nchw_batch_takes_the_numpy_passes(monkeypatch):
    rng = numpy.random.default_rng(5)
    x = rng.standard_normal((4, 16, 5, 3)).astype(F32)
    calls = []
    run_batch_norm(x, numpy.ones_like(x), True, monkeypatch, calls)
    assert calls == []
