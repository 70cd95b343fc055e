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
ones for a check) straight to one kernel launch per dtype (``_status_launch.host_plan``/
``host_check_plans``/``launch_plan``);
everything else takes the checked functions above. Every overflow decision passes through
``_reduce_overflow`` (in data parallel, an all-reduce: one rank's inf makes every rank skip).

fp16 gradients are unscaled into new float32 arrays: ``g * S`` fits fp16, but the true ``g`` is
often below fp16's smallest subnormal (6e-8), so unscaling in fp16 would flush it to zero and
undo the point of loss scaling. fp32/fp64 gradients are unscaled in place.

Accepted arrays: Tensors or NumPy/CuPy arrays of float16 or float32 (raw CUDA kernels on GPU,
the same kernels compiled for the CPU, or NumPy when no compiler is present) and float64
(array operations), of any shape, length, strides or alignment. The status buffer is a Tensor
(or array) of shape (8,) and dtype float32 on the same device as the arrays. Its sum is 0 when
no overflow was seen and > 0 otherwise (MindSpore's convention); checks only write element 0.
"""
import ctypes

import numpy

import minigrad.tensor as _tensor
from minigrad import _native, backend, communication
from minigrad import dtype as dtypes
from minigrad._config import config
from minigrad.amp import _status_args, _status_launch
from minigrad.communication import parallel_context

CHECKED_DTYPES, STATUS_SHAPE = _status_args.CHECKED_DTYPES, _status_args.STATUS_SHAPE
STATUS_SIZE = STATUS_SHAPE[0]
_array, _status_array = _status_args.array, _status_args.status_array
_checked_arrays, _as_sequence = _status_args.checked_arrays, _status_args.as_sequence
_inv_scale = _status_args.inv_scale


def alloc_status(like=None):
    """A new status buffer: a float32 Tensor of shape (8,) filled with zeros.

    Args:
        like: where to put it: a Tensor or array (its device), a device name (``"CPU"``,
            ``"GPU"``), or None for the default device (``set_context(device_target=...)``).

    Raises:
        ValueError: an unknown device name. RuntimeError: ``"GPU"`` without CuPy and a GPU.
    """
    if like is None:
        device = backend.check_device(config.device_target)
    elif isinstance(like, str):
        device = backend.check_device(like)
    else:
        data = _array(like, "like")
        device = backend.device_of(data)
        if device == "GPU":
            with data.device:  # the same GPU as ``like``
                return _tensor.Tensor(backend.cupy.zeros(STATUS_SHAPE, dtype=numpy.float32))
    xp = backend.cupy if device == "GPU" else numpy
    return _tensor.Tensor(xp.zeros(STATUS_SHAPE, dtype=numpy.float32))


def clear_status(status):
    """Reset every element of ``status`` to 0 in place and return ``status``.

    Raises:
        TypeError / ValueError: ``status`` is not a float32 buffer of shape (8,).
    """
    _status_array(status).fill(0)
    return status


def check_overflow(status, *arrays):
    """Set the flag in ``status`` if any element of any of ``arrays`` is +inf, -inf or NaN.

    The flag is sticky: ``status[0]`` becomes 1.0 on overflow and is left unchanged otherwise,
    so a clean check never resets an earlier overflow. One kernel launch covers all arrays of
    one dtype. ``None`` entries are skipped. Returns ``status``.

    Raises:
        TypeError: ``status`` or an array of the wrong type or dtype.
        ValueError: ``status`` of the wrong shape, or an array on another device.
    """
    buffer = _status_array(status)
    _status_launch.run(buffer, _checked_arrays(buffer, arrays, "arrays"))
    return status


def check_and_unscale(status, arrays, inv_scale):
    """Check ``arrays`` for inf/NaN like ``check_overflow``, then multiply them by ``inv_scale``.

    Both happen in one pass, in place: ``x <- x * inv_scale`` for every array, float16 through
    float32 with round-to-nearest-even. The flag reflects the values before the multiplication
    (PyTorch's ``_amp_foreach_non_finite_check_and_unscale_`` semantics). Non-contiguous
    arrays are updated through their view. Arrays must not overlap in memory.

    Args:
        status: the status buffer.
        arrays: a sequence of Tensors/arrays (``None`` entries skipped), or a single one.
        inv_scale: a finite real number (typically ``1 / loss_scale``), or a one-element
            Tensor/array holding it.

    Returns:
        ``status``.

    Raises:
        TypeError: as ``check_overflow``, or ``inv_scale`` not a number.
        ValueError: as ``check_overflow``, ``inv_scale`` not finite, or a read-only array.
    """
    buffer = _status_array(status)
    checked = _checked_arrays(buffer, _as_sequence(arrays), "arrays")
    for i, x in enumerate(checked):
        if isinstance(x, numpy.ndarray) and not x.flags.writeable:
            raise ValueError(f"arrays[{i}] is read-only; check_and_unscale writes in place")
    _status_launch.run(buffer, checked, _inv_scale(inv_scale))
    return status


def check_and_unscale_to_fp32(status, arrays, inv_scale):
    """Check float16 ``arrays`` for inf/NaN and return new float32 arrays ``fp32(x) * inv_scale``.

    One pass reads each fp16 value once, sets the sticky flag as ``check_overflow`` would and
    writes the unscaled value in fp32: unscaling in fp16 would flush true gradients below fp16's
    smallest subnormal (6e-8) to zero. The inputs are left untouched.

    Args:
        status: the status buffer.
        arrays: a sequence of float16 Tensors/arrays (``None`` entries skipped), or a single one.
        inv_scale: as ``check_and_unscale``.

    Returns:
        A list of new float32 arrays, one per array given (``None`` entries skipped).

    Raises:
        TypeError: as ``check_overflow``, for an array that is not float16, or ``inv_scale`` not
            a number. ValueError: as ``check_and_unscale``.
    """
    buffer = _status_array(status)
    checked = _checked_arrays(buffer, _as_sequence(arrays), "arrays")
    for i, x in enumerate(checked):
        if x.dtype != CHECKED_DTYPES[0]:  # a dtype object compares faster than numpy.float16
            raise TypeError(f"arrays[{i}] must have dtype float16 for check_and_unscale_to_fp32, "
                            f"got {x.dtype}")
    return _status_launch.widen(buffer, checked, _inv_scale(inv_scale))


def get_status(status):
    """True if an overflow was recorded since the last clear (``status.sum() > 0``).

    This reads the buffer: on GPU it waits for the checks queued before it.

    Raises:
        TypeError / ValueError: ``status`` is not a float32 buffer of shape (8,).
    """
    return bool(_status_array(status).sum() > 0)


def all_finite(arrays):
    """True when no element of ``arrays`` (a sequence of Tensors/arrays, or one) is inf or NaN.

    Uses a private status buffer; an empty sequence is all finite.

    Raises:
        TypeError / ValueError: as ``check_overflow``.
    """
    arrays = _as_sequence(arrays)
    first = next((i for i, x in enumerate(arrays) if x is not None), None)
    if first is None:
        return True
    status = alloc_status(_array(arrays[first], f"arrays[{first}]"))  # errors name arrays[i]
    check_overflow(status, *arrays)
    return not get_status(status)


def kernel_source():
    """The CUDA source of the float-status kernels, ``kernels/float_status.cu`` (package data
    ``minigrad.kernels``): the code every check runs, compiled by CuPy on a GPU and, through
    ``kernels/host_shim.h``, by the system C++ compiler for the CPU."""
    return _native.read_source(_native.STATUS_SOURCE)


def host_implementation():
    """How checks of NumPy arrays run in this process: ``("native", None)`` when the kernel
    source is compiled for this CPU, else ``("numpy", reason)`` (no C++ compiler, a failed
    build, or ``MINIGRAD_NATIVE=0``; the NumPy fallback gives the same answers)."""
    if _native.host_library() is not None:
        return "native", None
    return "numpy", _native.host_library_error()


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
    check alone; see ``_status_launch.host_plan``) go straight to the kernel, and ``overflow``
    reads the flag (element 0, the one every check writes) without a NumPy call. Every other
    case takes the checked ``float_status`` functions.
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
        arrays = list(arrays)
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
        fresh = [a for a in arrays if a is not None and id(a) not in seen]
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
            plans = _status_launch.host_check_plans(arrays)
        else:  # an unscale: fp32 only (fp16 unscales widen into new arrays)
            plans = _status_launch.host_plan(arrays)
            plans = None if plans is None else (plans,)
        if plans is None:
            return False
        for plan in plans:
            if plan[2][2]:  # some array is not empty
                if self._host is None:
                    self._host = self._spare if self._spare is not None else self._new_host()
                _status_launch.launch_plan(plan, inv, self._host_address)
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
