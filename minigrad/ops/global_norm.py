"""Gradient norms and clipping by the global norm (MindSpore's ``ops.clip_by_global_norm``).

The norm of a list of arrays is accumulated in float32 for float16 arrays (their squares
overflow fp16 from 256 on) and in the arrays' own dtype otherwise. An inf or NaN value gives an
inf or NaN norm without a NumPy warning: a loss-scaled step expects such values and skips.
"""
import math

import numpy

from minigrad import backend
from minigrad._checks import check_positive, check_relation
from minigrad._fp16_host import convert, widen
from minigrad.tensor import Tensor


def global_norm(arrays, norm_type=2.0):
    """The ``norm_type``-norm of all values of ``arrays`` together, as a Python float.

    ``norm_type`` inf: the largest magnitude; p > 0: ``(sum |x|^p) ** (1/p)``. Empty arrays
    and an empty list give 0.0. On the GPU the arrays' norms come back in one read of the device.
    """
    parts = []
    with numpy.errstate(over="ignore", invalid="ignore"):
        for x in arrays:
            if x.size == 0:
                continue
            xp = backend.get_array_module(x)
            v = xp.abs(widen(x).reshape(-1))
            if norm_type == math.inf:
                parts.append(v.max())
            elif norm_type == 2.0:
                parts.append(xp.sqrt(xp.dot(v, v)))
            else:
                parts.append(xp.sum(v ** norm_type))
    per_array = backend.read_scalars(parts)
    if norm_type not in (math.inf, 2.0):
        with numpy.errstate(over="ignore", invalid="ignore"):
            per_array = [n ** (1.0 / norm_type) for n in per_array]
    if not per_array:
        return 0.0
    if norm_type == math.inf:
        return max(per_array) if not any(math.isnan(n) for n in per_array) else math.nan
    with numpy.errstate(over="ignore", invalid="ignore"):
        total = numpy.sum(numpy.array(per_array, numpy.float64) ** norm_type) ** (1.0 / norm_type)
    return float(total)


def scale_in_place(arrays, factor):
    """``x *= factor`` for every array, no warnings; float16 is computed in float32 (``widen``)
    and stored back into ``x`` with one rounding (``store``'s conversion, written in place)."""
    with numpy.errstate(over="ignore", invalid="ignore"):
        for x in arrays:
            wide = widen(x)
            f = _as(factor, wide.dtype)
            if wide is x:
                x *= f
            else:
                convert(wide * f, x.dtype, out=x)


def _as(factor, dtype):
    """``factor`` (a Python number, or a 0-d device array) in ``dtype``."""
    return factor.astype(dtype) if hasattr(factor, "astype") else dtype.type(factor)


def _device_factor(arrays, clip_norm):
    """``clip_norm / max(global L2 norm, clip_norm)`` of device ``arrays`` as a 0-d float64
    device array, computed as ``global_norm`` computes it (per-array norms, then their float64
    root sum of squares), without reading the device."""
    xp = backend.get_array_module(arrays[0])
    with numpy.errstate(over="ignore", invalid="ignore"):
        norms = [xp.sqrt(xp.dot(v, v)).astype(numpy.float64)
                 for v in (xp.abs(widen(x).reshape(-1)) for x in arrays if x.size)]
        if not norms:
            return xp.ones((), numpy.float64)
        total = xp.sum(xp.stack(norms) ** 2) ** 0.5
        return numpy.float64(clip_norm) / xp.maximum(total, numpy.float64(clip_norm))


def clip_by_global_norm(x, clip_norm=1.0, use_norm=None):
    r"""Clip a list of Tensors by their global L2 norm (MindSpore ``ops.clip_by_global_norm``)::

        global_norm = sqrt(sum_i ||x_i||^2)
        x_i' = x_i * clip_norm / max(global_norm, clip_norm)

    The norm is accumulated in float32 for float16 inputs; each result keeps its input's dtype.
    On the GPU the norm and the factor stay on the device: clipping reads nothing.
    A non-finite norm gives what the formula gives, with no NumPy warning: an inf norm zeros
    the finite values (and makes the inf ones NaN), a NaN norm makes every value NaN. The
    results are new Tensors and record no gradient (this clips gradients; it is not a
    differentiable op).

    Args:
        x: a tuple or list of Tensors (the gradients).
        clip_norm: the largest global norm kept, a positive finite number. Default 1.0.
        use_norm: must be None (as in MindSpore, where only None is supported).

    Returns:
        A tuple of Tensors, one per input, in the input's dtype.

    Raises:
        TypeError: ``x`` is not a tuple/list of Tensors, ``clip_norm`` is not a real number.
        ValueError: ``clip_norm`` is not positive and finite, ``use_norm`` is not None.
    """
    owner = "clip_by_global_norm"
    check_relation("x", x, isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x),
                   "a tuple or list of Tensors", error=TypeError, owner=owner)
    clip_norm = check_positive("clip_norm", clip_norm, owner=owner)
    check_relation("use_norm", use_norm, use_norm is None,
                   "None (the only value MindSpore supports)", owner=owner)
    arrays = [t.data for t in x]
    if arrays and backend.device_of(arrays[0]) == "GPU":  # the factor stays on the device
        factor = _device_factor(arrays, clip_norm)
    else:
        norm = global_norm(arrays)
        factor = clip_norm / max(norm, clip_norm) if not math.isnan(norm) else math.nan
    out = [a.copy() for a in arrays]
    scale_in_place(out, factor)
    return tuple(Tensor(a, device=backend.device_of(a)) for a in out)
