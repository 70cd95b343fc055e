"""MindSpore's float-status primitives (``ops.NPUAllocFloatStatus`` and its two siblings) over
the float status of ``minigrad.amp.float_status``, and MindSpore 2.x's ``NPUClearFloatStatusV2``
/ ``NPUGetFloatStatusV2`` on its int32 status.

On Ascend they read and reset a hardware overflow register; here the status is a float32 buffer
of shape (8,) that the overflow checks write into, and these ops allocate, clear and return it.
``minigrad.ops`` looks them up here on first use (they belong to the loss-scaling layer above
the ops).
"""
import numpy

import minigrad.tensor as _tensor
from minigrad.amp._status_buffer import STATUS_SHAPE, _status_array, alloc_status, clear_status


class NPUAllocFloatStatus:
    """MindSpore's ``ops.NPUAllocFloatStatus()``: calling it returns ``alloc_status()``.

    ``NPUAllocFloatStatus()()`` gives a zeroed float32 Tensor of shape (8,) on the default
    device; ``NPUAllocFloatStatus()(like)`` puts it on ``like``'s device.
    """

    def __call__(self, like=None):
        return alloc_status(like)


class NPUClearFloatStatus:
    """MindSpore's ``ops.NPUClearFloatStatus()``: ``op(status)`` zeroes ``status`` in place.

    Returns ``status`` (all zeros), so that later work can be ordered after the clear.
    """

    def __call__(self, status):
        return clear_status(status)


class NPUGetFloatStatus:
    """MindSpore's ``ops.NPUGetFloatStatus()``: ``op(status)`` returns the updated ``status``.

    On Ascend this copies the hardware register into ``status``. Here the checks already wrote
    into it, so it only validates and returns it: ``status.sum() > 0`` means overflow.
    (MindSpore's op returns a separate all-zero tensor; the buffer itself is what matters.)
    """

    def __call__(self, status):
        _status_array(status)
        return status


class NPUClearFloatStatusV2:
    """MindSpore 2.x's ``NPUClearFloatStatusV2()``: ``op(status)`` zeroes ``status``, the int32
    Tensor of shape (8,) that MindSpore 2.x's ``start_overflow_check`` makes
    (``Tensor([0] * 8, mstype.int32)``), in place and returns it.

    A cell's ``get_overflow_status(status, grads)`` reads such a status as "no overflow seen yet"
    when it is all zeros and checks the gradients itself, so code that clears it before the
    backward pass (a ``start_overflow_check`` of its own) runs as written.

    Raises:
        TypeError: ``status`` is not an int32 Tensor or array. ValueError: its shape is not (8,).
    """

    def __call__(self, status):
        _int32_status(status).fill(0)
        return status


class NPUGetFloatStatusV2:
    """MindSpore 2.x's ``NPUGetFloatStatusV2()``, which copies Ascend's overflow register into an
    int32 status. minigrad has no such register: nothing writes an overflow into an int32 status,
    so calling it raises ``NotImplementedError`` (reading zeros would report every overflow as
    clean) and says what to call instead."""

    def __call__(self, status):
        raise NotImplementedError(
            "NPUGetFloatStatusV2: minigrad has no overflow register to read into an int32 status "
            "(nothing would ever set it); let the cell check the gradients with "
            "self.get_overflow_status(status, grads), or use a float32 status: "
            "ops.NPUAllocFloatStatus()(), float_status.check_overflow(status, *grads) and "
            "ops.NPUGetFloatStatus()(status)")


def _int32_status(status):
    data = status.data if isinstance(status, _tensor.Tensor) else status
    if not hasattr(data, "dtype") or not hasattr(data, "shape"):
        raise TypeError(f"status must be an int32 Tensor of shape (8,), got "
                        f"{type(status).__name__}")
    if data.dtype != numpy.int32:
        raise TypeError(f"status must have dtype int32 (MindSpore 2.x's "
                        f"Tensor([0] * 8, mstype.int32)), got {data.dtype}")
    if tuple(data.shape) != STATUS_SHAPE:
        raise ValueError(f"status must have shape {STATUS_SHAPE}, got {tuple(data.shape)}")
    return data
