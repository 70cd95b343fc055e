"""What one loss-scaled step does with the gradients, shared by all three faces.

* ``unscale_and_check(arrays, scale)``: multiply every gradient by 1/scale and say whether any
  value is inf or NaN — through the float-status path, then ``_reduce_overflow``;
* ``_reduce_overflow(flag)``: the ONE place an overflow flag passes before a decision is taken
  (in data-parallel mode it is all-reduced here, so that every rank skips together);
* ``StepReport``: what happened (applied or skipped, why, scale before/after, which parameters
  held inf and which held NaN, optional underflow statistics);
* ``underflow_stats``: per parameter, the share of gradient values that are zero or subnormal
  once scaled into fp16.

fp16 gradients are unscaled into new float32 arrays: ``g * S`` fits fp16, but the true ``g`` is
often below fp16's smallest subnormal (6e-8), so unscaling in fp16 would flush it to zero and
undo the point of loss scaling. fp32/fp64 gradients are unscaled in place.
"""
import ctypes
import dataclasses

import numpy

import minigrad.tensor as _tensor  # as in float_status: safe while tensor.py is being imported
from minigrad import backend, communication, dtype as dtypes
from minigrad.amp import _status_launch, float_status

STATUS_SIZE = float_status.STATUS_SHAPE[0]
_FP32 = numpy.dtype(numpy.float32)


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
        (``float_status.alloc_status()``, ``ops.NPUAllocFloatStatus()()``): checks set it there.

        Raises:
            TypeError / ValueError: ``buffer`` is not such a buffer (``float_status``'s checks).
        """
        status = cls()
        float_status.get_status(buffer)  # validates it
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
            float_status.check_overflow(self._status(arrays[0]), *arrays)

    def _unscale_checked(self, arrays, inv):
        present = [a for a in arrays if a is not None]
        if not present:
            return arrays
        status = self._status(present[0])
        halves, wide = [], []
        for a in present:
            (halves if a.dtype == dtypes.float16 else wide).append(a)
        if wide:
            float_status.check_and_unscale(status, wide, inv)
        if halves:
            widened = iter(float_status.check_and_unscale_to_fp32(status, halves, inv))
            arrays = [a if a is None or a.dtype != dtypes.float16 else next(widened) for a in arrays]
        self._seen.append(tuple(arrays))
        return arrays

    def check(self, arrays):
        """Check the arrays (None skipped) that this status has not seen yet."""
        seen = {id(a) for group in self._seen for a in group}
        fresh = [a for a in arrays if a is not None and id(a) not in seen]
        if fresh and not self._lean(fresh, None):
            float_status.check_overflow(self._status(fresh[0]), *fresh)
            self._seen.append(tuple(fresh))

    def overflow(self):
        """The status as a Python bool (one read of the buffer), through ``_reduce_overflow``."""
        if self._host is not None:
            return _reduce_overflow(self._host[0] > 0)
        return _reduce_overflow(self._buffer is not None and float_status.get_status(self._buffer))

    def _lean(self, arrays, inv):
        """Run the check (and the unscale, with ``inv``) as one host launch when the arrays allow
        it and this status is (or can become) a host one; False when nothing was done."""
        if self._host is None and self._buffer is not None:
            return False  # a GPU status (or one set from outside): the checked path
        plan = _status_launch.host_plan(arrays, halves=inv is None)  # fp16 unscales widen
        if plan is None:
            return False
        lib, dtype, (_, table, n_arrays, n_chunks, chunk) = plan
        if n_arrays:  # some array is not empty
            if self._host is None:
                self._host = self._spare if self._spare is not None else self._new_host()
            if inv is not None:  # the call rounds ``inv`` to float32
                lib.launch_check_unscale_fp32(1, table, n_arrays, n_chunks, chunk, inv,
                                              self._host_address)
            else:
                launch = lib.launch_check_fp32 if dtype is _FP32 else lib.launch_check_fp16
                launch(1, table, n_arrays, n_chunks, chunk, 1.0, self._host_address)
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
                self._buffer = float_status.alloc_status(like)
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
    skip and every rank's scale follows the same trajectory.
    """
    return communication.reduce_flag(flag)


@dataclasses.dataclass
class StepReport:
    """The outcome of one loss-scaled step.

    Attributes:
        step: 1-based count of steps seen by this scaler.
        skipped: True if the optimizer was not run.
        reason: None, ``"gradient_overflow"`` (finite loss, inf/NaN gradients: the scale was too
            high) or ``"nonfinite_loss"`` (the forward loss itself is inf/NaN: no scale helps).
        scale_before / scale_after: the scale used for this step and the one for the next.
        inf_params / nan_params: names of the parameters whose gradient held inf / NaN.
        underflow: ``underflow_stats`` of the scaled gradients (``{name: {"zero": share,
            "subnormal": share, "max_abs": value}}``) when requested, else None.
    """
    step: int
    skipped: bool
    reason: object
    scale_before: float
    scale_after: float
    inf_params: tuple = ()
    nan_params: tuple = ()
    underflow: object = None

    def __str__(self):
        head = f"step {self.step}: " + (f"skipped ({self.reason})" if self.skipped else "applied")
        text = f"{head}, loss scale {self.scale_before:g} -> {self.scale_after:g}"
        if self.inf_params:
            text += f", inf in {list(self.inf_params)}"
        if self.nan_params:
            text += f", NaN in {list(self.nan_params)}"
        return text


def nonfinite_names(names, arrays):
    """``(inf_names, nan_names)``: which gradients hold ±inf and which hold NaN.

    Only called once a step has overflowed, so its per-array passes cost nothing on clean steps.
    """
    inf_names, nan_names = [], []
    for name, a in zip(names, arrays):
        if a is None:
            continue
        xp = backend.get_array_module(a)
        if bool(xp.isinf(a).any()):
            inf_names.append(name)
        if bool(xp.isnan(a).any()):
            nan_names.append(name)
    return tuple(inf_names), tuple(nan_names)


def loss_is_finite(loss):
    """True when ``loss`` (a Tensor, an array or None) holds no inf/NaN; None counts as finite."""
    if loss is None:
        return True
    data = getattr(loss, "data", loss)
    return bool(backend.get_array_module(data).isfinite(data).all())


def make_report(core, scale_before, overflow, loss, names, arrays, scale_after=None, underflow=None,
                owner=None):
    """Build the ``StepReport`` of a step, record it in ``core`` (step count, skip guard), return it.

    ``scale_after`` defaults to ``core.scale`` (the scale ``core`` chose for the next step).
    ``underflow`` goes into the report. With ``owner``, ``owner.last_report`` is set to the report
    before ``core`` records it, so a step that trips the skip guard (RuntimeError) still leaves
    its own report behind.
    """
    reason = inf_names = nan_names = None
    if overflow:
        reason = "gradient_overflow" if loss_is_finite(loss) else "nonfinite_loss"
        inf_names, nan_names = nonfinite_names(names, arrays)
    after = core.scale if scale_after is None else scale_after
    before = float(scale_before)
    report = StepReport(core.steps + 1, bool(overflow), reason, before,
                        before if after is scale_before else float(after),
                        inf_names or (), nan_names or (), underflow)
    if owner is not None:
        owner.last_report = report
    core.record(report)
    return report


def underflow_stats(names, scaled_grads):
    """Per parameter: share of gradient values that are zero or subnormal in fp16.

    Args:
        names: one name per gradient.
        scaled_grads: the gradients as backprop produced them, i.e. multiplied by the loss
            scale (fp16 arrays are taken as they are; wider arrays are rounded to fp16 first).

    Returns:
        ``{name: {"zero": z, "subnormal": s, "max_abs": m}}``: ``z`` counts exact zeros (values
        that flushed, and true zeros such as dead ReLU units), ``s`` values in fp16's subnormal
        range ``(0, 2**-14)`` that keep only a few bits, ``m`` the largest magnitude (headroom
        to fp16's 65504 tells how much higher the scale could go).
    """
    stats = {}
    for name, g in zip(names, scaled_grads):
        if g is None or g.size == 0:
            continue
        xp = backend.get_array_module(g)
        with numpy.errstate(over="ignore"):  # beyond 65504 is inf in fp16: what max_abs reports
            mag = xp.abs(g.astype(numpy.float16) if g.dtype != dtypes.float16 else g).astype(numpy.float32)
        n = float(g.size)
        zero = float((mag == 0).sum()) / n
        sub = float(((mag > 0) & (mag < dtypes.FP16_TINY)).sum()) / n
        stats[name] = {"zero": zero, "subnormal": sub, "max_abs": float(mag.max())}
    return stats
