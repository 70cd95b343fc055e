"""The native max-pooling passes (ops/_pool_host.py) against pooling's NumPy path.

Both passes only compare, select and (for overlapping windows) add in the NumPy path's order,
so every bit must match: the maximum under NumPy's tie and NaN rules (NaN payloads, -0 and
infinities included), the first-maximum argmax, and the gradient, for any geometry, padding,
stride and input strides, fp16 and fp32 (in a gradient summed over overlapping windows, any
NaN matches any NaN). Where a pass does not apply it returns None.
"""
import contextlib

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.layouts import channels_last, is_channels_last
from minigrad import Tensor, _native, ops
from minigrad.ops import _pool_host, pooling

F16, F32 = numpy.float16, numpy.float32
needs_host = pytest.mark.skipif(_native.host_library() is None,
                                reason="needs the native host library")


@contextlib.contextmanager
def numpy_path():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pooling._pool_host, "max_pool", lambda *args: None)
        patch.setattr(pooling._pool_host, "max_pool_grad", lambda *args: None)
        yield


@contextlib.contextmanager
def native_results():
    """How many times each native pass returned a result (not None) within the block."""
    counts = {"max_pool": 0, "max_pool_grad": 0}
    with pytest.MonkeyPatch.context() as patch:
        for name in counts:
            def counted(*args, real=getattr(_pool_host, name), name=name):
                result = real(*args)
                counts[name] += result is not None
                return result
            patch.setattr(_pool_host, name, counted)
        yield counts


def with_specials(rng, x):
    """``x`` (float16 or float32) with -0, ±inf, NaNs of several payloads and ties mixed in."""
    bits = x.view(f"u{x.itemsize}")
    specials = (numpy.array([0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0xFFA00123],
                            numpy.uint32) if x.itemsize == 4 else
                numpy.array([0x8000, 0x7C00, 0xFC00, 0x7E01, 0xFD23], numpy.uint16))
    where = rng.random(x.shape) < 0.1
    bits[where] = rng.choice(specials, int(where.sum()))
    x[rng.random(x.shape) < 0.2] = 0  # ties of zeros, as after a ReLU
    return x


