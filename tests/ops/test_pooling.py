"""max_pool2d and avg_pool2d (ops/pooling.py) against a window-by-window NumPy reference."""
import numpy
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import minigrad
from helpers.fp16 import (
    F16,
    F64,
    FAST,
    assert_bits,
    assert_close_to_rounded,
    grads,
    nchw,
    strided,
    ulps,
)
from minigrad import Tensor, ops
from minigrad.testing import assert_forward, check_backward, noncontiguous


def pool_reference(x, kernel, stride, padding, reduce, fill):
    """Loop over output pixels; ``fill`` pads (nan: excluded from an average)."""
    (kh, kw), (sh, sw), (top, bottom, left, right) = kernel, stride, padding
    xp = numpy.pad(x.astype(numpy.float64), ((0, 0), (0, 0), (top, bottom), (left, right)),
                   constant_values=fill)
    ho, wo = (xp.shape[2] - kh) // sh + 1, (xp.shape[3] - kw) // sw + 1
    out = numpy.empty(x.shape[:2] + (ho, wo))
    for i in range(ho):
        for j in range(wo):
            out[:, :, i, j] = reduce(xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw], axis=(2, 3))
    return out


# (kwargs for the op, kernel, stride, (top, bottom, left, right)) on a (2, 3, 7, 6) input
CASES = {
    "2x2": (dict(kernel_size=2), (2, 2), (2, 2), (0, 0, 0, 0)),
    "3x3_s2_p1": (dict(kernel_size=3, stride=2, padding=1), (3, 3), (2, 2), (1, 1, 1, 1)),
    "overlap_rect": (dict(kernel_size=(3, 2), stride=(1, 2)), (3, 2), (1, 2), (0, 0, 0, 0)),
    "pad4": (dict(kernel_size=3, stride=2, padding=(0, 1, 1, 0)), (3, 3), (2, 2), (0, 1, 1, 0)),
}


def _distinct(shape, dtype, seed=0):
    # a permutation: no ties, so the max's gradient is well defined for the numerical check
    values = numpy.random.RandomState(seed).permutation(numpy.prod(shape)).reshape(shape)
    return (values / 16.0).astype(dtype)


@pytest.mark.parametrize("name", sorted(CASES))
def test_max_pool2d(name, dtype, device):
    kwargs, kernel, stride, pads = CASES[name]
    x = _distinct((2, 3, 7, 6), dtype)
    out = ops.max_pool2d(minigrad.Tensor(x, device=device), **kwargs)
    assert out.device == device
    assert_forward(out, pool_reference(x, kernel, stride, pads, numpy.max, -numpy.inf), dtype)
    check_backward(
        lambda t: ops.max_pool2d(t, **kwargs), [minigrad.Tensor(x, device=device)], eps=1e-2
    )


@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("name", sorted(CASES))
def test_avg_pool2d(name, include_pad, dtype, device):
    kwargs, kernel, stride, pads = CASES[name]
    x = numpy.random.RandomState(1).standard_normal((2, 3, 7, 6)).astype(dtype)
    out = ops.avg_pool2d(minigrad.Tensor(x, device=device), count_include_pad=include_pad, **kwargs)
    expected = pool_reference(
        x,
        kernel,
        stride,
        pads,
        numpy.mean if include_pad else numpy.nanmean,
        0.0 if include_pad else numpy.nan,
    )
    assert_forward(out, expected, dtype)
    check_backward(
        lambda t: ops.avg_pool2d(t, count_include_pad=include_pad, **kwargs),
        [minigrad.Tensor(x, device=device)],
    )


@pytest.mark.parametrize("op", [ops.max_pool2d, ops.avg_pool2d])
def test_noncontiguous_and_float64(op):
    x = _distinct((2, 3, 6, 5), numpy.float64)
    for view in (noncontiguous(x), x.transpose(0, 1, 3, 2)):
        reduce = numpy.max if op is ops.max_pool2d else numpy.mean
        assert_forward(
            op(minigrad.Tensor(view), 2, 1, 1),
            pool_reference(
                view,
                (2, 2),
                (1, 1),
                (1, 1, 1, 1),
                reduce,
                -numpy.inf if op is ops.max_pool2d else 0.0,
            ),
            numpy.float64,
        )
        check_backward(lambda t: op(t, 2, 1, 1), [view], eps=1e-2)


