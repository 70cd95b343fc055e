"""fp16 on the host: float16 <-> float32 conversion at the speed of a copy, the two helpers every
op applies the fp16 compute rule with, and the fused fp16 passes of the ops.

NumPy converts between float16 and float32 one element at a time in software (about 1 ns an
element to fp32 and 2 ns to fp16, against 0.3 ns for a float32 copy), and an fp16 training
step converts millions of elements: every matmul widens its fp16 operands, every fp16 result is
rounded back. ``convert`` does it with the CPU's conversion instructions (``kernels/
convert_host.cpp``, built into the host library of ``minigrad._native``) and gives exactly the
bits NumPy's ``astype`` gives, NaN payloads included; see ``tests/core/test_fp16_host.py``.

Everything that is not a large, dense NumPy float16/float32 array (small arrays, where the
call costs more than it saves; other dtypes; non-contiguous views; CuPy arrays) goes to
``astype``, as does everything when the host library is missing (no compiler,
``MINIGRAD_NATIVE=0``) or has no vector conversion (a CPU without F16C).

bfloat16 <-> float32 has a native twin (``mg_bf16_to_float``, ``mg_float_to_bf16`` in the same
library; any CPU, no F16C needed) that gives ml_dtypes' ``astype`` bits: ``astype`` converts one
element at a time in software as NumPy does for float16. bfloat16 is the top half of a float32, so
widening is a shift (NaN payloads kept) and narrowing rounds the low half to nearest even
(subnormals kept, overflow to inf, a NaN becomes the quiet NaN 0x7FC0 with its sign). ``astype``
reports no overflow or underflow for bfloat16, only "invalid" for a signalling NaN input; the
native narrowing counts those and leaves such an array to ``astype``, for its warning. Without
ml_dtypes there is no bfloat16; without the host library ``astype`` does it. The FP8 formats
convert through ``astype``. ``tests/core/test_fp16_host_bf16.py`` checks the bits.

``convert`` and the ReLU passes also take a dense array in another axis order than C or F, such
as a channels-last image batch (``dense``), and give their result that order.

The ops compute fp16 in the dtype ``minigrad.dtype.acc_dtype`` names (float32) and store in
the tensor's dtype: ``widen(x)`` and ``store(y, dtype)`` are those two steps, both through
``convert``.

Rounding to fp16 can underflow, and NumPy reports that as it reports overflow, but only when
``numpy.errstate(under=...)`` (or ``seterr``) asks: the default is "ignore". The native code does
not report underflow, so the conversion to float16 leaves the work to NumPy whenever underflow
is not ignored (``underflow_ignored``): a lesson that turns underflow warnings on sees every one.

The fused passes each replace several NumPy calls with one native call (``kernels/
convert_host.cpp``): inside a training step every separate call pays several microseconds of
cold caches, whatever its size. ``relu_pass`` and ``relu_backward_pass`` serve ``ops.relu`` (in
fp32 too: NumPy's two passes and its bool-to-float product cost several times one native pass);
``add_bias_to_half`` serves the fp16 epilogue of Dense and conv2d, ``widen_sum_rows`` Dense's
bias gradient (``ops.linalg``); batch norm's passes are ``ops._norm_host``. They return the
NumPy code's bits (``tests/core/test_fp16_host_passes.py`` checks them), and None where they do
not apply: not a NumPy array of the expected dtype that is dense (the ReLU passes, in any axis
order: a channels-last image batch qualifies) or C-ordered (the row passes), no host library or no
vector conversion (``minigrad._native.HostBuild.fp16_passes`` is None), and for the two row
passes, also a result that is inf or NaN: the op then runs its NumPy code, which gives NumPy's
warnings. Only host arrays that qualify ever load the host library.
"""
import numpy

from minigrad import _native
from minigrad import dtype as dtypes
from minigrad.backend import data_address

_F16 = numpy.dtype(numpy.float16)
_F32 = numpy.dtype(numpy.float32)
_PAIRS = frozenset([(_F16, _F32), (_F32, _F16)]
                   + [p for d in dtypes.LOW_PRECISION if d != _F16 for p in ((d, _F32), (_F32, d))])
