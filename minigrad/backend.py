"""NumPy/CuPy dispatch: the only module that imports CuPy.

Everything else writes backend-neutral code with the ``xp`` idiom::

    xp = backend.get_array_module(x)
    y = xp.exp(x)

``cupy`` is ``None`` when CuPy is not installed or no GPU is visible; ``CUDA_AVAILABLE`` says
which, and ``CUPY_IMPORT_ERROR`` keeps the reason for a helpful message.
"""
import ctypes

import numpy

from minigrad._checks import check_relation, check_type

try:  # the one guarded CuPy import of the package
    import cupy
    cupy.cuda.runtime.getDeviceCount()
    CUDA_AVAILABLE = True
    CUPY_IMPORT_ERROR = None
except Exception as error:  # ImportError, or CuPy present but no driver/device
    cupy = None
    CUDA_AVAILABLE = False
    CUPY_IMPORT_ERROR = error

DEVICES = ("CPU", "GPU")


def get_array_module(*arrays):
    """Return ``cupy`` if any of ``arrays`` is a CuPy array, else ``numpy``."""
    if cupy is not None:
        for a in arrays:
            if isinstance(a, cupy.ndarray):
                return cupy
    return numpy


def device_of(array):
    """``"GPU"`` for a CuPy array, ``"CPU"`` otherwise."""
    return "GPU" if cupy is not None and isinstance(array, cupy.ndarray) else "CPU"


_addressof, _from_buffer = ctypes.addressof, ctypes.c_char.from_buffer  # bound once: a hot path


def data_address(array):
    """The address of ``array``'s first element (a NumPy or CuPy array), for native kernels."""
    if type(array) is numpy.ndarray:
        try:  # a third of the time of ``.ctypes.data``, which read-only and empty arrays still need
            return _addressof(_from_buffer(array))
        except (TypeError, ValueError):
            return array.ctypes.data
    return array.data.ptr if device_of(array) == "GPU" else array.ctypes.data


def check_device(device, name="device", *, owner=None):
    """Normalise a device name (``"CPU"``, ``"GPU"``, any case, or ``"cuda"``) to ``"CPU"`` or
    ``"GPU"``. ``name`` is the argument the messages name (``device_target``, ``like``).

    Raises:
        TypeError: for a value that is not a str.
        ValueError: for another name.
        RuntimeError: for ``"GPU"`` when CuPy or a CUDA device is missing.
    """
    expected = f"one of {DEVICES}"
    check_type(name, device, str, expected=expected + " (a str)", owner=owner)
    spelled = "GPU" if device.upper() == "CUDA" else device.upper()
    check_relation(name, device, spelled in DEVICES, expected, owner=owner)
    if spelled == "GPU" and not CUDA_AVAILABLE:
        raise RuntimeError(f"device 'GPU' needs CuPy and a CUDA device: {CUPY_IMPORT_ERROR}")
    return spelled


def to_device(array, device):
    """Return ``array`` as a NumPy (``"CPU"``) or CuPy (``"GPU"``) array, copying only if needed."""
    device = check_device(device)
    if device == "GPU":
        return cupy.asarray(array)
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy.asnumpy(array)
    return numpy.asarray(array)


def as_numpy(array):
    """Host copy of ``array`` (no copy for a NumPy array)."""
    return to_device(array, "CPU")


_deferred = {}  # key -> (device float64 vector, error builder): checks awaiting the next read


def defer_check(key, values, error):
    """Queue a check computed on the device, to be raised at the next ``read_scalar`` of a device
    value, in the same transfer (a check that reads the device itself would add a wait per step).

    ``values`` is a 1-D float64 array on the device whose first element is nonzero when the check
    fails; ``error(host_values)`` builds the exception to raise. A check queued again under the
    same ``key`` before a read merges with the queued one by elementwise maximum (so write a
    minimum as its negative), which keeps the queue bounded over any number of unread steps.
    """
    queued = _deferred.get(key)
    if queued is not None:
        values = get_array_module(values).maximum(queued[0], values)
    _deferred[key] = (values, error)


def clear_deferred_checks():
    """Drop the queued checks (``minigrad.testing.strict_device`` does on leaving its block)."""
    _deferred.clear()


def read_scalar(value):
    """``value`` as a Python scalar: ``value.item()`` for a one-element NumPy or CuPy array or a
    NumPy scalar, ``value`` itself for a Python number.

    On a CuPy array this is an explicit read of the device: it waits for the work queued before
    it. minigrad reads the device only through this function, ``.item()`` and ``as_numpy``
    (``minigrad.testing.strict_device`` counts them). A device read also brings back the checks
    queued by ``defer_check`` in the same transfer and raises the first that failed (then clears
    the queue).

    Raises:
        Exception: the queued check's exception, when one failed (e.g. ValueError for a sparse
            label outside [0, C) in a loss computed on the device).
    """
    if not hasattr(value, "item"):
        return value
    if not _deferred or device_of(value) != "GPU":
        return value.item()
    host = _read_with_checks(value.reshape(1).astype(numpy.float64))
    return host[:1].astype(value.dtype).item()  # exact: float64 holds every value of ``value``


def read_scalars(values):
    """Several one-element arrays (and Python numbers) as Python floats, the device's read in
    one transfer: a step that needs n device values waits for the device once, not n times.

    The values go through float64 (exact for every float32, float16, bool and int32 value).
    Like ``read_scalar`` the transfer brings back the queued ``defer_check`` checks and raises
    the first that failed.
    """
    values = list(values)
    device = [k for k, v in enumerate(values) if hasattr(v, "item") and device_of(v) == "GPU"]
    on_device = set(device)
    out = [None if k in on_device else float(v.item() if hasattr(v, "item") else v)
           for k, v in enumerate(values)]
    if device:
        xp = get_array_module(values[device[0]])
        host = _read_with_checks(xp.concatenate([values[k].reshape(1).astype(numpy.float64)
                                                 for k in device]))
        for k, value in zip(device, host[:len(device)].tolist()):
            out[k] = value
    return out


def _read_with_checks(vector):
    """The host copy of a float64 device ``vector``, read in one transfer with the queued
    checks (raising the first that failed; the queue is cleared)."""
    checks = list(_deferred.values())
    _deferred.clear()
    if not checks:
        return as_numpy(vector)
    xp = get_array_module(vector)
    host = as_numpy(xp.concatenate([vector] + [values for values, _ in checks]))
    start = vector.size
    for values, error in checks:
        part = host[start:start + values.size]
        start += values.size
        if part[0]:
            raise error(part)
    return host