@given(
    size=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    padding=st.tuples(*[st.integers(0, 2)] * 4),
    include_pad=st.booleans(),
    seed=st.integers(0, 100),
)
def test_pooling_any_geometry(size, kernel, stride, padding, include_pad, seed):
    assume(max(padding[:2]) < kernel[0] and max(padding[2:]) < kernel[1])
    assume(
        size[0] + padding[0] + padding[1] >= kernel[0]
        and size[1] + padding[2] + padding[3] >= kernel[1]
    )
    x = _distinct((2, 2) + size, numpy.float64, seed)
    kwargs = dict(kernel_size=kernel, stride=stride, padding=padding)
    assert_forward(
        ops.max_pool2d(minigrad.Tensor(x), **kwargs),
        pool_reference(x, kernel, stride, padding, numpy.max, -numpy.inf),
        numpy.float64,
    )
    check_backward(lambda t: ops.max_pool2d(t, **kwargs), [x], eps=1e-2)
    avg = lambda t: ops.avg_pool2d(t, count_include_pad=include_pad, **kwargs)
    assert_forward(
        avg(minigrad.Tensor(x)),
        pool_reference(
            x,
            kernel,
            stride,
            padding,
            numpy.mean if include_pad else numpy.nanmean,
            0.0 if include_pad else numpy.nan,
        ),
        numpy.float64,
    )
    check_backward(avg, [x])


def test_max_pool_ties_send_the_gradient_to_the_first_maximum():
    x = minigrad.Tensor(numpy.ones((1, 1, 2, 2), numpy.float32), requires_grad=True)
    ops.max_pool2d(x, 2).sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy()[0, 0], [[1, 0], [0, 0]])


def test_fp16_average_accumulates_in_fp32():
    x = numpy.full((1, 1, 64, 64), 1 + 2**-10, numpy.float16)
    x[0, 0, 0, 0] = 2048
    out = ops.avg_pool2d(minigrad.Tensor(x), 64)
    assert out.dtype == numpy.float16
    expected = (2048 + 4095 * (1 + 2**-10)) / 4096
    assert abs(out.asnumpy().item() - expected) < 1e-3


@pytest.mark.parametrize("op", [ops.max_pool2d, ops.avg_pool2d])
def test_bad_arguments(op):
    x = minigrad.Tensor(numpy.zeros((1, 1, 4, 4), numpy.float32))
    with pytest.raises(ValueError, match=r"x must have 4 dimensions \(N, C, H, W\), got x of"
        r" shape \(4, 4\)"):
        op(minigrad.Tensor(numpy.zeros((4, 4), numpy.float32)), 2)
    with pytest.raises(ValueError, match=r"padding must be smaller than the kernel size \(2, 2\) "
                                         r"on each side \(padding \(1, 1, 2, 2\)\), got \[1, 2\]"):
        op(x, 2, padding=[1, 2])
    with pytest.raises(ValueError, match="kernel_size must be a positive int"):
        op(x, 0)
    with pytest.raises(ValueError, match=r"kernel_size \(5, 5\) with dilation .* must fit"):
        op(x, 5)


def pool_taps(shape, kernel, stride, pad):
    """(i, j, rows, cols) of every tap on the padded input, as the docstrings define windows."""
    (kh, kw), (sh, sw) = kernel, stride
    hp, wp = shape[2] + pad[0] + pad[1], shape[3] + pad[2] + pad[3]
    ho, wo = (hp - kh) // sh + 1, (wp - kw) // sw + 1
    for i in range(kh):
        for j in range(kw):
            yield slice(i, i + sh * (ho - 1) + 1, sh), slice(j, j + sw * (wo - 1) + 1, sw)


