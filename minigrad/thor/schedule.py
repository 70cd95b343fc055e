"""THOR's schedules: the per-step damping, and when each layer refreshes its factors and inverses.

Damping (and the learning rate) may be a 0-d Tensor (constant), a 1-D Tensor with one value per
step (MindSpore's ResNet/BERT schedules: step k reads entry k; past the end the last entry is
used, as the other optimizers do for a per-step learning rate), or a callable of the step (a
``LearningRateSchedule``, or any ``fn(step) -> float``).

Refresh rules (``refresh=``):

- ``"frequency"`` (MindSpore): factors are recorded every ``factor_frequency`` steps and the
  inverses recomputed every ``inverse_frequency`` steps (both default ``frequency``), counting
  from step 0; the steps in between reuse the stored inverses and record nothing.
- ``"trace"`` (the THOR paper's rule, which MindSpore does not implement): every step each layer
  keeps its rows and measures ``Δ = |T - T_ref| / T_ref`` with ``T = tr(A + δ_A I) ·
  tr(G + δ_G I)`` (``tr(A ⊗ G) = tr A · tr G``; the traces are two dot products, the factors
  are not formed) against ``T_ref`` of the layer's last refresh. ``Δ > omega1``: the layer forms
  its factors from this step's rows and inverts them at once; ``Δ < omega2``: the layer is
  frozen for good (its inverses are kept, nothing is recorded any more); otherwise the stored
  inverses are reused. The traces are always the training loss's (also with ``fisher="mc"``) and
  of the step's own batch (also with ``factor_decay``, whose running average then takes in the
  batches of the refresh steps). With ``fisher="mc"`` the sampled backward pass that gives G
  runs inside the forward pass, before the step's traces exist, so it runs only on the steps
  planned to record factors: a refresh that the rule asks for at step k (the layer is then
  ``due``) is served by the factors of step k + 1, whatever that step's Δ.
"""
import numbers

import numpy

from minigrad._checks import check_float, check_in, check_positive_int
from minigrad.tensor import Tensor

REFRESH_RULES = ("frequency", "trace")


class StepValue:
    """A per-step value: ``value(step) -> float`` (see the module docstring)."""

    def __init__(self, value, name, owner):
        self.name = name
        if isinstance(value, Tensor):
            array = numpy.asarray(value.asnumpy(), numpy.float64)
            if array.ndim > 1:
                raise ValueError(f"{owner}: {name} must be a 0-d or 1-D Tensor, "
                                 f"got shape {array.shape}")
            if array.size == 0:
                raise ValueError(f"{owner}: {name} must not be empty, got shape {array.shape}")
            if not (numpy.isfinite(array).all() and (array >= 0).all()):
                raise ValueError(f"{owner}: {name} must be finite and >= 0, got {array}")
            self.values = array.reshape(-1).tolist()
            self.fn = None
        elif callable(value):
            self.values, self.fn = None, value
        else:
            raise TypeError(f"{owner}: {name} must be a Tensor (0-d, or 1-D with one value per "
                            f"step) or a callable of the step, got {value!r} "
                            f"({type(value).__name__})")

    def __call__(self, step):
        if self.fn is None:
            return self.values[min(step, len(self.values) - 1)]
        value = self.fn(step)
        value = value.item() if hasattr(value, "item") else value
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0 \
                or value == float("inf"):
            raise ValueError(f"THOR: the {self.name} schedule returned {value!r} at step {step}; "
                             f"expected a finite float >= 0")
        return float(value)


class RefreshRule:
    """Decides, per layer and step, whether to record factors and whether to refresh inverses.

    Args:
        rule: "frequency" or "trace".
        frequency: MindSpore's period (int >= 2), the default of both periods below.
        factor_frequency: a positive int or None (= ``frequency``).
        inverse_frequency: a positive int or None (= ``frequency``).
        omega1: the trace rule's refresh threshold (a float >= 0).
        omega2: the trace rule's freeze threshold (a float >= 0, <= ``omega1``).
    """

    def __init__(self, rule, frequency, factor_frequency=None, inverse_frequency=None,
                 omega1=0.01, omega2=0.0, owner="THOR"):
        self.rule = check_in("refresh", rule, REFRESH_RULES, owner=owner)
        self.factor_frequency = check_positive_int(
            "factor_frequency", frequency if factor_frequency is None else factor_frequency,
            owner=owner)
        self.inverse_frequency = check_positive_int(
            "inverse_frequency", frequency if inverse_frequency is None else inverse_frequency,
            owner=owner)
        self.omega1 = check_float("omega1", omega1, low=0.0, owner=owner)
        self.omega2 = check_float("omega2", omega2, low=0.0, high=self.omega1, owner=owner)

    def record_mode(self, block, step, sampled=False):
        """What ``block``'s layer records at ``step``: None, "traces" (rows for the trace test)
        or "factors" (a refresh may use them; with ``sampled``, i.e. ``fisher="mc"``, the
        sampled pass runs)."""
        if block.frozen:
            return None
        if self.rule == "trace":
            return "factors" if not sampled or block.due or block.A is None else "traces"
        if step % self.factor_frequency == 0 or block.A is None:
            return "factors"
        return None

    def decide(self, block, step, recorded):
        """The frequency rule: "refresh" or "reuse" for ``block`` at ``step`` (``recorded``: new
        finite factors came in)."""
        if block.A is None:
            return "reuse"
        if block.A_inv is None or block.G_inv is None:
            return "refresh"
        return "refresh" if step % self.inverse_frequency == 0 else "reuse"

    def test(self, block, traces):
        """The trace rule: ``(decision, Δ)`` for ``block`` given this step's ``traces`` ((tr A,
        tr G) or None): decision "refresh", "reuse" or "frozen" (Δ None without a reference)."""
        if block.frozen:
            return "frozen", None
        delta = None
        if traces is not None and block.trace_ref:
            delta = abs(block.damped_trace(traces, block.damping_used) - block.trace_ref) \
                / block.trace_ref
        if block.due or block.A_inv is None or block.G_inv is None or delta is None:
            return ("refresh" if traces is not None else "reuse"), delta
        if delta > self.omega1:
            return "refresh", delta
        if delta < self.omega2:
            block.frozen = True
            return "frozen", delta
        return "reuse", delta
