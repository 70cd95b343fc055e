"""The native patch-matrix pass (ops/_image_host.py) against NumPy's copy of the window view.

It only copies, so every bit must match, -0 and NaN payloads included, for every geometry
and input layout; where it does not apply it writes nothing and returns None.
"""
import numpy
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from helpers.layouts import channels_last, layouts
from minigrad import Tensor, _native, ops
from minigrad.ops import _image_host
from minigrad.ops.conv import _windows

F32 = numpy.float32
needs_host = pytest.mark.skipif(_native.host_library() is None,
                                reason="needs the native host library")


def numpy_patches(x, geometry, out_hw, channels):
    stride, padding, dilation, kernel = geometry
    windows = _windows(x, kernel, stride, padding, dilation, out_hw)[..., channels]
    return numpy.ascontiguousarray(windows).reshape(-1, kernel[0] * kernel[1] *
                                                    windows.shape[-1])


def special_values(rng, shape):
    """Random values with -0, infinities and NaNs of several payloads mixed in."""
    x = rng.standard_normal(shape).astype(F32)
    bits = x.view(numpy.uint32)
    specials = numpy.array([0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0xFFA00123],
                           numpy.uint32)
    where = rng.random(shape) < 0.1
    bits[where] = rng.choice(specials, int(where.sum()))
    return x


# conv geometries: batch, channels per group, groups, image, kernel, stride, dilation, padding
GEOMETRY = dict(n=st.integers(1, 3), c=st.integers(1, 6), groups=st.integers(1, 3),
                hw=st.tuples(st.integers(1, 9), st.integers(1, 9)),
                kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
                stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
                dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
                padding=st.tuples(*[st.integers(0, 3)] * 4), seed=st.integers(0, 2**31))


