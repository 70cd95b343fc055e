"""Elementwise unary math: neg, abs, reciprocal, exp, log, sqrt, tanh, sigmoid, relu, clip, where.

Transcendental functions of fp16 inputs are evaluated in fp32 and rounded once to fp16: NumPy's
fp16 loops are slow, and ``log`` near 1 needs the extra precision. Every rule also runs on
Tensors, for higher-order gradients (``saves``: ``minigrad.autograd.function``).
"""
import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_broadcast, check_float, check_relation, is_real
from minigrad._fp16_host import convert
from minigrad.autograd.function import OUTPUT, Function
from minigrad import _fp16_host
from minigrad.ops import _rules
from minigrad.ops._util import unbroadcast
from minigrad.ops.arithmetic import as_tensor, binary_operands, cast, div, float_tensor
from minigrad.tensor import Tensor


def _via_f32(fn, x):
    if dtypes.is_low_precision(x.dtype):
        return convert(fn(convert(x, dtypes.float32)), x.dtype)
    return fn(x)


class Neg(Function):
    """out = -x;  dx = -g."""
    saves = {}

    def forward(self, x):
        return -x

    def backward(self, g):
        return -g


class Abs(Function):
    """out = |x|;  dx = g * sign(x) (0 at x = 0)."""
    saves = {}

    def forward(self, x):
        self.x = x
        return backend.get_array_module(x).abs(x)

    def backward(self, g):
        return g * backend.get_array_module(self.x).sign(self.x)


class Exp(Function):
    """out = eˣ;  dx = g * out."""
    autocast = "fp32"
    saves = {"out": OUTPUT}

    def forward(self, x):
        self.out = _via_f32(backend.get_array_module(x).exp, x)
        return self.out

    def backward(self, g):
        return g * self.out


class Log(Function):
    """out = ln x;  dx = g / x."""
    autocast = "fp32"
    saves = {"x": 0}

    def forward(self, x):
        self.x = x
        return _via_f32(backend.get_array_module(x).log, x)

    def backward(self, g):
        return g / self.x


class Sqrt(Function):
    """out = √x;  dx = g / (2 √x)."""
    saves = {"out": OUTPUT}

    def forward(self, x):
        self.out = _via_f32(backend.get_array_module(x).sqrt, x)
        return self.out

    def backward(self, g):
        return g / (2 * self.out)


class Tanh(Function):
    """out = tanh x;  dx = g * (1 - out²)."""
    saves = {"out": OUTPUT}

    def forward(self, x):
        self.out = _via_f32(backend.get_array_module(x).tanh, x)
        return self.out

    def backward(self, g):
        return g * (1 - self.out * self.out)


def _sigmoid(x):
    xp = backend.get_array_module(x)
    # e = e^-|x| in (0, 1]: no overflow warning for any x, one transcendental per element, and
    # full relative accuracy in both tails (for x < 0, e/(1 + e); the tanh form 0.5 + 0.5·tanh(x/2)
    # cancels there: in fp32 it is 7% off at x = -15 and gives 0 at x = -40)
    # Saturating to 0 is sigmoid's intended result, so exp's underflow is not reported even under
    # numpy.errstate(under="raise") (the fp16 rounding after it still is).
    with numpy.errstate(under="ignore"):
        e = xp.exp(-xp.abs(x))
        r = 1 / (1 + e)
        return xp.where(x >= 0, r, e * r)


class Sigmoid(Function):
    """out = 1 / (1 + e⁻ˣ);  dx = g * out * (1 - out)."""
    saves = {"out": OUTPUT}

    def forward(self, x):
        self.out = _via_f32(_sigmoid, x)
        return self.out

    def backward(self, g):
        return g * self.out * (1 - self.out)


# the 16-bit floats whose ReLU runs on bit patterns: the bits of +inf (sign 0, exponent all ones)
_INF_BITS = {dtypes.float16: 0x7C00}
if dtypes.HAS_LOWP:
    _INF_BITS[dtypes.bfloat16] = 0x7F80


class ReLU(Function):
    """out = max(x, 0);  dx = g where x > 0, else 0.

    fp16 and bf16 run on the int16 bit patterns (exact, and fast: NumPy's fp16 arithmetic and
    compares, and ml_dtypes' bf16 loops, are slow): x > 0 is ``0 < bits <= inf's bits`` (0x7C00,
    0x7F80); NaNs of either sign pass through unchanged, and dx is +0 where x <= 0. fp32 is
    NumPy's ``maximum(x, 0)`` forward and ``g * (x > 0)`` backward (-0 for a negative g, NaN
    for an infinite one, where x <= 0). On the host, fp16 and fp32 run each direction as one
    native pass (``_fp16_host.relu_pass``, ``relu_backward_pass``), same bits.
    """
    saves = {}

    def forward(self, x):
        xp = backend.get_array_module(x)
        native = _fp16_host.relu_pass(x)
        if native is not None:
            out, self.mask = native
            return out
        inf_bits = _INF_BITS.get(x.dtype)
        if inf_bits is not None:
            bits = x.view(numpy.int16)
            self.mask = (bits > 0) & (bits <= inf_bits)
            keep = self.mask | ((bits & 0x7FFF) > inf_bits)
            return (bits * keep).view(x.dtype)
        self.mask = x > 0
        return xp.maximum(x, x.dtype.type(0))

    def backward(self, g):
        if isinstance(g, Tensor):  # a create_graph rule: the recorded product
            return g * self.mask
        native = _fp16_host.relu_backward_pass(g, self.mask)
        if native is not None:
            return native
        if g.dtype in _INF_BITS:  # the bit patterns
            return (g.view(numpy.int16) * self.mask).view(g.dtype)
        return g * self.mask


