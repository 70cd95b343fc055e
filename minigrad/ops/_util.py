"""Helpers shared by the ops: axis arguments, and gradient un-broadcasting with fp32 sums for
fp16."""
import numpy

from minigrad import dtype as dtypes
from minigrad._checks import is_int
from minigrad._fp16_host import convert


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
