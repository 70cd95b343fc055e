"""The FP8 formats and their round-to-nearest-even casts, written out in array arithmetic.

An FP8 value is one byte ``s eeee mmm`` (E4M3) or ``s eeeee mm`` (E5M2)::

    normal    (-1)^s · 2^(e - bias) · (1 + m / 2^M)        e > 0
    subnormal (-1)^s · 2^(1 - bias) · (m / 2^M)            e = 0

==========  ====  ====  =====  =========  =============  ==============  ======================
format      exp   man   bias   max        min normal     min subnormal   specials
==========  ====  ====  =====  =========  =============  ==============  ======================
E4M3 (fn)   4     3     7      448        2^-6           2^-9            NaN = s.1111.111, no inf
E5M2        5     2     15     57344      2^-14          2^-16           inf = s.11111.00, NaN
==========  ====  ====  =====  =========  =============  ==============  ======================

(Micikevicius et al., "FP8 Formats for Deep Learning", 2022, Table 1.)

``encode`` rounds to the nearest FP8 value, ties to the even mantissa, and returns the bytes as
``uint8``, so the same code runs on NumPy and CuPy (which has no FP8 dtype). Out of range it
either saturates to ±max (``saturate=True``: CUDA's ``__NV_SATFINITE``, Transformer Engine,
torchao's clamp before the cast; ±inf become ±max too) or does what a plain cast does
(``saturate=False``: ml_dtypes and PyTorch give NaN for E4M3, which has no inf, and ±inf for
E5M2). NaN stays NaN with its sign. The tests check every byte against ml_dtypes.
"""
from dataclasses import dataclass

import numpy

from minigrad import backend, dtype


@dataclass(frozen=True)
class Fp8Format:
    """One FP8 format: ``name`` (the ml_dtypes / minigrad dtype name), exponent and mantissa
    bits, exponent bias, largest finite value, whether it has inf, and its NaN byte."""
    name: str
    exp_bits: int
    man_bits: int
    bias: int
    max: float
    has_inf: bool
    nan_byte: int

    @property
    def min_normal_exp(self):
        """The exponent of the smallest normal value, 1 - bias (subnormals share its spacing)."""
        return 1 - self.bias

    @property
    def smallest_subnormal(self):
        return 2.0 ** (self.min_normal_exp - self.man_bits)

    @property
    def inf_byte(self):
        return ((1 << self.exp_bits) - 1) << self.man_bits

    def __repr__(self):
        return f"Fp8Format({self.name}, max={self.max:g})"


E4M3 = Fp8Format("float8_e4m3fn", 4, 3, 7, 448.0, False, 0x7F)
E5M2 = Fp8Format("float8_e5m2", 5, 2, 15, 57344.0, True, 0x7E)
FORMATS = {"E4M3": E4M3, "E5M2": E5M2}


def as_format(fmt, name="fmt", owner=None):
    """``fmt`` as an ``Fp8Format``: one already, "E4M3"/"E5M2" (any case), or the dtype names
    "float8_e4m3fn"/"float8_e5m2".

    Raises:
        TypeError: for a value that is not an Fp8Format or a str.
        ValueError: for another name.
    """
    if isinstance(fmt, Fp8Format):
        return fmt
    from minigrad._checks import check_in
    names = {**FORMATS, "FLOAT8_E4M3FN": E4M3, "FLOAT8_E5M2": E5M2}
    key = fmt.upper() if isinstance(fmt, str) else fmt
    return names[check_in(name, key, tuple(names), owner=owner)]


def encode(x, fmt, saturate=True):
    """The FP8 bytes (``uint8``, x's shape) nearest to ``x`` (a float array), ties to even;
    ``saturate`` as in the module docstring. ml_dtypes' cast on NumPy where it is installed,
    else ``encode_arith``."""
    fmt = as_format(fmt)
    xp = backend.get_array_module(x)
    if xp is numpy and dtype.FP8:
        x = numpy.asarray(x)
        if x.dtype not in (numpy.float16, numpy.float32, numpy.float64):
            x = x.astype(numpy.float32)
        if saturate:
            x = numpy.clip(x, -fmt.max, fmt.max)  # NaN stays NaN
        return x.astype(getattr(dtype, fmt.name)).view(numpy.uint8)
    return encode_arith(x, fmt, saturate)


