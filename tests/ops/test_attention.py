"""ops.scaled_dot_product_attention (ops/attention.py): forward against a float64 NumPy formula
and PyTorch, backward against the float64 checker in fp16 and fp32, the mask rule (-1e9 and
-inf remove a key, a fully masked row gives zeros), fp32 scores for fp16 inputs, dropout,
autocast, and argument errors."""
import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from minigrad import Tensor, amp, ops
from minigrad.testing import assert_forward, check_backward, noncontiguous

RNG = numpy.random.default_rng(0)
# masks of -1e9 rounded to fp16 overflow to -inf on purpose (the trap the mask rule handles)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")


def reference(q, k, v, mask=None, causal=False, scale=None):
    """float64 softmax(q kᵀ·scale + mask) v with the mask rule: a bool mask keeps the keys where
    True; a float value below -65504 removes the key; a row with no key left is zeros."""
    q, k, v = (numpy.asarray(a, numpy.float64) for a in (q, k, v))
    scale = 1 / numpy.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ numpy.swapaxes(k, -1, -2) * scale
    removed = numpy.zeros(scores.shape, bool)
    if mask is not None:
        mask = numpy.asarray(mask)
        if mask.dtype == bool:
            removed |= ~mask
        else:
            scores = scores + numpy.where(mask < -65504, 0, mask.astype(numpy.float64))
            removed |= mask < -65504
    if causal:
        removed |= numpy.triu(numpy.ones(scores.shape[-2:], bool), 1)
    scores = numpy.where(removed, -numpy.inf, scores)
    peak = scores.max(axis=-1, keepdims=True)
    e = numpy.exp(scores - numpy.where(numpy.isfinite(peak), peak, 0))
    total = e.sum(axis=-1, keepdims=True)
    weights = e / numpy.where(total > 0, total, 1)
    return weights @ v, weights


def _qkv(batch=(2, 3), length=5, source=6, e=4, ev=7, scale=1.0):
    return (RNG.standard_normal(batch + (length, e)) * scale,
            RNG.standard_normal(batch + (source, e)) * scale,
            RNG.standard_normal(batch + (source, ev)))


MASKS = {
    "none": lambda: None,
    "float 2-D": lambda: RNG.standard_normal((5, 6)),
    "float broadcast per batch": lambda: RNG.standard_normal((2, 1, 5, 6)),
    "bool 2-D": lambda: RNG.random((5, 6)) > 0.3,
    "-1e9 padding": lambda: numpy.where(RNG.random((2, 1, 1, 6)) > 0.4, 0.0, -1e9),
    "-inf": lambda: numpy.where(RNG.random((5, 6)) > 0.4, 0.0, -numpy.inf),
}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_forward_matches_the_float64_formula(mask, causal, dtype):
    q, k, v = _qkv()
    m = MASKS[mask]()
    out, weights = ops.scaled_dot_product_attention(
        Tensor(q.astype(dtype)), Tensor(k.astype(dtype)), Tensor(v.astype(dtype)),
        None if m is None else Tensor(m if m.dtype == bool else m.astype(dtype)),
        is_causal=causal, need_weights=True)
    rounded = [a.astype(dtype).astype(numpy.float64) for a in (q, k, v)]
    mask_ref = None if m is None else (m if m.dtype == bool else m.astype(dtype))
    expected, expected_weights = reference(*rounded, mask_ref, causal)
    assert_forward(out, expected, dtype)
    assert_forward(weights, expected_weights, dtype)


@pytest.mark.parametrize("mask", ["none", "float 2-D", "-1e9 padding"])
def test_backward_through_the_float64_checker(mask, dtype):
    q, k, v = _qkv(batch=(2,), length=3, source=4, e=3, ev=2)
    m = MASKS[mask]()
    if m is not None:
        m = m[..., :3, :4] if m.ndim == 2 else m[:, 0, :, :4]

    def attention(q, k, v):
        return ops.scaled_dot_product_attention(q, k, v, None if m is None else Tensor(m))
    check_backward(attention, [q, k, v], dtype=dtype)


def test_backward_to_a_float_mask_and_through_the_weights(dtype):
    q, k, v = _qkv(batch=(2,), length=3, source=4, e=3, ev=2)
    mask = RNG.standard_normal((3, 4))

    def both_outputs(q, k, v, mask):
        return ops.scaled_dot_product_attention(q, k, v, mask, is_causal=True, need_weights=True)
    check_backward(both_outputs, [q, k, v, mask], dtype=dtype)


