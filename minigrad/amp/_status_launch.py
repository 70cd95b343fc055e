"""Runs a float-status check over arrays on the right engine.

* CuPy float16/float32 arrays: the CUDA kernels of ``kernels/float_status.cu``, one launch per
  dtype for the whole list, driven by a table of (address, length, first chunk) rows.
* NumPy float16/float32 arrays: the same kernels compiled for the host (``_native.host_library``).
  ``float_status.OverflowStatus`` holds the training step's lean form of it: float32 (or, for a
  check alone, float16) gradients that are already C-contiguous, aligned and writable go to one
  launch with no copies and no NumPy calls.
* float64, or no host compiler: ``_status_numpy`` (the same semantics with array operations).

The kernels walk each array as one run of elements in memory; an array that is not (C or F)
contiguous, or not aligned to its element size, is checked through a packed copy, and for the
fused unscale the result is written back into the original view. ``widen`` checks float16
arrays and writes them unscaled into new float32 arrays, in one pass.
"""
import numpy

from minigrad import _native, backend
from minigrad.amp import _status_numpy

_KERNEL_DTYPES = {numpy.dtype(numpy.float16): "fp16", numpy.dtype(numpy.float32): "fp32"}
CHUNK = 1 << 16           # elements per chunk: a GPU block's unit of work
HOST_CHUNK_ALIGN = 1024   # host chunks start on whole 64-byte vectors of the array
# Host threads only for very large checks: right after OpenBLAS's threads (a training step's
# matmuls) the OpenMP team waits for cores they still spin on; with 2 cores that cost ~5 ms per
# O2 step of a 670k-parameter MLP, against ~0.1 ms saved by the second thread.
HOST_PARALLEL_MIN = 1 << 22
GPU_THREADS = 256
# One block per chunk, as PyTorch's multi-tensor apply does: the hardware hands chunks to SMs as
# blocks finish, whatever the occupancy of the kernel (the fused ones use more registers).
# Beyond this many chunks the kernels' grid-stride loop gives each block several.
GPU_MAX_BLOCKS = 1 << 20
_DEVICE_TABLES_KEPT = 64

_device_tables = {}


def run(status, arrays, inv_scale=None):
    """Set ``status[0]`` to 1 if any of ``arrays`` holds inf/NaN; never clear it.

    ``status`` is a float32 array of shape (8,) and ``arrays`` are float arrays on its device
    (already validated). With ``inv_scale`` every element is also multiplied by it, in place.
    """
    groups = {}
    for x in (distinct(arrays) if inv_scale is not None else arrays):
        if x.size:
            groups.setdefault(x.dtype, []).append(x)
    on_gpu = backend.device_of(status) == "GPU"
    for dtype, group in groups.items():
        tag = _KERNEL_DTYPES.get(dtype)
        lib = None if on_gpu or tag is None else _native.host_library()
        if tag is None or (lib is None and not on_gpu):
            _status_numpy.check(status, group, inv_scale)
            continue
        name = ("check_unscale_" if inv_scale is not None else "check_") + tag
        inv = numpy.float32(1.0 if inv_scale is None else inv_scale)
        dense = [_dense(x) for x in group]
        if on_gpu:
            _launch_gpu(name, dense, inv, status)
        else:
            _launch_host(lib, name, dense, inv, status)
        if inv_scale is not None:
            for x, packed in zip(group, dense):
                if packed is not x:
                    x[...] = packed


def _span(x):
    """``(first byte, one past the last byte)`` that ``x`` (not empty) can touch."""
    start = end = backend.data_address(x)
    for n, stride in zip(x.shape, x.strides):
        if stride < 0:
            start += (n - 1) * stride
        else:
            end += (n - 1) * stride
    return start, end + x.itemsize


def distinct(arrays):
    """``arrays`` with repeats of one array (the same memory, shape, strides and dtype) dropped,
    so that an in-place unscale divides each value once.

    Raises:
        ValueError: two different arrays share memory (partly overlapping views): no order of
            in-place updates would divide every value exactly once.
    """
    spans = sorted((_span(x), i) for i, x in enumerate(arrays) if x.size)
    keep, last = set(range(len(arrays))), None
    for (start, end), i in spans:
        if last is not None and start < last[0][1]:
            j = last[1]
            x, y = arrays[i], arrays[j]
            same = (start, end) == last[0] and x.shape == y.shape and x.strides == y.strides \
                and x.dtype == y.dtype
            if same:
                keep.discard(i)
                continue
            if backend.get_array_module(x).shares_memory(x, y):
                raise ValueError(f"arrays[{min(i, j)}] and arrays[{max(i, j)}] share memory: an "
                                 f"in-place unscale needs arrays that do not overlap")
        if last is None or end > last[0][1]:
            last = ((start, end), i)
    return [x for i, x in enumerate(arrays) if i in keep]


