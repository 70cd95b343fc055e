"""MindSpore's loss scale managers: what ``Model(..., loss_scale_manager=...)`` and
``build_train_network`` turn into an update cell.

=====================================  ===============================  ====================
manager                                train cell                       on overflow
=====================================  ===============================  ====================
FixedLossScaleManager(s)               TrainOneStepWithLossScaleCell +  step skipped,
                                       FixedLossScaleUpdateCell(s)      scale kept
FixedLossScaleManager(s, False)        TrainOneStepCell(sens=s); the    step applied (no
                                       optimizer's ``loss_scale=s``     check at all)
                                       divides the gradients
DynamicLossScaleManager(s, f, w)       TrainOneStepWithLossScaleCell +  step skipped,
                                       DynamicLossScaleUpdateCell       scale / f (floor 1)
=====================================  ===============================  ====================
"""
from minigrad._checks import (check_bool, check_flag, check_float, check_positive,
                              check_positive_int, check_relation)
from minigrad.amp.core import GROWTH_RANGE, ScaleCore, float32_scale


class LossScaleManager:
    """Base class: ``get_loss_scale()``, ``update_loss_scale(overflow)``, ``get_update_cell()``."""

    def get_loss_scale(self):
        """The current loss scale."""

    def update_loss_scale(self, overflow):
        """Host-side update from one step's ``overflow`` (``Model`` calls it after each step)."""

    def get_update_cell(self):
        """The update Cell for ``TrainOneStepWithLossScaleCell``, or None for no overflow check."""


class FixedLossScaleManager(LossScaleManager):
    """A constant loss scale.

    Args:
        loss_scale: the scale (>= 1). Default 128.0.
        drop_overflow_update: True (default): skip the optimizer on overflow. False: no
            overflow check; the optimizer must be built with ``loss_scale`` equal to this one,
            because it is the optimizer that divides the gradients by it.

    Raises:
        TypeError: for a non-numeric ``loss_scale`` or non-bool ``drop_overflow_update``.
        ValueError: if ``loss_scale < 1``, or it is inf in float32.
    """

    def __init__(self, loss_scale=128.0, drop_overflow_update=True):
        # the cells multiply in float32
        float32_scale(loss_scale, "loss_scale", "FixedLossScaleManager")
        value = float(loss_scale)
        owner = "FixedLossScaleManager"
        check_relation("loss_scale", loss_scale, value >= 1, ">= 1", owner=owner)
        self._drop_overflow_update = check_bool("drop_overflow_update", drop_overflow_update,
                                                owner=owner)
        self.core = ScaleCore(value, growth_interval=None, owner="FixedLossScaleManager",
                              names={"scale": "loss_scale"})

    def get_loss_scale(self):
        """The scale: the one the update cell made by ``get_update_cell`` shows too."""
        return float(self.core.scale)

    def get_drop_overflow_update(self):
        """Whether the optimizer is skipped on overflow."""
        return self._drop_overflow_update

    def update_loss_scale(self, overflow):
        """Nothing to do: the scale is fixed.

        Raises:
            TypeError: for an ``overflow`` that is not a bool or a one-element bool Tensor.
        """
        check_flag("overflow", overflow, owner="FixedLossScaleManager.update_loss_scale")

    def __repr__(self):
        return (f"FixedLossScaleManager(loss_scale={self.get_loss_scale()}, "
                f"drop_overflow_update={self._drop_overflow_update})")

    def get_update_cell(self):
        """A ``FixedLossScaleUpdateCell`` sharing this manager's scale, or None when
        ``drop_overflow_update`` is False."""
        if not self._drop_overflow_update:
            return None
        from minigrad.nn.loss_scale import FixedLossScaleUpdateCell
        return FixedLossScaleUpdateCell(self.get_loss_scale(), core=self.core)


class DynamicLossScaleManager(LossScaleManager):
    """A dynamic loss scale: divided by ``scale_factor`` on overflow (not below 1), multiplied by
    it after ``scale_window`` clean steps in a row (never to inf).

    Args:
        init_loss_scale: initial scale (>= 1). Default 2**24.
        scale_factor: growth factor and backoff divisor (> 1). Default 2.
        scale_window: clean steps between growths (positive int). Default 2000.

    The scale and its counter live in ``core`` (a ``ScaleCore``), which the update cell made by
    ``get_update_cell`` shares: that cell updates it during each training step, and
    ``get_loss_scale()`` always reports what the cell uses (after ``set_sense_scale`` too).
    ``update_loss_scale`` is for loops without such a cell. After more than 1000 overflowing
    steps in a row the step (or ``update_loss_scale``) raises RuntimeError, as MindSpore's
    manager does.

    Raises:
        TypeError / ValueError: naming the argument and the value received.
    """

    bad_step_max = 1000

    def __init__(self, init_loss_scale=2 ** 24, scale_factor=2, scale_window=2000):
        owner = "DynamicLossScaleManager"
        value = check_positive("init_loss_scale", init_loss_scale, owner=owner)
        check_relation("init_loss_scale", init_loss_scale, value >= 1, ">= 1", owner=owner)
        factor = check_float("scale_factor", scale_factor, **GROWTH_RANGE, owner=owner)
        self.scale_window = check_positive_int("scale_window", scale_window, owner=owner)
        self.scale_factor = scale_factor
        self.core = ScaleCore(value, factor, 1.0 / factor, self.scale_window, floor=1.0,
                              max_consecutive_skips=self.bad_step_max + 1, owner=owner,
                              names={"scale": "init_loss_scale"})

    def __repr__(self):
        return (f"DynamicLossScaleManager(loss_scale={float(self.core.scale)}, "
                f"scale_factor={self.scale_factor}, scale_window={self.scale_window})")

    @property
    def loss_scale(self):
        return float(self.core.scale)

    def get_loss_scale(self):
        return float(self.core.scale)

    def get_drop_overflow_update(self):
        return True

    def update_loss_scale(self, overflow):
        """Apply one step's ``overflow`` to the scale, for a loop that has no update cell from
        ``get_update_cell`` (that cell applies each step itself: do not call both).

        Raises:
            RuntimeError: after more than ``bad_step_max`` (1000) overflows in a row.
            TypeError: for an ``overflow`` that is not a bool or a one-element bool Tensor.
        """
        from minigrad.amp.core import StepReport
        overflow = check_flag("overflow", overflow,
                              owner="DynamicLossScaleManager.update_loss_scale")
        before = self.core.scale
        self.core.update(overflow)
        self.core.record(StepReport(self.core.steps + 1, overflow,
                                    "gradient_overflow" if overflow else None,
                                    float(before), float(self.core.scale)))

    def get_update_cell(self):
        """A ``DynamicLossScaleUpdateCell`` sharing this manager's scale and counter (``core``)."""
        from minigrad.nn.loss_scale import DynamicLossScaleUpdateCell
        return DynamicLossScaleUpdateCell(self.get_loss_scale(), self.scale_factor,
                                          self.scale_window, core=self.core)
