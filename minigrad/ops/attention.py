"""Scaled dot-product attention in one node: scores, mask, softmax, dropout and the weighted sum.

    out = softmax(q kᵀ·scale + mask) v

One Function rather than a chain of matmul, add and softmax nodes, for two reasons. The dtype
policy: with fp16 inputs the scores q kᵀ, the mask, the softmax and both products run in fp32,
and only the output (and the weights, when asked for) are rounded to fp16 — a chain of fp16 ops
would store the scores in fp16 (|score| > 65504 is inf), and an additive mask of -1e9 rounds to
-inf there. And speed: the (..., L, S) score matrix is made once, softmaxed in place, and kept
for backward without a separate node per step.

The mask rule (the same in fp16 and fp32): a key whose additive mask value is -inf or below
-65504 (so that fp16 would round it to -inf, as it does -1e9) gets weight exactly 0, and a query
whose keys are all removed this way gets all-zero weights and a zero output, never NaN (PyTorch
documents the same zeros for its fused kernels; its general path gives NaN there).
"""
import math

import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_bool, check_float, check_relation
from minigrad._fp16_host import store, widen
from minigrad.autograd.function import Function
from minigrad.ops import _rules
from minigrad.ops._util import unbroadcast
from minigrad.ops.arithmetic import as_tensor, cast, float_tensor
from minigrad.ops.linalg import matmul
from minigrad.random import get_rng

REMOVED_BELOW = -dtypes.FP16_MAX  # an additive mask value below this removes the key


def additive_mask(mask, dtype):
    """``mask`` as an additive array of ``dtype``: a bool mask gives 0 where True (the key takes
    part) and -inf where False; a float mask is widened, with every value below -65504 made
    -inf (the mask rule of the module docstring)."""
    xp = backend.get_array_module(mask)
    if mask.dtype == dtypes.bool_:
        return xp.where(mask, dtype.type(0), dtype.type(-numpy.inf))
    wide = mask.astype(dtype, copy=False)
    removed = wide < REMOVED_BELOW
    if xp is numpy and not removed.any():  # on the GPU no test: it would read the device
        return wide
    return xp.where(removed, dtype.type(-numpy.inf), wide)


