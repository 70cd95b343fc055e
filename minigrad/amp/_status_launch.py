"""Runs a float-status check over arrays on the right engine.

* CuPy float16/float32 arrays: the CUDA kernels of ``kernels/float_status.cu``, one launch per
  dtype for the whole list, driven by a table of (address, length, first chunk) rows.
* NumPy float16/float32 arrays: the same kernels compiled for the host (``_native.host_library``).
  ``host_plan`` and ``launch_plan`` are the training step's lean form of it (``float_status.
  OverflowStatus`` takes it): float32 (or, for a check alone, float16) gradients that are
  already C-contiguous, aligned and writable go to one launch with no copies and no NumPy calls.
* float64, or no host compiler: ``_status_numpy`` (the same semantics with array operations).

The kernels walk each array as one run of elements in memory; an array that is not (C or F)
contiguous, or not aligned to its element size, is checked through a packed copy, and for the
fused unscale the result is written back into the original view. ``widen`` checks float16
arrays and writes them unscaled into new float32 arrays, in one pass.
"""
import ctypes

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

_HOST_TABLES_KEPT = 64
_FP32 = numpy.dtype(numpy.float32)
_FP16 = numpy.dtype(numpy.float16)

_device_tables = {}
_host_tables = {}
# bound once: every name looked up in the training step costs a cold cache line there
_addressof = ctypes.addressof
_from_buffer = ctypes.c_char.from_buffer
_ndarray = numpy.ndarray


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


def host_plan(arrays, halves=False):
    """The host launch for ``arrays`` (None entries skipped) if they need nothing but a launch.

    That is: a host build exists, every array is a plain NumPy float32 array (or, with
    ``halves``, every one float16 instead) that is C-contiguous, aligned and writable, and
    together they are below ``HOST_PARALLEL_MIN`` elements (one thread). Returns ``(lib, dtype,
    (table, table_address, n_arrays, n_chunks, chunk))``; when ``n_arrays`` is not 0,
    ``lib.launch_check_<fp16|fp32>`` or ``lib.launch_check_unscale_fp32`` takes ``(1,
    table_address, n_arrays, n_chunks, chunk, inv_scale, status_address)``: one thread runs
    them all, and the status (a float32[8] buffer) gets 1.0 in element 0 on inf/NaN.
    Returns None otherwise: ``run`` (after the public functions' checks) handles every other case.

    A training step's gradients keep their buffers from step to step, so the work table is
    cached under its content (the arrays' addresses and sizes): a cached table is always right.
    """
    key = []
    total = 0
    dtype = None
    for x in arrays:
        if x is None:
            continue
        if type(x) is not _ndarray:
            return None
        if x.dtype is not dtype:  # the first array's dtype: every other one must have it
            if dtype is not None or not (x.dtype is _FP32 or (halves and x.dtype is _FP16)):
                return None
            dtype = x.dtype
            misaligned = dtype.itemsize - 1
        n = x.size
        if n:
            try:  # exports a buffer only when C-contiguous and writable
                address = _addressof(_from_buffer(x))
            except TypeError:
                return None
            if address & misaligned:
                return None
            key += (address, n)
            total += n
    if total >= HOST_PARALLEL_MIN:
        return None
    # looked up here, at a host launch: CuPy arrays never build it
    lib = (_native.host_build or _native.loaded()).lib
    if lib is None:
        return None
    key = tuple(key)
    entry = _host_tables.get(key)
    if entry is None:
        if key and not _disjoint(key, dtype.itemsize):
            return None  # repeated or overlapping arrays: ``run`` drops repeats or refuses
        entry = _new_host_table(key, total)
    return lib, dtype, entry


def host_check_plans(arrays):
    """The host launches of a check (no unscale) of ``arrays`` (None entries skipped): one
    ``host_plan`` per dtype when float16 and float32 arrays come together (an O2 step's fp16
    layer gradients beside its fp32 BatchNorm ones), as a tuple; None when either is None."""
    halves = [x for x in arrays if x is not None and x.dtype is _FP16]
    if not halves or len(halves) == sum(x is not None for x in arrays):
        plan = host_plan(arrays, halves=True)
        return None if plan is None else (plan,)
    plans = (host_plan(halves, halves=True),
             host_plan([x for x in arrays if x is not None and x.dtype is not _FP16]))
    return None if None in plans else plans


def launch_plan(plan, inv_scale, status_address):
    """Run ``host_plan``'s launch: the check of its arrays (``inv_scale`` None; float32 or
    float16) or their check and unscale in place (float32), in one thread, setting element 0 of
    the float[8] status at ``status_address`` on inf/NaN. ``inv_scale`` is rounded to float32."""
    lib, dtype, (_, table, n_arrays, n_chunks, chunk) = plan
    if inv_scale is not None:
        lib.launch_check_unscale_fp32(1, table, n_arrays, n_chunks, chunk, inv_scale,
                                      status_address)
    else:
        launch = lib.launch_check_fp32 if dtype is _FP32 else lib.launch_check_fp16
        launch(1, table, n_arrays, n_chunks, chunk, 1.0, status_address)


def _disjoint(key, itemsize):
    """Whether the dense runs ``(address, n)`` of ``key`` share no byte (checked once per new
    table: a cached table is a checked one)."""
    runs = sorted(zip(key[0::2], key[1::2]))
    return all(a + n * itemsize <= b for (a, n), (b, _) in zip(runs, runs[1:]))


def _new_host_table(key, total):
    # one thread (total < HOST_PARALLEL_MIN): the chunk size _launch_host would choose for it
    chunk = max(CHUNK, -(-total // HOST_CHUNK_ALIGN) * HOST_CHUNK_ALIGN)
    rows, first = [], 0
    for address, n in zip(key[0::2], key[1::2]):
        rows += (address, n, first)
        first += -(-n // chunk)
    table = numpy.array(rows, dtype=numpy.uint64)
    if len(_host_tables) >= _HOST_TABLES_KEPT:
        _host_tables.clear()
    # the entry keeps the table alive while its address is in use
    entry = _host_tables[key] = (table, backend.data_address(table) if rows else 0, len(key) // 2,
                                 first, chunk)
    return entry


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


def _launch_host(lib, name, arrays, inv, status, outputs=()):
    # Below HOST_PARALLEL_MIN elements one thread is faster than waking others; above it, one
    # chunk per thread gives each core a long sequential run.
    total = sum(x.size for x in arrays)
    threads = _native.host_threads() if total >= HOST_PARALLEL_MIN else 1
    per_thread = -(-total // threads)
    chunk = max(CHUNK, -(-per_thread // HOST_CHUNK_ALIGN) * HOST_CHUNK_ALIGN)
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

