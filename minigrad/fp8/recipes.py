"""FP8 recipes: how a tensor's scale is chosen, as objects that quantize a tensor under a state.

Each recipe quantizes one named tensor at a time, ``recipe.quantize(x, state, role)``, with a
``ScalingState`` per tensor (its scale, amax history and trace). ``role`` is ``"forward"``
(activations, weights) or ``"backward"`` (gradients); the recipe's format gives the FP8 format
of each role:

* ``"HYBRID"``: E4M3 forward, E5M2 backward (the default of Transformer Engine's recipes);
* ``"E4M3"``: E4M3 for both. A pure ``"E5M2"`` recipe is refused, as in Transformer Engine.

=========================  ======================================  ============================
recipe                     scale of a tensor                       whose rule
=========================  ======================================  ============================
``DelayedScaling``         from the amax history of earlier steps  Transformer Engine
``CurrentScaling``         from this tensor's amax                 Transformer Engine
``TensorwiseScaling``      from this tensor's amax, float64        torchao ``TENSORWISE``
``RowwiseScaling``         one power of two per row (last axis)    torchao ``ROWWISE``
``MXFP8BlockScaling``      one E8M0 power of two per 32 values     Transformer Engine / OCP MX
=========================  ======================================  ============================

Every recipe saturates to ±max. The scale rules themselves are the functions of
``minigrad.fp8.scales``.
"""
import numpy

from minigrad import backend
from minigrad._checks import check_bool, check_in, check_non_negative_int, check_positive_int
from minigrad.fp8 import scales
from minigrad.fp8.formats import E4M3, E5M2
from minigrad.fp8.quantize import quantize

ROLES = ("forward", "backward")


class ScalingState:
    """The scaling state of one named tensor: ``scale`` (float, 1.0 to start, as Transformer
    Engine), ``fmt`` (the format of its last cast), ``history`` (delayed scaling's amax window,
    newest in slot 0), ``pending`` (an amax was recorded since the last update), ``last`` (the
    ``QuantStats`` of the last cast), ``trace`` (one ``(amax, scale)`` pair per cast, for
    the plots), ``saturated`` (how many values all its casts clipped: a counter that only grows,
    like the float status's sticky flag; set it to 0 to restart) and ``name`` (the tensor's
    name in step reports, set by the layer that owns it)."""

    def __init__(self, history_len=1, name=None):
        self.name = name
        self.saturated = 0
        self.scale = 1.0
        self.fmt = None  # the format of its last cast
        self.history = numpy.zeros(history_len, dtype=numpy.float32)
        self.pending = False
        self.last = None
        self.trace = []

    def record(self, stats, size):
        self.last = stats
        self.saturated += round(stats.clipped * size)
        scale = stats.scale if not isinstance(stats.scale, tuple) else stats.scale[0]
        self.trace.append((stats.amax, scale))


def _amax(x):
    xp = backend.get_array_module(x)
    return float(xp.max(xp.abs(x.astype(numpy.float32)))) if x.size else 0.0


class Recipe:
    """What every recipe shares: the format of each role and ``quantize``. A subclass gives
    ``scale_for(x, state, fmt)`` and may hold state across steps (``update``)."""
    blocked = False  # one scale per row or block, not per tensor

    def __init__(self, fp8_format="HYBRID"):
        owner = type(self).__name__
        self.fp8_format = check_in("fp8_format", fp8_format, ("HYBRID", "E4M3", "E5M2"),
                                   owner=owner)
        if fp8_format == "E5M2":
            raise ValueError(f"{owner}: fp8_format='E5M2' is not supported (as in Transformer "
                             f"Engine: E5M2 is for gradients only); use 'HYBRID' or 'E4M3'")

    def fmt(self, role):
        """The FP8 format of ``role`` ("forward" or "backward")."""
        return E5M2 if role == "backward" and self.fp8_format == "HYBRID" else E4M3

    def new_state(self, name=None):
        return ScalingState(name=name)

    def quantize(self, x, state, role="forward"):
        """``(Quantized, QuantStats)`` of array ``x`` under this recipe and ``state`` (the
        stats are also kept in ``state.last`` and ``state.trace``)."""
        check_in("role", role, ROLES, owner=type(self).__name__)
        fmt = self.fmt(role)
        state.fmt = fmt
        q, stats = quantize(x, fmt, self.scale_for(x, state, fmt), saturate=True)
        state.record(stats, x.size)
        return q, stats

    def update(self, state):
        """End of a step for ``state`` (nothing to do unless the recipe keeps history)."""
        state.pending = False

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class DelayedScaling(Recipe):
    """Transformer Engine's delayed scaling: each tensor is cast with the scale computed from the
    amaxes of earlier steps; its own amax joins the history (slot 0, the maximum over the step's
    casts) and ``update`` (run by ``fp8_autocast`` when a step's casts are done) computes the
    next scale with ``scales.delayed_scale`` and rolls the history.

    Args:
        margin: non-negative int; the scale is divided by 2^margin (headroom). Default 0.
        fp8_format: "HYBRID" (default) or "E4M3".
        amax_history_len: positive int, the window. Default 1024 (Transformer Engine ≥ 1.x).
        amax_compute_algo: "max" (default) over the window, or "most_recent".

    The first step casts with scale 1.0. A tensor that was not cast in a step keeps its history
    (it is not rolled: Transformer Engine issue #825).

    Raises:
        TypeError / ValueError: for an argument outside the ranges above.
    """

    def __init__(self, margin=0, fp8_format="HYBRID", amax_history_len=1024,
                 amax_compute_algo="max"):
        super().__init__(fp8_format)
        self.margin = check_non_negative_int("margin", margin, owner="DelayedScaling")
        self.amax_history_len = check_positive_int("amax_history_len", amax_history_len,
                                                   owner="DelayedScaling")
        self.amax_compute_algo = check_in("amax_compute_algo", amax_compute_algo,
                                          ("max", "most_recent"), owner="DelayedScaling")

    def new_state(self, name=None):
        return ScalingState(self.amax_history_len, name)

    def scale_for(self, x, state, fmt):
        amax = _amax(x)
        state.history[0] = max(state.history[0], amax) if not numpy.isnan(amax) else amax
        state.pending = True
        return state.scale

    def update(self, state):
        if state.pending:
            state.history, state.scale, _ = scales.delayed_scale(
                state.history, state.scale, state.fmt.max, self.margin, self.amax_compute_algo)
        state.pending = False


