"""The saturating FP8 cast with a saturation counter, as a kernel (``kernels/fp8_cast.cu``).

``saturating_cast(x, fmt, scale)`` returns the FP8 bytes of ``x · scale`` (round to nearest even,
±max for anything beyond, ±inf included) and the number of elements it saturated. On the GPU it
is the CUDA kernel (``__nv_cvt_float_to_fp8`` with ``__NV_SATFINITE``, then one atomic add per
thread that clipped); on the CPU the same source built through ``kernels/host_shim.h`` (its twin
of the conversion is written out in float arithmetic), or ``reference`` in NumPy where no native
library was built. The count sits beside the float status's sticky inf/NaN flag: a NaN is not
counted (the flag sees it) and becomes CUDA's canonical NaN byte 0x7F.
"""
import math

import numpy

from minigrad import _native, backend
from minigrad.fp8.formats import E5M2, as_format, encode

THREADS = 256       # threads per block on the GPU
MAX_BLOCKS = 1024   # blocks of a GPU launch (a grid-stride loop covers the rest)
HOST_PARALLEL_MIN = 1 << 16  # fewer elements run on one host thread


def _kernel_name(fmt):
    return "fp8_cast_e5m2" if fmt is E5M2 else "fp8_cast_e4m3"


def _address(a):
    return a.ctypes.data if isinstance(a, numpy.ndarray) else a.data.ptr


def reference(x, fmt, scale=1.0):
    """``(bytes, saturated)`` in NumPy: ``encode(x · scale, saturate=True)`` with NaN as 0x7F,
    and the count of ``|x · scale| > max``."""
    fmt = as_format(fmt)
    xp = backend.get_array_module(x)
    with numpy.errstate(over="ignore"):  # an overflow to inf is a value to saturate
        v = xp.asarray(x, dtype=numpy.float32) * numpy.float32(scale)
    bits = xp.where(xp.isnan(v), numpy.uint8(0x7F), encode(v, fmt, True)).astype(numpy.uint8)
    return bits, int(xp.count_nonzero(xp.abs(v) > fmt.max))


def saturating_cast(x, fmt, scale=1.0):
    """``(bytes, saturated)``: the FP8 bytes (``uint8``, x's shape) of ``x · scale`` cast with
    saturation, and how many elements were beyond ±max (module docstring).

    Args:
        x: a float32 array (NumPy or CuPy; other floats are converted to float32 first).
        fmt: "E4M3", "E5M2" or an ``Fp8Format``.
        scale: a float multiplier (float32). Default 1.

    Raises:
        TypeError / ValueError: for a ``fmt`` that is not a format.
    """
    fmt = as_format(fmt, owner="saturating_cast")
    xp = backend.get_array_module(x)
    x = xp.ascontiguousarray(xp.asarray(x, dtype=numpy.float32))
    if _address(x) % 16:  # the kernel reads x 16 bytes at a time
        x = x.copy()
    out = xp.empty(x.shape, dtype=numpy.uint8)
    if x.size == 0:
        return out, 0
    if xp is numpy:
        lib = _native.loaded().lib
        if lib is None:
            return reference(x, fmt, scale)
        counter = numpy.zeros(1, dtype=numpy.uint32)
        grid = 1 if x.size < HOST_PARALLEL_MIN else _native.host_threads()
        getattr(lib, "launch_" + _kernel_name(fmt))(
            grid, x.ctypes.data, out.ctypes.data, x.size, float(numpy.float32(scale)),
            counter.ctypes.data)
        return out, int(counter[0])
    counter = xp.zeros(1, dtype=numpy.uint32)
    blocks = min(MAX_BLOCKS, math.ceil(x.size / THREADS))
    kernel = _native.cuda_function(_kernel_name(fmt), _native.FP8_SOURCE)
    kernel((blocks,), (THREADS,), (x, out, numpy.uint64(x.size), numpy.float32(scale), counter))
    return out, int(counter.get()[0])
