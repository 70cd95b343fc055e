"""The status buffer and the checked float-status functions over it (``alloc_status``,
``clear_status``, ``check_overflow``, ``check_and_unscale``, ``check_and_unscale_to_fp32``,
``get_status``, ``all_finite``, ``kernel_source``, ``host_implementation``), with the argument
checks that give their errors. ``minigrad.amp.float_status`` is their public module and documents
them; its ``OverflowStatus`` takes these functions wherever its host launch does not apply.
"""
import math
import numbers

import numpy

import minigrad.tensor as _tensor
from minigrad import _native, backend
from minigrad._config import config
from minigrad.amp import _status_launch
from minigrad._checks import check_non_negative, check_relation, check_type

CHECKED_DTYPES = (numpy.dtype(numpy.float16), numpy.dtype(numpy.float32),
                  numpy.dtype(numpy.float64))
STATUS_SHAPE = (8,)
_HALF = CHECKED_DTYPES[:1]
_FP32 = CHECKED_DTYPES[1]
_STATUS_WORDS = "a float32 Tensor or array of shape (8,) (alloc_status())"


def alloc_status(like=None):
    """A new status buffer: a float32 Tensor of shape (8,) filled with zeros.

    Args:
        like: where to put it: a Tensor or array (its device), a device name (``"CPU"``,
            ``"GPU"``), or None for the default device (``set_context(device_target=...)``).

    Raises:
        TypeError: ``like`` neither None, a str, a Tensor nor an array. ValueError: an
            unknown device name. RuntimeError: ``"GPU"`` without CuPy and a GPU.
    """
    if like is None:
        device = backend.check_device(config.device_target)
    elif isinstance(like, str):
        check_relation("like", like, like.upper() in (*backend.DEVICES, "CUDA"),
                       f"a Tensor, an array, a device name (one of {list(backend.DEVICES)}, any "
                       f"case) or None")
        device = backend.check_device(like)
    else:
        data = _array(like, "like")
        device = backend.device_of(data)
        if device == "GPU":
            with data.device:  # the same GPU as ``like``
                return _tensor.Tensor(backend.cupy.zeros(STATUS_SHAPE, dtype=numpy.float32))
    xp = backend.cupy if device == "GPU" else numpy
    return _tensor.Tensor(xp.zeros(STATUS_SHAPE, dtype=numpy.float32), device=device)


def clear_status(status):
    """Reset every element of ``status`` to 0 in place and return ``status``.

    Raises:
        TypeError / ValueError: ``status`` is not a float32 buffer of shape (8,).
    """
    _status_array(status).fill(0)
    return status


def check_overflow(status, *arrays):
    """Set the flag in ``status`` if any element of any of ``arrays`` is +inf, -inf or NaN.

    The flag is sticky: ``status[0]`` becomes 1.0 on overflow and is left unchanged otherwise,
    so a clean check never resets an earlier overflow. One kernel launch covers all arrays of
    one dtype. ``None`` entries are skipped. Returns ``status``.

    Raises:
        TypeError: ``status`` or an array of the wrong type or dtype.
        ValueError: ``status`` of the wrong shape, or an array on another device.
    """
    buffer = _status_array(status)
    _status_launch.run(buffer, _checked_arrays(buffer, arrays, "arrays"))
    return status


def check_and_unscale(status, arrays, inv_scale):
    """Check ``arrays`` for inf/NaN like ``check_overflow``, then multiply them by ``inv_scale``.

    Both happen in one pass, in place: ``x <- x * inv_scale`` for every array, float16 through
    float32 with round-to-nearest-even. The flag reflects the values before the multiplication
    (PyTorch's ``_amp_foreach_non_finite_check_and_unscale_`` semantics). Non-contiguous
    arrays are updated through their view. Arrays must not overlap in memory.

    Args:
        status: the status buffer.
        arrays: a sequence of Tensors/arrays (``None`` entries skipped), or a single one.
        inv_scale: a finite real number >= 0 (typically ``1 / loss_scale``; not a bool), or a
            one-element Tensor/array holding one (PyTorch passes a one-element tensor).

    Returns:
        ``status``.

    Raises:
        TypeError: as ``check_overflow``, or ``inv_scale`` not a number (a bool, a str, an array
            of no number dtype).
        ValueError: as ``check_overflow``, ``inv_scale`` negative, not finite or an array of
            more than one element, or a read-only array. Nothing is written then.
    """
    buffer = _status_array(status)
    checked = _checked_arrays(buffer, _as_sequence(arrays), "arrays", writes=True)
    _status_launch.run(buffer, checked, _inv_scale(inv_scale))
    return status


def check_and_unscale_to_fp32(status, arrays, inv_scale):
    """Check float16 ``arrays`` for inf/NaN and return new float32 arrays ``fp32(x) * inv_scale``.

    One pass reads each fp16 value once, sets the sticky flag as ``check_overflow`` would and
    writes the unscaled value in fp32: unscaling in fp16 would flush true gradients below fp16's
    smallest subnormal (6e-8) to zero. The inputs are left untouched.

    Args:
        status: the status buffer.
        arrays: a sequence of float16 Tensors/arrays (``None`` entries skipped), or a single one.
        inv_scale: as ``check_and_unscale``.

    Returns:
        A list of new float32 arrays, one per array given (``None`` entries skipped).

    Raises:
        TypeError: as ``check_overflow``, for an array that is not float16, or ``inv_scale`` not
            a number. ValueError: as ``check_and_unscale``.
    """
    buffer = _status_array(status)
    checked = _checked_arrays(buffer, _as_sequence(arrays), "arrays", _HALF,
                              "a float16 Tensor or array (check_and_unscale_to_fp32 widens "
                              "float16)")
    return _status_launch.widen(buffer, checked, _inv_scale(inv_scale))


