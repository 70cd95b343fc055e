"""MindSpore's float-status primitives (``ops.NPUAllocFloatStatus`` and its two siblings) over
the float status of ``minigrad.amp.float_status``.

On Ascend they read and reset a hardware overflow register; here the status is a float32 buffer
of shape (8,) that the overflow checks write into, and these ops allocate, clear and return it.
``minigrad.ops`` looks them up here on first use (they belong to the loss-scaling layer above
the ops).
"""
from minigrad.amp._status_buffer import _status_array, alloc_status, clear_status


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