def widen(status, arrays, inv_scale):
    """Float32 copies of the float16 ``arrays``, multiplied by ``inv_scale``; set ``status[0]``
    to 1 if any input holds inf/NaN (never clear it).

    Each result is ``x.astype(float32) * float32(inv_scale)`` bit for bit, in ``x``'s memory
    order when ``x`` is C- or F-contiguous. ``status`` as for ``run``.
    """
    xp = backend.get_array_module(status)
    dense = [_dense(x) for x in arrays]
    outs = [xp.empty_like(x, dtype=numpy.float32) for x in dense]
    inputs = [x for x in dense if x.size]
    outputs = [out for out in outs if out.size]
    if not inputs:
        return outs
    on_gpu = backend.device_of(status) == "GPU"
    lib = None if on_gpu else _native.host_library()
    inv = numpy.float32(inv_scale)
    name = "check_unscale_fp16_to_fp32"
    if on_gpu:
        _launch_gpu(name, inputs, inv, status, outputs)
    elif lib is not None:
        _launch_host(lib, name, inputs, inv, status, outputs)
    else:  # no host build: convert, then check and unscale the copies
        for x, out in zip(inputs, outputs):
            out[...] = x
        _status_numpy.check(status, outputs, inv)
    return outs


def chunk_table(arrays, chunk, outputs=()):
    """The kernels' work table for ``arrays`` (non-empty, dense) cut into ``chunk``-element chunks.

    Returns ``(table, n_chunks)``: ``table`` is a flat uint64 NumPy array of rows
    ``(address, n_elements, first_chunk)``, then the addresses of ``outputs`` (one per array,
    for the widening kernel).
    """
    rows, first = [], 0
    for x in arrays:
        rows.extend((backend.data_address(x), x.size, first))
        first += -(-x.size // chunk)
    rows.extend(backend.data_address(out) for out in outputs)
    return numpy.array(rows, dtype=numpy.uint64), first


def _dense(x):
    contiguous = x.flags.c_contiguous or x.flags.f_contiguous
    if backend.device_of(x) == "GPU":
        aligned = x.data.ptr % x.itemsize == 0
    else:
        aligned = x.flags.aligned
    if contiguous and aligned:
        return x
    return x.copy()  # C order, freshly allocated, hence aligned


def host_chunk(per_thread):
    """The host launches' chunk: ``per_thread`` elements rounded up to whole
    ``HOST_CHUNK_ALIGN`` runs, and at least ``CHUNK``."""
    return max(CHUNK, -(-per_thread // HOST_CHUNK_ALIGN) * HOST_CHUNK_ALIGN)


def _launch_host(lib, name, arrays, inv, status, outputs=()):
    # Below HOST_PARALLEL_MIN elements one thread is faster than waking others; above it, one
    # chunk per thread gives each core a long sequential run.
    total = sum(x.size for x in arrays)
    threads = _native.host_threads() if total >= HOST_PARALLEL_MIN else 1
    chunk = host_chunk(-(-total // threads))
    table, n_chunks = chunk_table(arrays, chunk, outputs)
    launch = getattr(lib, "launch_" + name)
    launch(min(threads, n_chunks), backend.data_address(table), len(arrays), n_chunks, chunk,
           float(inv),
           backend.data_address(status))


def _launch_gpu(name, arrays, inv, status, outputs=()):
    cupy = backend.cupy
    table, n_chunks = chunk_table(arrays, CHUNK, outputs)
    with status.device:
        grid = min(n_chunks, GPU_MAX_BLOCKS)
        kernel = _native.cuda_function(name)
        kernel((grid,), (GPU_THREADS,), (_device_table(cupy, status.device.id, table),
                                         numpy.int32(len(arrays)), numpy.uint64(n_chunks),
                                         numpy.uint64(CHUNK), inv, status))


def _device_table(cupy, device_id, table):
    # Gradient buffers keep their addresses from step to step, so the same table recurs: reuse
    # its device copy instead of a host-to-device transfer before every launch. The key is the
    # table's content, so a cached copy is always correct.
    key = (device_id, table.tobytes())
    copy = _device_tables.get(key)
    if copy is None:
        if len(_device_tables) >= _DEVICE_TABLES_KEPT:
            _device_tables.clear()
        copy = _device_tables[key] = cupy.asarray(table)
    return copy

