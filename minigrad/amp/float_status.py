"""The float status: a sticky overflow flag for loss scaling, as functions.

On Ascend NPUs MindSpore reads a hardware overflow register through ``NPUAllocFloatStatus``,
``NPUClearFloatStatus`` and ``NPUGetFloatStatus`` (here in ``minigrad.amp.npu_ops``, over these
functions). CPUs and GPUs have no such register, so here the status is a buffer in memory
that check kernels set and only a clear resets::

    status = alloc_status(grads[0])      # float32 zeros of shape (8,), on the grads' device
    clear_status(status)                 # reset before the step
    check_overflow(status, *grads)       # sets status[0] = 1 if any element is inf or NaN
    check_overflow(status, loss)         # a later clean check never resets it (sticky)
    if get_status(status): ...           # True: overflow since the last clear

``check_and_unscale(status, grads, 1 / scale)`` does the check and the division by the loss
scale in one pass over the gradients. ``all_finite(grads)`` is the one-call form: a Python
bool, True when no value is inf or NaN (the MindSpore face's ``amp.all_finite`` gives the same
answer as a bool Tensor, as MindSpore does).

The faces' training steps use ``OverflowStatus``, one step's status object over the same
functions: ``unscale_and_check(arrays, scale)``, ``check(arrays)`` and ``overflow()``. On the
host it keeps its flag in a small ctypes buffer and hands dense float32 gradients (or float16
ones for a check) straight to one kernel launch per dtype (``_host_plan``, at the end of this
module); everything else takes the checked functions above (``minigrad.amp._status_buffer``,
with their argument checks). Every overflow decision passes through ``_reduce_overflow`` (in
data parallel, an all-reduce: one rank's inf makes every rank skip).

fp16 gradients are unscaled into new float32 arrays: ``g * S`` fits fp16, but the true ``g`` is
often below fp16's smallest subnormal (6e-8), so unscaling in fp16 would flush it to zero and
undo the point of loss scaling. fp32/fp64 gradients are unscaled in place. bfloat16 gradients
(a loss scale forced on a bf16 network) have no kernel: ``OverflowStatus`` checks and unscales
their float32 copies, which it returns.

Accepted arrays: Tensors or NumPy/CuPy arrays of float16 or float32 (raw CUDA kernels on GPU,
the same kernels compiled for the CPU, or NumPy when no compiler is present) and float64
(array operations), of any shape, length, strides or alignment. The status buffer is a Tensor
(or array) of shape (8,) and dtype float32 on the same device as the arrays. Its sum is 0 when
no overflow was seen and > 0 otherwise (MindSpore's convention); checks only write element 0.
"""
import ctypes

import numpy

import minigrad.tensor as _tensor
from minigrad import _fp16_host, _native, backend, communication
from minigrad import dtype as dtypes
from minigrad.amp._status_buffer import (  # the checked functions, documented above
    STATUS_SHAPE,
    all_finite,
    alloc_status,
    check_and_unscale,
    check_and_unscale_to_fp32,
    check_overflow,
    clear_status,
    get_status,
    host_implementation,
    kernel_source,
)
from minigrad.amp._status_launch import HOST_PARALLEL_MIN, host_chunk
from minigrad.communication import parallel_context

STATUS_SIZE = STATUS_SHAPE[0]
_BF16 = frozenset(d for d in dtypes.LOW_PRECISION if d != dtypes.float16)  # empty w/o ml_dtypes


def _widen_bf16(arrays):
    """``arrays`` (a list; None kept) with every bfloat16 array replaced by its float32 copy:
    the check kernels read float16, float32 and float64 only."""
    if _BF16 and any(a is not None and a.dtype in _BF16 for a in arrays):
        return [_fp16_host.widen(a) if a is not None and a.dtype in _BF16 else a for a in arrays]
    return arrays
_HOST_TABLES_KEPT = 64
_FP32 = numpy.dtype(numpy.float32)
_FP16 = numpy.dtype(numpy.float16)
_host_tables = {}
# bound once: every name looked up in the training step costs a cold cache line there
_addressof = ctypes.addressof
_from_buffer = ctypes.c_char.from_buffer
_ndarray = numpy.ndarray

__all__ = ["alloc_status", "clear_status", "check_overflow", "check_and_unscale",
           "check_and_unscale_to_fp32", "get_status", "all_finite", "kernel_source",
           "host_implementation", "inverse", "OverflowStatus", "unscale_and_check", "check",
           "STATUS_SHAPE", "STATUS_SIZE"]


def inverse(scale):
    """1/scale as float32, computed in float64 (an fp32 division can be off by one ulp)."""
    return numpy.float32(1.0 / float(scale))  # Python floats are float64 (and faster than NumPy's)


