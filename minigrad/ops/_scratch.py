"""Reusable host arrays for the large temporaries of the image ops (padded copies, patch
matrices, patch gradients).

A fresh NumPy array of tens of megabytes costs more than the copy that fills it: glibc maps
every block of 32 MiB or more (its largest mmap threshold) afresh and returns it to the system
when it is freed, so the kernel zero-fills each page again on its first touch, every step.
(Smaller blocks come from glibc's heap, which reuses freed memory: those are left alone.)
``empty`` keeps the large arrays it hands out and hands one out again once nothing refers to it
any more: every view of a pooled array keeps the pooled base array alive, so
``sys.getrefcount`` of the base says whether a view (a saved patch matrix, a result still
held) is alive. An array in use is never handed out twice; where every pooled array of the
size is in use, ``empty`` gives a fresh one, as without the pool.

A step's peak is not raised (a pooled array is reused, never added to what is alive), but the
pool keeps what it has handed out until ``clear`` (at most ``PER_SIZE`` arrays of each size):
the memory a step needed stays reserved for the next step, as in PyTorch's caching
allocators. Only NumPy arrays of ``MIN_BYTES`` or more are pooled; CuPy has its own memory
pool.
"""
import math
import sys
import threading

import numpy

MIN_BYTES = 32 << 20
PER_SIZE = 8

_lock = threading.Lock()
_pool = {}  # size in bytes -> the pooled base arrays (1-D uint8) of that size


def _references(bases, k):
    return sys.getrefcount(bases[k])


# the count of a base that only the pool refers to, as ``_references`` sees it
_FREE = _references([numpy.empty(1, numpy.uint8)], 0)


def empty(xp, shape, dtype):
    """An uninitialised C-ordered array of ``shape`` and ``dtype`` on ``xp``'s device: a pooled
    one that nothing refers to any more where there is one, else a new one."""
    dtype = numpy.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    if xp is not numpy or size < MIN_BYTES:
        return xp.empty(shape, dtype)
    with _lock:
        bases = _pool.setdefault(size, [])
        for k in range(len(bases)):
            if _references(bases, k) == _FREE:
                return bases[k].view(dtype).reshape(shape)
        base = numpy.empty(size, numpy.uint8)
        if len(bases) < PER_SIZE:
            bases.append(base)
        return base.view(dtype).reshape(shape)


def clear():
    """Drop the pool's arrays (the ones in use live on while their views do)."""
    with _lock:
        _pool.clear()
