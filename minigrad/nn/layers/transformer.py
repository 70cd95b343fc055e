"""TransformerEncoderLayer and TransformerEncoder (MindSpore 2.x, PyTorch's signatures)."""
import copy
import math

from minigrad import dtype as dtypes
from minigrad._checks import (check_bool, check_callable, check_float, check_in, check_positive,
                              check_positive_int, check_relation, check_type)
from minigrad.nn.cell import Cell, check_tensor
from minigrad.nn.init import HeUniform, Uniform
from minigrad.nn.layers.activation import GELU, ReLU
from minigrad.nn.layers.attention import MultiheadAttention, parameter_dtype
from minigrad.nn.layers.basic import Dense, Dropout
from minigrad.nn.layers.container import CellList
from minigrad.nn.layers.normalization import LayerNorm


def _linear(fan_in, fan_out):
    """Dense initialised as PyTorch's Linear: weight and bias U(-1/√fan_in, 1/√fan_in)."""
    return Dense(fan_in, fan_out, weight_init=HeUniform(negative_slope=math.sqrt(5)),
                 bias_init=Uniform(1 / math.sqrt(fan_in)))


def _activation(activation, owner):
    """"relu" / "gelu" (exact, as PyTorch's and MindSpore's ``ops.gelu``) as a Cell; a Cell or
    another callable as it is."""
    if isinstance(activation, str):
        name = check_in("activation", activation, ("relu", "gelu"), owner=owner)
        return ReLU() if name == "relu" else GELU(approximate=False)
    return check_callable("activation", activation, owner=owner)


class TransformerEncoderLayer(Cell):
    r"""One transformer encoder block: self-attention and a feed-forward network, each in a
    residual branch with LayerNorm::

        norm_first=False:  x = norm1(x + SA(x));        x = norm2(x + FF(x))
        norm_first=True:   x = x + SA(norm1(x));        x = x + FF(norm2(x))
        SA(x) = dropout1(self_attn(x, x, x)),  FF(x) = dropout2(linear2(dropout(act(linear1(x)))))

    Args:
        d_model: the width E.
        nhead: attention heads (a divisor of d_model).
        dim_feedforward: the hidden width of the feed-forward network. Default 2048.
        dropout: the dropout probability of every dropout (attention weights included).
            Default 0.1.
        activation: "relu" (default), "gelu" (exact erf form), a Cell or a callable.
        layer_norm_eps: ε of both LayerNorms. Default 1e-5.
        batch_first: inputs (N, S, E) instead of (S, N, E). Default False.
        norm_first: LayerNorm before each branch (pre-LN) instead of after the sum. Default
            False.
        dtype: the Parameters' dtype, float32 (default) or float16.

    Sub-cells (PyTorch's names): ``self_attn`` (``MultiheadAttention``), ``linear1``,
    ``linear2`` (initialised as PyTorch's Linear), ``norm1``, ``norm2`` (``LayerNorm``, whose
    Parameters are MindSpore's ``gamma``/``beta``: PyTorch's ``weight``/``bias``),
    ``dropout``, ``dropout1``, ``dropout2``.

    Inputs: ``(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``: src (S, N, E)
    ((N, S, E) with ``batch_first``, (S, E) unbatched); the masks as ``MultiheadAttention``'s
    ``attn_mask`` and ``key_padding_mask``; ``is_causal=True`` masks the future (or pass
    ``generate_square_subsequent_mask(S)`` as ``src_mask``). Output: like src.

    Raises:
        TypeError / ValueError: at construction, for arguments of the wrong type or out of
            range (named); at the call, as ``MultiheadAttention``.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 dtype=dtypes.float32):
        super().__init__()
        owner = "TransformerEncoderLayer"
        d_model = check_positive_int("d_model", d_model, owner=owner)
        nhead = check_positive_int("nhead", nhead, owner=owner)
        check_relation("d_model", d_model, d_model % nhead == 0, f"a multiple of nhead ({nhead})",
                       owner=owner)
        dim_feedforward = check_positive_int("dim_feedforward", dim_feedforward, owner=owner)
        dropout = check_float("dropout", dropout, low=0.0, high=1.0, high_open=True, owner=owner)
        layer_norm_eps = check_positive("layer_norm_eps", layer_norm_eps, owner=owner)
        self.norm_first = check_bool("norm_first", norm_first, owner=owner)
        dtype = parameter_dtype(dtype, owner)
        self.activation = _activation(activation, owner)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first)
        self.linear1 = _linear(d_model, dim_feedforward)
        self.dropout = Dropout(p=dropout)
        self.linear2 = _linear(dim_feedforward, d_model)
        self.norm1 = LayerNorm((d_model,), epsilon=layer_norm_eps)
        self.norm2 = LayerNorm((d_model,), epsilon=layer_norm_eps)
        self.dropout1 = Dropout(p=dropout)
        self.dropout2 = Dropout(p=dropout)
        if dtype != dtypes.float32:
            self.cast_parameters(dtype)

    def construct(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        check_tensor("TransformerEncoderLayer", "src", src)
        x = src
        if self.norm_first:
            x = x + self._attention_block(self.norm1(x), src_mask, src_key_padding_mask,
                                          is_causal)
            return x + self._feed_forward_block(self.norm2(x))
        x = self.norm1(x + self._attention_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward_block(x))

    def _attention_block(self, x, mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)
        return self.dropout1(out)

    def _feed_forward_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Cell):
    """A stack of ``num_layers`` copies of ``encoder_layer``, then ``norm`` if given.

    Args:
        encoder_layer: a ``TransformerEncoderLayer`` (or any Cell with its call signature);
            each layer is a deep copy of it, with Parameters of its own (named
            ``layers.0.…``, ``layers.1.…``).
        num_layers: how many copies.
        norm: a Cell applied to the output (e.g. ``LayerNorm`` for pre-LN stacks), or None.

    Inputs: ``(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``, passed to
    every layer; PyTorch's name ``mask=`` is accepted for ``src_mask``. Output: like src.

    Raises:
        TypeError: ``encoder_layer`` or ``norm`` is not a Cell, ``num_layers`` not an int, or
            both ``src_mask`` and ``mask`` are given.
        ValueError: ``num_layers`` < 1.
    """

    def __init__(self, encoder_layer, num_layers, norm=None):
        super().__init__()
        owner = "TransformerEncoder"
        check_type("encoder_layer", encoder_layer, Cell, owner=owner)
        self.num_layers = check_positive_int("num_layers", num_layers, owner=owner)
        if norm is not None:
            check_type("norm", norm, Cell, expected="a Cell or None", owner=owner)
        self.layers = CellList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.norm = norm

    def construct(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False, *,
                  mask=None):
        if mask is not None:
            if src_mask is not None:
                raise TypeError("TransformerEncoder got both src_mask and mask (PyTorch's name "
                                "for it): give one")
            src_mask = mask
        x = src
        for layer in self.layers:
            x = layer(x, src_mask, src_key_padding_mask, is_causal)
        return x if self.norm is None else self.norm(x)