def pool_by_hand(x, g, kernel, stride, pad, op):
    """Forward and the float64 backward of max/avg pooling (max: first maximum in tap order)."""
    top, bottom, left, right = pad
    fill = -numpy.inf if op == "max" else 0
    xp = numpy.pad(
        x.astype(F64), ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill
    )
    taps = list(pool_taps(x.shape, kernel, stride, pad))
    stack = numpy.stack([xp[:, :, r, c] for r, c in taps])
    dx = numpy.zeros(xp.shape)
    if op == "max":
        out = stack.max(0)
        first = numpy.argmax(stack == out, axis=0)
        for k, (r, c) in enumerate(taps):
            dx[:, :, r, c] += numpy.where(first == k, g.astype(F64), 0)
    else:
        out = stack.sum(0) / len(taps)
        for r, c in taps:
            dx[:, :, r, c] += g.astype(F64) / len(taps)
    return out, dx[:, :, top : top + x.shape[2], left : left + x.shape[3]]


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    kernel=st.sampled_from([(2, 2), (3, 3), (2, 3)]),
    stride=st.sampled_from([(1, 1), (2, 1), (2, 2)]),
    pad=st.sampled_from([(0, 0, 0, 0), (1, 0, 1, 1)]),
    noncontig=st.booleans(),
)
def test_pool_fp16_forward_and_backward_follow_the_rule(seed, kernel, stride, pad, noncontig):
    rng = numpy.random.default_rng(seed)
    x = nchw(rng, (2, 2, 7, 6), 1000)
    x[rng.random(x.shape) < 0.1] = F16.type(2**-24)
    x[rng.random(x.shape) < 0.2] = F16.type(7)  # ties: the first maximum takes the gradient
    for op, fn in (("max", ops.max_pool2d), ("avg", ops.avg_pool2d)):
        out_shape = pool_by_hand(x, numpy.zeros(1), kernel, stride, pad, op)[0].shape
        g = nchw(rng, out_shape, 20000)
        out, dx = pool_by_hand(x, g, kernel, stride, pad, op)
        t = Tensor(strided(x) if noncontig else x, requires_grad=True)
        y = fn(t, kernel, stride, pad)
        with numpy.errstate(all="ignore"):
            y.backward(Tensor(g))
        if op == "max":
            assert_bits(y.asnumpy(), out.astype(F16))
        else:
            assert (ulps(y.asnumpy(), out.astype(F16)) <= 1).all()
        # the overlapping windows' gradients add up in fp32 and are rounded once
        assert_close_to_rounded(t.grad.asnumpy(), dx, 1 if op == "avg" else 0)


def test_max_pool_gradient_of_overlapping_windows_sums_in_fp32():
    x = numpy.array([0, 5, 0], F16).reshape(1, 1, 1, 3)
    for g, want in (([-40000, 40000, 40000], 40000), ([1, 1, 2048], 2050)):
        (gx,) = grads(
            lambda t: ops.max_pool2d(t, (1, 3), 1, (0, 0, 1, 1)),
            [x],
            numpy.array(g, F16).reshape(1, 1, 1, 3),
        )
        assert_bits(gx, numpy.array([0, want, 0], F16).reshape(1, 1, 1, 3))


def test_avg_pool_gradient_is_the_fp32_sum_of_the_shares_rounded_once():
    # each x[1] gets g/3 from three windows: (1 + 1 + 1)/3 = 1 exactly; 3·fp16(1/3) = 0.99951
    x = numpy.zeros((1, 1, 1, 3), F16)
    (gx,) = grads(
        lambda t: ops.avg_pool2d(t, (1, 3), 1, (0, 0, 1, 1)), [x], numpy.ones((1, 1, 1, 3), F16)
    )
    assert_bits(gx, numpy.array([2 / 3, 1, 2 / 3]).astype(F16).reshape(1, 1, 1, 3))


def test_pool_inf_nan_and_empty():
    x = numpy.array([[1, numpy.nan], [numpy.inf, -numpy.inf]], F16).reshape(1, 1, 2, 2)
    assert numpy.isnan(ops.max_pool2d(Tensor(x), (1, 2)).asnumpy()[0, 0, 0, 0])
    assert ops.max_pool2d(Tensor(x), (1, 2)).asnumpy()[0, 0, 1, 0] == numpy.inf
    with numpy.errstate(invalid="ignore"):  # inf + -inf: NaN, with NumPy's warning
        assert numpy.isnan(ops.avg_pool2d(Tensor(x), (1, 2)).asnumpy()).all()
    # fp16 avg of values near 65504 does not overflow in its fp32 sum
    big = numpy.full((1, 1, 2, 2), 65504, F16)
    assert_bits(ops.avg_pool2d(Tensor(big), 2).asnumpy(), numpy.full((1, 1, 1, 1), 65504, F16))
    for fn in (ops.max_pool2d, ops.avg_pool2d):
        t = Tensor(numpy.zeros((0, 3, 4, 4), F16), requires_grad=True)
        y = fn(t, 2)
        assert y.shape == (0, 3, 2, 2)
        y.sum().backward()
        assert t.grad.shape == (0, 3, 4, 4)
