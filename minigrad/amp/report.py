"""What one loss-scaled step did, shared by all three faces.

* ``StepReport``: applied or skipped, why, scale before/after, which parameters held inf and
  which held NaN, optional underflow statistics;
* ``make_report``: builds it and records it in the face's ``ScaleCore`` (step count, skip guard);
* ``underflow_stats``: per parameter, the share of gradient values that are zero or subnormal
  once scaled into fp16.
"""
import dataclasses

import numpy

from minigrad import backend
from minigrad import dtype as dtypes


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
    """Build the ``StepReport`` of a step, record it in ``core`` (step count, skip guard), return
    it.

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
            mag = xp.abs(
                g.astype(numpy.float16) if g.dtype != dtypes.float16 else g).astype(numpy.float32)
        n = float(g.size)
        zero = float((mag == 0).sum()) / n
        sub = float(((mag > 0) & (mag < dtypes.FP16_TINY)).sum()) / n
        stats[name] = {"zero": zero, "subnormal": sub, "max_abs": float(mag.max())}
    return stats
