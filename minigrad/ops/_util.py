"""Helpers shared by the ops: axis arguments, and gradient un-broadcasting with fp32 sums for
fp16."""

from minigrad import dtype as dtypes
from minigrad._checks import check_axes
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
    """``axis`` (None: every axis; an int or a tuple/list of ints) as a sorted tuple of
    non-negative axes of a tensor of ``ndim`` dimensions.

    Raises:
        TypeError / ValueError: naming ``name``, as ``_checks.check_axes``.
    """
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(check_axes(name, axis, ndim)))
