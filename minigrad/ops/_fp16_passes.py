"""Fused fp16 passes of the ops on the host: each replaces several NumPy calls with one native
call (``kernels/convert_host.cpp``): inside a training step every separate call pays several
microseconds of cold caches, whatever its size.

``relu_half`` and ``relu_half_backward`` serve ``ops.relu``; ``add_bias_to_half`` and
``widen_sum_rows`` serve Dense's fp16 epilogue and bias gradient (``ops.linalg``). They return
the NumPy code's bits (the fp16 native tests check them), and None where they do not apply:
not a C-ordered NumPy array of the expected dtype, no host library or no vector conversion
(``minigrad._native.HostBuild.fp16_passes`` is None), and for the two Dense passes, also a
result that is inf or NaN: the op then runs its NumPy code, which gives NumPy's warnings. Only
host arrays that qualify ever load the host library.
"""
import numpy

from minigrad import _native
from minigrad._fastcast import underflow_ignored
from minigrad.backend import data_address

_F16 = numpy.dtype(numpy.float16)
_F32 = numpy.dtype(numpy.float32)


def _host(x, dtype):
    """Whether ``x`` is a non-empty, aligned, C-ordered NumPy array of ``dtype``."""
    return (type(x) is numpy.ndarray and x.dtype == dtype and x.size > 0 and x.flags.c_contiguous
            and x.flags.aligned)


def _library():
    return _native.loaded().fp16_passes


def relu_half(x):
    """ReLU of an fp16 array in one pass: ``(out, mask)`` with ``mask = x > 0`` and ``out = x``
    where ``mask`` or ``x`` is NaN (payload kept, as ``numpy.maximum(x, 0)`` keeps it), else +0.
    None where it does not apply."""
    lib = _library() if _host(x, _F16) else None
    if lib is None:
        return None
    out, mask = numpy.empty(x.shape, _F16), numpy.empty(x.shape, numpy.bool_)
    lib.mg_relu_half(data_address(x), data_address(out), data_address(mask), x.size)
    return out, mask


def relu_half_backward(g, mask):
    """``g`` where ``mask`` else +0, for an fp16 ``g`` and the boolean mask of ``relu_half``, in
    one pass. None where it does not apply."""
    fits = _host(g, _F16) and _host(mask, numpy.bool_) and mask.shape == g.shape
    lib = _library() if fits else None
    if lib is None:
        return None
    out = numpy.empty(g.shape, _F16)
    lib.mg_relu_half_backward(data_address(g), data_address(mask), data_address(out), g.size)
    return out


def add_bias_to_half(y, b):
    """``(y + b.astype(float32)).astype(float16)`` for an fp32 (rows, cols) ``y`` and an fp16
    (cols,) ``b``, in one pass (``y`` is not written): Dense's fp16 epilogue. None where it does
    not apply (also while NumPy does not ignore underflow), and where a result is inf or NaN: the
    caller's NumPy code then computes it, with NumPy's warnings."""
    lib = (_library() if y.ndim == 2 and _host(y, _F32) and _host(b, _F16)
           and b.shape == y.shape[1:]
           and underflow_ignored() else None)
    if lib is None:
        return None
    out = numpy.empty(y.shape, _F16)
    if lib.mg_add_bias_to_half(data_address(y), data_address(b), data_address(out), y.shape[0],
                               y.shape[1]):
        return None
    return out


def widen_sum_rows(g):
    """``(g32, g32.sum(axis=0).astype(float16))`` with ``g32 = g.astype(float32)``, for an fp16
    (rows, cols) ``g``, in one pass: Dense's fp16 bias gradient. None where it does not apply,
    which includes a single column (NumPy sums one column pairwise; the native sum adds row
    after row, as NumPy does for two columns or more), and where a sum is inf or NaN: the
    caller's NumPy code then computes it, with NumPy's warnings. (Rounding the sums cannot
    underflow: fp16 values and their fp32 sums are multiples of 2⁻²⁴, and every such number
    below fp16's smallest normal is an fp16 subnormal.)"""
    lib = _library() if g.ndim == 2 and g.shape[1] > 1 and _host(g, _F16) else None
    if lib is None:
        return None
    g32, gb = numpy.empty(g.shape, _F32), numpy.empty(g.shape[1], _F16)
    if lib.mg_half_to_float_colsum(data_address(g), data_address(g32), data_address(gb),
                                   g.shape[0], g.shape[1]):
        return None
    return g32, gb
