"""fp16 on the host: float16 <-> float32 conversion at the speed of a copy, and the two helpers
every op applies the fp16 compute rule with.

NumPy converts between float16 and float32 one element at a time in software (about 1 ns an
element to fp32 and 2 ns to fp16, against 0.3 ns for a float32 copy), and an fp16 training
step converts millions of elements: every matmul widens its fp16 operands, every fp16 result is
rounded back. ``convert`` does it with the CPU's conversion instructions (``kernels/
convert_host.cpp``, built into the host library of ``minigrad._native``) and gives exactly the
bits NumPy's ``astype`` gives, NaN payloads included; see ``tests/core/test_fastcast.py``.

Everything that is not a large, dense NumPy float16/float32 array (small arrays, where the
call costs more than it saves; other dtypes; non-contiguous views; CuPy arrays) goes to
``astype``, as does everything when the host library is missing (no compiler,
``MINIGRAD_NATIVE=0``) or has no vector conversion (a CPU without F16C).

The ops compute fp16 in the dtype ``minigrad.dtype.acc_dtype`` names (float32) and store in
the tensor's dtype: ``widen(x)`` and ``store(y, dtype)`` are those two steps, both through
``convert``.

Rounding to fp16 can underflow, and NumPy reports that as it reports overflow, but only when
``numpy.errstate(under=...)`` (or ``seterr``) asks: the default is "ignore". The native code does
not report underflow, so the conversion to float16 leaves the work to NumPy whenever underflow
is not ignored (``underflow_ignored``): a lesson that turns underflow warnings on sees every one.
"""
import numpy

from minigrad import _native
from minigrad.backend import data_address

_F16 = numpy.dtype(numpy.float16)
_F32 = numpy.dtype(numpy.float32)
_PAIRS = frozenset([(_F16, _F32), (_F32, _F16)])
# Below this many elements ``astype`` is as fast: the native call costs about 1 µs in Python, and
# 1024 instead of 4096 gained nothing inside the O2 training step (its 1280-element casts).
MIN_SIZE = 4096


def underflow_ignored():
    """Whether NumPy ignores underflow now (its default): the native rounding to fp16 may run."""
    return numpy.geterr()["under"] == "ignore"


def convert(x, dtype, out=None):
    """``x.astype(dtype)``, bit for bit, fast for float16 <-> float32 NumPy arrays.

    Args:
        x: a NumPy or CuPy array.
        dtype: the dtype of the result, a ``numpy.dtype`` (a type such as ``numpy.float16``
            still converts correctly, through ``astype``).
        out: optional array of ``x``'s shape and dtype ``dtype`` to write into instead of
            allocating (``out[...] = x`` with the conversion); it must not overlap ``x``.

    Returns:
        A new array in ``x``'s memory order (``astype``'s ``order="K"`` for C- and F-ordered
        arrays), or ``out``.

    Overflow to inf warns (or raises) as NumPy's cast does, under ``numpy.errstate``; so does
    underflow, for which the conversion to float16 runs as ``astype`` unless it is ignored.
    """
    fn = None
    if type(x) is numpy.ndarray and x.size >= MIN_SIZE and (x.dtype, dtype) in _PAIRS:
        fns = _native.loaded().conversions
        if fns is not None and (dtype == _F32 or underflow_ignored()):
            fn = fns[x.dtype, dtype]
    if fn is not None:
        c_order = x.flags.c_contiguous
        if out is None and (c_order or x.flags.f_contiguous) and x.flags.aligned:
            result = numpy.empty(x.shape, dtype, order="C" if c_order else "F")
            if not fn(data_address(x), data_address(result), x.size):
                return result
        elif (out is not None and type(out) is numpy.ndarray and out.dtype == dtype
              and out.shape == x.shape and x.flags.aligned and out.flags.aligned
              and out.flags.writeable
              and (c_order and out.flags.c_contiguous
                   or x.flags.f_contiguous and out.flags.f_contiguous)):
            if not fn(data_address(x), data_address(out), x.size):
                return out
        # else (a view, a mismatched ``out``), or an fp16 overflow: NumPy, for its warning
    if out is None:
        return x.astype(dtype)
    out[...] = x
    return out




def widen(x):
    """``x`` in the dtype its ops compute in, through ``convert``: float16 as float32, other
    dtypes as they are (``minigrad.dtype.acc_dtype``'s rule, spelled out here because every op
    calls it): NumPy has no fp16 BLAS, and fp16 intermediates overflow."""
    return convert(x, _F32) if x.dtype == _F16 else x


def store(y, dtype):
    """``y`` rounded once to ``dtype`` (the tensor's storage dtype), through ``convert``; ``y``
    itself when it already has it."""
    return y if y.dtype == dtype else convert(y, dtype)