class Clip(Function):
    """out = min(max(x, lo), hi);  dx = g where lo <= x <= hi, else 0."""
    saves = {}

    def forward(self, x, lo, hi):
        xp = backend.get_array_module(x)
        self.inside = xp.ones(x.shape, bool)
        if lo is not None:
            self.inside &= x >= lo
        if hi is not None:
            self.inside &= x <= hi
        # in x's dtype: NumPy 2 promotes a bfloat16 array with float bounds to float32
        return xp.clip(x, lo, hi).astype(x.dtype, copy=False)

    def backward(self, g):
        return g * self.inside


class Where(Function):
    """out = x where cond else y;  dx = g where cond, dy = g elsewhere (cond is not
    differentiated)."""
    saves = {}

    def forward(self, x, y, cond):
        xp = backend.get_array_module(x)
        self.cond, self.shapes = cond, (x.shape, y.shape)
        return xp.where(cond, x, y)

    def backward(self, g):
        zero = g.dtype.type(0)
        sx, sy = self.shapes
        gx = unbroadcast(_rules.where(self.cond, g, zero), sx) if self.needs_grad[0] else None
        gy = unbroadcast(_rules.where(self.cond, zero, g), sy) if self.needs_grad[1] else None
        return gx, gy


def neg(x):
    """-x.

    Raises:
        TypeError: for a bool tensor (negation is not defined on bools, as in NumPy and PyTorch:
            ``logical_not`` flips them), or a value that is not a Tensor, a number or an array.
    """
    x = as_tensor(x)
    if x.data.dtype.kind == "b":
        check_relation("x", x, False, "a numeric Tensor (negation is not defined on bools; use "
                                      "logical_not)", error=TypeError, owner="neg")
    return Neg.apply(x)


def abs(x):
    """|x| (subgradient 0 at 0)."""
    return Abs.apply(as_tensor(x))


def reciprocal(x):
    """1 / x elementwise (MindSpore ``ops.reciprocal``): the division ``1.0 / x``, so an fp16 x
    gives fp16 and the gradient is -g / x²."""
    return div(1.0, as_tensor(x))


def _float_unary(cls, doc):
    def op(x):
        return cls.apply(float_tensor(x, op.__name__))
    op.__name__ = cls.__name__.lower()
    op.__doc__ = doc + "\n\n    Raises:\n        TypeError: for an integer or bool tensor."
    return op


exp = _float_unary(Exp, "eˣ elementwise (fp16 computed in fp32).")
log = _float_unary(Log, "Natural logarithm elementwise (fp16 computed in fp32).")
sqrt = _float_unary(Sqrt, "√x elementwise (fp16 computed in fp32).")
tanh = _float_unary(Tanh, "Hyperbolic tangent elementwise (fp16 computed in fp32).")
sigmoid = _float_unary(Sigmoid,
                       "Logistic sigmoid 1 / (1 + e⁻ˣ) elementwise (fp16 computed in fp32).")


def relu(x):
    """max(x, 0) elementwise (subgradient 0 at 0)."""
    return ReLU.apply(as_tensor(x))


def clip(x, min=None, max=None):
    """Clamp to [min, max] (either may be None); the gradient passes where min <= x <= max.

    The bounds are weak operands (the dtype policy): they take x's dtype, except that a float
    bound of an integer tensor gives a float32 result (as NumPy and PyTorch promote).

    Raises:
        TypeError: for a bound that is not a number (a str, a bool, a Tensor) or None.
        ValueError: for a NaN bound, or if ``min`` and ``max`` are both None.
    """
    x = as_tensor(x)
    if min is None and max is None:
        raise ValueError("clip needs at least one of min and max, got both None")
    for name, bound in (("min", min), ("max", max)):
        if bound is not None:
            if not is_real(bound) or bound != bound:  # a bool, NaN or a non-number
                check_float(name, bound, finite=False, owner="clip")
            # a no-op unless the policy widens x
            x = cast(x, dtypes.weak_dtype(bound, x.data.dtype))
    t = x.data.dtype.type
    return Clip.apply(x, lo=None if min is None else t(min), hi=None if max is None else t(max))


def where(condition, x, y):
    """``x`` where ``condition`` is true, else ``y`` (broadcasting all three).

    ``condition`` (a Tensor, array or nested list, read as bool) is moved to ``x``'s device.

    Raises:
        TypeError / ValueError: naming the argument, for an operand that is not a Tensor, a
            number or an array of numbers, or shapes that do not broadcast together.
    """
    x, y = binary_operands(x, y, ("x", "y"))
    cond = as_tensor(condition, name="condition").data
    cond = backend.to_device(cond, backend.device_of(x.data)).astype(bool, copy=False)
    check_broadcast(("x", "y", "condition"), (x.shape, y.shape, cond.shape), owner="where")
    return Where.apply(x, y, cond=cond)