_NARROW = frozenset((*dtypes.LOW_PRECISION, *dtypes.FP8))  # the dtypes widen() makes float32
# Below this many elements ``astype`` is as fast: the native call costs about 1 µs in Python, and
# 1024 instead of 4096 gained nothing inside the O2 training step (its 1280-element casts).
# bfloat16 shares the threshold (measured for float16 only; at 4096 elements ``astype`` spends
# microseconds a call, more than the native call costs).
MIN_SIZE = 4096


def underflow_ignored():
    """Whether NumPy ignores underflow now (its default): the native rounding to fp16 may run."""
    return numpy.geterr()["under"] == "ignore"


def convert(x, dtype, out=None):
    """``x.astype(dtype)``, bit for bit, fast for float16 <-> float32 and bfloat16 <-> float32
    NumPy arrays (large, dense, aligned; see the module docstring).

    Args:
        x: a NumPy or CuPy array.
        dtype: the dtype of the result, a ``numpy.dtype`` (a type such as ``numpy.float16``
            still converts correctly, through ``astype``).
        out: optional array of ``x``'s shape and dtype ``dtype`` to write into instead of
            allocating (``out[...] = x`` with the conversion); it must not overlap ``x``.

    Returns:
        A new array in ``x``'s memory order (``astype``'s ``order="K"``: a dense array in any axis
        order, such as a channels-last image batch, converts natively), or ``out``.

    Overflow to inf warns (or raises) as NumPy's cast does, under ``numpy.errstate``; so does
    underflow, for which the conversion to float16 runs as ``astype`` unless it is ignored, and
    so does a signalling NaN rounded to bfloat16 ("invalid value encountered in cast"): such an
    array converts through ``astype``. Rounding to bfloat16 reports no overflow or underflow, as
    ``astype`` reports none.
    """
    fn = None
    if type(x) is numpy.ndarray and x.size >= MIN_SIZE and (x.dtype, dtype) in _PAIRS:
        fns = (_native.host_build or _native.loaded()).conversions
        if fns is not None and (dtype != _F16 or underflow_ignored()):
            fn = fns.get((x.dtype, dtype))
    if fn is not None:
        c_order = x.flags.c_contiguous
        if out is None and dense(x) and x.flags.aligned:
            result = numpy.empty_like(x, dtype)  # order "K": x's axis order, so the same flat order
            if not fn(data_address(x), data_address(result), x.size):
                return result
        elif (out is not None and type(out) is numpy.ndarray and out.dtype == dtype
              and out.shape == x.shape and x.flags.aligned and out.flags.aligned
              and out.flags.writeable
              and (c_order and out.flags.c_contiguous
                   or x.flags.f_contiguous and out.flags.f_contiguous)):
            if not fn(data_address(x), data_address(out), x.size):
                return out
        # else (a view, a mismatched ``out``), an fp16 overflow or a signalling NaN rounded to
        # bf16: NumPy, for its warning
    if out is None:
        return x.astype(dtype)
    out[...] = x
    return out


def widen(x):
    """``x`` in the dtype its ops compute in, through ``convert``: the low-precision floats
    (float16, bfloat16) and the FP8 formats as float32, other dtypes as they are
    (``minigrad.dtype.acc_dtype``'s rule): NumPy has no fp16 or bf16 BLAS (ml_dtypes' bf16
    ``dot`` is a scalar loop), fp16 intermediates overflow and bf16 sums lose their small terms."""
    return convert(x, _F32) if x.dtype in _NARROW else x


def store(y, dtype):
    """``y`` rounded once to ``dtype`` (the tensor's storage dtype), through ``convert``; ``y``
    itself when it already has it."""
    return y if y.dtype == dtype else convert(y, dtype)


