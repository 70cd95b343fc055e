"""The one loss-scale core behind every face (MindSpore cells and managers, TF ``LossScale``,
PyTorch ``GradScaler``).

Every framework runs the same loop::

    loss * S  ->  backward  ->  grads / S  ->  any inf/NaN?
              ->  skip the update or apply it  ->  adjust S

and they differ only in the adjustment rule's constants. ``ScaleCore`` holds that rule once:

* overflow:  ``counter = 0``; after ``hysteresis`` consecutive overflows (default 1: at once)
  ``S = max(float32(S * backoff_factor), floor)`` (``floor`` None: ``SCALE_MIN``, float32's
  smallest normal value, whose inverse is finite), or
  ``max(float32(S / backoff_divisor), floor)`` for the faces whose peer divides (TF's
  ``DynamicLossScale``, MindSpore's ``amp.DynamicLossScaler``: for a factor that is not a power
  of two the two roundings differ by an ulp);
* clean step: ``counter += 1``; once ``counter >= growth_interval`` (``== growth_interval``
  with ``exact_interval``, PyTorch's test):
  ``S = min(float32(S * growth_factor), cap)`` unless that product is inf (the scale never grows
  to inf), and ``counter = 0``. The two tests differ only when the interval is lowered below the
  counter: ``>=`` grows at the next clean step, ``==`` waits for the next overflow to reset the
  counter;
* ``growth_interval=None``: a fixed scale that no step changes.

The peers as parameters of this core (checked step by step in tests/amp/test_loss_scale_rules.py):

=================================  ==============  ==============  ==========  =====
face                               growth_factor   backoff_factor  interval    floor
=================================  ==============  ==============  ==========  =====
MindSpore DynamicLossScaleUpdate   scale_factor    1/scale_factor  window      1
MindSpore amp.DynamicLossScaler    scale_factor    1/scale_factor  window      1
TF DynamicLossScale                multiplier      1/multiplier    period      1
PyTorch GradScaler                 growth_factor   backoff_factor  interval    SCALE_MIN
=================================  ==============  ==============  ==========  =====

The scale is a float32 value kept on the host (``numpy.float32``): deciding to skip a step
already needs one host read of the overflow flag, so the rule itself costs no device work.

What one step did, the same in all three faces:

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

from minigrad._checks import (
    check_bool,
    check_float,
    check_non_negative_int,
    check_positive,
    check_positive_int,
    check_relation,
    check_str_tuple,
    check_type,
    describe,
)
from minigrad.fp8.autocast import take_step_stats
from minigrad.tensor import Tensor

# the smallest scale a backoff leaves: float32's smallest normal value, whose inverse (8.5e37)
# is still finite in float32, so unscaling by it never divides by zero or multiplies by inf
SCALE_MIN = float(numpy.finfo(numpy.float32).tiny)
# the intervals of the update rule's multipliers, as ``check_float`` keywords
GROWTH_RANGE = {"low": 1.0, "low_open": True}  # a growth factor is > 1
BACKOFF_RANGE = {"low": 0.0, "high": 1.0, "low_open": True, "high_open": True}  # in (0, 1)


def as_number(value):
    """``value.item()`` for a one-element Tensor or array (a checkpoint loads numbers as 0-d
    Parameters), ``value`` itself otherwise (the checks that follow judge it)."""
    data = getattr(value, "data", value) if hasattr(value, "asnumpy") else value
    if isinstance(data, numpy.ndarray) or hasattr(data, "__cuda_array_interface__"):
        if data.size == 1:
            return data.reshape(()).item()
    return value


def float32_scale(value, name, owner):
    """``numpy.float32(value)`` for a positive number between ``SCALE_MIN`` and float32's largest
    value (no backoff or growth could leave another), or TypeError/ValueError naming ``name``."""
    with numpy.errstate(over="ignore", under="ignore"):
        scale = numpy.float32(check_positive(name, value, owner=owner))
    if not SCALE_MIN <= scale < numpy.inf:
        raise ValueError(f"{owner}: {name} must be a float32 value in [{SCALE_MIN:g}, "
                         f"{float(numpy.finfo(numpy.float32).max):g}], got {value!r}")
    return scale


class ScaleCore:
    """Loss scale state and its update rule (see the module docstring for the formulas).

    Args:
        scale: initial scale (> 0), kept as float32 (neither inf nor 0 there).
        growth_factor: multiplier applied after ``growth_interval`` clean steps (> 1).
        backoff_factor: multiplier applied on overflow (0 < backoff < 1).
        growth_interval: clean steps before growth (positive int), or None for a fixed scale.
        floor: the scale never drops below this (None: ``SCALE_MIN``, where the scale stays
            while every step is skipped, as PyTorch keeps skipping). MindSpore and TF use 1.
        cap: the scale never grows above this (None: only the finite guard).
        hysteresis: overflowing steps in a row tolerated before backing off (every one is still
            skipped); 1 backs off at once as all the peers do. The tolerance refills on every
            clean step ("consecutive" semantics, as in apex/NeMo).
        max_consecutive_skips: if set, ``record`` raises RuntimeError after that many skipped
            steps in a row, naming the cause (opt-in guard; None disables it).
        backoff_divisor: if set (> 1), the backoff divides by it in float32 instead of
            multiplying by ``backoff_factor`` (which becomes ``1 / backoff_divisor``).
        exact_interval: grow when the counter equals ``growth_interval`` (PyTorch's
            ``successful == growth_interval``) rather than when it reaches or passes it
            (MindSpore's ``scale_window <= cur_iter - last_overflow_iter``). Default False.
        owner: the class or function named in error messages.
        names: the face's own spelling of the arguments in error messages, e.g.
            ``{"scale": "init_scale"}`` for GradScaler (default: the names above).

    Raises:
        TypeError / ValueError: naming the argument and the value received.
    """

    def __init__(self, scale, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 floor=None, cap=None, hysteresis=1, max_consecutive_skips=None, owner="ScaleCore",
                 names=None, backoff_divisor=None, exact_interval=False):
        names = names or {}

        def name(key):  # the face's spelling of argument ``key``
            return names.get(key, key)

        self.scale = float32_scale(scale, name("scale"), owner)
        self.growth_factor = check_float(name("growth_factor"), growth_factor, **GROWTH_RANGE,
                                         owner=owner)
        if backoff_divisor is not None:
            backoff_divisor = check_float(name("backoff_divisor"), backoff_divisor, **GROWTH_RANGE,
                                          owner=owner)
            backoff_factor = 1.0 / backoff_divisor
        self.backoff_divisor = backoff_divisor
        self.backoff_factor = check_float(name("backoff_factor"), backoff_factor, **BACKOFF_RANGE,
                                          owner=owner)
        if growth_interval is not None:
            growth_interval = check_positive_int(name("growth_interval"), growth_interval,
                                                 owner=owner)
        self.growth_interval = growth_interval
        self.exact_interval = check_bool("exact_interval", exact_interval, owner=owner)
        self.floor = None if floor is None else check_positive("floor", floor, owner=owner)
        self.cap = None if cap is None else check_positive("cap", cap, owner=owner)
        if self.floor is not None and self.cap is not None:
            check_relation("floor", self.floor, self.floor <= self.cap, f"<= cap ({self.cap})",
                           owner=owner)
        self.hysteresis = check_positive_int("hysteresis", hysteresis, owner=owner)
        if max_consecutive_skips is not None:
            max_consecutive_skips = check_positive_int("max_consecutive_skips",
                                                       max_consecutive_skips, owner=owner)
        self.max_consecutive_skips = max_consecutive_skips
        self.counter = 0                   # clean steps since the last change of the scale
        self.tolerance = self.hysteresis   # overflows left before the next backoff
        self.consecutive_skips = 0
        self.steps = 0      # steps recorded (``record``)
        self.updates = 0    # calls of ``update``: MindSpore's iteration count

    @property
    def dynamic(self):
        return self.growth_interval is not None

    def update(self, overflow):
        """Apply one step's outcome (``overflow``: a Python bool) to the scale; return the new
        scale."""
        self.updates += 1
        if self.growth_interval is None:  # fixed (``dynamic`` without a property call)
            return self.scale
        if overflow:
            self.counter = 0
            self.tolerance -= 1
            if self.tolerance <= 0:
                self.tolerance = self.hysteresis
                if self.backoff_divisor is None:
                    new = numpy.float32(self.scale * numpy.float32(self.backoff_factor))
                else:
                    new = numpy.float32(self.scale / numpy.float32(self.backoff_divisor))
                floor = SCALE_MIN if self.floor is None or self.floor < SCALE_MIN else self.floor
                if new < floor:
                    new = numpy.float32(floor)
                self.scale = new
        else:
            self.tolerance = self.hysteresis
            self.counter += 1
            if (self.counter == self.growth_interval if self.exact_interval
                    else self.counter >= self.growth_interval):
                self.counter = 0
                with numpy.errstate(over="ignore"):
                    new = numpy.float32(self.scale * numpy.float32(self.growth_factor))
                if numpy.isfinite(new):
                    if self.cap is not None and new > self.cap:
                        new = numpy.float32(self.cap)
                    self.scale = new
        return self.scale

    def record(self, report):
        """Count the step described by ``report`` and enforce the optional skip guard.

        Raises:
            RuntimeError: after ``max_consecutive_skips`` skipped steps in a row, with the last
                report's cause (a non-finite loss cannot be fixed by any scale).
        """
        self.steps += 1
        self.consecutive_skips = self.consecutive_skips + 1 if report.skipped else 0
        limit = self.max_consecutive_skips
        if limit is not None and self.consecutive_skips >= limit:
            raise RuntimeError(
                f"loss scaling skipped {self.consecutive_skips} steps in a row "
                f"(max_consecutive_skips={limit}); last step: {report}. "
                + ("The forward loss itself is not finite: check the inputs and the forward pass, "
                   "no loss scale can fix that." if report.reason == "nonfinite_loss" else
                   "Gradients keep overflowing even at this scale: look for inf/NaN in the "
                   "parameters named above."))

    def state_dict(self):
        """The rule and its progress as a dict of Python numbers (``load_state_dict`` restores
        it)."""
        return {"scale": float(self.scale), "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "counter": self.counter, "tolerance": self.tolerance, "floor": self.floor,
                "cap": self.cap, "hysteresis": self.hysteresis}

    def load_state_dict(self, state):
        """Restore a ``state_dict()``: every value is checked as the constructor checks it, and
        nothing changes unless all of them pass.

        Raises:
            TypeError: ``state`` is not a dict, or a value of the wrong type.
            KeyError: naming the missing keys.
            ValueError: naming unknown keys, or a value out of range (as the constructor, plus
                ``counter`` >= 0 and 1 <= ``tolerance`` <= ``hysteresis``).
        """
        owner = "ScaleCore.load_state_dict"
        check_type("state_dict", state, dict, owner=owner)
        expected = sorted(self.state_dict())
        given = sorted(map(str, state))
        unknown, missing = sorted(set(given) - set(expected)), sorted(set(expected) - set(given))
        check_relation("state_dict keys", given, not unknown,
                       f"a subset of {expected} (unknown {unknown})", owner=owner)
        check_relation("state_dict keys", given, not missing,
                       f"a superset of {expected} (missing {missing})", error=KeyError,
                       owner=owner)
        state = {key: as_number(value) for key, value in state.items()}
        checked = ScaleCore(state["scale"], state["growth_factor"], state["backoff_factor"],
                            state["growth_interval"], state["floor"], state["cap"],
                            state["hysteresis"],
                            owner=owner)
        counter = check_non_negative_int("counter", state["counter"], owner=owner)
        tolerance = check_positive_int("tolerance", state["tolerance"], owner=owner)
        check_relation("tolerance", tolerance, tolerance <= checked.hysteresis,
                       f"<= hysteresis ({checked.hysteresis})", owner=owner)
        if self.backoff_divisor is not None and checked.backoff_factor != self.backoff_factor:
            self.backoff_divisor = 1.0 / checked.backoff_factor  # still dividing, by the new factor
        for key in ("scale", "growth_factor", "backoff_factor", "growth_interval", "floor", "cap",
                    "hysteresis"):
            setattr(self, key, getattr(checked, key))
        self.counter, self.tolerance = counter, tolerance

    def __repr__(self):
        rule = (f"growth x{self.growth_factor} every {self.growth_interval} clean steps, "
                f"backoff x{self.backoff_factor}" if self.dynamic else "fixed")
        return f"ScaleCore(scale={float(self.scale)}, {rule}, counter={self.counter})"

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
        fp8: the FP8 tensors cast in the step under ``fp8_autocast`` (``{name: {"amax",
            "scale_min", "scale_max", "clipped", "flushed", "sqnr_db", "saturated"}}``, from
            ``minigrad.fp8.autocast.take_step_stats``), else None; the text lists those that
            clipped values.
    """
    step: int
    skipped: bool
    reason: object
    scale_before: float
    scale_after: float
    inf_params: tuple = ()
    nan_params: tuple = ()
    underflow: object = None
    fp8: object = None

    def __str__(self):
        head = f"step {self.step}: " + (f"skipped ({self.reason})" if self.skipped else "applied")
        # 9 significant digits: every float32 scale exactly (2**24 is 16777216, not 1.67772e+07)
        text = f"{head}, loss scale {self.scale_before:.9g} -> {self.scale_after:.9g}"
        if self.inf_params:
            text += f", inf in {list(self.inf_params)}"
        if self.nan_params:
            text += f", NaN in {list(self.nan_params)}"
        clipped = [f"{name} {100 * row['clipped']:.3g} %" for name, row in (self.fp8 or {}).items()
                   if row["clipped"] > 0]
        if clipped:
            text += f", FP8 clipped in [{', '.join(clipped)}]"
        return text


def overflow_details(loss, names, arrays):
    """``(loss_finite, inf_names, nan_names)`` of an overflowing step: whether ``loss`` (a
    Tensor, an array or None, which counts as finite) holds no inf/NaN, and which gradients hold
    ±inf and which NaN.

    Only called once a step has overflowed, so its per-array passes cost nothing on clean steps.
    The flags are gathered on the gradients' device and read back together: one host read.
    """
    loss = getattr(loss, "data", loss)
    present = [(name, a) for name, a in zip(names, arrays) if a is not None]
    first = present[0][1] if present else loss
    if first is None:
        return True, (), ()
    xp = backend.get_array_module(first)
    flags = [] if loss is None else [xp.isfinite(backend.to_device(loss, backend.device_of(
        first))).all()]
    for _, a in present:
        flags += (xp.isinf(a).any(), xp.isnan(a).any())
    values = backend.as_numpy(xp.stack(flags)).tolist()
    loss_finite = True if loss is None else values.pop(0)
    inf_names = tuple(name for (name, _), flag in zip(present, values[0::2]) if flag)
    nan_names = tuple(name for (name, _), flag in zip(present, values[1::2]) if flag)
    return loss_finite, inf_names, nan_names


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
        loss_finite, inf_names, nan_names = overflow_details(loss, names, arrays)
        reason = "gradient_overflow" if loss_finite else "nonfinite_loss"
    after = core.scale if scale_after is None else scale_after
    before = float(scale_before)
    report = StepReport(core.steps + 1, bool(overflow), reason, before,
                        before if after is scale_before else float(after),
                        inf_names or (), nan_names or (), underflow, take_step_stats())
    if owner is not None:
        owner.last_report = report
    core.record(report)
    return report


def underflow_stats(names, scaled_grads):
    """Per parameter: share of gradient values that are zero or subnormal in fp16.

    Args:
        names: one name per gradient (a tuple or list of distinct non-empty strs).
        scaled_grads: the gradients as backprop produced them, i.e. multiplied by the loss
            scale, a tuple or list of NumPy/CuPy float arrays or Tensors (None entries skipped),
            as many as ``names`` (fp16 arrays are taken as they are; wider arrays are rounded to
            fp16 first).

    Returns:
        ``{name: {"zero": z, "subnormal": s, "max_abs": m}}``: ``z`` counts exact zeros (values
        that flushed, and true zeros such as dead ReLU units), ``s`` values in fp16's subnormal
        range ``(0, 2**-14)`` that keep only a few bits, ``m`` the largest magnitude (headroom
        to fp16's 65504 tells how much higher the scale could go).

    On the GPU every count comes back in one read of the device (``backend.read_scalars``).

    Raises:
        TypeError: ``names`` or ``scaled_grads`` not a tuple or list, a name not a str, a
            gradient not a float array or Tensor. ValueError: an empty or repeated name, or not
            one gradient per name.
    """
    given, names = names, check_str_tuple("names", names, scalar=False)
    check_type("scaled_grads", scaled_grads, (tuple, list),
               expected="a tuple or list of float arrays (None entries skipped)")
    check_relation("scaled_grads", scaled_grads, len(scaled_grads) == len(names),
                   f"one gradient per name (names={describe(given)})")
    kept, values = [], []
    for i, (name, g) in enumerate(zip(names, scaled_grads)):
        g = _float_array(f"scaled_grads[{i}]", g)
        if g is None or g.size == 0:
            continue
        xp = backend.get_array_module(g)
        with numpy.errstate(over="ignore"):  # beyond 65504 is inf in fp16: what max_abs reports
            mag = xp.abs(
                g.astype(numpy.float16) if g.dtype != dtypes.float16 else g).astype(numpy.float32)
        kept.append((name, float(g.size)))
        values += [(mag == 0).sum(), ((mag > 0) & (mag < dtypes.FP16_TINY)).sum(), mag.max()]
    host = backend.read_scalars(values)
    return {name: {"zero": host[3 * k] / n, "subnormal": host[3 * k + 1] / n,
                   "max_abs": host[3 * k + 2]} for k, (name, n) in enumerate(kept)}


def _float_array(name, value):
    """The NumPy/CuPy float array behind ``value`` (a Tensor or such an array), or None."""
    data = value.data if isinstance(value, Tensor) else value
    kinds = numpy.ndarray if backend.cupy is None else (numpy.ndarray, backend.cupy.ndarray)
    array = data is None or (isinstance(data, kinds) and dtypes.is_float(data.dtype))
    check_relation(name, value, array, "a float array or Tensor, or None", error=TypeError)
    return data
