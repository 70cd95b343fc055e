"""Quantize an array to FP8 with a scale, dequantize it back, and measure what the cast did.

``quantize(x, fmt, scale)`` computes ``encode(x · scale)`` (``x · scale`` in float32, as the
libraries' kernels multiply) and returns a ``Quantized`` (the bytes, the format, the scale)
with the ``QuantStats`` of the cast::

    amax     max |x|  (NaN if x holds a NaN: the report shows it rather than skipping it)
    clipped  share of the elements with |x · scale| > max (±inf included): saturated to ±max
             (or turned into NaN / inf by a non-saturating cast)
    flushed  share of the elements that are finite and non-zero but became ±0
    sqnr_db  10 · log10(Σ x² / Σ (x - x̂)²) over the finite elements, x̂ = dequantize(q);
             inf when the cast is exact

``dequantize(q)`` is ``decode(bytes) / scale`` in float32 (torchao's ``to_original_precision``;
Transformer Engine multiplies by ``scale_inv = 1 / scale``, the same for power-of-two scales).
``scale`` is a number or an array that broadcasts against ``x`` (one per row, one per block).
A scale of 0, inf or NaN (what some recipes give for an amax of inf or NaN) is applied as given:
the values become NaN or 0 and the stats show it; a negative scale is refused.
"""
from dataclasses import dataclass

import numpy

from minigrad import backend
from minigrad.fp8.formats import as_format, decode, encode


@dataclass
class Quantized:
    """An FP8 tensor: ``bits`` (uint8 bytes), ``fmt`` (``Fp8Format``), ``scale`` (float32,
    broadcasting against ``bits``)."""
    bits: object
    fmt: object
    scale: object
    shape_out: tuple = None  # the dequantized shape, where the bytes are held in blocks

    def values(self):
        """The FP8 values as an ml_dtypes array (``minigrad.float8_e4m3fn`` / ``float8_e5m2``;
        NumPy only). Raises ImportError without ml_dtypes."""
        from minigrad import dtype
        return backend.as_numpy(self.bits).view(getattr(dtype, self.fmt.name))

    def dequantize(self):
        return dequantize(self)


@dataclass
class QuantStats:
    """What one cast did: ``amax``, ``scale`` (a float, or (min, max) over several scales),
    the shares ``clipped`` and ``flushed`` (0..1) and ``sqnr_db`` (module docstring)."""
    amax: float
    scale: object
    clipped: float
    flushed: float
    sqnr_db: float

    def row(self):
        """The stats as a dict of plain floats (a scale range as its min and max)."""
        scale = self.scale if isinstance(self.scale, tuple) else (self.scale, self.scale)
        return {"amax": self.amax, "scale_min": scale[0], "scale_max": scale[1],
                "clipped": self.clipped, "flushed": self.flushed, "sqnr_db": self.sqnr_db}


def quantize(x, fmt, scale, saturate=True):
    """``(Quantized, QuantStats)`` for ``x`` cast to FP8 format ``fmt`` after multiplying by
    ``scale``.

    Args:
        x: a float array (NumPy or CuPy; float16, bfloat16, float32 or float64).
        fmt: "E4M3", "E5M2" or an ``Fp8Format``.
        scale: a non-negative number, or a float array that broadcasts against ``x``.
        saturate: True (default) clips to ±max as ``__NV_SATFINITE`` does; False casts as
            ml_dtypes does (E4M3 overflow is NaN, E5M2 overflow is inf).

    Raises:
        TypeError / ValueError: for a ``fmt`` that is not a format, a non-bool ``saturate``,
            or a negative scale.
    """
    from minigrad._checks import check_bool, check_relation
    fmt = as_format(fmt, owner="quantize")
    check_bool("saturate", saturate, owner="quantize")
    xp = backend.get_array_module(x)
    x = xp.asarray(x)
    scale = xp.asarray(scale, dtype=numpy.float32)
    ok = not bool(xp.any(scale < 0))
    check_relation("scale", scale if scale.ndim else float(scale), ok, ">= 0", owner="quantize")
    scaled = x.astype(numpy.float32) * scale
    q = Quantized(encode(scaled, fmt, saturate), fmt, scale)
    return q, _stats(x, scaled, q, xp)


def dequantize(q):
    """``decode(q.bits) / q.scale`` in float32: the values the FP8 tensor stands for."""
    out = decode(q.bits, q.fmt) / q.scale
    return out if q.shape_out is None else out.reshape(q.shape_out)


def _stats(x, scaled, q, xp):
    x64 = x.astype(numpy.float64)
    back = (decode(q.bits, q.fmt) / q.scale).astype(numpy.float64)
    n = max(x.size, 1)
    mag = xp.abs(scaled)
    clipped = float(xp.count_nonzero(mag > q.fmt.max)) / n
    finite = xp.isfinite(x64)
    flushed = float(xp.count_nonzero(finite & (x64 != 0) & (back == 0))) / n
    err = xp.where(finite, x64 - back, 0.0)
    signal = float(xp.sum(xp.where(finite, x64, 0.0) ** 2))
    noise = float(xp.sum(err * err))
    sqnr = numpy.inf if noise == 0 else (10 * numpy.log10(signal / noise) if signal > 0
                                         else -numpy.inf)
    amax = float(xp.max(xp.abs(x64))) if x.size else 0.0
    scale = float(q.scale.ravel()[0]) if q.scale.size == 1 else (
        float(q.scale.min()), float(q.scale.max()))
    return QuantStats(amax, scale, clipped, flushed, float(sqnr))
