"""Review, session 3p: the fp16 battery of session 3n, over the ops it did not cover.

conv2d, max/avg pooling, batch/layer norm, dropout, embedding, concat/stack/split, the shape ops
and getitem, and the nn layers over them. Forward: fp16 results against each op's documented
rule computed by hand (float64 by hand, rounded once to fp16; within one fp16 step where the
accumulation order is free, bit for bit where the rule fixes it). Backward: the float64
central difference (``check_backward``) and, where the rule says 'accumulate in fp32, round
once', the float64 gradient rounded to fp16. Adversarial values: sums that overflow fp16 only
part-way, many repeated ids/indices, subnormals, inf/NaN, empty and non-contiguous inputs.
"""
import numpy
import pytest
from hypothesis import given, settings, strategies as st

import minigrad
from minigrad import Tensor, nn, ops
from minigrad.testing import check_backward
from test_review_session3n import F16, F32, F64, assert_bits, assert_close_to_rounded, grads, ulps

FAST = settings(max_examples=15, deadline=None)


def nchw(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F16)


def strided(x):
    """``x``'s values in a non-contiguous view (every other element of the last axis)."""
    big = numpy.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    big[..., ::2] = x
    return big[..., ::2]


# ---- conv2d ------------------------------------------------------------------------------------

def conv_by_hand(x, w, b, stride, pad, dilation, groups):
    """The documented sum, in float64: out[n,o,h,w] = b[o] + Σ W[o,c,i,j]·x_pad[n, g·Cg + c, ...]."""
    x, w = x.astype(F64), w.astype(F64)
    top, bottom, left, right = pad
    xp = numpy.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, hp, wp = xp.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    ho, wo = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    out = numpy.zeros((n, o, ho, wo))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i * dh:i * dh + sh * (ho - 1) + 1:sh,
                           j * dw:j * dw + sw * (wo - 1) + 1:sw]
                out[:, oc] += numpy.einsum("nchw,c->nhw", patch, w[oc, :, i, j])
    return out if b is None else out + b.astype(F64)[None, :, None, None]


@FAST
@given(seed=st.integers(0, 2 ** 32 - 1), groups=st.sampled_from([1, 2]), stride=st.sampled_from([1, 2, (2, 1)]),
       dilation=st.sampled_from([1, (1, 2)]), pad=st.sampled_from([0, 1, (1, 0, 2, 1)]),
       bias=st.booleans(), noncontig=st.booleans())
