"""Dense, Flatten and Dropout."""
import math

from minigrad import ops
from minigrad.nn.cell import Cell
from minigrad.nn.init import initializer
from minigrad.nn.layers import _check
from minigrad.nn.layers.activation import get_activation
from minigrad.parameter import Parameter


class Dense(Cell):
    """Fully connected layer: y = activation(x Wᵀ + b).

    Args:
        in_channels, out_channels: positive ints.
        weight_init: initializer of ``weight``, shape (out_channels, in_channels). Default "normal".
        bias_init: initializer of ``bias``, shape (out_channels,). Default "zeros".
        has_bias: default True.
        activation: None, a name ("relu", "tanh", ...) or a Cell applied to the output.

    Input (..., in_channels) → output (..., out_channels).

    Raises:
        TypeError / ValueError: for a non-int or non-positive channel count, a non-bool
            ``has_bias``, or an activation that is not a name or a Cell; ValueError (naming the
            shape) for an input whose last axis is not ``in_channels``.
    """

    def __init__(self, in_channels, out_channels, weight_init="normal", bias_init="zeros",
                 has_bias=True, activation=None):
        super().__init__()
        self.in_channels = _check.positive_int("in_channels", in_channels)
        self.out_channels = _check.positive_int("out_channels", out_channels)
        self.has_bias = _check.boolean("has_bias", has_bias)
        self.weight = Parameter(initializer(weight_init, (out_channels, in_channels)))
        self.bias = Parameter(initializer(bias_init, (out_channels,))) if has_bias else None
        if isinstance(activation, str):
            activation = get_activation(activation)
        elif activation is not None and not isinstance(activation, Cell):
            raise TypeError(f"activation must be None, a str or a Cell, got {type(activation).__name__}")
        self.activation = activation

    def construct(self, x):
        if not hasattr(x, "shape"):
            raise TypeError(f"Dense expects a Tensor input, got {type(x).__name__}")
        if x.shape[-1] != self.in_channels:
            raise ValueError(f"Dense(in_channels={self.in_channels}) got an input of shape {x.shape}")
        y = ops.dense(x, self.weight, self.bias)
        if self.activation is not None:
            y = self.activation(y)
        return y

    def extend_repr(self):
        return f"input_channels={self.in_channels}, output_channels={self.out_channels}, has_bias={self.has_bias}"


class Flatten(Cell):
    """Reshape (N, d1, d2, ...) to (N, d1·d2·...)."""

    def construct(self, x):
        # the product, not -1: a reshape cannot infer -1 next to a zero batch (N = 0)
        return ops.reshape(x, (x.shape[0], math.prod(x.shape[1:])))


class Dropout(Cell):
    """In training, zero each element with probability p = 1 - keep_prob and scale the rest by
    1 / keep_prob; in evaluation (``training`` False) return the input unchanged.

    Args:
        keep_prob: probability of keeping an element, in (0, 1]; default 0.5 (MindSpore 1.x).
        p: probability of dropping, in [0, 1) (newer MindSpore); overrides ``keep_prob``.

    Raises:
        ValueError: if ``keep_prob`` is not in (0, 1] or ``p`` not in [0, 1).
    """

    def __init__(self, keep_prob=0.5, p=None):
        super().__init__()
        if p is not None:
            keep_prob = 1.0 - _check.real("p", p, lambda v: 0 <= v < 1, "in [0, 1)")
        self.keep_prob = _check.real("keep_prob", keep_prob, lambda v: 0 < v <= 1, "in (0, 1]")

    def construct(self, x):
        if not self.training or self.keep_prob == 1.0:
            return x
        return ops.dropout(x, p=1.0 - self.keep_prob, training=True)

    def extend_repr(self):
        return f"keep_prob={self.keep_prob}"
