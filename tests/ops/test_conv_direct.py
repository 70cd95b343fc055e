"""conv2d's direct kernel (kernels/conv_host.cpp through ops/_image_host.py) against its patch
matrix path, and its gradients against the float64 checker.

The direct kernel serves one-group, undilated convolutions with at most 64 input and output
channels, output channels a multiple of 16, and a kernel larger than 1x1. It sums the same
products in another order than the BLAS, so its results agree with the patch-matrix path to the
dtype's rounding; the input's memory layout changes none of its bits (the output gradient's
layout changes the order of the bias gradient's sum, as on every path).
"""
import numpy
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from helpers.fp16 import F16, F32, ulps
from helpers.layouts import layouts
from minigrad import Tensor, _native, ops
from minigrad.ops import _image_host
from minigrad.testing import check_backward

pytestmark = pytest.mark.skipif(_native.host_library() is None,
                                reason="needs the native host library")


def run(x, w, b, g, **kwargs):
    """Output and gradients (x, w, b) of conv2d for the output gradient ``g``."""
    tensors = [Tensor(a, requires_grad=True) for a in (x, w, b)]
    out = ops.conv2d(*tensors, **kwargs)
    out.backward(Tensor(g))
    return [out.data] + [t.grad.data for t in tensors]


def run_both(monkeypatch, *args, **kwargs):
    """(direct, patch-matrix path) results of ``run``; fails unless the direct kernel ran."""
    calls = []
    direct_conv = _image_host.direct_conv
    monkeypatch.setattr(_image_host, "direct_conv", lambda *a: calls.append(1) or direct_conv(*a))
    direct = run(*args, **kwargs)
    assert calls, "the direct kernel did not run"
    monkeypatch.setattr(_image_host, "direct_applies", lambda *a: False)
    return direct, run(*args, **kwargs)


def assert_close(got, want, dtype):
    """Within fp32's rounding of sums of a few thousand terms of the arrays' scale; fp16: that,
    plus one fp16 step for the final rounding (a result near zero, a difference of the sum's
    terms, may land a few fp16 steps away after its fp32 sums differ in the last bit)."""
    scale = max(float(numpy.abs(want).max()), 1.0)
    if dtype == F16:
        diff = numpy.abs(got.astype(numpy.float64) - want)
        near = diff <= 2e-6 * scale + numpy.spacing(numpy.abs(want))
        assert ((ulps(got, want) <= 1) | near).all(), (got, want)
    else:
        numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * scale)


def operands(rng, n, c, o, hw, kernel, dtype):
    x = rng.standard_normal((n, c, *hw)).astype(dtype)
    w = (rng.standard_normal((o, c, *kernel)) / numpy.sqrt(c * kernel[0] * kernel[1]))
    return x, w.astype(dtype), rng.standard_normal(o).astype(dtype)


@given(n=st.integers(1, 2), c=st.sampled_from([1, 3, 16, 24, 64]),
       o=st.sampled_from([16, 48, 64]),
       hw=st.tuples(st.integers(1, 9), st.integers(1, 14)),
       kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)).filter(lambda k: k != (1, 1)),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       padding=st.tuples(*[st.integers(0, 3)] * 4), dtype=st.sampled_from([F16, F32]),
       seed=st.integers(0, 2**31))
