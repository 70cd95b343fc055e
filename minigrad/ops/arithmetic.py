"""Elementwise binary arithmetic, cast and comparisons, with broadcasting, and the operand rules
every op applies (``as_tensor``, ``binary_operands``: the dtype policy of ``minigrad.dtype``).

Each gradient is summed back to its input's shape (``unbroadcast``) and kept in its dtype. For
fp16, the gradients of mul (of a broadcast operand), div and pow are computed in fp32 on the
widened values and rounded once, after that sum. Every rule also runs on Tensors, for
higher-order gradients (``saves``: ``minigrad.autograd.function``).
"""
import operator

import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_broadcast, check_operand, check_relation
from minigrad._config import config
from minigrad._fp16_host import MIN_SIZE, add_halves, convert, widen
from minigrad.tensor import Tensor, make
from minigrad.autograd.function import OUTPUT, Function
from minigrad.ops._rules import log, where
from minigrad.ops._util import unbroadcast

# numbers that need no check beside a tensor (a Python int may not fit in int64)
_PLAIN_NUMBERS = (float, numpy.floating, numpy.integer, numpy.bool_)


def leaf(array):
    """A constant tensor (no graph) around ``array``, without checks."""
    return make(array, None, 0)


def as_tensor(value, like=None, name="x"):
    """``value`` (argument ``name``) as a Tensor; a non-tensor beside tensor ``like`` is weak
    (takes its dtype).

    Raises:
        TypeError / ValueError: naming ``name``, for a value that is not a Tensor, a number or an
            array of numbers (``_checks.check_operand``).
    """
    if isinstance(value, Tensor):
        return value
    if like is None:
        if not hasattr(value, "__cuda_array_interface__"):
            check_operand(name, value)
        return Tensor(value)
    xp = backend.get_array_module(like.data)
    if not isinstance(value, _PLAIN_NUMBERS):
        # nested Python data is weak as a whole, like the array it makes: [0.5, 1.5] beside an
        # int tensor is float (weak_dtype reads only a scalar's or an array's kind); None or
        # "nan" would become NaN in asarray(value, dtype=float)
        value = check_operand(name, value)
    dtype = dtypes.weak_dtype(value, like.data.dtype)
    return leaf(xp.asarray(value, dtype=dtype))


def binary_operands(a, b, names=("a", "b")):
    """Coerce two operands to tensors of one dtype: weak scalars adopt, mixed floats promote.

    Raises:
        TypeError: when neither operand is a Tensor, or the other is not a number or an array
            of numbers (naming it by ``names``).
        ValueError: naming both devices when two tensors live on different devices.
    """
    a_is, b_is = isinstance(a, Tensor), isinstance(b, Tensor)
    if not a_is:
        if not b_is:
            check_relation(names[0], a, False, f"a Tensor (at least one Tensor operand; "
                                               f"{names[1]} is {b!r:.40})", error=TypeError)
        a = as_tensor(a, b, names[0])
    elif not b_is:
        b = as_tensor(b, a, names[1])
    elif backend.cupy is not None and backend.device_of(a.data) != backend.device_of(b.data):
        raise ValueError(f"operands are on different devices: {a.device} (shape {a.shape}) and "
                         f"{b.device} (shape {b.shape}); move one with Tensor.to(device)")
    if a.data.dtype != b.data.dtype:
        for t in (a, b):  # no silent promotion of an FP8 tensor
            dtypes.check_compute(t.data.dtype, "elementwise arithmetic")
        common = dtypes.promote_types(a.data.dtype, b.data.dtype)
        a, b = cast(a, common), cast(b, common)
    return a, b


