"""Helpers shared by the ops: axis arguments, gradient un-broadcasting with fp32 sums for fp16,
accurate sums over the outer axes of a batch, and a select by bit patterns. The sums take
Tensors too (the gradient rules under ``create_graph``)."""
import math

import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_axes
from minigrad._fp16_host import convert
from minigrad.tensor import Tensor


def unbroadcast(grad, shape):
    """Sum ``grad`` over the axes that broadcasting added or stretched, giving ``shape``."""
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1)
    return sum_acc(grad, axes, keepdims=False).reshape(shape)


def sum_acc(x, axis, keepdims):
    """Sum with fp32 accumulation for fp16 and bf16, returned in ``x``'s dtype.

    fp16 is widened first (``convert``): NumPy's ``sum(dtype=float32)`` of fp16 casts element by
    element in its buffered loop, several times slower than a conversion and an fp32 sum.
    """
    if dtypes.is_low_precision(x.dtype):
        return convert(convert(x, dtypes.float32).sum(axis=axis, keepdims=keepdims), x.dtype)
    return x.sum(axis=axis, keepdims=keepdims)


def sum_axes(a, axes):
    """Σ of ``a`` over ``axes`` (sorted; keepdims), in a's dtype, with about the error of a
    pairwise sum: the per-channel sums of conv2d's bias gradient and of batch norm.

    When the summed axes are the outer ones in memory (a channels-last batch summed over
    N, H, W; an (N, C) batch over N), NumPy's reduction adds rows of the kept axes one after
    the other: ten times slower than memory allows, and with an error that grows with the
    number of rows (enough, through BatchNorm's backward, to move a ResNet's first weight
    gradients by 0.5 %). There the first summed axis (N) goes through one BLAS product with a
    ones vector, and the partial sums left (1/N of the values) are added in float64.
    Otherwise (an NCHW batch, a layer norm: the summed axes are inner) NumPy's own pairwise
    sum runs.
    """
    if isinstance(a, Tensor):  # a create_graph rule: the recorded sum
        return a.sum(axis=axes, keepdims=True)
    kept = tuple(i for i in range(a.ndim) if i not in axes)
    rows = a.transpose(axes + kept)
    if not rows.flags.c_contiguous or a.size == 0:
        return a.sum(axis=axes, keepdims=True)
    first = a.shape[axes[0]]
    partial = backend.get_array_module(a).ones(first, a.dtype) @ rows.reshape(first, -1)
    sums = partial.reshape(-1, math.prod(a.shape[i] for i in kept)).sum(axis=0, dtype="float64")
    return sums.astype(a.dtype).reshape([1 if i in axes else n for i, n in enumerate(a.shape)])


def dot_axes(a, b, axes):
    """Σ of ``a``·``b`` over ``axes`` (sorted; keepdims), in a's dtype, with the error of
    ``sum_axes`` and, where it can, without the product array: batch norm's Σ g·(x - μ) and
    Σ (x - μ)².

    When both are laid out alike with the summed axes outermost in memory (a channels-last
    batch), one ``einsum`` adds the products over the first summed axis (N) without storing
    them, and the partial sums left are added in float64, as ``sum_axes`` does. Otherwise the
    products are formed and summed by ``sum_axes``.
    """
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return (a * b).sum(axis=axes, keepdims=True)
    kept = tuple(i for i in range(a.ndim) if i not in axes)
    order = axes + kept
    rows_a, rows_b = a.transpose(order), b.transpose(order)
    if not (rows_a.flags.c_contiguous and rows_b.flags.c_contiguous) or a.size == 0:
        return sum_axes(a * b, axes)
    first = a.shape[axes[0]]
    xp = backend.get_array_module(a)
    partial = xp.einsum("nk,nk->k", rows_a.reshape(first, -1), rows_b.reshape(first, -1))
    sums = partial.reshape(-1, math.prod(a.shape[i] for i in kept)).sum(axis=0, dtype="float64")
    return sums.astype(a.dtype).reshape([1 if i in axes else n for i, n in enumerate(a.shape)])


def per_channel(op, a, v, out):
    """``op(a, v, out=out)`` (a NumPy or CuPy ufunc) for an (N, C, ...) array ``a`` and a
    per-channel ``v`` of shape (1, C, 1, ...): batch norm's scale and shift passes.

    When ``a`` and ``out`` are both stored channels-last, NumPy's inner loop over a broadcast
    ``v`` would run over the C values of one pixel only (a few times slower than a plain pass
    for C = 16). There the pass runs over rows of (last spatial size)·C values, with ``v``
    tiled to one such row: the same operations on the same elements, so the same bits.
    """
    if a.ndim >= 3 and out is not None:
        order = (0,) + tuple(range(2, a.ndim)) + (1,)
        rows_a, rows_out = a.transpose(order), out.transpose(order)
        if rows_a.flags.c_contiguous and rows_out.flags.c_contiguous and a.size:
            width = a.shape[-1] * a.shape[1]
            xp = backend.get_array_module(a)
            tiled = xp.tile(v.reshape(a.shape[1]), a.shape[-1])
            op(rows_a.reshape(-1, width), tiled, out=rows_out.reshape(-1, width))
            return out
    return op(a, v, out=out)


def normalize_axis(axis, ndim, name="axis"):
    """``axis`` (None: every axis; an int or a tuple/list of ints) as a sorted tuple of
    non-negative axes of a tensor of ``ndim`` dimensions.

    Raises:
        TypeError / ValueError: naming ``name``, as ``_checks.check_axes``.
    """
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(check_axes(name, axis, ndim)))


def select_bits(g, mask, out=None):
    """The array ``g`` where ``mask``, else +0 (into ``out`` if given): ``where(mask, g, 0)``
    bit for bit (inf and NaN kept where selected, never a -0), computed as g's bit patterns
    times the mask, an integer product that runs several times faster than a select."""
    bits = numpy.dtype(f"i{g.dtype.itemsize}")
    xp = backend.get_array_module(g)
    kept = xp.multiply(g.view(bits), mask, out=None if out is None else out.view(bits))
    return kept.view(g.dtype)
