"""fp16 <-> fp32 conversion of NumPy arrays at the speed of a copy.

NumPy converts between float16 and float32 one element at a time in software (about 1 ns an
element to fp32 and 2 ns to fp16, against 0.3 ns for a float32 copy), and an fp16 training
step converts millions of elements: every matmul widens its fp16 operands, every fp16 result is
rounded back. ``convert`` does it with the CPU's conversion instructions (``kernels/
convert_host.cpp``, built into ``minigrad.amp.kernels``' host library) and gives exactly the
bits NumPy's ``astype`` gives, NaN payloads included; see ``tests/test_fastcast.py``.

Everything that is not a large, dense NumPy float16/float32 array — small arrays (where the
call costs more than it saves), other dtypes, non-contiguous views, CuPy arrays — goes to
``astype``, as does everything when the host library is missing (no compiler,
``MINIGRAD_NATIVE=0``) or has no vector conversion (a CPU without F16C).
"""
import numpy

_F16 = numpy.dtype(numpy.float16)
_F32 = numpy.dtype(numpy.float32)
_PAIRS = frozenset([(_F16, _F32), (_F32, _F16)])
# Below this many elements ``astype`` is faster: the native call costs about 3 µs in Python.
MIN_SIZE = 4096

_native = {}  # "fns": {(from, to): ctypes function} or None when there is no vector conversion


def _functions():
    if "fns" not in _native:
        from minigrad.amp import kernels  # late: minigrad.amp imports the ops, which import us
        lib = kernels.host_library()
        _native["fns"] = None if lib is None or not lib.mg_convert_vectorized() else {
            (_F16, _F32): lib.mg_half_to_float, (_F32, _F16): lib.mg_float_to_half}
    return _native["fns"]


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

    Overflow to inf warns (or raises) as NumPy's cast does, under ``numpy.errstate``.
    """
    fn = None
    if type(x) is numpy.ndarray and x.size >= MIN_SIZE and (x.dtype, dtype) in _PAIRS:
        fns = _functions()
        if fns is not None:
            fn = fns[x.dtype, dtype]
    if fn is not None:
        c_order = x.flags.c_contiguous
        if out is None and (c_order or x.flags.f_contiguous) and x.flags.aligned:
            result = numpy.empty(x.shape, dtype, order="C" if c_order else "F")
            if not fn(x.ctypes.data, result.ctypes.data, x.size):
                return result
        elif (out is not None and type(out) is numpy.ndarray and out.dtype == dtype and out.shape == x.shape
              and x.flags.aligned and out.flags.aligned
              and (c_order and out.flags.c_contiguous or x.flags.f_contiguous and out.flags.f_contiguous)):
            if not fn(x.ctypes.data, out.ctypes.data, x.size):
                return out
        # else (a view, a mismatched ``out``), or an fp16 overflow: NumPy, for its warning
    if out is None:
        return x.astype(dtype)
    out[...] = x
    return out