def get_status(status):
    """True if an overflow was recorded since the last clear (``status.sum() > 0``).

    This reads the buffer: on GPU it waits for the checks queued before it.

    Raises:
        TypeError / ValueError: ``status`` is not a float32 buffer of shape (8,).
    """
    return backend.read_scalar(_status_array(status).sum() > 0)  # the one read of the device


def all_finite(arrays):
    """True when no element of ``arrays`` (a sequence of Tensors/arrays, or one) is inf or NaN.

    Uses a private status buffer; an empty sequence is all finite.

    Raises:
        TypeError / ValueError: as ``check_overflow``.
    """
    arrays = _as_sequence(arrays)
    first = next((i for i, x in enumerate(arrays) if x is not None), None)
    if first is None:
        return True
    status = alloc_status(_array(arrays[first], f"arrays[{first}]"))  # errors name arrays[i]
    check_overflow(status, *arrays)
    return not get_status(status)


def kernel_source():
    """The CUDA source of the float-status kernels, ``kernels/float_status.cu`` (package data
    ``minigrad.kernels``): the code every check runs, compiled by CuPy on a GPU and, through
    ``kernels/host_shim.h``, by the system C++ compiler for the CPU."""
    return _native.read_source(_native.STATUS_SOURCE)


def host_implementation():
    """How checks of NumPy arrays run in this process: ``("native", None)`` when the kernel
    source is compiled for this CPU, else ``("numpy", reason)`` (no C++ compiler, a failed
    build, or ``MINIGRAD_NATIVE=0``; the NumPy fallback gives the same answers)."""
    if _native.host_library() is not None:
        return "native", None
    return "numpy", _native.host_library_error()


# ---- argument checks ----------------------------------------------------------------------------
def _array(x, name):
    data = x.data if isinstance(x, _tensor.Tensor) else x
    if not isinstance(data, numpy.ndarray) and not (
            backend.cupy is not None and isinstance(data, backend.cupy.ndarray)):
        check_type(name, x, (), expected="a Tensor or a NumPy/CuPy array")
    return data


def _status_array(status):
    """The array behind ``status`` (O(1): its type, dtype and shape; no pass over the data)."""
    data = _array(status, "status")
    if data.dtype != _FP32:
        check_relation("status", status, False, f"{_STATUS_WORDS}, not of dtype {data.dtype}",
                       error=TypeError)
    if data.shape != STATUS_SHAPE:
        check_relation("status", status, False, f"{_STATUS_WORDS}, not of shape {data.shape}")
    return data


def _checked_arrays(buffer, arrays, name, accepted=CHECKED_DTYPES,
                    words="a float16, float32 or float64 Tensor or array", writes=False):
    """The arrays behind ``arrays`` (None entries dropped), each of a dtype in ``accepted``, on
    the status' device and, with ``writes``, writable; O(1) per array (its type, dtype, device
    and flags), never a pass over the data. Errors name ``name[i]``, ``i`` counting the None
    entries too."""
    device = backend.device_of(buffer)
    out = []
    on_host = device == "CPU"
    for i, x in enumerate(arrays):
        if x is None:
            continue
        data = x.data if isinstance(x, _tensor.Tensor) else x
        # the common case, a NumPy array with a host status, needs only the dtype check
        fast = on_host and type(data) is numpy.ndarray
        if not fast:
            data = _array(x, f"{name}[{i}]")
        if data.dtype not in accepted:
            check_relation(f"{name}[{i}]", x, False, f"{words}, not of dtype {data.dtype}",
                           error=TypeError)
        if not fast and backend.device_of(data) != device:
            check_relation(f"{name}[{i}]", x, False, f"on the status' device ({device}), not on "
                           f"{backend.device_of(data)}")
        if writes and isinstance(data, numpy.ndarray) and not data.flags.writeable:
            check_relation(f"{name}[{i}]", x, False, "writable (check_and_unscale writes in "
                           "place), not read-only")
        out.append(data)
    return out


def _as_sequence(arrays):
    return arrays if isinstance(arrays, (list, tuple)) else (arrays,)


def _inv_scale(inv_scale):
    """``inv_scale`` as a Python float: a finite real number >= 0, or a one-element Tensor or
    array of one (PyTorch passes its ``inv_scale`` as a one-element tensor). O(1): one element
    read."""
    if type(inv_scale) in _PLAIN_FLOATS:  # the per-step case, in one comparison
        value = float(inv_scale)
        if 0.0 <= value < math.inf:  # (False for NaN)
            return value
    if isinstance(inv_scale, _tensor.Tensor) or isinstance(inv_scale, numpy.ndarray) or (
            backend.cupy is not None and isinstance(inv_scale, backend.cupy.ndarray)):
        data = _array(inv_scale, "inv_scale")
        check_relation("inv_scale", inv_scale, data.size == 1 and data.dtype.kind in "fiu",
                       _INV_SCALE_WORDS, error=TypeError if data.dtype.kind not in "fiu"
                       else ValueError)
        value = float(data.reshape(-1)[0])
        check_relation("inv_scale", inv_scale, math.isfinite(value) and value >= 0.0,
                       _INV_SCALE_WORDS)
        return value
    if not isinstance(inv_scale, numbers.Real) or isinstance(inv_scale, (bool, numpy.bool_)):
        check_type("inv_scale", inv_scale, (), expected=_INV_SCALE_WORDS)
    return check_non_negative("inv_scale", inv_scale)


_PLAIN_FLOATS = (float, numpy.float32, numpy.float64)
_INV_SCALE_WORDS = "a finite real number >= 0 or a one-element Tensor/array holding one"