def test_conv2d_fp16_forward_is_the_fp32_sum_rounded_once(seed, groups, stride, dilation, pad, bias, noncontig):
    rng = numpy.random.default_rng(seed)
    x, w = nchw(rng, (2, 4, 6, 7)), nchw(rng, (4, 4 // groups, 3, 2))
    b = nchw(rng, (4,)) if bias else None
    got = ops.conv2d(Tensor(strided(x) if noncontig else x), Tensor(w), None if b is None else Tensor(b),
                     stride=stride, padding=pad, dilation=dilation, groups=groups).asnumpy()
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
    x = numpy.array([numpy.inf, 1, 2 ** -24, 2 ** -24], F16).reshape(1, 1, 1, 4)
    w = numpy.array([1, 2 ** -1], F16).reshape(1, 1, 1, 2)
    got = ops.conv2d(Tensor(x), Tensor(w)).asnumpy().ravel()
    assert got[0] == numpy.inf and got[1] == F16.type(2 ** -24 * 0.5 + 1) and got[2] == F16.type(1.5 * 2 ** -24)


@pytest.mark.parametrize("groups,stride,dilation,pad", [(1, 1, 1, 1), (2, 2, (1, 2), (1, 0, 2, 1)), (4, 1, 2, 2)])
def test_conv2d_gradients_fp16_match_float64(groups, stride, dilation, pad):
    rng = numpy.random.default_rng(3)
    x, w, b = nchw(rng, (2, 4, 7, 6)), nchw(rng, (4, 4 // groups, 2, 3)), nchw(rng, (4,))
    fn = lambda x, w, b: ops.conv2d(x, w, b, stride=stride, padding=pad, dilation=dilation, groups=groups)  # noqa: E731
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
    # fp16 input with an fp32 weight promotes; the fp16 input's gradient is fp16
    x = Tensor(numpy.ones((1, 2, 3, 3), F16), requires_grad=True)
    out = ops.conv2d(x, Tensor(w.astype(F32)))
    assert out.dtype == F32
    out.sum().backward()
    assert x.grad.dtype == F16


# ---- pooling -----------------------------------------------------------------------------------

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
    xp = numpy.pad(x.astype(F64), ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
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
    return out, dx[:, :, top:top + x.shape[2], left:left + x.shape[3]]


@FAST
@given(seed=st.integers(0, 2 ** 32 - 1), kernel=st.sampled_from([(2, 2), (3, 3), (2, 3)]),
       stride=st.sampled_from([(1, 1), (2, 1), (2, 2)]), pad=st.sampled_from([(0, 0, 0, 0), (1, 0, 1, 1)]),
       noncontig=st.booleans())
def test_pool_fp16_forward_and_backward_follow_the_rule(seed, kernel, stride, pad, noncontig):
    rng = numpy.random.default_rng(seed)
    x = nchw(rng, (2, 2, 7, 6), 1000)
    x[rng.random(x.shape) < 0.1] = F16.type(2 ** -24)
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
        (gx,) = grads(lambda t: ops.max_pool2d(t, (1, 3), 1, (0, 0, 1, 1)), [x],
                      numpy.array(g, F16).reshape(1, 1, 1, 3))
        assert_bits(gx, numpy.array([0, want, 0], F16).reshape(1, 1, 1, 3))


def test_avg_pool_gradient_is_the_fp32_sum_of_the_shares_rounded_once():
    # each x[1] gets g/3 from three windows: (1 + 1 + 1)/3 = 1 exactly; 3·fp16(1/3) = 0.99951
    x = numpy.zeros((1, 1, 1, 3), F16)
    (gx,) = grads(lambda t: ops.avg_pool2d(t, (1, 3), 1, (0, 0, 1, 1)), [x], numpy.ones((1, 1, 1, 3), F16))
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


# ---- batch_norm / layer_norm -------------------------------------------------------------------

def norm_by_hand(x, gamma, beta, axes, eps, mean=None, var=None, dtype=F64):
    """The documented rule; ``dtype=F32``: statistics and x̂ in fp32, as the docstring says for fp16."""
    x = x.astype(dtype)
    if mean is None:
        mean = x.mean(axis=axes, keepdims=True, dtype=F64).astype(dtype)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True, dtype=F64).astype(dtype)
    return ((x - mean) * (1 / numpy.sqrt(var + eps)) * gamma + beta).astype(dtype)


@pytest.mark.parametrize("offset", [0.0, 30000.0])
def test_batch_norm_fp16_train_and_eval_with_fp32_params_and_stats(offset):
    rng = numpy.random.default_rng(0)
    x = (rng.standard_normal((4, 3, 5, 2)) * 50 + offset).astype(F16)
    gamma, beta = rng.standard_normal(3).astype(F32), rng.standard_normal(3).astype(F32)
    rm, rv = numpy.zeros(3, F32), numpy.ones(3, F32)
    gm, bt = gamma.reshape(1, 3, 1, 1).astype(F64), beta.reshape(1, 3, 1, 1).astype(F64)
    y = ops.batch_norm(Tensor(x), Tensor(gamma), Tensor(beta), rm, rv, True, momentum=0.1)
    assert y.dtype == F16 and rm.dtype == F32 and rv.dtype == F32
    # statistics and x̂ in fp32 (at offset 30000 the fp32 x - μ alone is off by ~1e-3)
    ref = norm_by_hand(x, gm.astype(F32), bt.astype(F32), (0, 2, 3), 1e-5, dtype=F32)
    assert (ulps(y.asnumpy(), ref.astype(F16)) <= 1).all()
    x64 = x.astype(F64)
    numpy.testing.assert_allclose(rm, 0.1 * x64.mean((0, 2, 3)), rtol=1e-6)
    numpy.testing.assert_allclose(rv, 0.9 + 0.1 * x64.var((0, 2, 3), ddof=1), rtol=1e-5)
    y = ops.batch_norm(Tensor(x), Tensor(gamma), Tensor(beta), rm, rv, False)
    ref = norm_by_hand(x, gm, bt, None, 1e-5, rm.astype(F64).reshape(1, 3, 1, 1), rv.astype(F64).reshape(1, 3, 1, 1))
    with numpy.errstate(over="ignore"):
        assert_close_to_rounded(y.asnumpy(), ref, 1)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_gradients_match_float64(training):
    rng = numpy.random.default_rng(1)
    x = nchw(rng, (4, 3, 2, 2))
    gamma, beta = rng.standard_normal(3).astype(F32), rng.standard_normal(3).astype(F32)
    rm, rv = rng.standard_normal(3).astype(F32), rng.random(3).astype(F32) + 0.5

    def fn(x, gamma, beta):
        return ops.batch_norm(x, gamma, beta, rm.copy(), rv.copy(), training)
    check_backward(fn, [x, gamma, beta])
    gx, gg, gb = grads(fn, [x, gamma, beta], nchw(rng, x.shape))
    assert (gx.dtype, gg.dtype, gb.dtype) == (F16, F32, F32)


def test_layer_norm_fp16_forward_and_gradients():
    rng = numpy.random.default_rng(2)
    x = (rng.standard_normal((3, 4, 5)) * 100 + 20000).astype(F16)
    gamma, beta = rng.standard_normal((4, 5)).astype(F16), rng.standard_normal((4, 5)).astype(F16)
    y = ops.layer_norm(Tensor(x), Tensor(gamma), Tensor(beta), begin_norm_axis=1, begin_params_axis=1)
    assert y.dtype == F16
    ref = norm_by_hand(x, gamma.astype(F32), beta.astype(F32), (1, 2), 1e-5, dtype=F32)
    assert (ulps(y.asnumpy(), ref.astype(F16)) <= 1).all()
    x = nchw(rng, (3, 4, 5))
    check_backward(lambda x, g, b: ops.layer_norm(x, g, b, 1, 1), [x, gamma, beta])
    check_backward(lambda x, g, b: ops.layer_norm(x, g, b, -1, -1), [x, gamma[0], beta[0]])


def test_norms_propagate_nan_per_group_only():
    x = numpy.ones((2, 3), F16)
    x[0, 1] = numpy.nan
    x[1] = [1, 2, 3]
    with numpy.errstate(invalid="ignore"):  # NaN and inf - inf in the statistics, as NumPy warns
        y = ops.layer_norm(Tensor(x), None, None).asnumpy()
    assert numpy.isnan(y[0]).all() and numpy.isfinite(y[1]).all()
    x = numpy.arange(12, dtype=F16).reshape(4, 3)
    x[2, 0] = numpy.inf
    with numpy.errstate(invalid="ignore"):
        y = ops.batch_norm(Tensor(x), None, None, None, None, True).asnumpy()
    assert numpy.isnan(y[:, 0]).all() and numpy.isfinite(y[:, 1:]).all()


# ---- dropout -----------------------------------------------------------------------------------

def dropout_pair(x, p, seed=7):
    """The op's output on x and, under the same seed, the mask it drew (from an input of ones)."""
    with numpy.errstate(over="ignore"):  # kept values beyond 65504 / scale are inf, as NumPy's fp16
        minigrad.set_seed(seed)
        out = ops.dropout(Tensor(x), p=p).asnumpy()
        minigrad.set_seed(seed)
        keep = ops.dropout(Tensor(numpy.ones_like(x)), p=p).asnumpy() != 0
    return out, keep


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.75, 0.99999])
def test_dropout_fp16_is_x_times_the_fp32_scale_rounded_once(p):
    rng = numpy.random.default_rng(0)
    x = nchw(rng, (50, 400))
    x[0, :8] = [0, -0.0, 2 ** -24, 65504, -65504, 0.01, 1e-3, 0]
    out, keep = dropout_pair(x, p)
    scale = F32.type(1 / (1 - p))
    with numpy.errstate(over="ignore"):
        rule = (x.astype(F32) * numpy.where(keep, scale, F32.type(0))).astype(F16)  # -x dropped: -0
    assert_bits(out, rule)
    assert abs(keep.mean() - (1 - p)) < 0.02 + 4 * numpy.sqrt(p * (1 - p) / keep.size)
    # the backward uses the same mask and the same rule
    minigrad.set_seed(7)
    t = Tensor(x, requires_grad=True)
    with numpy.errstate(over="ignore"):
        ops.dropout(t, p=p).backward(Tensor(x))
    assert_bits(t.grad.asnumpy(), rule)


def test_dropout_near_one_keeps_finite_values():
    # p = 0.99999: kept values are x·1e5 (0.01 -> 1000); the fp16 scale 1e5 was inf (and 0·inf NaN)
    x = numpy.full(200000, 0.01, F16)
    x[::2] = 0
    out, keep = dropout_pair(x, 0.99999, seed=3)
    assert keep.any()
    assert numpy.isfinite(out).all()
    assert_bits(out[keep], (x[keep].astype(F32) * F32.type(1e5)).astype(F16))


def test_dropout_layer_keep_prob_and_empty():
    x = nchw(numpy.random.default_rng(1), (64, 64))
    layer = nn.Dropout(keep_prob=0.9).set_train()
    minigrad.set_seed(5)
    got = layer(Tensor(x)).asnumpy()
    minigrad.set_seed(5)
    assert_bits(got, ops.dropout(Tensor(x), p=1 - 0.9).asnumpy())
    keep = got != 0
    assert_bits(got[keep], (x[keep].astype(F32) * F32.type(1 / 0.9)).astype(F16))
    assert ops.dropout(Tensor(numpy.zeros((0, 3), F16)), 0.5).shape == (0, 3)


# ---- embedding, getitem, joins and shape ops ---------------------------------------------------

def test_embedding_gradient_of_many_repeated_ids_accumulates_in_fp32():
    # 70000 ids 0 with g = 2^-10: Σ = 68.359375 exactly (an fp16 running sum stalls at 64)
    tab = numpy.zeros((3, 2), F16)
    (gt,) = grads(lambda t: ops.embedding(numpy.zeros(70000, numpy.int64), t), [tab],
                  numpy.full((70000, 2), 2 ** -10, F16))
    assert_bits(gt, numpy.array([[70000 / 1024] * 2, [0, 0], [0, 0]], F16))
    # 60000 + 60000 - 60000 and subnormals 3·2^-24 (no overflow, no flush)
    ids = numpy.array([[0, 2], [0, 2], [0, 2]])
    g = numpy.zeros((3, 2, 2), F16)
    g[:, 0, 0] = [60000, 60000, -60000]
    g[:, 1, 1] = 2 ** -24
    (gt,) = grads(lambda t: ops.embedding(ids, t), [tab], g)
    assert_bits(gt, numpy.array([[60000, 0], [0, 0], [0, 3 * 2 ** -24]], F16))
    # nn.Embedding: gather and one-hot paths agree (the one-hot path through the matmul rule)
    rng = numpy.random.default_rng(0)
    ids = Tensor(rng.integers(0, 5, (4, 3)))
    for one_hot in (False, True):
        layer = nn.Embedding(5, 4, use_one_hot=one_hot)
        layer.embedding_table.set_data(Tensor(nchw(rng, (5, 4))))
        out = layer(ids).asnumpy()
        assert_bits(out, layer.embedding_table.asnumpy()[ids.asnumpy()])


def test_getitem_repeated_indices_and_broadcast_sum_in_fp32():
    x = numpy.zeros((2, 3), F16)
    g = numpy.array([[2048, 2048, 60000], [1, 2 ** -24, 60000], [1, 2 ** -24, -60000]], F16)
    (gx,) = grads(lambda t: t[numpy.array([0, 0, 0]), :], [x], g)
    assert_bits(gx, numpy.array([[2050, 2048, 60000], [0, 0, 0]], F16))
    (gx,) = grads(lambda t: t[[1, 1, 1]], [x], g)
    assert_bits(gx, numpy.array([[0, 0, 0], [2050, 2048, 60000]], F16))
    (gx,) = grads(lambda t: ops.broadcast_to(t, (3, 3)), [numpy.zeros((1, 3), F16)], g)
    assert_bits(gx, numpy.array([[2050, 2048, 60000]], F16))
    # slices and bool masks select once: the gradient is g itself (subnormals, inf, -0 kept)
    v = numpy.array([2 ** -24, numpy.inf, -0.0, 3], F16)
    (gx,) = grads(lambda t: t[::2], [numpy.zeros(4, F16)], v[:2])
    assert_bits(gx, numpy.array([2 ** -24, 0, numpy.inf, 0], F16))
    (gx,) = grads(lambda t: t[numpy.array([True, False, True, True])], [numpy.zeros(4, F16)], v[1:])
    assert_bits(gx, numpy.array([numpy.inf, 0, -0.0, 3], F16))


def test_join_and_shape_ops_are_exact_in_fp16():
    rng = numpy.random.default_rng(4)
    a, b = strided(nchw(rng, (2, 3, 4))), nchw(rng, (2, 3, 4))
    a[0, 0, :3] = [2 ** -24, numpy.inf, numpy.nan]
    assert_bits(ops.concat([Tensor(a), Tensor(b)], 1).asnumpy(), numpy.concatenate([a, b], 1))
    assert_bits(ops.stack([Tensor(a), Tensor(b)], -1).asnumpy(), numpy.stack([a, b], -1))
    pieces = ops.split(Tensor(a), [1, 1, 3], axis=2)
    for got, ref in zip(pieces, numpy.split(a, [1, 1, 3], axis=2)):
        assert_bits(got.asnumpy(), ref)
    assert_bits(ops.transpose(Tensor(a), (2, 0, 1)).asnumpy(), a.transpose(2, 0, 1))
    assert_bits(ops.squeeze(ops.reshape(Tensor(a), (1, 24, 1))).asnumpy(), a.reshape(24))
    ta, tb = Tensor(a, requires_grad=True), Tensor(b.astype(F32), requires_grad=True)
    out = ops.concat([ta, tb], 1)
    assert out.dtype == F32
    g = rng.standard_normal((2, 6, 4)).astype(F32)
    out.backward(Tensor(g))
    assert_bits(ta.grad.asnumpy(), g[:, :3].astype(F16))
    assert_bits(tb.grad.asnumpy(), g[:, 3:])
    # split: an unused piece's gradient is zero; stack/split gradients route each slice back
    t = Tensor(a, requires_grad=True)
    first, _, rest = ops.split(t, [1, 1], axis=2)
    ops.concat([rest, first], 2).backward(Tensor(nchw(rng, (2, 3, 4))))
    check_backward(lambda x: ops.split(x, 2, axis=2)[1] * 3, [nchw(rng, (2, 3, 4))])
    check_backward(lambda x, y: ops.stack([x, y], 1), [nchw(rng, (2, 3)), nchw(rng, (2, 3))])
    e = ops.concat([Tensor(numpy.zeros((0, 3), F16)), Tensor(numpy.ones((2, 3), F16))], 0)
    assert e.shape == (2, 3) and e.dtype == F16


# ---- nn layers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("pad_mode,stride", [("same", 1), ("same", 2), ("valid", 2), ("pad", 1)])
def test_nn_conv2d_fp16_pad_modes(pad_mode, stride):
    rng = numpy.random.default_rng(5)
    layer = nn.Conv2d(4, 6, (3, 2), stride=stride, pad_mode=pad_mode, padding=1 if pad_mode == "pad" else 0,
                      group=2, has_bias=True)
    for name in ("weight", "bias"):
        old = getattr(layer, name)
        setattr(layer, name, minigrad.Parameter(nchw(rng, old.shape), name=old.name))
    x = nchw(rng, (2, 4, 7, 5))
    out = layer(Tensor(x)).asnumpy()
    if pad_mode == "same":
        assert out.shape[2:] == (-(-7 // stride), -(-5 // stride))
        total = [max((-(-n // stride) - 1) * stride + k - n, 0) for n, k in ((7, 3), (5, 2))]
        pad = (total[0] // 2, total[0] - total[0] // 2, total[1] // 2, total[1] - total[1] // 2)
    else:
        pad = (1,) * 4 if pad_mode == "pad" else (0,) * 4
    exact = conv_by_hand(x, layer.weight.asnumpy(), layer.bias.asnumpy(), (stride, stride), pad, (1, 1), 2)
    assert out.dtype == F16 and (ulps(out, exact.astype(F16)) <= 1).all()


def test_nn_batchnorm_and_pools_fp16():
    rng = numpy.random.default_rng(6)
    bn = nn.BatchNorm2d(3, momentum=0.9).set_train()
    x = nchw(rng, (4, 3, 3, 3), 100)
    y = bn(Tensor(x))
    assert y.dtype == F16 and bn.moving_mean.dtype == F32
    numpy.testing.assert_allclose(bn.moving_mean.asnumpy(), 0.1 * x.astype(F64).mean((0, 2, 3)), rtol=1e-5)
    y.sum().backward()
    assert bn.gamma.grad.dtype == F32
    pool = nn.AvgPool2d(3, 2, pad_mode="same")
    out = pool(Tensor(x)).asnumpy()
    # same (3 -> 2, one padding row/col each side): windows {0, 1} and {1, 2}, padding not counted
    ref = numpy.stack([numpy.stack([x[:, :, r, :][..., c].astype(F64).mean((-1, -2))
                                    for c in (slice(0, 2), slice(1, 3))], -1)
                       for r in (slice(0, 2), slice(1, 3))], -2)
    assert (ulps(out, ref.astype(F16)) <= 1).all()
    mp = nn.MaxPool2d(2, 2, pad_mode="same")(Tensor(x)).asnumpy()
    assert_bits(mp[:, :, 1, 1], x[:, :, 2, 2])
