"""``ThorReport``: what one THOR step did (``optimizer.last_report``), and a plain-text table."""
from dataclasses import dataclass, field


@dataclass
class LayerReport:
    """One layer in one step.

    Attributes:
        name: the weight's name.
        action: "refresh" (inverses recomputed), "reuse" (stored inverses), "frozen" (the trace
            rule stopped refreshing it), "record" (factors recorded, inverses kept: a factor
            period shorter than the inverse period), or "kept" (the recorded factors were not
            finite: the previous factors and inverses stay).
        trace_a, trace_g: ``tr(A)``, ``tr(G)`` of this step's record (None when nothing was
            recorded); ``tr(G)`` is the training loss's, also with ``fisher="mc"`` (the trace
            rule's statistic).
        damping_a, damping_g: the damping added to A and G by the last refresh.
        delta: the trace rule's relative change (None with the frequency rule and before the
            layer's first refresh).
        ladder: the blocks that needed the inversion ladder, ``{"A": {...}, "G": {...}}``
            (see ``linalg.inv_spd_ladder``); empty when every block factorised at once.
        factor_seconds, inverse_seconds: wall time spent forming the factors and inverting.
    """
    name: str
    action: str
    trace_a: float = None
    trace_g: float = None
    damping_a: float = None
    damping_g: float = None
    delta: float = None
    ladder: dict = field(default_factory=dict)
    factor_seconds: float = 0.0
    inverse_seconds: float = 0.0


@dataclass
class ThorReport:
    """One THOR step.

    Attributes:
        step: the 1-based number of the step, as amp's ``StepReport.step``: the optimizer's
            ``global_step`` after an applied step. A skipped step carries the number it would
            have had; the next applied step takes that number (the schedules index
            ``learning_rate`` and ``damping`` by ``step - 1``). Under dynamic loss scaling the
            train cell does not call the optimizer on an overflowed step, so there the two
            counts differ by the number of skipped steps.
        applied: False when the step was skipped (a non-finite gradient): then parameters,
            momentum and THOR state are unchanged.
        reason: why a step was skipped ("" when applied).
        refresh: whether any layer recomputed its inverses.
        layers: ``{name: LayerReport}`` for every THOR layer.
        learning_rate, damping: the step's values.
        kl_scale: the KL clip's factor ν (1.0 when off or not binding).
        seconds: wall time per phase: "factors", "inverses", "precondition", "update", and
            with ``fisher="mc"`` "sampling" (the sampled pass, run inside the forward pass).
    """
    step: int
    applied: bool = True
    reason: str = ""
    refresh: bool = False
    layers: dict = field(default_factory=dict)
    learning_rate: float = None
    damping: float = None
    kl_scale: float = 1.0
    seconds: dict = field(default_factory=dict)

    @property
    def refreshed(self):
        """Names of the layers whose inverses were recomputed this step."""
        return tuple(n for n, r in self.layers.items() if r.action == "refresh")

    @property
    def reused(self):
        """Names of the layers that reused their stored inverses."""
        return tuple(n for n, r in self.layers.items() if r.action in ("reuse", "record"))

    def summary(self):
        """One line: the step, refresh or reuse, and the time spent in the second-order phases."""
        if not self.applied:
            return f"step {self.step}: skipped ({self.reason})"
        times = ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in self.seconds.items())
        what = f"refresh {len(self.refreshed)}/{len(self.layers)} layers" if self.refresh \
            else "reuse"
        return f"step {self.step}: {what}; {times}"

    def progress_note(self):
        """A short note for progress bars and monitors (``ProgressBar``, ``LossMonitor``):
        ``"refresh 2/3 layers, factors 0.41 ms, inverses 1.20 ms"`` (with ``fisher="mc"`` also
        the sampled pass), ``"reuse"``, or ``"skipped"`` for a skipped step."""
        if not self.applied:
            return "skipped"
        if not self.refresh:
            return "reuse"
        times = ", ".join(f"{k} {1e3 * self.seconds[k]:.2f} ms"
                          for k in ("factors", "inverses", "sampling") if k in self.seconds)
        return f"refresh {len(self.refreshed)}/{len(self.layers)} layers, {times}"

    def __str__(self):
        header = (f"{'layer':<24} {'action':<8} {'tr(A)':>10} {'tr(G)':>10} {'damp A':>9} "
                  f"{'damp G':>9} {'delta':>8} {'ms inv':>7}")
        lines = [self.summary(), header]
        for name, r in self.layers.items():
            lines.append(f"{name:<24} {r.action:<8} {_num(r.trace_a):>10} {_num(r.trace_g):>10} "
                         f"{_num(r.damping_a):>9} {_num(r.damping_g):>9} {_num(r.delta):>8} "
                         f"{1e3 * r.inverse_seconds:>7.2f}")
        return "\n".join(lines)


def _num(value):
    return "-" if value is None else f"{value:.3g}"