class Attention(Function):
    """out = P_d v,  P = softmax(q kᵀ·scale + mask),  P_d = P·m/(1 - p) (dropout mask m, or P).

    With ds = P·(dP - Σⱼ dP·P) and dP = (g vᵀ + g_P_d)·m/(1 - p):
    dv = P_dᵀ g,  dq = ds k·scale,  dk = dsᵀ q·scale,  dmask = ds (a float mask).
    Everything between the inputs and the outputs is in the accumulation dtype (fp32 for fp16).
    Under ``create_graph`` the rule runs on Tensors, with P recomputed from them (``_weights``).
    """
    autocast = "low"
    saves = {"q": 0, "k": 1, "v": 2, "p": lambda node: _weights(node)}

    def forward(self, q, k, v, mask=None, *, scale, dropout_p, causal, need_weights):
        xp = backend.get_array_module(q)
        self.dtypes = q.dtype, k.dtype, v.dtype
        self.mask_like = None if mask is None else (mask.shape, mask.dtype)
        self.scale = scale
        self.q, self.k, self.v = widen(q), widen(k), widen(v)
        # scaling q (L·E values) rather than the L·S scores
        scores = (self.q * self.q.dtype.type(scale)) @ self.k.swapaxes(-1, -2)
        self.removed = None  # the keys removed (broadcastable to the scores), for _weights
        if mask is not None:
            additive = additive_mask(mask, scores.dtype)
            scores += additive
            self.removed = additive == -numpy.inf
        if causal:  # key j > query i is removed (top-left aligned, as PyTorch's is_causal)
            later = xp.triu(xp.ones(scores.shape[-2:], dtypes.bool_), 1)
            scores[..., later] = -numpy.inf
            self.removed = later if self.removed is None else self.removed | later
        self.peak, self.p = _softmax_in_place(scores, xp, self.removed is not None)
        self.keep = None
        weights = self.p
        if dropout_p:
            keep = get_rng(xp).random(weights.shape, dtype=numpy.float32) >= dropout_p
            self.keep = xp.zeros(weights.shape, weights.dtype)
            xp.copyto(self.keep, weights.dtype.type(1 / (1 - dropout_p)), where=keep)
            weights = weights * self.keep
        out = store(weights @ self.v, self.dtypes[2])
        if need_weights:
            return out, store(weights, self.dtypes[0])
        return out

    def backward(self, g, g_weights=None):
        q_dtype, k_dtype, v_dtype = self.dtypes
        q, k, v, p = widen(self.q), widen(self.k), widen(self.v), self.p
        g = widen(g)
        needs = self.needs_grad
        weights = p if self.keep is None else p * self.keep
        dv = None
        if needs[2]:
            dv = store(unbroadcast(weights.swapaxes(-1, -2) @ g, v.shape), v_dtype)
        ds = g @ v.swapaxes(-1, -2)  # the gradient of the weights P_d
        if g_weights is not None:
            ds = ds + widen(g_weights)
        if self.keep is not None:
            ds = ds * self.keep
        ds = p * (ds - (ds * p).sum(axis=-1, keepdims=True))  # softmax's gradient
        dmask = None
        if len(needs) > 3 and needs[3]:
            shape, dtype = self.mask_like
            dmask = store(unbroadcast(ds, shape), dtype)
        dq = dk = None
        if needs[0]:
            dq = store(unbroadcast((ds @ k) * self.scale, q.shape), q_dtype)
        if needs[1]:
            dk = store(unbroadcast((ds.swapaxes(-1, -2) @ q) * self.scale, k.shape), k_dtype)
        return (dq, dk, dv) if len(needs) == 3 else (dq, dk, dv, dmask)


def _softmax_in_place(scores, xp, removable):
    """``(row maxima, softmax over the last axis)``, the softmax written into ``scores``; a row
    whose entries are all -inf (every key removed) becomes zeros, its maximum 0.
    ``removable``: whether -inf entries may exist."""
    peak = scores.max(axis=-1, keepdims=True)
    if removable:
        # a row of -inf stays -inf, and exp gives its zeros (xp.where: a boolean-mask
        # assignment would wait for the device on CuPy)
        peak = xp.where(peak == -numpy.inf, peak.dtype.type(0), peak)
    scores -= peak
    xp.exp(scores, out=scores)
    total = scores.sum(axis=-1, keepdims=True)
    if removable:
        total = xp.where(total == 0, total.dtype.type(1), total)
    scores /= total
    return peak, scores


def _weights(node):
    """P recomputed from the node's Tensors (a ``create_graph`` backward differentiates it):
    exp(scores - peak) over the keys not removed, divided by its row sum; the row maxima of the
    forward (``peak``) are constants, as the softmax does not depend on the shift."""
    q, k = widen(node.q), widen(node.k)
    scores = matmul(q * node.scale, k.swapaxes(-1, -2)) - node.peak
    if node.mask_like is not None and node.mask_like[1] != dtypes.bool_:
        mask = widen(node.inputs[3])  # a float mask takes part in the graph
        scores = scores + _rules.where(node.removed, 0.0, mask)
    if node.removed is None:
        e = _rules.exp(scores)
    else:
        e = _rules.where(node.removed, 0.0, _rules.exp(_rules.where(node.removed, 0.0, scores)))
    total = e.sum(axis=-1, keepdims=True)
    dead = total.data == 0  # a query with no key left: zeros
    return e / _rules.where(dead, 1.0, total) if dead.any() else e / total