def test_direct_kernel_agrees_with_the_patch_matrix_path(n, c, o, hw, kernel, stride, padding,
                                                         dtype, seed):
    (h, w), (kh, kw), (top, bottom, left, right) = hw, kernel, padding
    assume(h + top + bottom >= kh and w + left + right >= kw)
    rng = numpy.random.default_rng(seed)
    x, wt, b = operands(rng, n, c, o, hw, kernel, dtype)
    out_hw = ((h + top + bottom - kh) // stride[0] + 1, (w + left + right - kw) // stride[1] + 1)
    g = rng.standard_normal((n, o, *out_hw)).astype(dtype)
    with pytest.MonkeyPatch.context() as patch:
        direct, patches = run_both(patch, x, wt, b, g, stride=stride, padding=padding)
    for got, want in zip(direct, patches):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert_close(got, want, dtype)


@pytest.mark.parametrize("layout", ["channels_last", "strided"])
@pytest.mark.parametrize("dtype", [F16, F32])
def test_the_input_layout_changes_no_bit(layout, dtype):
    rng = numpy.random.default_rng(5)
    x, w, b = operands(rng, 2, 16, 32, (7, 6), (3, 3), dtype)
    g = rng.standard_normal((2, 32, 7, 6)).astype(dtype)
    want = run(x, w, b, g, padding=1)
    got = run(layouts(x)[layout], w, b, g, padding=1)
    for a, e in zip(got, want):
        numpy.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("dtype", [F16, F32])
@pytest.mark.parametrize("stride, padding", [((1, 1), (1, 1, 1, 1)), ((2, 2), (1, 0, 1, 0)),
                                             ((1, 2), (0, 2, 1, 1))])
@pytest.mark.parametrize("c", [3, 16])
def test_direct_gradients_match_the_float64_checker(dtype, stride, padding, c):
    """Also with 3 input channels, whose dx takes the tap products at every stride."""
    rng = numpy.random.default_rng(7)
    x, w, b = operands(rng, 2, c, 16, (6, 5), (3, 2), F32)
    check_backward(lambda x, w, b: ops.conv2d(x, w, b, stride=stride, padding=padding),
                   [x, w, b], dtype=dtype)


def test_what_the_direct_kernel_does_not_serve_takes_the_patch_matrix_path(monkeypatch):
    calls = []
    direct_conv = _image_host.direct_conv
    monkeypatch.setattr(_image_host, "direct_conv", lambda *a: calls.append(1) or direct_conv(*a))
    rng = numpy.random.default_rng(0)
    for c, o, kernel, kwargs in ((16, 16, (1, 1), {}), (16, 8, (3, 3), {}),
                                 (16, 128, (3, 3), {}), (128, 64, (3, 3), {}),
                                 (32, 24, (3, 3), {}),
                                 (32, 32, (3, 3), {"groups": 2}),
                                 (16, 16, (3, 3), {"dilation": 2})):
        groups = kwargs.get("groups", 1)
        x = rng.standard_normal((1, c, 6, 6)).astype(F32)
        w = rng.standard_normal((o, c // groups, *kernel)).astype(F32)
        ops.conv2d(Tensor(x), Tensor(w), **kwargs)
        ops.conv2d(Tensor(x.astype(numpy.float64)), Tensor(w.astype(numpy.float64)), **kwargs)
    assert not calls
    with _native.numpy_fallback():
        x = rng.standard_normal((1, 16, 6, 6)).astype(F32)
        assert not _image_host.direct_applies(x, numpy.ones((16, 16, 3, 3), F32), 1, (1, 1))


def test_direct_kernels_refuse_arrays_they_cannot_read():
    x = numpy.zeros((1, 5, 5, 16), F32)
    w = numpy.zeros((3, 3, 16, 16), F32)
    with pytest.raises(ValueError, match="C-ordered float32"):
        _image_host.direct_conv(x[:, ::2], w, (1, 1))
    with pytest.raises(ValueError, match="C-ordered float32"):
        _image_host.direct_conv(x, w.astype(numpy.float64), (1, 1))
    with pytest.raises(ValueError, match="multiple of 16"):
        _image_host.direct_weight_grad(x, numpy.zeros((1, 3, 3, 8), F32), (3, 3), (1, 1))
    for bad in (numpy.zeros((3, 3, 8, 16), F32), numpy.zeros((3, 16, 16), F32)):
        with pytest.raises(ValueError, match="matching shapes"):  # other channels; not 4-D
            _image_host.direct_conv(x, bad, (1, 1))
    with pytest.raises(ValueError, match="must fit the input"):  # a kernel past x
        _image_host.direct_conv(x, numpy.zeros((6, 6, 16, 16), F32), (1, 1))
    with pytest.raises(ValueError, match="matching shapes"):  # g not (1, 3, 3, O)
        _image_host.direct_weight_grad(x, numpy.zeros((1, 4, 3, 16), F32), (3, 3), (1, 1))