# ---- the fused fp16 passes of the ops -------------------------------------------------------
def dense(x):
    """Whether the elements of the NumPy array ``x`` fill one block of memory without gaps, in any
    axis order: C or F order, or a permutation of them such as a channels-last (N, C, H, W) batch
    (whose ``transpose(0, 2, 3, 1)`` is C-ordered). A pass over the flat memory of such an array
    visits every element once; ``numpy.empty_like`` gives a result with the same axis order."""
    if x.flags.c_contiguous or x.flags.f_contiguous:
        return True
    step = x.itemsize
    for stride, size in sorted((s, n) for s, n in zip(x.strides, x.shape) if n != 1):
        if stride != step:  # a gap, an overlap or a reversed axis
            return False
        step *= size
    return True


def same_layout(a, b):
    """Whether the dense arrays ``a`` and ``b`` (same shape) keep their elements in the same flat
    order: their strides are proportional to their item sizes on every axis longer than 1."""
    return all(n == 1 or sa * b.itemsize == sb * a.itemsize
               for n, sa, sb in zip(a.shape, a.strides, b.strides))


def _host(x, dtype, any_order=False):
    """Whether ``x`` is a non-empty, aligned NumPy array of ``dtype``, C-ordered (the passes over
    rows), or with ``any_order`` dense in any axis order (the elementwise passes)."""
    return (type(x) is numpy.ndarray and x.dtype == dtype and x.size > 0 and x.flags.aligned
            and (x.flags.c_contiguous or any_order and dense(x)))


def _library():
    return (_native.host_build or _native.loaded()).fp16_passes


# the native ReLU passes of each dtype: (forward, backward)
_RELU = {_F16: ("mg_relu_half", "mg_relu_half_backward"),
         _F32: ("mg_relu_float", "mg_relu_float_backward")}


def relu_pass(x):
    """ReLU of an fp16 or fp32 array in one pass: ``(out, mask)`` with ``mask = x > 0`` and
    ``out = x`` where ``mask`` or ``x`` is NaN (payload kept, as ``numpy.maximum(x, 0)`` keeps
    it), else +0. None where it does not apply."""
    names = _RELU.get(x.dtype) if type(x) is numpy.ndarray else None
    lib = _library() if names is not None and _host(x, x.dtype, any_order=True) else None
    if lib is None:
        return None
    out, mask = numpy.empty_like(x), numpy.empty_like(x, numpy.bool_)  # x's axis order
    getattr(lib, names[0])(data_address(x), data_address(out), data_address(mask), x.size)
    return out, mask


def relu_backward_pass(g, mask):
    """The gradient of ``relu_pass`` in one pass, for an fp16 or fp32 ``g`` and its boolean
    ``mask``: fp16, ``g`` where ``mask`` else +0 (the bits of ``g`` times the mask as int16);
    fp32, NumPy's ``g * mask`` (-0 for a negative ``g`` and NaN for an infinite one where the
    mask is off). None where it does not apply."""
    names = _RELU.get(g.dtype) if type(g) is numpy.ndarray else None
    fits = (names is not None and _host(g, g.dtype, any_order=True)
            and _host(mask, numpy.bool_, any_order=True) and mask.shape == g.shape
            and same_layout(g, mask))
    lib = _library() if fits else None
    if lib is None:
        return None
    out = numpy.empty_like(g)
    getattr(lib, names[1])(data_address(g), data_address(mask), data_address(out), g.size)
    return out


def add_halves(a, b):
    """``(a.astype(float32) + b.astype(float32)).astype(float16)`` for two fp16 arrays of one
    shape and memory layout, in one pass (neither is written): a new array in their axis order.
    None where it does not apply (also while NumPy does not ignore underflow), and where a sum
    is inf or NaN: the caller's NumPy code then computes it, with NumPy's warnings."""
    lib = (_library() if _host(a, _F16, any_order=True) and _host(b, _F16, any_order=True)
           and a.shape == b.shape and same_layout(a, b) and underflow_ignored() else None)
    if lib is None:
        return None
    out = numpy.empty_like(a)
    if lib.mg_add_halves(data_address(a), data_address(b), data_address(out), a.size):
        return None
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
