"""``clip_grad_norm_``: PyTorch's in-place gradient clipping by the total norm.

The PyTorch mixed-precision recipe runs as written::

    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)                        # the true gradients, in place
    nn.utils.clip_grad_norm_(net.trainable_params(), max_norm=1.0)
    scaler.step(optimizer)                            # skipped if a gradient is inf/NaN
    scaler.update()
"""
import math

import numpy

from minigrad._checks import check_bool, check_non_negative, check_positive, check_relation
from minigrad.ops.global_norm import global_norm, scale_in_place
from minigrad.tensor import Tensor


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    r"""Scale the gradients of ``parameters`` in place so that their total norm is at most
    ``max_norm`` (PyTorch ``torch.nn.utils.clip_grad_norm_``)::

        total_norm = || (||g_1||_p, ..., ||g_n||_p) ||_p
        g_i <- g_i * min(1, max_norm / (total_norm + 1e-6))

    The norm is accumulated in float32 for float16 gradients (PyTorch computes it in the
    gradients' dtype, where the squares of fp16 values overflow from 256 on); the gradients keep
    their dtype. A non-finite total norm (an overflowed loss-scaled step) scales every gradient
    by NaN as PyTorch does, with no NumPy warning, and ``GradScaler.step`` then skips the step.

    Args:
        parameters: a Tensor/Parameter or an iterable of them; those without ``.grad`` are
            skipped.
        max_norm: the largest total norm kept (a real number >= 0).
        norm_type: p of the p-norm (> 0), or ``inf`` for the largest magnitude. Default 2.0.
        error_if_nonfinite: raise RuntimeError when the total norm is inf or NaN. Default False.
        foreach: accepted for PyTorch compatibility (None or a bool); every path is the same.

    Returns:
        The total norm of the gradients before clipping, a float32 Tensor of shape ``()``
        (float64 if a gradient is float64).

    Raises:
        TypeError: an element without ``.grad`` semantics (not a Tensor), a ``max_norm`` or
            ``norm_type`` that is not a real number, a non-bool ``error_if_nonfinite`` or
            ``foreach`` (None passes).
        ValueError: ``max_norm`` < 0 or NaN, ``norm_type`` <= 0.
        RuntimeError: a non-finite norm with ``error_if_nonfinite=True``.
    """
    owner = "clip_grad_norm_"
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    check_relation("parameters", params, all(isinstance(p, Tensor) for p in params),
                   "a Tensor or an iterable of Tensors/Parameters", error=TypeError, owner=owner)
    max_norm = check_non_negative("max_norm", max_norm, finite=False, owner=owner)
    norm_type = check_positive("norm_type", norm_type, finite=False, owner=owner)
    check_bool("error_if_nonfinite", error_if_nonfinite, owner=owner)
    if foreach is not None:
        check_bool("foreach", foreach, owner=owner)
    grads = [p.grad.data for p in params if p.grad is not None]
    dtype = numpy.float64 if any(g.dtype == numpy.float64 for g in grads) else numpy.float32
    total = global_norm(grads, norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` "
                           f"is non-finite, so it cannot be clipped. To disable this error and "
                           f"scale the gradients by the non-finite norm anyway, set "
                           f"`error_if_nonfinite=False`")
    with numpy.errstate(divide="ignore", invalid="ignore"):
        coef = min(1.0, max_norm / (total + 1e-6)) if not math.isnan(total) else math.nan
    if grads:
        scale_in_place(grads, coef)
    return Tensor(numpy.array(total, dtype))
