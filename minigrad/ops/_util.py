"""Helpers shared by the ops: operand coercion (the dtype policy) and gradient un-broadcasting."""
import numpy

import minigrad.tensor as _tensor  # a cycle: tensor.py imports the ops
from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import is_int
from minigrad._fp16_host import convert

_NUMBERS = (int, float, numpy.number, numpy.bool_)  # bool is an int
_NOT_NUMERIC = numpy.dtype(object)


def tensor_class():
    return _tensor.Tensor


def leaf(array):
    """A constant tensor (no graph) around ``array``, without checks."""
    return _tensor.make(array, None, 0)


def as_tensor(value, like=None):
    """``value`` as a Tensor; a non-tensor beside tensor ``like`` is weak (takes its dtype)."""
    Tensor = tensor_class()
    if isinstance(value, Tensor):
        return value
    if like is None:
        return Tensor(value)
    xp = backend.get_array_module(like.data)
    if isinstance(value, (list, tuple)):
        # nested Python data is weak as a whole, like the array it makes: [0.5, 1.5] beside an
        # int tensor is float (weak_dtype reads only a scalar's or an array's kind)
        value = numpy.asarray(value)
    if not isinstance(value, _NUMBERS) and getattr(value, "dtype", _NOT_NUMERIC).kind not in "biuf":
        # None or "nan" would become NaN in asarray(value, dtype=float)
        raise TypeError(f"an operand beside a Tensor must be a Tensor, a number or an array of "
                        f"numbers, got {value!r:.60} ({type(value).__name__})")
    dtype = dtypes.weak_dtype(value, like.data.dtype)
    return leaf(xp.asarray(value, dtype=dtype))


def binary_operands(a, b):
    """Coerce two operands to tensors of one dtype: weak scalars adopt, mixed floats promote.

    Raises:
        ValueError: naming both devices when two tensors live on different devices.
    """
    Tensor = tensor_class()
    a_is, b_is = isinstance(a, Tensor), isinstance(b, Tensor)
    if not a_is:
        if not b_is:
            raise TypeError(f"expected at least one Tensor operand, got {type(a).__name__} "
                            f"and {type(b).__name__}")
        a = as_tensor(a, b)
    elif not b_is:
        b = as_tensor(b, a)
    elif backend.cupy is not None and backend.device_of(a.data) != backend.device_of(b.data):
        raise ValueError(f"operands are on different devices: {a.device} (shape {a.shape}) and "
                         f"{b.device} (shape {b.shape}); move one with Tensor.to(device)")
    if a.data.dtype != b.data.dtype:
        common = dtypes.promote_types(a.data.dtype, b.data.dtype)
        a, b = cast(a, common), cast(b, common)
    return a, b


def cast(t, dtype):
    from minigrad.ops.arithmetic import cast as cast_op
    return cast_op(t, dtype)


def unbroadcast(grad, shape):
    """Sum ``grad`` over the axes that broadcasting added or stretched, giving ``shape``."""
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1)
    return sum_acc(grad, axes, keepdims=False).reshape(shape)



def sum_acc(x, axis, keepdims):
    """Sum with fp32 accumulation for fp16, returned in ``x``'s dtype.

    fp16 is widened first (``convert``): NumPy's ``sum(dtype=float32)`` of fp16 casts element by
    element in its buffered loop, several times slower than a conversion and an fp32 sum.
    """
    if x.dtype == dtypes.float16:
        return convert(convert(x, dtypes.float32).sum(axis=axis, keepdims=keepdims), dtypes.float16)
    return x.sum(axis=axis, keepdims=keepdims)


def normalize_axis(axis, ndim, name="axis"):
    """``axis`` (None, int or sequence of ints) as a sorted tuple of non-negative ints.

    Raises:
        TypeError: naming ``name`` for an axis that is not an int or a sequence of ints.
        ValueError: naming ``name`` for an axis out of range.
    """
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, numpy.integer)):
        axes = (axis,)
    elif isinstance(axis, (tuple, list)):
        axes = tuple(axis)
    else:
        axes = (None,)  # refused below
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, numpy.integer)):
            # int(0.5) would silently reduce axis 0
            raise TypeError(f"{name} must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= a < max(ndim, 1):
            raise ValueError(f"{name}={axis} is out of range for a tensor of {ndim} dimensions")
        out.append(int(a) % max(ndim, 1))
    return tuple(sorted(set(out)))


def one_axis(axis, ndim, name="axis"):
    """``axis`` (one int, negative counting from the end) as a non-negative int below ``ndim``.

    Raises:
        TypeError: naming ``name`` for an axis that is not an int (a list, a float, None).
        ValueError: naming ``name`` for an axis out of range.
    """
    if not is_int(axis):
        raise TypeError(f"{name} must be an int, got {axis!r} ({type(axis).__name__})")
    return normalize_axis(axis, ndim, name)[0]


def check_float_tensor(t, op):
    if t.data.dtype.kind != "f":
        raise TypeError(f"{op} expects a float tensor (float16/float32/float64), got "
                        f"{t.data.dtype}")