class CurrentScaling(Recipe):
    """Transformer Engine's current scaling (``Float8CurrentScaling``): each tensor is cast with
    ``scales.current_scale`` of its own amax (1.0 for an amax of 0, inf or NaN; FLT_MAX where the
    scale overflows).

    Args:
        fp8_format: "HYBRID" (default) or "E4M3".
        power_2_scale: round each scale down to a power of two. Default False.
    """

    def __init__(self, fp8_format="HYBRID", power_2_scale=False):
        super().__init__(fp8_format)
        self.power_2_scale = check_bool("power_2_scale", power_2_scale, owner="CurrentScaling")

    def scale_for(self, x, state, fmt):
        state.scale = scales.current_scale(_amax(x), fmt.max, self.power_2_scale)
        return state.scale


class TensorwiseScaling(Recipe):
    """torchao.float8's ``TENSORWISE`` recipe: ``scales.tensorwise_scale`` of the tensor's amax
    (``max / clamp(amax, 1e-12)`` in float64), an explicit clamp to ±max, then the cast.

    Args:
        fp8_format: "HYBRID" (default, torchao's e4m3 forward / e5m2 gradients) or "E4M3".
        round_scales_to_power_of_2: default False.
    """

    def __init__(self, fp8_format="HYBRID", round_scales_to_power_of_2=False):
        super().__init__(fp8_format)
        self.round_scales_to_power_of_2 = check_bool(
            "round_scales_to_power_of_2", round_scales_to_power_of_2, owner="TensorwiseScaling")

    def scale_for(self, x, state, fmt):
        state.scale = float(scales.tensorwise_scale(_amax(x), fmt.max,
                                                    self.round_scales_to_power_of_2))
        return state.scale


class RowwiseScaling(Recipe):
    """torchao.float8's ``ROWWISE`` recipe: one scale per row (over the last axis), rounded down
    to a power of two, E4M3 for activations, weights and gradients (``fp8_format="E4M3"``).
    Each tensor is quantized once along its last axis (torchao quantizes the operands of each of
    a Linear's three GEMMs along that GEMM's reduction axis)."""
    blocked = True

    def __init__(self, fp8_format="E4M3"):
        super().__init__(fp8_format)

    def scale_for(self, x, state, fmt):
        xp = backend.get_array_module(x)
        amax = backend.as_numpy(xp.max(xp.abs(x.astype(numpy.float32)), axis=-1, keepdims=True))
        return xp.asarray(scales.tensorwise_scale(amax, fmt.max, True))


class MXFP8BlockScaling(Recipe):
    """MXFP8 (OCP Microscaling, Transformer Engine's ``MXFP8BlockScaling``): blocks of 32
    consecutive values along the last axis, each with an E8M0 power-of-two scale
    (``scales.mx_scale``: the exponent of amax / 448 rounded up). E4M3 by default, as TE.

    Raises:
        ValueError: (in ``quantize``) when the last axis is not a multiple of 32.
    """
    blocked = True
    BLOCK = 32

    def __init__(self, fp8_format="E4M3"):
        super().__init__(fp8_format)

    def quantize(self, x, state, role="forward"):
        n = x.shape[-1] if x.ndim else 1
        if n % self.BLOCK:
            raise ValueError(f"MXFP8BlockScaling: the last axis of x must be a multiple of "
                             f"{self.BLOCK}, got x of shape {x.shape}")
        q, stats = super().quantize(x.reshape(x.shape[:-1] + (n // self.BLOCK, self.BLOCK)),
                                    state, role)
        q.shape_out = x.shape
        return q, stats

    def scale_for(self, x, state, fmt):
        xp = backend.get_array_module(x)
        amax = backend.as_numpy(xp.max(xp.abs(x.astype(numpy.float32)), axis=-1, keepdims=True))
        return xp.asarray(scales.mx_scale(amax, fmt.max))


RECIPES = {"delayed": DelayedScaling, "current": CurrentScaling,
           "tensorwise": TensorwiseScaling, "rowwise": RowwiseScaling,
           "mxfp8": MXFP8BlockScaling}