def same_bits(got, want, any_nan=False):
    """Every bit equal; with ``any_nan``, a NaN matches any NaN (where two NaN shares meet in a
    sum, which payload survives is the add instruction's operand order, the compiler's choice
    in both paths)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    kind = f"u{got.dtype.itemsize}"
    if any_nan:
        nan = numpy.isnan(got)
        numpy.testing.assert_array_equal(nan, numpy.isnan(want))
        got, want = numpy.where(nan, 0, got), numpy.where(nan, 0, want)
    numpy.testing.assert_array_equal(got.view(kind), want.view(kind))


def pool_and_grad(x, g, **geometry):
    t = Tensor(x, requires_grad=True)
    out = ops.max_pool2d(t, **geometry)
    argmax = out._ctx.argmax  # a backward pass releases it
    out.backward(Tensor(g))
    return out.data, argmax, t.grad.data


def channels_adjacent_with_gaps(x):
    """``x``'s values in an (N, C, H, W) view whose channels are adjacent but whose pixels are
    not (every other column of a wider channels-last array)."""
    n, c, h, w = x.shape
    wide = numpy.zeros((n, h, 2 * w, c), x.dtype)
    wide[:, :, ::2] = x.transpose(0, 2, 3, 1)
    return wide[:, :, ::2].transpose(0, 3, 1, 2)


@needs_host
@given(n=st.integers(1, 2), c=st.integers(1, 40), hw=st.tuples(st.integers(1, 9),
                                                                  st.integers(1, 9)),
       kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       stride=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       padding=st.tuples(*[st.integers(0, 2)] * 4), dtype=st.sampled_from([F16, F32]),
       seed=st.integers(0, 2**31))
def test_native_passes_give_the_numpy_paths_bits(n, c, hw, kernel, stride, padding, dtype, seed):
    (kh, kw), (top, bottom, left, right) = kernel, padding
    # PyTorch's rule: padding at most half the kernel; the padded image holds one window
    padding = top, bottom, left, right = (min(top, kh // 2), min(bottom, kh // 2),
                                          min(left, kw // 2), min(right, kw // 2))
    h, w = max(hw[0], kh - top - bottom), max(hw[1], kw - left - right)
    rng = numpy.random.default_rng(seed)
    x = channels_last(with_specials(rng, rng.standard_normal((n, c, h, w)).astype(dtype)))
    geometry = dict(kernel_size=kernel, stride=stride, padding=padding)
    with numpy_path():
        out_shape = ops.max_pool2d(Tensor(x), **geometry).shape
    g = channels_last(with_specials(rng, rng.standard_normal(out_shape).astype(dtype)))
    with native_results() as used:
        native = pool_and_grad(x, g, **geometry)
    assert used == {"max_pool": 1, "max_pool_grad": 1}
    with numpy_path():
        reference = pool_and_grad(x, g, **geometry)
    overlapping = stride[0] < kh or stride[1] < kw
    for got, want, summed in zip(native, reference, (False, False, overlapping)):
        same_bits(got, want, any_nan=summed)
    assert is_channels_last(native[0]) and is_channels_last(native[1])
    if dtype == F32:  # the pass reads any pixel strides: channels adjacent, pixels apart
        out, argmax = _pool_host.max_pool(channels_adjacent_with_gaps(x), kernel, stride,
                                          padding, out_shape[2:])
        same_bits(out, reference[0])
        same_bits(argmax, reference[1])


@needs_host
def test_a_window_of_nans_and_infinities_keeps_numpys_maximum_and_first_argmax():
    nan1, nan2 = (numpy.array([b], numpy.uint32).view(F32)[0] for b in (0x7FC00001, 0xFFC00002))
    windows = [[1, nan1, nan2, 5], [nan1, 7, 7, 2], [-numpy.inf] * 4, [0.0, -0.0, -0.0, 0.0],
               [-0.0, 0.0, 3, 3], [numpy.inf, 1, numpy.inf, nan2]]
    x = numpy.array(windows, F32).reshape(1, 6, 2, 2)
    for layout in (channels_last(x), channels_adjacent_with_gaps(x)):
        out, argmax = _pool_host.max_pool(layout, (2, 2), (2, 2), (0, 0, 0, 0), (1, 1))
        with numpy_path():
            want = pool_and_grad(x, numpy.ones((1, 6, 1, 1), F32), kernel_size=2)
        same_bits(out, want[0])
        numpy.testing.assert_array_equal(argmax.ravel(), [0, 0, 0, 0, 2, 0])


@needs_host
def test_windows_that_skip_elements_give_them_a_zero_gradient():
    # kernel 2, stride 3: every third row and column is read by no window
    x = channels_last(numpy.arange(2 * 3 * 8 * 8, dtype=F32).reshape(2, 3, 8, 8) % 7)
    g = channels_last(numpy.full((2, 3, 3, 3), -2.5, F32))
    out, _, dx = pool_and_grad(x, g, kernel_size=2, stride=3)
    assert (dx[:, :, 2::3] == 0).all() and (dx[:, :, :, 2::3] == 0).all()
    assert (dx == -2.5).sum() == g.size and not numpy.signbit(dx[dx == 0]).any()


@needs_host
@pytest.mark.parametrize("case", ["nchw", "float64", "float16", "256 taps"])
def test_max_pool_declines_what_it_does_not_handle(case):
    x = channels_last(numpy.ones((1, 2, 16, 16), F32))
    kernel = (16, 16) if case == "256 taps" else (2, 2)
    x = {"nchw": numpy.ascontiguousarray(x), "float64": x.astype(numpy.float64),
         "float16": x.astype(F16)}.get(case, x)
    out_hw = (1, 1) if case == "256 taps" else (8, 8)
    assert _pool_host.max_pool(x, kernel, kernel, (0, 0, 0, 0), out_hw) is None


@needs_host
@pytest.mark.parametrize("case", ["nchw g", "overlapping float16", "float64", "argmax dtype",
                                  "shapes"])
def test_max_pool_grad_declines_what_it_does_not_handle(case):
    g = channels_last(numpy.ones((1, 2, 4, 4), F32))
    argmax = channels_last(numpy.zeros((1, 2, 4, 4), numpy.uint8))
    disjoint = True
    if case == "nchw g":
        g = numpy.ascontiguousarray(g)
    elif case == "overlapping float16":
        g, disjoint = g.astype(F16), False
    elif case == "float64":
        g = g.astype(numpy.float64)
    elif case == "argmax dtype":
        argmax = argmax.astype(numpy.uint16)
    else:
        argmax = argmax[:, :, :3]
    assert _pool_host.max_pool_grad(g, argmax, (1, 2, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0),
                                    disjoint) is None


@pytest.mark.parametrize("shape, geometry", [
    ((1, 0, 4, 4), dict(kernel_size=2)),  # no channels
    ((1, 2, 3, 0), dict(kernel_size=(1, 3), stride=1, padding=(0, 0, 2, 2))),  # no columns
])
def test_empty_batches_pool_and_give_empty_gradients(shape, geometry):
    x = channels_last(numpy.zeros(shape, F32))
    out_shape = ops.max_pool2d(Tensor(x), **geometry).shape
    _, _, dx = pool_and_grad(x, channels_last(numpy.ones(out_shape, F32)), **geometry)
    assert dx.shape == shape
