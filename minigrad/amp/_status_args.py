"""Argument checks of the float-status functions: what counts as an array, a status buffer and
an inverse scale (``minigrad.amp.float_status``'s errors)."""
import math
import numbers

import numpy

import minigrad.tensor as _tensor
from minigrad import backend

CHECKED_DTYPES = (numpy.dtype(numpy.float16), numpy.dtype(numpy.float32),
                  numpy.dtype(numpy.float64))
STATUS_SHAPE = (8,)


def array(x, name):
    data = x.data if isinstance(x, _tensor.Tensor) else x
    if not isinstance(data, numpy.ndarray) and not (
            backend.cupy is not None and isinstance(data, backend.cupy.ndarray)):
        raise TypeError(f"{name} must be a Tensor or a NumPy/CuPy array, "
                        f"got {type(x).__name__}")
    return data


def status_array(status):
    data = array(status, "status")
    if data.dtype != numpy.float32:
        raise TypeError(f"status must have dtype float32, got {data.dtype}")
    if data.shape != STATUS_SHAPE:
        raise ValueError(f"status must have shape {STATUS_SHAPE}, got {data.shape}")
    return data


def checked_arrays(buffer, arrays, name):
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
            data = array(x, f"{name}[{i}]")
        if data.dtype not in CHECKED_DTYPES:
            raise TypeError(f"{name}[{i}] must have dtype float16, float32 or float64, "
                            f"got {data.dtype}")
        if not fast and backend.device_of(data) != device:
            raise ValueError(f"{name}[{i}] is on {backend.device_of(data)} but status is on "
                             f"{device}")
        out.append(data)
    return out


def as_sequence(arrays):
    return arrays if isinstance(arrays, (list, tuple)) else (arrays,)


def inv_scale(inv_scale):
    if isinstance(inv_scale, numbers.Real):
        value = float(inv_scale)
    else:
        try:
            data = array(inv_scale, "inv_scale")
        except TypeError:
            raise TypeError(f"inv_scale must be a real number or a one-element Tensor/array, "
                            f"got {type(inv_scale).__name__}") from None
        if data.size != 1:
            raise ValueError(f"inv_scale must hold one number, got shape {data.shape}")
        value = float(data.reshape(-1)[0])
    if not math.isfinite(value):
        raise ValueError(f"inv_scale must be finite, got {value}")
    return value