def check_same_float_dtype(op, named):
    """Raise TypeError naming both dtypes when two of the ``(name, tensor)`` pairs ``named``
    (the operands of a product: matmul, dense, conv2d) are Tensors of different floating dtypes
    and autocast is off.

    PyTorch and MindSpore refuse such a product too: an fp16 input into an fp32 layer is a
    slip (a layer that was meant to compute in fp16, or an input meant to be fp32), and silent
    promotion would hide it, running the "fp16" layer in fp32. Under ``amp.autocast`` the
    operands are cast to one dtype first, so no mismatch reaches the op. Non-tensor operands
    are weak (they take the tensor's dtype), and integer tensors promote as the dtype policy
    says."""
    if config.autocast_dtype is not None:
        return
    floats = [(name, t) for name, t in named if isinstance(t, Tensor) and dtypes.is_float(t.dtype)]
    for name, t in floats[1:]:
        if t.dtype != floats[0][1].dtype:
            first, dtype = floats[0][0], floats[0][1].dtype
            raise TypeError(f"{op}: {first} has dtype {dtype} but {name} has dtype {t.dtype}; "
                            f"a product needs one dtype (cast one with ops.cast, compute the "
                            f"cell in the input's dtype with Cell.to_float, or run it under "
                            f"amp.autocast)")


def float_tensor(value, op, name="x"):
    """``value`` (argument ``name`` of ``op``) as a float Tensor (``as_tensor``).

    Raises:
        TypeError: naming ``op`` and ``name``, for a value that is not a number or an array, or
            whose tensor is not float16, bfloat16, float32 or float64 (ints and bools: the ops
            that need this are not defined on them, as in PyTorch; FP8: a storage format).
    """
    t = as_tensor(value, name=name)
    if not dtypes.is_float(t.data.dtype):
        dtypes.check_compute(t.data.dtype, op)
        check_relation(name, value, False, f"a float Tensor or array (float16, bfloat16, float32 "
                                           f"or float64), not {t.data.dtype}", error=TypeError,
                       owner=op)
    return t


def _arith(op, a, b):
    """``op(a, b)`` for +, -, ×, ÷; large fp16 NumPy operands are computed in fp32 and rounded
    once to fp16.

    That is bit for bit NumPy's fp16 result (its loop widens each element to fp32 too, only
    slowly) and the correctly rounded one: fp32 has 24 >= 2·11 + 2 significand bits, enough for
    the double rounding of +, -, ×, ÷ to be harmless. (Of two NaN operands, either payload may
    come through, as IEEE allows.) Small operands keep the plain op.
    """
    if (dtypes.is_low_precision(a.dtype) and type(a) is numpy.ndarray
            and type(b) is numpy.ndarray and max(a.size, b.size) >= MIN_SIZE):
        summed = add_halves(a, b) if op is operator.add else None  # one native pass
        if summed is not None:
            return summed
        return convert(op(convert(a, dtypes.float32), convert(b, dtypes.float32)), a.dtype)
    return op(a, b)


class _Binary(Function):
    saves = {}

    def forward(self, a, b):
        self.shapes = a.shape, b.shape
        try:
            return self.compute(a, b)
        except ValueError:
            check_broadcast(("a", "b"), self.shapes)
            raise

    def reduce(self, ga, gb):
        sa, sb = self.shapes
        return (None if ga is None else unbroadcast(ga, sa),
                None if gb is None else unbroadcast(gb, sb))


class Add(_Binary):
    """out = a + b;  da = g, db = g."""
    def compute(self, a, b):
        return _arith(operator.add, a, b)

    def backward(self, g):
        return self.reduce(g, g)


class Sub(_Binary):
    """out = a - b;  da = g, db = -g."""
    def compute(self, a, b):
        return _arith(operator.sub, a, b)

    def backward(self, g):
        return self.reduce(g, -g if self.needs_grad[1] else None)


class Mul(_Binary):
    """out = a * b;  da = g * b, db = g * a."""
    saves = {"a": 0, "b": 1}

    def compute(self, a, b):
        self.a, self.b = a, b
        return _arith(operator.mul, a, b)

    def backward(self, g):
        na, nb = self.needs_grad
        sa, sb = self.shapes
        return (_product_grad(g, self.b, sa) if na else None,
                _product_grad(g, self.a, sb) if nb else None)