def test_float64_and_noncontiguous_inputs():
    q, k, v = _qkv(batch=(2,), length=3, source=4, e=3, ev=2)
    views = [noncontiguous(a) for a in (q, k, v)]
    out = ops.scaled_dot_product_attention(*(Tensor(a) for a in views), scale=0.7)
    assert_forward(out, reference(q, k, v, scale=0.7)[0], numpy.float64)
    check_backward(lambda q, k, v: ops.scaled_dot_product_attention(q, k, v, is_causal=True),
                   views)


def test_batch_axes_broadcast_and_gradients_sum_back():
    q = RNG.standard_normal((2, 3, 4, 5))
    k, v = RNG.standard_normal((1, 3, 6, 5)), RNG.standard_normal((6, 2))  # shared key/value
    out = ops.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v))
    assert_forward(out, reference(q, k, v)[0], numpy.float64)
    check_backward(ops.scaled_dot_product_attention, [q, k, v])


def test_matches_pytorch_forward_and_backward(dtype):
    torch = pytest.importorskip("torch")
    q, k, v = _qkv()
    mask = RNG.standard_normal((5, 6)).astype(numpy.float32)
    g = RNG.standard_normal((2, 3, 5, 7)).astype(numpy.float32)
    ours = [Tensor(a.astype(numpy.float32), requires_grad=True) for a in (q, k, v)]
    out = ops.scaled_dot_product_attention(*ours, Tensor(mask))
    (out * Tensor(g)).sum().backward()
    theirs = [torch.tensor(a.astype(numpy.float32), requires_grad=True) for a in (q, k, v)]
    expected = torch.nn.functional.scaled_dot_product_attention(*theirs, torch.tensor(mask))
    expected.backward(torch.tensor(g))
    numpy.testing.assert_allclose(out.asnumpy(), expected.detach().numpy(), atol=2e-6)
    for mine, peer in zip(ours, theirs):
        numpy.testing.assert_allclose(mine.grad.asnumpy(), peer.grad.numpy(), atol=2e-6)


# ---- the mask rule --------------------------------------------------------------------------

@pytest.mark.parametrize("removed", [-1e9, -numpy.inf, -7e4])
def test_a_removed_key_gets_zero_weight_in_fp16_and_fp32(removed, dtype):
    q, k, v = _qkv(batch=(1,), length=3, source=4)
    mask = numpy.zeros((3, 4))
    mask[:, 1] = removed
    mask[2, :] = removed  # query 2 may see no key at all
    qt, kt, vt = (Tensor(a.astype(dtype), requires_grad=True) for a in (q, k, v))
    out, weights = ops.scaled_dot_product_attention(qt, kt, vt, Tensor(mask.astype(dtype)),
                                                    need_weights=True)
    w = weights.asnumpy()
    assert (w[..., 1] == 0).all() and (w[..., 2, :] == 0).all()
    assert (out.asnumpy()[..., 2, :] == 0).all()
    numpy.testing.assert_allclose(w[..., :2, :].astype(numpy.float64).sum(-1), 1, atol=2e-3)
    out.sum().backward()
    for t in (qt, kt, vt):
        assert numpy.isfinite(t.grad.asnumpy()).all()
    assert (qt.grad.asnumpy()[..., 2, :] == 0).all()  # a query that sees nothing learns nothing


def test_minus_1e9_in_fp16_is_inf_and_keeps_its_meaning():
    assert numpy.float16(-1e9) == -numpy.inf  # the trap: the mask itself becomes -inf in fp16
    q, k, v = _qkv(batch=(1,), length=4, source=4)
    keep = numpy.tril(numpy.ones((4, 4), bool))
    additive = numpy.where(keep, 0.0, -1e9)
    half = [Tensor(a.astype(numpy.float16)) for a in (q, k, v)]
    by_float = ops.scaled_dot_product_attention(*half, Tensor(additive.astype(numpy.float16)))
    by_bool = ops.scaled_dot_product_attention(*half, Tensor(keep))
    by_flag = ops.scaled_dot_product_attention(*half, is_causal=True)
    assert (by_float.asnumpy() == by_bool.asnumpy()).all()
    assert (by_float.asnumpy() == by_flag.asnumpy()).all()


