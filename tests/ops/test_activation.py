"""Activations (ops/activation.py): gelu, leaky_relu, softmax, log_softmax, and the erf behind
gelu; their fp16 results against the fp32 rule, on the native and the NumPy path."""

import math
import warnings

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from helpers.fp16 import F16, F32, F64, FIXTURE_OK, assert_bits, grads, run, unary_case
from minigrad import Tensor, ops
from minigrad.ops.activation import _erf
from minigrad.testing import assert_forward, check_backward, noncontiguous

_erf_ref = numpy.vectorize(math.erf)


def _gelu_tanh(x):
    return 0.5 * x * (1 + numpy.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_exact(x):
    return 0.5 * x * (1 + _erf_ref(x / math.sqrt(2)))


def _softmax(x, axis):
    e = numpy.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis):
    z = x - x.max(axis=axis, keepdims=True)
    return z - numpy.log(numpy.exp(z).sum(axis=axis, keepdims=True))


def _input(shape, seed=0):
    return numpy.random.RandomState(seed).uniform(-3, 3, shape)


CASES = {
    "gelu": (ops.gelu, _gelu_tanh),
    "gelu_exact": (lambda x: ops.gelu(x, approximate=False), _gelu_exact),
    "leaky_relu": (lambda x: ops.leaky_relu(x, 0.1), lambda x: numpy.where(x > 0, x, 0.1 * x)),
    "softmax": (ops.softmax, lambda x: _softmax(x, -1)),
    "softmax_axis0": (lambda x: ops.softmax(x, axis=0), lambda x: _softmax(x, 0)),
    "log_softmax": (ops.log_softmax, lambda x: _log_softmax(x, -1)),
    "log_softmax_axis0": (lambda x: ops.log_softmax(x, axis=0), lambda x: _log_softmax(x, 0)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_backward(name, dtype, device):
    fn, ref = CASES[name]
    x = _input((3, 5)).astype(dtype)
    out = fn(minigrad.Tensor(x, device=device))
    assert out.device == device
    assert_forward(out, ref(x.astype(numpy.float64)), dtype)
    check_backward(fn, [minigrad.Tensor(x, device=device)])


@pytest.mark.parametrize("name", sorted(CASES))
def test_noncontiguous_and_float64(name):
    fn, ref = CASES[name]
    x = _input((4, 3), seed=1)
    for view in (x.T, noncontiguous(x)):
        assert_forward(fn(minigrad.Tensor(view)), ref(view), numpy.float64)
        check_backward(fn, [view])


def test_erf_matches_math_erf_over_the_whole_range():
    x = numpy.concatenate([numpy.linspace(-7, 7, 2001), [0.0, 1.9999, 2.0, 5.9999, 6.0, 40.0]])
    numpy.testing.assert_allclose(_erf(x), _erf_ref(x), atol=2e-14, rtol=0)
    out32 = _erf(x.astype(numpy.float32))
    assert out32.dtype == numpy.float32
    numpy.testing.assert_allclose(out32, _erf_ref(x), atol=3e-7, rtol=0)


def test_gelu_forms_agree_closely():
    x = minigrad.Tensor(numpy.linspace(-4, 4, 81))
    exact, tanh = ops.gelu(x, approximate=False).asnumpy(), ops.gelu(x).asnumpy()
    assert numpy.abs(exact - tanh).max() < 1e-3


def test_fp16_softmax_of_large_logits_does_not_overflow():
    # e^12 overflows fp16 (max 65504); the max-subtracted fp32 computation does not
    x = numpy.array([[12.0, 11.0, -20.0], [60000.0, 60000.0, 0.0]], numpy.float16)
    out = ops.softmax(minigrad.Tensor(x))
    assert out.dtype == numpy.float16
    assert_forward(out, _softmax(x.astype(numpy.float64), -1), numpy.float16)
    log = ops.log_softmax(minigrad.Tensor(x))
    assert numpy.isfinite(log.asnumpy()).all()
    assert_forward(log, _log_softmax(x.astype(numpy.float64), -1), numpy.float16)


@given(
    rows=st.integers(1, 4),
    cols=st.integers(1, 6),
    scale=st.floats(0.1, 50),
    seed=st.integers(0, 1000),
    axis=st.sampled_from([0, 1, -1]),
)
def test_softmax_is_a_distribution(rows, cols, scale, seed, axis):
    x = numpy.random.RandomState(seed).standard_normal((rows, cols)) * scale
    for dtype in (numpy.float16, numpy.float32):
        p = ops.softmax(minigrad.Tensor(x.astype(dtype)), axis=axis).asnumpy().astype(numpy.float64)
        assert (p >= 0).all()
        numpy.testing.assert_allclose(
            p.sum(axis=axis), 1.0, atol=3e-3 if dtype == numpy.float16 else 1e-6
        )
        logp = ops.log_softmax(minigrad.Tensor(x.astype(dtype)), axis=axis).asnumpy()
        numpy.testing.assert_allclose(
            numpy.exp(logp.astype(numpy.float64)).sum(axis=axis),
            1.0,
            atol=5e-3 if dtype == numpy.float16 else 1e-5,
        )


@pytest.mark.parametrize("fn", [ops.gelu, ops.softmax, ops.log_softmax, ops.leaky_relu])
def test_reject_integer_tensors(fn):
    with pytest.raises(TypeError, match="x must be a float Tensor.*not int64"):
        fn(minigrad.Tensor([1, 2]))


def test_softmax_axis_errors():
    x = minigrad.Tensor(numpy.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"axis must be an int in \[-2, 1\].*got 2$"):
        ops.softmax(x, axis=2)
    with pytest.raises(TypeError, match="axis must be an int"):
        ops.log_softmax(x, axis=(0, 1))


@pytest.mark.parametrize("op", [ops.softmax, ops.log_softmax])
def test_softmax_along_an_empty_axis_is_empty(op):
    # PyTorch: softmax of a (2, 0) tensor along dim 1 is a (2, 0) tensor, not NumPy's
    # 'zero-size array to reduction operation maximum which has no identity'
    x = Tensor(numpy.zeros((2, 0), numpy.float32), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a 'divide by zero in log' warning
        out = op(x, 1)
        assert out.shape == (2, 0) and out.dtype == numpy.float32
        out.backward(numpy.zeros((2, 0), numpy.float32))
    assert x.grad.shape == (2, 0)


@FIXTURE_OK
@given(x=unary_case())
def test_softmax_log_softmax_fp16_follow_the_fp32_rule(path, x):
    if x.ndim == 0 or x.shape[-1] == 0:
        return
    x = x.copy()
    x[numpy.isinf(x)] = F16.type(7)  # inf - inf has no softmax; NaN rows still propagate

    def by_hand(log):
        z = x.astype(F32) - x.astype(F32).max(axis=-1, keepdims=True)
        e = numpy.exp(z)
        return (
            z - numpy.log(e.sum(axis=-1, keepdims=True))
            if log
            else e / e.sum(axis=-1, keepdims=True)
        ).astype(F16)

    for op, log in ((ops.softmax, False), (ops.log_softmax, True)):
        got, k = run(lambda: op(Tensor(x)).asnumpy())
        ref, ref_k = run(by_hand, log)
        assert_bits(got, ref)
        assert k == ref_k  # only the rounding of a log_softmax below -65504 may warn (overflow)


@FIXTURE_OK
@given(x=unary_case(), approximate=st.booleans())
def test_gelu_fp16_matches_its_fp32_evaluation(path, x, approximate):
    x = x.copy()
    x[~numpy.isfinite(x)] = F16.type(-3)
    got = ops.gelu(Tensor(x), approximate).asnumpy()
    assert_bits(got, ops.gelu(Tensor(x.astype(F32)), approximate).asnumpy().astype(F16))


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 6), c=st.integers(1, 5))
def test_softmax_sigmoid_tanh_gradients_match_float64(seed, n, c):
    rng = numpy.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * 4).astype(F16)
    g = rng.standard_normal((n, c)).astype(F16)
    x64, g64 = x.astype(F64), g.astype(F64)
    (gx,) = grads(ops.softmax, [x], g)
    y = numpy.exp(x64 - x64.max(-1, keepdims=True))
    y /= y.sum(-1, keepdims=True)
    exact = y * (g64 - (g64 * y).sum(-1, keepdims=True))
    numpy.testing.assert_allclose(gx.astype(F64), exact, atol=2e-3, rtol=2e-3)
    (gx,) = grads(ops.sigmoid, [x], g)
    s = 1 / (1 + numpy.exp(-x64))
    numpy.testing.assert_allclose(gx.astype(F64), g64 * s * (1 - s), atol=1e-3, rtol=4e-3)
    (gx,) = grads(ops.tanh, [x], g)
    numpy.testing.assert_allclose(
        gx.astype(F64), g64 * (1 - numpy.tanh(x64) ** 2), atol=1e-3, rtol=4e-3
    )
