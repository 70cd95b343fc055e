"""conv2d, im2col and same_padding (ops/conv.py) against a direct NumPy reference."""
import numpy
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import minigrad
from helpers.fp16 import F16, F32, FAST, assert_bits, conv_by_hand, grads, nchw, strided, ulps
from minigrad import Tensor, ops
from minigrad.testing import assert_forward, check_backward, noncontiguous


def conv_reference(x, w, b=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """Direct definition in float64: a sum over kernel taps of shifted, strided input slices."""
    (n, _, h, width), (o, cg, kh, kw) = x.shape, w.shape
    top, bottom, left, right = padding
    xp = numpy.pad(x.astype(numpy.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    ho = (h + top + bottom - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (width + left + right - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = numpy.zeros((n, o, ho, wo))
    og = o // groups
    for oc in range(o):
        group_x = xp[:, oc // og * cg:(oc // og + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                window = group_x[
                    :,
                    :,
                    i * dilation[0] : i * dilation[0] + stride[0] * (ho - 1) + 1 : stride[0],
                    j * dilation[1] : j * dilation[1] + stride[1] * (wo - 1) + 1 : stride[1],
                ]
                out[:, oc] += numpy.einsum(
                    "nchw,c->nhw", window, w[oc, :, i, j].astype(numpy.float64)
                )
    return out if b is None else out + b.astype(numpy.float64)[None, :, None, None]


# (x shape, weight shape, keyword arguments for conv2d, the same normalised for the reference)
CASES = {
    "3x3_pad1": ((2, 3, 5, 5), (4, 3, 3, 3), dict(padding=1), dict(padding=(1, 1, 1, 1))),
    "stride2_rect": (
        (1, 2, 7, 6),
        (3, 2, 3, 2),
        dict(stride=2, padding=(1, 0)),
        dict(stride=(2, 2), padding=(1, 1, 0, 0)),
    ),
    "pad4_dilation": (
        (2, 2, 6, 7),
        (2, 2, 2, 3),
        dict(padding=(0, 1, 2, 1), dilation=(2, 1)),
        dict(padding=(0, 1, 2, 1), dilation=(2, 1)),
    ),
    "groups": (
        (2, 4, 5, 4),
        (6, 2, 3, 3),
        dict(groups=2, padding=1, stride=(1, 2)),
        dict(groups=2, padding=(1, 1, 1, 1), stride=(1, 2)),
    ),
    "depthwise_1x1": ((2, 3, 3, 3), (3, 1, 1, 1), dict(groups=3), dict(groups=3)),
}


def _case(name, dtype, seed=0):
    xs, ws, kwargs, ref_kwargs = CASES[name]
    rng = numpy.random.RandomState(seed)
    x, w = rng.standard_normal(xs).astype(dtype), (rng.standard_normal(ws) / 3).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    return x, w, b, kwargs, ref_kwargs


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv2d(name, dtype, device):
    x, w, b, kwargs, ref_kwargs = _case(name, dtype)
    out = ops.conv2d(
        minigrad.Tensor(x, device=device),
        minigrad.Tensor(w, device=device),
        minigrad.Tensor(b, device=device),
        **kwargs,
    )
    # stored channels-last, the order the product writes (ops/windows.py)
    assert out.device == device and out.dtype == dtype
    assert out.data.transpose(0, 2, 3, 1).flags.c_contiguous
    assert_forward(out, conv_reference(x, w, b, **ref_kwargs), dtype)
    tensors = [minigrad.Tensor(a, device=device) for a in (x, w, b)]
    check_backward(lambda x, w, b: ops.conv2d(x, w, b, **kwargs), tensors)
    check_backward(lambda x, w: ops.conv2d(x, w, **kwargs), tensors[:2])


@pytest.mark.parametrize("name", ["3x3_pad1", "groups"])
def test_conv2d_float64_and_noncontiguous(name):
    x, w, b, kwargs, ref_kwargs = _case(name, numpy.float64, seed=1)
    xv = noncontiguous(x)
    wv = numpy.ascontiguousarray(w.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    assert not xv.flags.c_contiguous and not wv.flags.c_contiguous
    assert_forward(
        ops.conv2d(minigrad.Tensor(xv), minigrad.Tensor(wv), minigrad.Tensor(b), **kwargs),
        conv_reference(x, w, b, **ref_kwargs),
        numpy.float64,
    )
    check_backward(lambda x, w, b: ops.conv2d(x, w, b, **kwargs), [xv, wv, b])


@given(
    groups=st.integers(1, 2),
    cg=st.integers(1, 2),
    og=st.integers(1, 2),
    n=st.integers(1, 2),
    size=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    padding=st.tuples(*[st.integers(0, 2)] * 4),
    bias=st.booleans(),
    seed=st.integers(0, 100),
)
def test_conv2d_any_geometry(
    groups, cg, og, n, size, kernel, stride, dilation, padding, bias, seed
):
    extent = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    assume(
        size[0] + padding[0] + padding[1] >= extent[0]
        and size[1] + padding[2] + padding[3] >= extent[1]
    )
    rng = numpy.random.RandomState(seed)
    x = rng.standard_normal((n, cg * groups) + size)
    w = rng.standard_normal((og * groups, cg) + kernel)
    b = rng.standard_normal(og * groups) if bias else None
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    out = ops.conv2d(
        minigrad.Tensor(x), minigrad.Tensor(w), None if b is None else minigrad.Tensor(b), **kwargs
    )
    assert_forward(out, conv_reference(x, w, b, **kwargs), numpy.float64)
    if bias:
        check_backward(lambda x, w, b: ops.conv2d(x, w, b, **kwargs), [x, w, b])
    else:
        check_backward(lambda x, w: ops.conv2d(x, w, **kwargs), [x, w])


def test_fp16_accumulates_in_fp32():
    # 4096 products of 1·(1 + 2^-10): an fp16 running sum would stall at 2048
    x = numpy.ones((1, 1024, 2, 2), numpy.float16)
    w = numpy.full((1, 1024, 2, 2), 1 + 2**-10, numpy.float16)
    out = ops.conv2d(minigrad.Tensor(x), minigrad.Tensor(w))
    assert out.dtype == numpy.float16
    assert out.asnumpy().item() == float(numpy.float16(4096 * (1 + 2**-10)))


def test_two_dtypes_are_refused_outside_autocast_and_run_in_fp16_under_it():
    x, w, _, kwargs, ref_kwargs = _case("3x3_pad1", numpy.float32)
    x16 = minigrad.Tensor(x.astype(numpy.float16))
    with pytest.raises(TypeError, match="conv2d: x has dtype float16 but weight has dtype float32"):
        ops.conv2d(x16, minigrad.Tensor(w), **kwargs)
    with pytest.raises(TypeError, match="x has dtype float32 but bias has dtype float16"):
        ops.conv2d(minigrad.Tensor(x), minigrad.Tensor(w),
                   minigrad.Tensor(numpy.zeros(w.shape[0], numpy.float16)), **kwargs)
    with minigrad.amp.autocast():
        assert ops.conv2d(x16, minigrad.Tensor(w), **kwargs).dtype == numpy.float16


def test_im2col_matches_weight_order():
    x, w, _, _, _ = _case("stride2_rect", numpy.float64)
    cols = ops.im2col(minigrad.Tensor(x), (3, 2), stride=2, padding=(1, 0))
    assert cols.shape == (1, 4, 3, 2 * 3 * 2)
    out = (cols @ w.reshape(3, -1).T).transpose(0, 3, 1, 2)
    numpy.testing.assert_allclose(out, conv_reference(x, w, stride=(2, 2), padding=(1, 1, 0, 0)))


@pytest.mark.parametrize(
    "size,kernel,stride,dilation,expected",
    [
        ((5, 5), 3, 1, 1, (1, 1, 1, 1)),
        ((6, 6), 3, 2, 1, (0, 1, 0, 1)),
        ((7, 4), (2, 3), (3, 1), 1, (0, 1, 1, 1)),
        ((5, 5), 3, 1, 2, (2, 2, 2, 2)),
        ((4, 4), 1, 2, 1, (0, 0, 0, 0)),
    ],
)
def test_same_padding_keeps_ceil_size(size, kernel, stride, dilation, expected):
    pads = ops.same_padding(size, kernel, stride, dilation)
    assert pads == expected
    x = minigrad.Tensor(numpy.zeros((1, 1) + size, numpy.float32))
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    out = ops.conv2d(
        x,
        minigrad.Tensor(numpy.zeros((1, 1, kh, kw), numpy.float32)),
        stride=stride,
        padding=pads,
        dilation=dilation,
    )
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    assert out.shape[2:] == (-(-size[0] // sh), -(-size[1] // sw))


def test_bad_arguments_name_the_problem():
    x = minigrad.Tensor(numpy.zeros((1, 4, 5, 5), numpy.float32))
    w = minigrad.Tensor(numpy.zeros((2, 4, 3, 3), numpy.float32))
    with pytest.raises(ValueError, match=r"x must have 4 dimensions \(N, C, H, W\), got x of"
        r" shape \(4, 5, 5\)"):
        ops.conv2d(minigrad.Tensor(numpy.zeros((4, 5, 5), numpy.float32)), w)
    with pytest.raises(ValueError, match="x has 4 channels.*groups=2 needs 8"):
        ops.conv2d(x, w, groups=2)
    with pytest.raises(ValueError, match=r"bias must have shape \(2,\).*\(3,\)"):
        ops.conv2d(x, w, minigrad.Tensor(numpy.zeros(3, numpy.float32)))
    with pytest.raises(ValueError, match=r"kernel \(7, 7\) with dilation .* must fit the input"):
        ops.conv2d(x, minigrad.Tensor(numpy.zeros((2, 4, 7, 7), numpy.float32)))
    with pytest.raises(ValueError, match="stride must be a positive int"):
        ops.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match="padding must be a non-negative int"):
        ops.conv2d(x, w, padding=(1, 2, 3))
    with pytest.raises(TypeError, match="^conv2d: x must be a float Tensor"):
        ops.conv2d(minigrad.Tensor(numpy.zeros((1, 4, 5, 5), numpy.int32)), w)


@pytest.mark.parametrize("groups", [1, 3])
def test_conv2d_of_an_empty_batch_is_an_empty_batch(groups):
    # PyTorch: a batch of 0 images convolves to a batch of 0 outputs; a reshape(..., -1) of the
    # empty patch matrix raised 'cannot reshape array of size 0 into shape (1,0,newaxis)'
    x = Tensor(numpy.zeros((0, 3, 5, 5), numpy.float32), requires_grad=True)
    w = Tensor(numpy.ones((6, 3 // groups, 3, 3), numpy.float32), requires_grad=True)
    b = Tensor(numpy.ones(6, numpy.float32), requires_grad=True)
    out = ops.conv2d(x, w, b, padding=1, groups=groups)
    assert out.shape == (0, 6, 5, 5)
    out.backward(numpy.zeros(out.shape, numpy.float32))
    assert x.grad.shape == x.shape
    numpy.testing.assert_array_equal(w.grad.asnumpy(), numpy.zeros(w.shape))
    numpy.testing.assert_array_equal(b.grad.asnumpy(), numpy.zeros(6))
    assert ops.im2col(x, 3, padding=1).shape == (0, 5, 5, 27)


def _x(shape=(2, 3)):
    return minigrad.Tensor(numpy.arange(numpy.prod(shape), dtype=numpy.float32).reshape(shape))


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: ops.max_pool2d(_x((1, 1, 4, 4)), 2.5), "kernel_size"),
        (lambda: ops.avg_pool2d(_x((1, 1, 4, 4)), 2, stride=1.5), "stride"),
        (lambda: ops.max_pool2d(_x((1, 1, 4, 4)), 3, padding=1.0), "padding"),
        (lambda: ops.conv2d(_x((1, 1, 4, 4)), _x((1, 1, 2, 2)), stride=1.0), "stride"),
        (lambda: ops.conv2d(_x((1, 1, 4, 4)), _x((1, 1, 2, 2)), dilation=None), "dilation"),
        (lambda: ops.conv2d(_x((1, 1, 4, 4)), _x((1, 1, 2, 2)), padding=0.5), "padding"),
    ],
)
def test_window_sizes_that_are_not_ints_are_type_errors_naming_them(call, name):
    # minigrad._checks' rule: a float (or None) where an int belongs is a TypeError
    with pytest.raises(TypeError, match=name):
        call()


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    groups=st.sampled_from([1, 2]),
    stride=st.sampled_from([1, 2, (2, 1)]),
    dilation=st.sampled_from([1, (1, 2)]),
    pad=st.sampled_from([0, 1, (1, 0, 2, 1)]),
    bias=st.booleans(),
    noncontig=st.booleans(),
)
def test_conv2d_fp16_forward_is_the_fp32_sum_rounded_once(
    seed, groups, stride, dilation, pad, bias, noncontig
):
    rng = numpy.random.default_rng(seed)
    x, w = nchw(rng, (2, 4, 6, 7)), nchw(rng, (4, 4 // groups, 3, 2))
    b = nchw(rng, (4,)) if bias else None
    got = ops.conv2d(
        Tensor(strided(x) if noncontig else x),
        Tensor(w),
        None if b is None else Tensor(b),
        stride=stride,
        padding=pad,
        dilation=dilation,
        groups=groups,
    ).asnumpy()
    p4 = (pad,) * 4 if isinstance(pad, int) else pad
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    exact = conv_by_hand(x, w, b, pair(stride), p4, pair(dilation), groups)
    assert got.dtype == F16 and got.shape == exact.shape
    assert (ulps(got, exact.astype(F16)) <= 1).all()


def test_conv2d_fp16_sum_past_65504_in_between_stays_finite():
    # 60000·1 + 60000·1 - 60000·1 = 60000: an fp16 running sum overflows, fp32 does not
    x = numpy.array([60000, 60000, 60000], F16).reshape(1, 1, 1, 3)
    w = numpy.array([1, 1, -1], F16).reshape(1, 1, 1, 3)
    assert_bits(ops.conv2d(Tensor(x), Tensor(w)).asnumpy(), numpy.full((1, 1, 1, 1), 60000, F16))
    # inf and NaN propagate; a subnormal product survives the fp32 accumulation
    x = numpy.array([numpy.inf, 1, 2**-24, 2**-24], F16).reshape(1, 1, 1, 4)
    w = numpy.array([1, 2**-1], F16).reshape(1, 1, 1, 2)
    got = ops.conv2d(Tensor(x), Tensor(w)).asnumpy().ravel()
    assert (
        got[0] == numpy.inf
        and got[1] == F16.type(2**-24 * 0.5 + 1)
        and got[2] == F16.type(1.5 * 2**-24)
    )


@pytest.mark.parametrize(
    "groups,stride,dilation,pad", [(1, 1, 1, 1), (2, 2, (1, 2), (1, 0, 2, 1)), (4, 1, 2, 2)]
)
def test_conv2d_gradients_fp16_match_float64(groups, stride, dilation, pad):
    rng = numpy.random.default_rng(3)
    x, w, b = nchw(rng, (2, 4, 7, 6)), nchw(rng, (4, 4 // groups, 2, 3)), nchw(rng, (4,))
    fn = lambda x, w, b: ops.conv2d(
        x, w, b, stride=stride, padding=pad, dilation=dilation, groups=groups
    )  # noqa: E731
    check_backward(fn, [x, w, b])


def test_conv2d_gradients_accumulate_in_fp32_and_round_once():
    # every output reads x[0,0,0,2] (kernel 1x5, stride 1): its gradient Σ g·w passes 65504 half way
    x = numpy.zeros((1, 1, 1, 5), F16)
    w = numpy.ones((1, 1, 1, 3), F16)
    g = numpy.array([40000, 40000, -40000], F16).reshape(1, 1, 1, 3)
    gx, gw = grads(lambda x, w: ops.conv2d(x, w), [x, w], g)
    # gx = [g0, g0+g1, g0+g1+g2, g1+g2, g2]: only the middle passes 65504 on the way
    assert_bits(gx, numpy.array([40000, numpy.inf, 40000, 0, -40000], F16).reshape(1, 1, 1, 5))
    # gw = Σ_positions g·x; gb = Σ g: 2048 + 1 + 1 is 2050 (fp16 running sums stall at 2048)
    x = numpy.ones((1, 1, 1, 3), F16)
    w = numpy.ones((1, 1, 1, 1), F16)
    g = numpy.array([2048, 1, 1], F16).reshape(1, 1, 1, 3)
    gx, gw, gb = grads(lambda x, w, b: ops.conv2d(x, w, b), [x, w, numpy.zeros(1, F16)], g)
    assert_bits(gw, numpy.full((1, 1, 1, 1), 2050, F16))
    assert_bits(gb, numpy.array([2050], F16))


def test_conv2d_empty_batch_and_mixed_dtypes():
    w = numpy.ones((3, 2, 3, 3), F16)
    x = Tensor(numpy.zeros((0, 2, 5, 5), F16), requires_grad=True)
    wt = Tensor(w, requires_grad=True)
    out = ops.conv2d(x, wt, padding=1)
    assert out.shape == (0, 3, 5, 5) and out.dtype == F16
    out.sum().backward()
    assert_bits(wt.grad.asnumpy(), numpy.zeros_like(w))
    assert x.grad.shape == (0, 2, 5, 5)
    # under autocast an fp32 weight meets the fp16 input in fp16; each gradient keeps its dtype
    x = Tensor(numpy.ones((1, 2, 3, 3), F16), requires_grad=True)
    w32 = Tensor(w.astype(F32), requires_grad=True)
    with minigrad.amp.autocast():
        out = ops.conv2d(x, w32)
    assert out.dtype == F16
    out.sum().backward()
    assert x.grad.dtype == F16 and w32.grad.dtype == F32


@pytest.mark.parametrize("in_hw, error", [(None, TypeError), ("", TypeError), (4, TypeError),
                                          ((4, 4.0), TypeError), ((4, -1), ValueError),
                                          ((4, 4, 4), ValueError)])
def test_same_padding_checks_in_hw(in_hw, error):
    with pytest.raises(error, match=r"same_padding: in_hw must be a 2-tuple or list of "
                                    r"non-negative ints, got"):
        ops.same_padding(in_hw, 3)


@pytest.mark.parametrize("x, error", [(None, TypeError), ("abc", TypeError), (3.0, ValueError),
                                      (numpy.zeros((4, 4)), ValueError)])
def test_im2col_checks_x(x, error):
    with pytest.raises(error, match=r"(im2col: )?x must be"):
        ops.im2col(x, 2)
