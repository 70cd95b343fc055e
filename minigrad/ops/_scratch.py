"""Host memory for the large temporaries of a training step: glibc's malloc told to keep what a
step frees for the next step, and reusable arrays for the largest temporaries of the image ops
(padded copies, patch matrices, patch gradients).

A fresh NumPy array costs more than the pass that fills it when its pages are new: the kernel
zero-fills each page on its first touch (a page fault every 4 KiB).
glibc hands pages back to the system in two ways, and a training step, which frees and
allocates again the same tens of megabytes every step, hits both every step:

- it maps every block above its mmap threshold afresh and unmaps it when it is freed (the
  threshold starts at 128 KiB and rises, with the blocks freed, to at most 32 MiB);
- it trims the top of its heap once more than the trim threshold (twice the mmap threshold)
  lies free there.

So at import, on Linux with glibc, ``keep_freed_memory`` sets the mmap threshold to its most,
32 MiB, and the trim threshold to ``TRIM_BYTES`` (``mallopt``, as the ``MALLOC_MMAP_THRESHOLD_``
and ``MALLOC_TRIM_THRESHOLD_`` environment variables would): blocks below 32 MiB come from the
heap and go back to it, and up to ``TRIM_BYTES`` of freed memory stays mapped for the next
allocation. A ResNet-8 training step on 64 images of 32x32 (``benchmarks/cnn_step.py``'s net;
``resource.getrusage`` over 8 steps, one busy 2-core machine) took about 11,000 page faults and
40-60 ms of system time without it, none and 2 ms with it. It
changes no result, only where freed memory waits; ``MINIGRAD_KEEP_HOST_MEMORY=0`` turns it off
(elsewhere than glibc it does nothing).

Blocks of 32 MiB or more are always mapped afresh: ``empty`` keeps the large arrays it hands
out and hands one out again once nothing refers to it any more: every view of a pooled array
keeps the pooled base array alive, so ``sys.getrefcount`` of the base says whether a view (a
saved patch matrix, a result still held) is alive. An array in use is never handed out twice;
where every pooled array of the size is in use, ``empty`` gives a fresh one, as without the
pool.

A step's peak is not raised (a pooled array is reused, never added to what is alive), but the
pool keeps what it has handed out until ``clear`` (at most ``PER_SIZE`` arrays of each size):
the memory a step needed stays reserved for the next step, as in PyTorch's caching
allocators. Only NumPy arrays of ``MIN_BYTES`` or more are pooled; CuPy has its own memory
pool.
"""
import ctypes
import math
import os
import sys
import threading

import numpy

MIN_BYTES = 32 << 20
PER_SIZE = 8
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's largest mmap threshold on 64-bit machines
TRIM_BYTES = 512 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)


def keep_freed_memory(trim_bytes=TRIM_BYTES):
    """Tell glibc's malloc to serve blocks below 32 MiB from its heap and to keep up to
    ``trim_bytes`` of freed heap memory mapped (the module docstring says why). Returns whether
    it could: False where the C library is not glibc."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
        mallopt = ctypes.CDLL(None).mallopt
    except (ValueError, OSError, AttributeError):  # no such confstr name: not glibc
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)
                and mallopt(_M_TRIM_THRESHOLD, min(int(trim_bytes), 2**31 - 1)))


if os.environ.get("MINIGRAD_KEEP_HOST_MEMORY", "1") != "0":
    keep_freed_memory()

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
