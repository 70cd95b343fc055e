"""Native host passes of batch norm in training (``kernels/norm_host.cpp``, built into the host
library of ``minigrad._native``): the forward and backward passes over a float32 NumPy batch
stored channels-last, two passes each way.

``minigrad.ops.normalization`` otherwise computes the statistics, x - μ, Σ (x - μ)², the
normalised output, and in backward Σ g, x - μ, Σ g·(x - μ) and dx in NumPy passes over the whole
batch; on a channels-last batch those run over rows of a few channels, and each costs about a
read of the batch from memory. Here:

* ``moments``: μ and σ² (biased) per channel in one read, summed in float64 about the first
  row's values (the shift that keeps the variance free of cancellation);
* ``normalize``: ``out = ((x - μ) · a) + b``;
* ``grad_sums``: Σ g and Σ g·(x - μ), x - μ rounded to float32, in float64;
* ``dx``: ``out = ((((x - μ) · k) + g) - s) · a``.

``normalize`` and ``dx`` round each operation as NumPy's passes do and give their bits for the
same vectors; the sums are more accurate than NumPy's float32 sums (tests/ops/test_norm_host.py).
Each function returns None, having written nothing, where it does not apply: not a non-empty,
aligned float32 NumPy array stored channels-last (an (N, C) batch: C-ordered), a vector of
another dtype or size, a gradient laid out otherwise than x, an output that is not writable, or
no host library (``MINIGRAD_NATIVE=0``, no compiler). The caller then runs its NumPy passes.
"""
import numpy

from minigrad import _native
from minigrad.backend import data_address

_F32 = numpy.dtype(numpy.float32)


def channel_rows(a, written=False):
    """The float32 NumPy array ``a`` (N, C, ...) as its (rows, C) C-ordered matrix, a view, where
    it is stored channels-last (an (N, C) array: C-ordered) and, if it is to be ``written``,
    writable; else None."""
    if not (type(a) is numpy.ndarray and a.dtype == _F32 and a.ndim >= 2 and a.size
            and a.flags.aligned and (a.flags.writeable or not written)):
        return None
    rows = a.transpose((0, *range(2, a.ndim), 1))
    return rows.reshape(-1, a.shape[1]) if rows.flags.c_contiguous else None


def _vectors(c, *vectors):
    """Each per-channel (1, C, 1, ...) float32 vector as a C-ordered array of C values, or None
    if one is of another dtype or size (NumPy's broadcast then decides the result)."""
    flat = [v.reshape(-1) for v in vectors]
    if any(type(v) is not numpy.ndarray or v.dtype != _F32 or v.size != c for v in flat):
        return None
    return [numpy.ascontiguousarray(v) for v in flat]


def _library():
    return (_native.host_build or _native.loaded()).lib


def _per_channel(values, like):
    """The C values of a float32 vector in the shape (1, C, 1, ...) of ``like``'s statistics."""
    return values.reshape([1, like.shape[1], *[1] * (like.ndim - 2)])


def moments(x):
    """(μ, σ²) of the channels-last float32 batch ``x`` over every axis but 1, as float32 arrays of
    shape (1, C, 1, ...); σ² is biased (divided by the number of rows). None where it does not
    apply."""
    rows = channel_rows(x)
    lib = None if rows is None else _library()
    if lib is None:
        return None
    mean, var = numpy.empty(rows.shape[1], _F32), numpy.empty(rows.shape[1], _F32)
    lib.mg_bn_moments(data_address(rows), data_address(mean), data_address(var), *rows.shape)
    return _per_channel(mean, x), _per_channel(var, x)


def normalize(x, mean, a, b, out):
    """``out = ((x - mean) * a) + b`` per channel, for channels-last float32 ``x`` and ``out``
    laid out alike (``out`` may be ``x``). ``out``, or None where it does not apply."""
    rows = channel_rows(x)
    out_rows = channel_rows(out, written=True) if out.shape == x.shape else None
    vectors = None if rows is None or out_rows is None else _vectors(rows.shape[1], mean, a, b)
    lib = None if vectors is None else _library()
    if lib is None:
        return None
    lib.mg_bn_normalize(data_address(rows), data_address(out_rows),
                        *(data_address(v) for v in vectors), *rows.shape)
    return out


def grad_sums(x, g, mean):
    """(Σ g, Σ g·(x - mean)) per channel for channels-last float32 ``x`` and ``g`` laid out alike,
    as float32 arrays of shape (1, C, 1, ...). None where it does not apply."""
    rows = channel_rows(x)
    g_rows = channel_rows(g) if g.shape == x.shape else None
    vectors = None if rows is None or g_rows is None else _vectors(rows.shape[1], mean)
    lib = None if vectors is None else _library()
    if lib is None:
        return None
    sum_g, sum_gc = numpy.empty(rows.shape[1], _F32), numpy.empty(rows.shape[1], _F32)
    lib.mg_bn_grad_sums(data_address(rows), data_address(g_rows), data_address(vectors[0]),
                        data_address(sum_g), data_address(sum_gc), *rows.shape)
    return _per_channel(sum_g, x), _per_channel(sum_gc, x)


def dx(x, g, mean, k, s, a, out):
    """``out = ((((x - mean) * k) + g) - s) * a`` per channel, for channels-last float32 ``x``,
    ``g`` and ``out`` laid out alike (``out`` may be ``x``): batch norm's dx. ``out``, or None
    where it does not apply."""
    rows = channel_rows(x)
    fits = rows is not None and g.shape == out.shape == x.shape
    g_rows = channel_rows(g) if fits else None
    out_rows = channel_rows(out, written=True) if g_rows is not None else None
    vectors = None if out_rows is None else _vectors(rows.shape[1], mean, k, s, a)
    lib = None if vectors is None else _library()
    if lib is None:
        return None
    lib.mg_bn_dx(data_address(rows), data_address(g_rows), data_address(out_rows),
                 *(data_address(v) for v in vectors), *rows.shape)
    return out