@needs_host
@given(**GEOMETRY, layout=st.sampled_from(["nchw", "channels_last", "strided"]))
def test_patch_matrix_is_numpys_copy_bit_for_bit(n, c, groups, hw, kernel, stride, dilation,
                                                  padding, layout, seed):
    (h, w), (kh, kw), (dh, dw), (top, bottom, left, right) = hw, kernel, dilation, padding
    assume(h + top + bottom >= dh * (kh - 1) + 1 and w + left + right >= dw * (kw - 1) + 1)
    x = layouts(special_values(numpy.random.default_rng(seed), (n, c * groups, h, w)))[layout]
    out_hw = ((h + top + bottom - dh * (kh - 1) - 1) // stride[0] + 1,
              (w + left + right - dw * (kw - 1) - 1) // stride[1] + 1)
    geometry = (stride, padding, dilation, kernel)
    for k in range(groups):
        channels = slice(k * c, (k + 1) * c)
        want = numpy_patches(x, geometry, out_hw, channels)
        out = numpy.full(want.shape, numpy.nan, F32)  # every element must be written
        assert _image_host.patch_matrix(x, geometry, out_hw, out, channels) is out
        numpy.testing.assert_array_equal(out.view(numpy.uint32), want.view(numpy.uint32))


@needs_host
def test_a_padded_window_wider_than_the_image_is_zeros_around_it():
    # every window reaches past both sides (kernel 5 over a 2-wide row, padding 3 and 2)
    x = numpy.arange(1, 9, dtype=F32).reshape(1, 2, 2, 2)
    geometry = ((1, 2), (3, 2, 3, 2), (1, 1), (5, 5))
    out_hw = (2 + 5 - 4, (2 + 5 - 4 - 1) // 2 + 1)
    want = numpy_patches(x, geometry, out_hw, slice(None))
    out = numpy.empty_like(want)
    _image_host.patch_matrix(x, geometry, out_hw, out)
    numpy.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("case", ["float64", "float16", "read-only out", "wrong shape",
                                  "non-contiguous out", "list"])
def test_patch_matrix_declines_what_it_does_not_handle(case):
    x = numpy.ones((1, 2, 4, 4), F32)
    geometry, out_hw = ((1, 1), (0, 0, 0, 0), (1, 1), (3, 3)), (2, 2)
    out = numpy.full((4, 18), 7, F32)
    if case in ("float64", "float16"):
        x = x.astype(case)
    elif case == "read-only out":
        out.flags.writeable = False
    elif case == "wrong shape":
        out = numpy.full((4, 9), 7, F32)
    elif case == "non-contiguous out":
        out = numpy.full((4, 36), 7, F32)[:, ::2]
    else:
        x = x.tolist()
    assert _image_host.patch_matrix(x, geometry, out_hw, out) is None
    assert (out == 7).all()  # nothing written


@needs_host
@pytest.mark.parametrize("layout", ["nchw", "channels_last", "strided"])
@pytest.mark.parametrize("dtype", [numpy.float16, F32])
def test_conv2d_is_the_same_with_and_without_the_native_pass(layout, dtype):
    rng = numpy.random.default_rng(3)
    x = layouts(rng.standard_normal((2, 4, 7, 6)).astype(dtype))[layout]
    w = rng.standard_normal((6, 2, 3, 2)).astype(dtype)
    g = rng.standard_normal((2, 6, 4, 5)).astype(dtype)

    def run():
        xt, wt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
        out = ops.conv2d(xt, wt, stride=(2, 1), padding=(1, 2, 0, 1), dilation=(1, 2), groups=2)
        out.backward(Tensor(g))
        return [a.view(numpy.uint16 if dtype == numpy.float16 else numpy.uint32)
                for a in (out.data, xt.grad.data, wt.grad.data)]
    native = run()
    with _native.numpy_fallback():
        fallback = run()
    for got, want in zip(native, fallback):
        numpy.testing.assert_array_equal(got, want)


@needs_host
@given(**GEOMETRY)
def test_col2im_gives_the_tap_by_tap_adds_bits(n, c, groups, hw, kernel, stride, dilation,
                                               padding, seed):
    (h, w), (kh, kw), (dh, dw), (top, bottom, left, right) = hw, kernel, dilation, padding
    h, w = max(h, dh * (kh - 1) + 1 - top - bottom), max(w, dw * (kw - 1) + 1 - left - right)
    # a 1x1, stride-1, unpadded conv has no sums: its dx is the patch gradients joined (-0 kept)
    assume(kernel != (1, 1) or stride != (1, 1) or any(padding))
    rng = numpy.random.default_rng(seed)
    x = Tensor(numpy.zeros((n, c * groups, h, w), F32), requires_grad=True)
    weight = Tensor(numpy.zeros((c * groups, c, kh, kw), F32))
    conv = ops.conv2d(x, weight, stride=stride, padding=padding, dilation=dilation,
                      groups=groups)._ctx  # its geometry
    rows = (kh * kw, n * conv.out_hw[0] * conv.out_hw[1], c)
    dcols = [special_values(rng, rows) for _ in range(groups)]
    native = _image_host.col2im(dcols, conv.x_shape, conv.geometry, conv.out_hw)
    assert native is not None
    native = native.transpose(0, 3, 1, 2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_image_host, "col2im", lambda *args: None)
        with numpy.errstate(invalid="ignore"):  # inf - inf: NumPy's warning
            want = conv._col2im(dcols)
    # where two NaNs meet in a sum, the add instruction's operand order picks the payload
    nan = numpy.isnan(want)
    numpy.testing.assert_array_equal(numpy.isnan(native), nan)
    numpy.testing.assert_array_equal(numpy.where(nan, 0, native).view(numpy.uint32),
                                     numpy.where(nan, 0, want).view(numpy.uint32))


@pytest.mark.parametrize("case", ["float64", "wrong shape", "non-contiguous"])
def test_col2im_declines_what_it_does_not_handle(case):
    geometry = ((2, 2), (1, 1, 1, 1), (1, 1), (3, 3))
    d = numpy.ones((9, 2 * 2 * 2, 3), F32)
    d = {"float64": d.astype(numpy.float64), "wrong shape": d[:, :4],
         "non-contiguous": numpy.ones((9, 8, 6), F32)[:, :, ::2]}[case]
    assert _image_host.col2im([d], (2, 3, 4, 4), geometry, (2, 2)) is None


@pytest.mark.parametrize("x_shape, w_shape", [((1, 0, 5, 5), (4, 0, 3, 3)),  # no channels
                                              ((1, 2, 5, 0), (4, 2, 3, 3))])  # no columns
def test_col2im_of_an_empty_input_is_an_empty_gradient(x_shape, w_shape):
    x = Tensor(channels_last(numpy.zeros(x_shape, F32)), requires_grad=True)
    ops.conv2d(x, Tensor(numpy.ones(w_shape, F32)), stride=2, padding=2).sum().backward()
    assert x.grad.shape == x_shape and not x.grad.data.any()