def _check_shapes(q, k, v, mask):
    """The batch shape of the scores (..., L, S) the inputs make, or ValueError naming them."""
    for name, t in (("query", q), ("key", k), ("value", v)):
        check_relation(f"{name}.shape", t.shape, t.ndim >= 2, "(..., length, features)",
                       owner="scaled_dot_product_attention")
    fits = q.shape[-1] == k.shape[-1] and k.shape[-2] == v.shape[-2]
    try:
        batch = numpy.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"scaled_dot_product_attention needs query (..., L, E), key (..., S, E) "
                         f"and value (..., S, Ev) with broadcastable batch axes, got shapes "
                         f"{q.shape}, {k.shape} and {v.shape}")
    scores = batch + (q.shape[-2], k.shape[-2])
    if mask is not None:
        try:
            fits = numpy.broadcast_shapes(mask.shape, scores) == scores
        except ValueError:
            fits = False
        check_relation("attn_mask.shape", mask.shape, fits,
                       f"a shape that broadcasts to the scores' shape {scores}",
                       owner="scaled_dot_product_attention")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, *, need_weights=False):
    """Attention of ``query`` over ``key``/``value`` (PyTorch's
    ``F.scaled_dot_product_attention``)::

        out = softmax(query keyᵀ · scale + mask) value,   scale = 1/√E by default

    on query (..., L, E), key (..., S, E), value (..., S, Ev), the batch axes broadcasting; out
    has shape (..., L, Ev). fp16 inputs are computed in fp32 (scores, mask, softmax, products)
    and the result rounded once to fp16.

    Args:
        attn_mask: None; a bool tensor, True where a query may attend to a key (PyTorch's
            meaning for this function; ``nn.MultiheadAttention``'s bool masks mean the
            opposite); or a float tensor added to the scores. Any shape that broadcasts to
            (..., L, S). A float value of -inf or below -65504 (e.g. -1e9) removes the key: its
            weight is exactly 0, and a query with every key removed gets zero weights and a
            zero output, never NaN.
        dropout_p: probability of dropping each weight (the rest scaled by 1/(1 - p)); pass 0
            outside training. Default 0.
        is_causal: also remove every key j > query i (top-left aligned). Default False.
        scale: the factor of the scores; None (default) for 1/√E.
        need_weights: also return the weights softmax(...) after dropout, (..., L, S), in the
            inputs' dtype. Default False. (minigrad's addition, for ``nn.MultiheadAttention``.)

    Returns:
        out, or (out, weights) with ``need_weights``.

    Raises:
        TypeError: for non-float query/key/value, a mask neither bool nor float, or a
            ``dropout_p``/``scale`` that is not a real number, ``is_causal``/``need_weights``
            not a bool.
        ValueError: for shapes that do not fit (named), a mask that does not broadcast to the
            scores, ``dropout_p`` outside [0, 1) or a non-finite ``scale``.
    """
    owner = "scaled_dot_product_attention"
    q, k, v = (float_tensor(t, owner, name) for name, t in (("query", query), ("key", key),
                                                             ("value", value)))
    mask = None if attn_mask is None else as_tensor(attn_mask, name="attn_mask")
    if mask is not None:
        check_relation("attn_mask.dtype", mask.dtype, mask.dtype == dtypes.bool_
                       or dtypes.is_float(mask.dtype), "bool or a float dtype", error=TypeError,
                       owner=owner)
    dropout_p = check_float("dropout_p", dropout_p, low=0.0, high=1.0, high_open=True, owner=owner)
    is_causal = check_bool("is_causal", is_causal, owner=owner)
    need_weights = check_bool("need_weights", need_weights, owner=owner)
    _check_shapes(q, k, v, mask)
    scale = (1.0 / math.sqrt(q.shape[-1]) if scale is None
             else check_float("scale", scale, owner=owner))
    common = dtypes.promote_types(q.dtype, k.dtype, v.dtype)
    q, k, v = (cast(t, common) if t.dtype != common else t for t in (q, k, v))
    tensors = (q, k, v) if mask is None else (q, k, v, mask)
    return Attention.apply(*tensors, scale=scale, dropout_p=dropout_p, causal=is_causal,
                           need_weights=need_weights)
