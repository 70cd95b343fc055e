"""MultiheadAttention and the causal-mask helper.

The masks follow PyTorch's ``nn.MultiheadAttention`` (and MindSpore 2.x's, which has the same
signature): a bool mask is True where a query may NOT attend to a key; a float mask is added to
the scores. Both are turned into one additive float mask; ``ops.scaled_dot_product_attention``
then applies its rule: a value of -inf or below -65504 (e.g. -1e9, which fp16 rounds to -inf)
removes the key, and a query whose keys are all removed gets zero weights and a zero output
(PyTorch's general path gives NaN there).
"""
import math

import numpy

from minigrad import backend, ops
from minigrad import dtype as dtypes
from minigrad._checks import check_bool, check_float, check_positive_int, check_relation
from minigrad.nn.cell import Cell, check_tensor
from minigrad.nn.init import HeUniform, Normal, XavierUniform, initializer
from minigrad.fp8 import gemm as fp8_gemm
from minigrad.fp8.autocast import get_fp8_recipe
from minigrad.nn.layers.basic import Dense
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor


def generate_square_subsequent_mask(size, dtype=dtypes.float32):
    """The causal mask of a sequence of ``size`` (PyTorch's
    ``nn.Transformer.generate_square_subsequent_mask``): a float (size, size) Tensor, 0 on and
    below the diagonal and -inf above it, so that position i attends to positions 0..i.

    Pass it as ``attn_mask`` / ``src_mask``, or give ``is_causal=True`` instead.

    Raises:
        TypeError: if ``size`` is not an int or ``dtype`` not a float dtype.
        ValueError: if ``size`` < 1.
    """
    size = check_positive_int("size", size, owner="generate_square_subsequent_mask")
    dtype = dtypes.as_dtype(dtype)
    check_relation("dtype", dtype, dtype in dtypes.FLOATS,
                   "float16, bfloat16, float32 or float64", error=TypeError,
                   owner="generate_square_subsequent_mask")
    return Tensor(_causal(size, size).astype(dtype))


def _causal(length, source):
    """The additive causal mask as a float32 array: -inf where key j > query i, else 0."""
    return numpy.where(numpy.triu(numpy.ones((length, source), bool), 1), numpy.float32(-numpy.inf),
                       numpy.float32(0))


def _additive(mask, name, owner):
    """``mask`` (a bool or float Tensor, or None) as an additive float Tensor: a bool True (the
    key is masked) becomes -inf, False 0; a float mask is returned as it is."""
    if mask is None or isinstance(mask, Tensor) and dtypes.is_float(mask.dtype):
        return mask  # (dtype.is_float: ml_dtypes gives bfloat16 the NumPy kind "V")
    check_tensor(owner, name, mask)
    if mask.dtype == dtypes.bool_:
        xp = backend.get_array_module(mask.data)
        return Tensor(xp.where(mask.data, numpy.float32(-numpy.inf), numpy.float32(0)),
                      device=mask.device)
    check_relation(f"{name}.dtype", mask.dtype, mask.dtype.kind == "f", "bool or a float dtype",
                   error=TypeError, owner=owner)
    return mask


def _pad_key(mask):
    """``mask`` (additive, keys on the last axis) with one more key of value 0 (a key that
    add_bias_kv or add_zero_attn appended); None stays None."""
    if mask is None:
        return None
    xp = backend.get_array_module(mask.data)
    zero = Tensor(xp.zeros(mask.shape[:-1] + (1,), mask.dtype), device=mask.device)
    return ops.concat([mask, zero], axis=-1)


