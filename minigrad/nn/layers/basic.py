"""Dense, Flatten and Dropout."""
import math
import warnings

from minigrad import ops
from minigrad.fp8 import gemm as fp8_gemm
from minigrad.fp8.autocast import get_fp8_recipe
from minigrad.nn.cell import Cell, check_tensor
from minigrad.nn.init import check_init, default_initializers, init_tensor
from minigrad._checks import check_bool, check_float, check_positive_int, check_relation
from minigrad.nn.layers.activation import activation_by_name
from minigrad.parameter import Parameter


class Dense(Cell):
    """Fully connected layer: y = activation(x Wᵀ + b).

    Args:
        in_channels: a positive int.
        out_channels: a positive int.
        weight_init: initializer of ``weight``, shape (out_channels, in_channels). Default None:
            MindSpore 2.x's (and PyTorch's) ``HeUniform(negative_slope=√5)``, U(±1/√in_channels).
        bias_init: initializer of ``bias``, shape (out_channels,). Default None: U(±1/√in_channels).
            (MindSpore 1.x's defaults were "normal", σ = 0.01, and "zeros".)
        has_bias: default True.
        activation: None, a name ("relu", "tanh", ...) or a Cell applied to the output.

    Input (..., in_channels) → output (..., out_channels).

    Raises:
        TypeError / ValueError: for a non-int or non-positive channel count, a non-bool
            ``has_bias``, or an activation that is not a name or a Cell; ValueError (naming the
            shape) for an input whose last axis is not ``in_channels``.
    """

    def __init__(self, in_channels, out_channels, weight_init=None, bias_init=None,
                 has_bias=True, activation=None):
        super().__init__()
        self.in_channels = check_positive_int("in_channels", in_channels)
        self.out_channels = check_positive_int("out_channels", out_channels)
        self.has_bias = check_bool("has_bias", has_bias)
        shape = (out_channels, in_channels)
        weight_init, bias_init = default_initializers(weight_init, bias_init, shape)
        self.weight = Parameter(init_tensor("weight_init", weight_init, shape))
        check_init("bias_init", bias_init, (out_channels,))  # even with no bias to make
        self.bias = (Parameter(init_tensor("bias_init", bias_init, (out_channels,)))
                     if has_bias else None)
        if isinstance(activation, str):
            activation = activation_by_name("activation", activation)
        elif activation is not None and not isinstance(activation, Cell):
            raise TypeError(f"Dense: activation must be None, a str or a Cell, got "
                            f"{activation!r} ({type(activation).__name__})")
        self.activation = activation

    def construct(self, x):
        check_tensor("Dense", "x", x)
        if not x.shape or x.shape[-1] != self.in_channels:  # a 0-d input has no feature axis
            raise ValueError(f"Dense(in_channels={self.in_channels}) got an input of shape "
                             f"{x.shape}")
        recipe = get_fp8_recipe()  # inside fp8_autocast: the GEMM in FP8
        y = (ops.dense(x, self.weight, self.bias) if recipe is None
             else fp8_gemm.dense(self, x, self.weight, self.bias, recipe))
        if self.activation is not None:
            y = self.activation(y)
        return y

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"has_bias={self.has_bias}")


class Flatten(Cell):
    """Reshape (N, d1, d2, ...) to (N, d1·d2·...)."""

    def construct(self, x):
        check_tensor("Flatten", "x", x)
        if not x.shape:  # one batch axis at least
            check_relation("x", x, False, "a Tensor of at least 1 dimension (the batch)",
                           owner="Flatten")
        # the product, not -1: a reshape cannot infer -1 next to a zero batch (N = 0)
        return ops.reshape(x, (x.shape[0], math.prod(x.shape[1:])))


class Dropout(Cell):
    """In training, zero each element with probability ``p`` and scale the rest by 1 / (1 - p);
    in evaluation (``training`` False) return the input unchanged.

    ``Dropout(p=0.2)`` (MindSpore 2.x, and PyTorch's meaning of ``p``) drops 20 %. MindSpore 2.x
    keeps the 1.x first parameter ``keep_prob`` (the probability of keeping) as a deprecated
    alternative, and so does minigrad: ``Dropout(keep_prob=0.8)`` is ``Dropout(p=0.2)`` with a
    ``FutureWarning``. A positional value is a keep probability as in MindSpore
    (``Dropout(0.8)`` keeps 80 %), with the same warning; one below 0.5 (``Dropout(0.2)``, which
    drops 80 %) is most likely meant as a drop rate, and the warning says so.

    Args:
        p: probability of dropping an element, in [0, 1). Default 0.5 when neither ``p`` nor
            ``keep_prob`` is given.
        keep_prob: deprecated: probability of keeping an element, in (0, 1].

    Attributes:
        p, keep_prob: the drop and keep probabilities (``keep_prob == 1 - p``).

    Raises:
        TypeError: for more than two positional arguments, both ``p`` and ``keep_prob``, or a
            probability that is not a real number.
        ValueError: if ``p`` is not in [0, 1) or ``keep_prob`` not in (0, 1].
    """

    def __init__(self, *args, keep_prob=None, p=None):
        super().__init__()
        keep_prob, p, positional = _dropout_arguments(args, keep_prob, p)
        if keep_prob is not None:
            keep_prob = check_float("keep_prob", keep_prob, low=0.0, high=1.0, low_open=True)
            # a keep_prob below float64's spacing at 1 would make p = 1 - keep_prob exactly 1
            check_relation("keep_prob", keep_prob, 1.0 - keep_prob < 1.0,
                           "in (0, 1] and at least 2**-53 (so that p = 1 - keep_prob < 1)")
            hint = ""
            if positional and keep_prob < 0.5:
                hint = (f" Dropout({keep_prob:g}) keeps {keep_prob:.0%} of the elements and drops "
                        f"{1 - keep_prob:.0%}; to drop {keep_prob:.0%}, write "
                        f"Dropout(p={keep_prob:g}).")
            warnings.warn("For Dropout, the parameter `keep_prob` will be deprecated, please use "
                          "`p` instead (p = 1 - keep_prob)." + hint, FutureWarning, stacklevel=2)
            p = 1.0 - keep_prob
        self.p = check_float("p", 0.5 if p is None else p, low=0.0, high=1.0, high_open=True)
        self.keep_prob = 1.0 - self.p

    def construct(self, x):
        if not self.training or self.p == 0.0:
            return x
        return ops.dropout(x, p=self.p, training=True)

    def extend_repr(self):
        return f"p={self.p}"


def _dropout_arguments(args, keep_prob, p):
    """(keep_prob, p, whether keep_prob came positionally) from MindSpore's
    ``Dropout(keep_prob=0.5, p=None)`` order."""
    if len(args) > 2:
        raise TypeError(f"Dropout takes at most 2 positional arguments (keep_prob, p), got "
                        f"{len(args)}")
    positional = bool(args) and args[0] is not None
    if args and keep_prob is not None:
        raise TypeError("Dropout got keep_prob both positionally and by keyword")
    if len(args) == 2 and p is not None:
        raise TypeError("Dropout got p both positionally and by keyword")
    keep_prob = args[0] if args else keep_prob
    p = args[1] if len(args) == 2 else p
    if keep_prob is not None and p is not None:
        raise TypeError(f"Dropout takes p (the drop rate) or the deprecated keep_prob, not both; "
                        f"got keep_prob={keep_prob!r} and p={p!r}")
    return keep_prob, p, positional