def _product_grad(g, other, shape):
    """unbroadcast(g * other, shape). A broadcast fp16 operand's gradient sums the fp32 products
    and rounds the sum once (rounding each product first rounds twice, and turns products beyond
    65504 that cancel in the sum into inf - inf = NaN); otherwise the one rounded product."""
    if dtypes.is_low_precision(g.dtype) and g.shape != shape:
        return convert(unbroadcast(widen(g) * widen(other), shape), g.dtype)
    return unbroadcast(_arith(operator.mul, g, other), shape)


class Div(_Binary):
    """out = a / b;  da = g / b, db = -g * a / b²."""
    saves = {"a": 0, "b": 1}

    def compute(self, a, b):
        self.a, self.b = a, b
        return _arith(operator.truediv, a, b)

    def backward(self, g):
        if dtypes.is_low_precision(g.dtype):
            # in fp32 on the widened values, each gradient rounded once (after any broadcast
            # sum): g / b rounded to fp16 first overflowed where -g·a/b² is finite
            sa, sb = self.shapes
            dtype = g.dtype
            ga = widen(g) / widen(self.b)
            gb = None
            if self.needs_grad[1]:
                gb = convert(unbroadcast(-ga * widen(self.a) / widen(self.b), sb), dtype)
            return convert(unbroadcast(ga, sa), dtype), gb
        ga = _arith(operator.truediv, g, self.b)
        gb = None
        if self.needs_grad[1]:
            gb = _arith(operator.truediv, _arith(operator.mul, -ga, self.a), self.b)
        return self.reduce(ga, gb)


class Pow(_Binary):
    """out = a ** b;  da = g * b * a^(b-1) (0 where b = 0, as PyTorch: a⁰ is constant, even at
    a = 0 where b * a^(b-1) would be 0 * inf), db = g * out * log(a) (taken as 0 where a <= 0).

    fp16 gradients are computed in fp32 on the widened values (out recomputed in fp32) and each
    rounded once, after any broadcast sum: in fp16, g * b could overflow while a^(b-1) underflowed,
    giving inf * 0 = NaN for a gradient that is ~0.
    """
    autocast = "fp32"
    saves = {"a": 0, "b": 1, "out": OUTPUT}

    def compute(self, a, b):
        self.a, self.b = a, b
        self.out = a ** b
        return self.out

    def backward(self, g):
        dtype = g.dtype
        a, b, out = self.a, self.b, self.out
        if dtypes.is_low_precision(dtype):
            g, a, b = widen(g), widen(a), widen(b)
            out = a ** b
        ga = None
        if self.needs_grad[0]:
            ga = where(b == 0, g.dtype.type(0), g * b * a ** (b - 1))
        gb = None
        if self.needs_grad[1]:
            gb = g * out * log(where(a > 0, a, 1))
        ga, gb = self.reduce(ga, gb)
        if dtypes.is_low_precision(dtype):
            ga, gb = (None if v is None else convert(v, dtype) for v in (ga, gb))
        return ga, gb


class Maximum(_Binary):
    """out = max(a, b); the gradient goes to the larger input, split evenly on ties."""
    def compute(self, a, b):
        self.a, self.b = a, b
        return backend.get_array_module(a).maximum(a, b)

    def backward(self, g):
        return self.reduce(*_split_by(g, self.a > self.b, self.a == self.b))


class Minimum(_Binary):
    """out = min(a, b); the gradient goes to the smaller input, split evenly on ties."""
    def compute(self, a, b):
        self.a, self.b = a, b
        return backend.get_array_module(a).minimum(a, b)

    def backward(self, g):
        return self.reduce(*_split_by(g, self.a < self.b, self.a == self.b))


def _split_by(g, first, tie):
    xp = backend.get_array_module(first)
    wa = xp.where(first, 1.0, xp.where(tie, 0.5, 0.0)).astype(g.dtype)
    return g * wa, g * (1 - wa)


class Cast(Function):
    """out = a.astype(dtype); the gradient is cast back to a's dtype."""
    storage = True
    saves = {}

    def forward(self, a, dtype):
        self.dtype = a.dtype
        return convert(a, dtype)

    def backward(self, g):
        return convert(g, self.dtype)