class MultiheadAttention(Cell):
    r"""Multi-head attention (MindSpore 2.x ``nn.MultiheadAttention``, PyTorch's signature)::

        MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O + b_O
        head_i = softmax((Q W_Q,i)(K W_K,i)ᵀ / √d + mask) (V W_V,i),   d = embed_dim / num_heads

    Args:
        embed_dim: E, the model's width (of the query and the output).
        num_heads: h, a divisor of E.
        dropout: probability of dropping attention weights in training. Default 0.0.
        has_bias: biases in the input and output projections. Default True.
        add_bias_kv: append a learned key and value (``bias_k``, ``bias_v``) to the sequences.
            Default False.
        add_zero_attn: append a zero key and value to the sequences. Default False.
        kdim: the key's width; None (default) for E.
        vdim: the value's width; None (default) for E. When ``kdim`` or ``vdim`` differs from
            E the projections are separate Parameters ``q_proj_weight``, ``k_proj_weight``,
            ``v_proj_weight``; otherwise one ``in_proj_weight`` (3E, E).
        batch_first: inputs and output are (N, L, E) instead of (L, N, E). Default False.
        dtype: the Parameters' dtype, float32 (default) or float16.

    Parameters (PyTorch's names and initialisation): ``in_proj_weight`` (Xavier uniform),
    ``in_proj_bias`` (zeros), ``out_proj.weight`` (He uniform with a = √5, PyTorch's Linear
    default) and ``out_proj.bias`` (zeros), ``bias_k``/``bias_v`` (Xavier normal).

    Inputs: ``(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)``:

    - query (L, N, E), key (S, N, kdim), value (S, N, vdim) (batch axis first with
      ``batch_first``); or unbatched (L, E), (S, kdim), (S, vdim).
    - key_padding_mask: (N, S) (or (S,) unbatched), bool (True: ignore that key) or float
      (added).
    - attn_mask: (L, S) or (N·num_heads, L, S), bool (True: may not attend) or float (added).
    - need_weights: also return the attention weights. Default True.
    - average_attn_weights: average the weights over the heads. Default True.
    - is_causal: also mask every key j > query i (minigrad applies it; PyTorch takes it as a
      hint about ``attn_mask``). Default False.

    The masks combine (added as float masks). A mask value of -inf or below -65504 removes the
    key (-1e9 too, in fp16 and fp32 alike), and a query with every key removed gets zero
    weights and a zero output instead of NaN. Scores and softmax run in fp32 for fp16 inputs
    (``ops.scaled_dot_product_attention``).

    Outputs: ``(attn_output, attn_weights)``: attn_output like query (E features);
    attn_weights (N, L, S) averaged, (N, num_heads, L, S) per head, without N unbatched, or
    None without ``need_weights``. S counts the appended key of ``add_bias_kv`` and
    ``add_zero_attn``.

    Raises:
        TypeError / ValueError (at construction): a non-int or non-positive ``embed_dim``,
            ``num_heads``, ``kdim`` or ``vdim``; ``num_heads`` not dividing ``embed_dim``;
            ``dropout`` outside [0, 1); non-bool flags; a ``dtype`` other than float16/float32.
        TypeError / ValueError (at the call): inputs that are not Tensors, of the wrong rank or
            width; masks of the wrong dtype or shape (the message names the expected shape).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, has_bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False,
                 dtype=dtypes.float32):
        super().__init__()
        owner = "MultiheadAttention"
        self.embed_dim = check_positive_int("embed_dim", embed_dim, owner=owner)
        self.num_heads = check_positive_int("num_heads", num_heads, owner=owner)
        check_relation("num_heads", num_heads, embed_dim % num_heads == 0,
                       f"a divisor of embed_dim ({embed_dim})", owner=owner)
        self.head_dim = embed_dim // num_heads
        self.dropout = check_float("dropout", dropout, low=0.0, high=1.0, high_open=True,
                                   owner=owner)
        self.has_bias = check_bool("has_bias", has_bias, owner=owner)
        self.add_zero_attn = check_bool("add_zero_attn", add_zero_attn, owner=owner)
        check_bool("add_bias_kv", add_bias_kv, owner=owner)
        self.kdim = embed_dim if kdim is None else check_positive_int("kdim", kdim, owner=owner)
        self.vdim = embed_dim if vdim is None else check_positive_int("vdim", vdim, owner=owner)
        self.batch_first = check_bool("batch_first", batch_first, owner=owner)
        dtype = parameter_dtype(dtype, owner)
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        e = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(initializer(XavierUniform(), (3 * e, e)))
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.in_proj_weight = None
            self.q_proj_weight = Parameter(initializer(XavierUniform(), (e, e)))
            self.k_proj_weight = Parameter(initializer(XavierUniform(), (e, self.kdim)))
            self.v_proj_weight = Parameter(initializer(XavierUniform(), (e, self.vdim)))
        self.in_proj_bias = Parameter(initializer("zeros", (3 * e,))) if has_bias else None
        self.out_proj = Dense(e, e, weight_init=HeUniform(negative_slope=math.sqrt(5)),
                              bias_init="zeros", has_bias=has_bias)
        if add_bias_kv:
            # Xavier normal on (1, 1, E): fan_in = fan_out = E, so σ = √(2 / 2E)
            self.bias_k = Parameter(initializer(Normal(sigma=math.sqrt(1 / e)), (1, 1, e)))
            self.bias_v = Parameter(initializer(Normal(sigma=math.sqrt(1 / e)), (1, 1, e)))
        else:
            self.bias_k = self.bias_v = None
        if dtype != dtypes.float32:
            self.cast_parameters(dtype)

    # ---- the call -------------------------------------------------------------------------------
    def construct(self, query, key, value, key_padding_mask=None, need_weights=True,
                  attn_mask=None, average_attn_weights=True, is_causal=False):
        owner = "MultiheadAttention"
        for name, t in (("query", query), ("key", key), ("value", value)):
            check_tensor(owner, name, t)
        need_weights = check_bool("need_weights", need_weights, owner=owner)
        average_attn_weights = check_bool("average_attn_weights", average_attn_weights,
                                          owner=owner)
        is_causal = check_bool("is_causal", is_causal, owner=owner)
        self_attention = query is key and key is value
        batched = self._check_inputs(query, key, value)
        batch_axis = 0 if self.batch_first else 1
        if not batched:
            query, key, value = (ops.expand_dims(t, batch_axis) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = ops.expand_dims(key_padding_mask, 0)
        batch = query.shape[batch_axis]
        length, source = query.shape[1 - batch_axis], key.shape[1 - batch_axis]
        mask = self._mask(attn_mask, key_padding_mask, is_causal, batch, length, source)
        q, k, v = self._project(query, key, value, self_attention)
        if self.bias_k is not None:
            k, v = (ops.concat([t, ops.broadcast_to(b, _one_step(t.shape, batch_axis))],
                               axis=1 - batch_axis)
                    for t, b in ((k, self.bias_k), (v, self.bias_v)))
            mask = _pad_key(mask)
        q, k, v = (self._split_heads(t) for t in (q, k, v))
        if self.add_zero_attn:
            xp = backend.get_array_module(k.data)
            zeros = Tensor(xp.zeros(k.shape[:2] + (1, self.head_dim), k.dtype))
            k, v = ops.concat([k, zeros], axis=2), ops.concat([v, zeros], axis=2)
            mask = _pad_key(mask)
        dropout = self.dropout if self.training else 0.0
        result = ops.scaled_dot_product_attention(q, k, v, mask, dropout_p=dropout,
                                                  need_weights=need_weights)
        out, weights = result if need_weights else (result, None)
        out = self.out_proj(self._merge_heads(out))
        if weights is not None and average_attn_weights:
            weights = ops.mean(weights, axis=1)
        if not batched:
            out = ops.squeeze(out, batch_axis)
            weights = None if weights is None else ops.squeeze(weights, 0)
        return out, weights

    def _check_inputs(self, query, key, value):
        """Whether the inputs are batched (3-D); ValueError for ranks or widths that do not fit."""
        batched = query.ndim == 3
        ranks_fit = query.ndim in (2, 3) and key.ndim == value.ndim == query.ndim
        widths_fit = (ranks_fit and query.shape[-1] == self.embed_dim
                      and key.shape[-1] == self.kdim and value.shape[-1] == self.vdim
                      and key.shape[:-1] == value.shape[:-1]
                      and (not batched or query.shape[0 if self.batch_first else 1]
                           == key.shape[0 if self.batch_first else 1]))
        if not widths_fit:
            layout = "(N, L, E)" if self.batch_first else "(L, N, E)"
            raise ValueError(
                f"MultiheadAttention(embed_dim={self.embed_dim}, kdim={self.kdim}, "
                f"vdim={self.vdim}, batch_first={self.batch_first}) needs query {layout} and "
                f"key, value of the same batch and length with kdim and vdim features (or all "
                f"unbatched, 2-D), got shapes {query.shape}, {key.shape} and {value.shape}")
        return batched

    def _mask(self, attn_mask, key_padding_mask, is_causal, batch, length, source):
        """One additive mask broadcastable to (N, h, L, S), or None."""
        owner = "MultiheadAttention"
        attn = _additive(attn_mask, "attn_mask", owner)
        if attn is not None:
            per_head = (batch * self.num_heads, length, source)
            check_relation("attn_mask.shape", attn.shape,
                           attn.shape in ((length, source), per_head),
                           f"({length}, {source}) or {per_head}", owner=owner)
            attn = ops.reshape(attn, (1, 1, length, source) if attn.ndim == 2
                               else (batch, self.num_heads, length, source))
        if is_causal:
            causal = Tensor(_causal(length, source).reshape(1, 1, length, source))
            attn = causal if attn is None else ops.add(attn, causal)
        padding = _additive(key_padding_mask, "key_padding_mask", owner)
        if padding is not None:
            check_relation("key_padding_mask.shape", padding.shape,
                           padding.shape == (batch, source),
                           f"({batch}, {source}) (or ({source},) unbatched)", owner=owner)
            padding = ops.reshape(padding, (batch, 1, 1, source))
            attn = padding if attn is None else ops.add(attn, padding)
        return attn

    def _project(self, query, key, value, self_attention):
        """The query, key and value projections (each with its bias)."""
        biases = (None,) * 3 if self.in_proj_bias is None else ops.split(self.in_proj_bias, 3)
        if not self._qkv_same_embed_dim:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        elif self_attention:  # one product for all three
            return ops.split(self._dense(query, self.in_proj_weight, self.in_proj_bias), 3,
                             axis=-1)
        else:
            weights = ops.split(self.in_proj_weight, 3)
            base = (getattr(self.in_proj_weight, "name", None) or "in_proj_weight").removesuffix(
                "_weight")
            names = [f"{base}_{part}" for part in "qkv"]  # the slices' names in FP8 reports
            return tuple(self._dense(x, w, b, n) for x, w, b, n in zip(
                (query, key, value), weights, biases, names))
        return tuple(self._dense(x, w, b) for x, w, b in zip((query, key, value), weights, biases))

    def _dense(self, x, weight, bias, name=None):
        """``ops.dense``, or its FP8 GEMM inside ``fp8_autocast`` (as ``Dense``, so out_proj)."""
        recipe = get_fp8_recipe()
        if recipe is None:
            return ops.dense(x, weight, bias)
        return fp8_gemm.dense(self, x, weight, bias, recipe, name)

    def _split_heads(self, x):
        """(L, N, E) or (N, L, E) -> (N, h, L, d)."""
        if self.batch_first:
            n, length = x.shape[:2]
            return ops.transpose(ops.reshape(x, (n, length, self.num_heads, self.head_dim)),
                                 (0, 2, 1, 3))
        length, n = x.shape[:2]
        return ops.transpose(ops.reshape(x, (length, n, self.num_heads, self.head_dim)),
                             (1, 2, 0, 3))

    def _merge_heads(self, x):
        """(N, h, L, d) -> (L, N, E) or (N, L, E)."""
        n, _, length, _ = x.shape
        if self.batch_first:
            return ops.reshape(ops.transpose(x, (0, 2, 1, 3)), (n, length, self.embed_dim))
        return ops.reshape(ops.transpose(x, (2, 0, 1, 3)), (length, n, self.embed_dim))

    def extend_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, has_bias={self.has_bias}, kdim={self.kdim}, "
                f"vdim={self.vdim}, batch_first={self.batch_first}")


def _one_step(shape, batch_axis):
    """``shape`` with its sequence axis (the other of the first two) cut to 1."""
    shape = list(shape)
    shape[1 - batch_axis] = 1
    return tuple(shape)


def parameter_dtype(dtype, owner):
    """float32 or float16 (the ``dtype`` argument of MindSpore's layers), else TypeError."""
    dtype = dtypes.as_dtype(dtype)
    return check_relation("dtype", dtype, dtype in (dtypes.float16, dtypes.float32),
                          "float16 or float32", error=TypeError, owner=owner)