def encode_arith(x, fmt, saturate=True):
    """``encode`` in array arithmetic (NumPy or CuPy).

    The rounding is exact: with ``x = f · 2^E`` (``frexp``) the FP8 spacing in x's binade is
    ``q = 2^(max(E - 1, 1 - bias) - man_bits)`` and ``rint(|x| / q) · q`` rounds to nearest even
    in float64, where the division by a power of two is exact for float16/32/64 input.
    """
    fmt = as_format(fmt)
    xp = backend.get_array_module(x)
    x = xp.asarray(x, dtype=numpy.float64)
    sign = xp.signbit(x).astype(numpy.uint8) << 7
    mag = xp.abs(x)
    nan, inf = xp.isnan(mag), xp.isinf(mag)
    mag = xp.where(nan | inf, 0.0, mag)
    _, e = xp.frexp(mag)  # mag = f · 2^e, f in [0.5, 1): the binade's exponent is e - 1
    exp = xp.maximum(e - 1, fmt.min_normal_exp)
    quantum = xp.ldexp(xp.ones_like(mag), exp - fmt.man_bits)
    rounded = xp.rint(mag / quantum) * quantum
    over = inf | (rounded > fmt.max)
    rounded = xp.where(over, fmt.max, rounded)
    body = _pack(rounded, fmt, xp)
    if saturate:
        body = xp.where(over, _pack(fmt.max, fmt, xp), body)
    else:  # as a plain cast: E5M2 overflows to inf, E4M3 (no inf) to NaN
        body = xp.where(over, fmt.inf_byte if fmt.has_inf else fmt.nan_byte, body)
    body = xp.where(nan, fmt.nan_byte, body).astype(numpy.uint8)
    return sign | body


def _pack(mag, fmt, xp):
    """The low 7 bits of FP8 values ``mag`` (non-negative, on the FP8 grid, at most max)."""
    mag = xp.asarray(mag, dtype=numpy.float64)
    _, e = xp.frexp(mag)
    exp = e - 1
    normal = (mag > 0) & (exp >= fmt.min_normal_exp)
    shift = xp.where(normal, exp, fmt.min_normal_exp) - fmt.man_bits
    units = xp.ldexp(mag, -shift).astype(numpy.int64)  # the significand in units of spacing
    man = xp.where(normal, units - (1 << fmt.man_bits), units)
    biased = xp.where(normal, exp + fmt.bias, 0)
    return ((biased << fmt.man_bits) | man).astype(numpy.uint8)


def decode_table(fmt, xp=numpy):
    """The float32 value of each of the 256 bytes of ``fmt`` (index = byte)."""
    fmt = as_format(fmt)
    byte = numpy.arange(256)
    e = (byte >> fmt.man_bits) & ((1 << fmt.exp_bits) - 1)
    m = byte & ((1 << fmt.man_bits) - 1)
    mag = numpy.where(e > 0, numpy.ldexp(1.0 + m / 2.0 ** fmt.man_bits, e - fmt.bias),
                      numpy.ldexp(m / 2.0 ** fmt.man_bits, fmt.min_normal_exp))
    top = e == (1 << fmt.exp_bits) - 1
    if fmt.has_inf:  # IEEE-like: all-ones exponent is inf (m = 0) or NaN
        mag = numpy.where(top, numpy.where(m == 0, numpy.inf, numpy.nan), mag)
    else:  # E4M3 (fn): only s.1111.111 is NaN
        mag = numpy.where(top & (m == (1 << fmt.man_bits) - 1), numpy.nan, mag)
    table = numpy.where(byte >= 128, -mag, mag).astype(numpy.float32)
    return xp.asarray(table)


def decode(bits, fmt):
    """The float32 values of FP8 bytes ``bits`` (``uint8``)."""
    xp = backend.get_array_module(bits)
    return decode_table(fmt, xp)[bits]