class ToDevice(Function):
    """Move between NumPy and CuPy; the gradient moves back."""
    storage = True
    saves = {}

    def forward(self, a, device):
        self.device = backend.device_of(a)
        return backend.to_device(a, device)

    def backward(self, g):
        if isinstance(g, Tensor):
            return to_device(g, self.device)
        return backend.to_device(g, self.device)


def add(a, b):
    """Elementwise a + b with broadcasting."""
    return Add.apply(*binary_operands(a, b))


def sub(a, b):
    """Elementwise a - b with broadcasting."""
    return Sub.apply(*binary_operands(a, b))


def mul(a, b):
    """Elementwise a * b with broadcasting."""
    return Mul.apply(*binary_operands(a, b))


def div(a, b):
    """Elementwise a / b with broadcasting (true division)."""
    a, b = binary_operands(a, b)
    if not dtypes.is_float(a.data.dtype):
        dtypes.check_compute(a.data.dtype, "div")
        a, b = cast(a, dtypes.float32), cast(b, dtypes.float32)
    return Div.apply(a, b)


def pow(a, b):
    """Elementwise a ** b with broadcasting."""
    return Pow.apply(*binary_operands(a, b))


def maximum(a, b):
    """Elementwise max(a, b); at ties each input receives half the gradient."""
    return Maximum.apply(*binary_operands(a, b))


def minimum(a, b):
    """Elementwise min(a, b); at ties each input receives half the gradient."""
    return Minimum.apply(*binary_operands(a, b))


def cast(a, dtype):
    """``a`` (a Tensor, or a number or an array taken as one) converted to ``dtype`` (a no-op
    returning ``a`` when it already has it).

    Raises:
        TypeError / ValueError: naming ``a`` for a value that is not a Tensor, a number or an
            array of numbers (``as_tensor``), naming ``dtype`` for one that is not a supported
            dtype (``dtype.as_dtype``).
    """
    if not isinstance(a, Tensor):
        a = as_tensor(a, name="a")
    if not (isinstance(dtype, numpy.dtype) and dtype in dtypes.SUPPORTED):
        dtype = dtypes.as_dtype(dtype)  # a name or a type, or a refused value (TypeError)
    if a.data.dtype == dtype:
        return a
    return Cast.apply(a, dtype=dtype)


def autocast_inputs(label, inputs):
    """The inputs of an op labelled ``label`` as autocast runs it (``Function.autocast``): the
    float32 inputs of a ``"low"`` op in the autocast dtype, the fp16 inputs of an ``"fp32"`` op
    in float32, others (float64, integers) as they are, as PyTorch's autocast leaves them."""
    low = config.autocast_dtype
    source, target = (dtypes.float32, low) if label == "low" else (low, dtypes.float32)
    return tuple(cast(t, target) if t.data.dtype == source else t for t in inputs)


def to_device(a, device):
    """``a`` (a Tensor, or a number or an array taken as one) on ``"CPU"`` or ``"GPU"``.

    Raises:
        TypeError / ValueError: naming ``a`` for a value that is not a Tensor, a number or an
            array of numbers; naming ``device`` for a device other than ``"CPU"`` or ``"GPU"``.
    """
    return ToDevice.apply(as_tensor(a, name="a"), device=backend.check_device(device))


def _compare(name):
    def compare(a, b):
        a, b = binary_operands(a, b)
        xp = backend.get_array_module(a.data)
        try:
            return leaf(getattr(xp, name)(a.data, b.data))
        except ValueError:
            check_broadcast(("a", "b"), (a.shape, b.shape))
            raise
    compare.__name__ = name
    compare.__doc__ = f"Elementwise ``{name}`` as a bool tensor (not differentiable)."
    return compare


equal = _compare("equal")
not_equal = _compare("not_equal")
less = _compare("less")
less_equal = _compare("less_equal")
greater = _compare("greater")
greater_equal = _compare("greater_equal")