class OverflowStatus:
    """The float status of one step (``minigrad.amp.float_status``): checks only ever set it.

    Arrays that went through ``unscale_and_check`` are remembered, so a later ``check`` of the
    same gradients (MindSpore's ``get_overflow_status`` after the unscale) does not read them a
    second time. ``clear()`` starts a new step with the same object.

    ``buffer`` is the status Tensor (float32, shape (8,)), None before the first check. On the
    host it lives in a ctypes array: gradients that need no copy (float32, or float16 for a
    check alone; see ``_host_plan``) go straight to the kernel, and ``overflow`` reads the flag
    (element 0, the one every check writes) without a NumPy call. Every other case takes the
    checked ``float_status`` functions.
    """

    def __init__(self):
        self._buffer = None   # the status Tensor, once made
        self._host = None     # ctypes float[8] behind a host status (None: none yet, or on GPU)
        self._spare = None    # the last host array made: cleared and reused while no view exists
        self._host_address = 0  # its address
        self._seen = []       # the array lists checked so far (kept alive: their ids stay theirs)

    @classmethod
    def wrap(cls, buffer):
        """A status whose flag lives in ``buffer``, a float32 Tensor or array of shape (8,)
        (``alloc_status()``, ``ops.NPUAllocFloatStatus()()``): checks set it there.

        Raises:
            TypeError / ValueError: ``buffer`` is not such a buffer (``float_status``'s checks).
        """
        status = cls()
        get_status(buffer)  # validates it
        status.buffer = buffer
        return status

    def __getstate__(self):
        # a host status is ctypes memory known by its address: a copy (deepcopy, pickle) gets an
        # array of its own holding the same flag, never the original's address
        state = dict(self.__dict__, _spare=None, _host_address=0)
        if self._host is not None:
            state.update(_host=float(self._host[0]), _buffer=None)
        return state

    def __setstate__(self, state):
        flag = state.pop("_host")
        self.__dict__.update(state, _host=None)
        if flag is not None:
            self._host = self._new_host()
            self._host[0] = flag

    @property
    def buffer(self):
        if self._buffer is None and self._host is not None:
            self._buffer = _tensor.make(numpy.frombuffer(self._host, numpy.float32), None, 0)
        return self._buffer

    @buffer.setter
    def buffer(self, status):
        self._buffer, self._host, self._spare = status, None, None

    def clear(self):
        """Forget the flag and the arrays seen: the next check starts a new step, on whichever
        device its arrays are (a host buffer is zeroed and reused, not reallocated)."""
        if self._host is not None:
            if self._buffer is None:  # no view of it was handed out: reuse it
                self._host[0] = 0.0   # the only element a check writes
            else:  # the view keeps its values; the next step gets a new array
                self._spare = None
        self._host = self._buffer = None
        self._seen = []

    def unscale_and_check(self, arrays, scale):
        """Check ``arrays`` and multiply them by 1/scale in one pass (None kept; fp16 arrays are
        read once and unscaled into new fp32 arrays, see the module docstring); return the list
        of unscaled arrays.

        The flag covers the unscaled values too, as MindSpore checks after unscaling: with a
        scale below 1, ``1/scale > 1`` can turn a finite gradient into inf, so the results are
        then checked again (one more pass, only for such scales).
        """
        arrays = _widen_bf16(list(arrays))
        inv = 1.0 / float(scale)  # as inverse(scale): the host launch rounds it to float32
        if not self._lean(arrays, inv):
            arrays = self._unscale_checked(arrays, numpy.float32(inv))
        if inv > 1.0:  # (a Python float: when it is <= 1, so is its float32 rounding)
            self._recheck([a for a in arrays if a is not None])
        return arrays

    def _recheck(self, arrays):
        # a check of arrays this status has already seen (the unscaled results); checked public
        # path, never the lean one (which would record them again)
        if arrays:
            check_overflow(self._status(arrays[0]), *arrays)

    def _unscale_checked(self, arrays, inv):
        present = [a for a in arrays if a is not None]
        if not present:
            return arrays
        status = self._status(present[0])
        halves, wide = [], []
        for a in present:
            (halves if a.dtype == dtypes.float16 else wide).append(a)
        if wide:
            check_and_unscale(status, wide, inv)
        if halves:
            widened = iter(check_and_unscale_to_fp32(status, halves, inv))
            arrays = [a if a is None or a.dtype != dtypes.float16 else next(widened)
                      for a in arrays]
        self._seen.append(tuple(arrays))
        return arrays

    def check(self, arrays):
        """Check the arrays (None skipped) that this status has not seen yet."""
        seen = {id(a) for group in self._seen for a in group}
        fresh = _widen_bf16([a for a in arrays if a is not None and id(a) not in seen])
        if fresh and not self._lean(fresh, None):
            check_overflow(self._status(fresh[0]), *fresh)
            self._seen.append(tuple(fresh))

    def overflow(self):
        """The status as a Python bool (one read of the buffer), through ``_reduce_overflow``."""
        if self._host is not None:
            return _reduce_overflow(self._host[0] > 0)
        return _reduce_overflow(self._buffer is not None and get_status(self._buffer))

    def _lean(self, arrays, inv):
        """Run the check (and the unscale, with ``inv``) as one host launch when the arrays allow
        it and this status is (or can become) a host one; False when nothing was done."""
        if self._host is None and self._buffer is not None:
            return False  # a GPU status (or one set from outside): the checked path
        if inv is None:  # a check: fp16 and fp32 arrays each in one launch
            plans = _host_check_plans(arrays)
        else:  # an unscale: fp32 only (fp16 unscales widen into new arrays)
            plans = _host_plan(arrays)
            plans = None if plans is None else (plans,)
        if plans is None:
            return False
        for plan in plans:
            if plan[2][2]:  # some array is not empty
                if self._host is None:
                    self._host = self._spare if self._spare is not None else self._new_host()
                _launch_plan(plan, inv, self._host_address)
        self._seen.append(tuple(arrays))
        return True

    def _new_host(self):
        host = self._spare = (ctypes.c_float * STATUS_SIZE)()  # zeroed
        self._host_address = ctypes.addressof(host)
        return host

    def _status(self, like):
        if self._buffer is None and self._host is None:
            if isinstance(like, numpy.ndarray):
                self._host = self._spare if self._spare is not None else self._new_host()
            else:
                self._buffer = alloc_status(like)
        return self.buffer