def test_fp16_scores_beyond_fp16_range_do_not_overflow():
    """q·k of 300·300·8 = 720000 overflows fp16; the scores are fp32, so the result is finite
    and equal to the float64 formula on the same fp16 inputs."""
    q = numpy.full((1, 2, 8), 300.0)
    k = numpy.stack([numpy.full(8, 300.0), numpy.full(8, 299.0)])[None]
    v = RNG.standard_normal((1, 2, 3))
    assert numpy.isinf(numpy.float16(q[0, 0] @ k[0, 0]))
    out = ops.scaled_dot_product_attention(*(Tensor(a.astype(numpy.float16)) for a in (q, k, v)))
    rounded = [a.astype(numpy.float16).astype(numpy.float64) for a in (q, k, v)]
    assert_forward(out, reference(*rounded)[0], numpy.float16)


@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 6), st.integers(0, 2 ** 31 - 1))
def test_weights_are_a_distribution_or_zeros(length, source, e, seed):
    rng = numpy.random.default_rng(seed)
    q, k = rng.standard_normal((length, e)) * 4, rng.standard_normal((source, e)) * 4
    v = rng.standard_normal((source, 2))
    keep = rng.random((length, source)) > 0.5
    _, w = ops.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), Tensor(keep),
                                            need_weights=True)
    w = w.asnumpy()
    assert (w[~keep] == 0).all() and (w >= 0).all()
    sums = w.sum(-1)
    numpy.testing.assert_allclose(sums[keep.any(-1)], 1, rtol=1e-12)
    assert (sums[~keep.any(-1)] == 0).all()


# ---- dropout, autocast ----------------------------------------------------------------------

def test_dropout_drops_weights_with_the_seeded_rng_and_its_gradient_checks():
    q, k, v = _qkv(batch=(2,), length=3, source=4, e=3, ev=2)

    def dropped(q, k, v):
        minigrad.set_seed(3)  # the same mask on every call of the checker
        return ops.scaled_dot_product_attention(q, k, v, dropout_p=0.5, need_weights=True)
    out, w = dropped(*(Tensor(a) for a in (q, k, v)))
    _, full = reference(q, k, v)
    kept = w.asnumpy() != 0
    assert 0 < kept.mean() < 1
    numpy.testing.assert_allclose(w.asnumpy()[kept], 2 * full[kept], rtol=1e-12)
    numpy.testing.assert_allclose(out.asnumpy(), w.asnumpy() @ v, rtol=1e-12)
    check_backward(dropped, [q, k, v])


def test_autocast_runs_it_on_fp16_inputs():
    q, k, v = (Tensor(a.astype(numpy.float32)) for a in _qkv())
    with amp.autocast():
        out = ops.scaled_dot_product_attention(q, k, v)
    assert out.dtype == minigrad.float16
    half = ops.scaled_dot_product_attention(*(ops.cast(t, minigrad.float16) for t in (q, k, v)))
    assert (out.asnumpy() == half.asnumpy()).all()


# ---- argument errors ------------------------------------------------------------------------

def test_bad_arguments_name_what_was_expected():
    q, k, v = (Tensor(a.astype(numpy.float32)) for a in _qkv())
    attention = ops.scaled_dot_product_attention
    with pytest.raises(ValueError, match=r"query \(..., L, E\).*\(2, 3, 5, 4\), \(2, 3, 6, 3\)"):
        attention(q, Tensor(numpy.zeros((2, 3, 6, 3), numpy.float32)), v)
    with pytest.raises(ValueError, match=r"attn_mask.shape must be a shape that broadcasts"):
        attention(q, k, v, Tensor(numpy.zeros((5, 5), numpy.float32)))
    with pytest.raises(TypeError, match="attn_mask.dtype must be bool or a float dtype"):
        attention(q, k, v, Tensor(numpy.zeros((5, 6), numpy.int32)))
    with pytest.raises(TypeError, match="query must be a float Tensor or array"):
        attention(Tensor(numpy.zeros((5, 4), numpy.int32)), k, v)
    with pytest.raises(ValueError, match=r"dropout_p must be a finite float in \[0.0, 1.0\)"):
        attention(q, k, v, dropout_p=1.0)
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        attention(q, k, v, is_causal=1)
    with pytest.raises(ValueError, match="query.shape must be"):
        attention(Tensor(numpy.zeros(4, numpy.float32)), k, v)
