"""What the attention and transformer layer tests share: float64 NumPy formulas of
MultiheadAttention and TransformerEncoderLayer written from their definitions, and the copy of a
minigrad layer's weights into its PyTorch twin.

The formulas take the layer's weights as a dict name -> float64 array (``weights(layer)``) and
use batch-first (N, L, E) arrays; masks are additive float64 arrays broadcast to (N, h, L, S),
with the mask rule of ``ops.scaled_dot_product_attention`` (below -65504: the key is removed, a
query with no key left gets zeros).
"""
import math

import numpy

# minigrad's LayerNorm names its parameters as MindSpore does
TORCH_NAME = {"gamma": "weight", "beta": "bias"}


def weights(cell):
    """``{parameter path: float64 array}`` of a minigrad cell."""
    return {name: p.asnumpy().astype(numpy.float64) for name, p in cell.parameters_and_names()}


def torch_state(cell, torch):
    """The cell's parameters as a PyTorch state dict (float32, LayerNorm's gamma/beta as
    weight/bias)."""
    state = {}
    for name, p in cell.parameters_and_names():
        head, _, last = name.rpartition(".")
        key = f"{head}.{TORCH_NAME.get(last, last)}" if head else TORCH_NAME.get(last, last)
        state[key] = torch.tensor(p.asnumpy().astype(numpy.float32))
    return state


def softmax_rows(scores):
    """softmax over the last axis; rows of -inf give zeros."""
    peak = scores.max(axis=-1, keepdims=True)
    e = numpy.exp(scores - numpy.where(numpy.isfinite(peak), peak, 0))
    total = e.sum(axis=-1, keepdims=True)
    return e / numpy.where(total > 0, total, 1)


def attention_reference(w, query, key, value, num_heads, mask=None, prefix=""):
    """MultiheadAttention in float64 on batch-first inputs: (output (N, L, E), weights
    (N, h, L, S)). ``mask``: additive, broadcastable to (N, h, L, S)."""
    e = query.shape[-1]
    d = e // num_heads
    if prefix + "in_proj_weight" in w:
        wq, wk, wv = numpy.split(w[prefix + "in_proj_weight"], 3)
    else:
        wq, wk, wv = (w[prefix + f"{x}_proj_weight"] for x in "qkv")
    bq = bk = bv = 0.0
    if prefix + "in_proj_bias" in w:
        bq, bk, bv = numpy.split(w[prefix + "in_proj_bias"], 3)
    q, k, v = query @ wq.T + bq, key @ wk.T + bk, value @ wv.T + bv

    def heads(x):
        n, length, _ = x.shape
        return x.reshape(n, length, num_heads, d).transpose(0, 2, 1, 3)
    scores = heads(q) @ heads(k).transpose(0, 1, 3, 2) / math.sqrt(d)
    if mask is not None:
        mask = numpy.broadcast_to(mask, scores.shape)
        scores = numpy.where(mask < -65504, -numpy.inf, scores + mask)
    p = softmax_rows(scores)
    out = (p @ heads(v)).transpose(0, 2, 1, 3).reshape(query.shape[:2] + (e,))
    out = out @ w[prefix + "out_proj.weight"].T + w.get(prefix + "out_proj.bias", 0.0)
    return out, p


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / numpy.sqrt(var + eps) * gamma + beta


def gelu_exact(x):
    erf = numpy.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def encoder_layer_reference(w, x, num_heads, mask=None, norm_first=False, activation="relu",
                            eps=1e-5, prefix=""):
    """TransformerEncoderLayer (no dropout) in float64 on a batch-first (N, S, E) input."""
    act = (lambda z: numpy.maximum(z, 0)) if activation == "relu" else gelu_exact

    def norm(i, z):
        return layer_norm(z, w[f"{prefix}norm{i}.gamma"], w[f"{prefix}norm{i}.beta"], eps)

    def attend(z):
        return attention_reference(w, z, z, z, num_heads, mask, prefix + "self_attn.")[0]

    def feed_forward(z):
        hidden = act(z @ w[prefix + "linear1.weight"].T + w[prefix + "linear1.bias"])
        return hidden @ w[prefix + "linear2.weight"].T + w[prefix + "linear2.bias"]
    if norm_first:
        x = x + attend(norm(1, x))
        return x + feed_forward(norm(2, x))
    x = norm(1, x + attend(x))
    return norm(2, x + feed_forward(x))