def unscale_and_check(arrays, scale):
    """Return ``(unscaled_arrays, overflow)`` for the gradient arrays (None entries kept).

    fp32/fp64 arrays are scaled in place and returned; fp16 arrays give new fp32 arrays.
    ``overflow`` is a Python bool, already passed through ``_reduce_overflow``.
    """
    status = OverflowStatus()
    out = status.unscale_and_check(arrays, scale)
    return out, status.overflow()


def check(arrays):
    """Overflow flag (Python bool, reduced) of arrays that are already unscaled."""
    status = OverflowStatus()
    status.check(arrays)
    return status.overflow()


def _reduce_overflow(flag):
    """The single point every overflow decision passes through.

    Standalone it returns ``bool(flag)``. In data-parallel mode the flag is all-reduced (max)
    across the ranks (``communication.reduce_flag``), so that one rank's inf makes every rank
    skip and every rank's scale follows the same trajectory. The mode is read from
    ``parallel_context.data_parallel``: a stand-alone step makes no call for it.
    """
    return communication.reduce_flag(flag) if parallel_context.data_parallel else bool(flag)


# ---- the host launch of OverflowStatus ----------------------------------------------------------
def _host_plan(arrays, halves=False):
    """The host launch for ``arrays`` (None entries skipped) if they need nothing but a launch.

    That is: a host build exists, every array is a plain NumPy float32 array (or, with
    ``halves``, every one float16 instead) that is C-contiguous, aligned and writable, and
    together they are below ``HOST_PARALLEL_MIN`` elements (one thread). Returns
    ``(lib, dtype, (table, table_address, n_arrays, n_chunks, chunk))``; when ``n_arrays`` is
    not 0, ``lib.launch_check_<fp16|fp32>`` or ``lib.launch_check_unscale_fp32`` takes ``(1,
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


def _host_check_plans(arrays):
    """The host launches of a check (no unscale) of ``arrays`` (None entries skipped): one
    ``_host_plan`` per dtype when float16 and float32 arrays come together (an O2 step's fp16
    layer gradients beside its fp32 BatchNorm ones), as a tuple; None when either is None."""
    halves = [x for x in arrays if x is not None and x.dtype is _FP16]
    if not halves or len(halves) == sum(x is not None for x in arrays):
        plan = _host_plan(arrays, halves=True)
        return None if plan is None else (plan,)
    plans = (_host_plan(halves, halves=True),
             _host_plan([x for x in arrays if x is not None and x.dtype is not _FP16]))
    return None if None in plans else plans


def _launch_plan(plan, inv_scale, status_address):
    """Run ``_host_plan``'s launch: the check of its arrays (``inv_scale`` None; float32 or
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
    chunk = host_chunk(total)  # one thread: total < HOST_PARALLEL_MIN
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
