"""Mixed precision: one loss-scale core, one float-status path, three faces.

* MindSpore: ``nn.TrainOneStepWithLossScaleCell`` with ``nn.DynamicLossScaleUpdateCell`` /
  ``nn.FixedLossScaleUpdateCell``; ``FixedLossScaleManager`` / ``DynamicLossScaleManager``;
  ``build_train_network`` and the AMP levels O0-O3; functional ``all_finite``, ``init_status``,
  ``StaticLossScaler``, ``DynamicLossScaler``.
* TensorFlow: ``minigrad.mixed_precision`` (``LossScale``, ``FixedLossScale``,
  ``DynamicLossScale``, ``get``, ``LossScaleOptimizer``).
* PyTorch: ``GradScaler`` and ``autocast``.

All of them decide with ``ScaleCore`` (``core.py``), unscale and check through
``step.unscale_and_check`` (the float-status path, then ``_reduce_overflow``) and leave a
``StepReport`` in ``last_report``: applied or skipped, gradient overflow vs non-finite loss,
scale before/after, the parameters holding inf and NaN. ``minigrad.amp.plots`` draws the scale's
trajectory and where gradient values fall in fp16's range (matplotlib, optional).
"""
from minigrad.amp.core import ScaleCore
from minigrad.amp import float_status
from minigrad.amp.float_status import (alloc_status, clear_status, check_overflow, check_and_unscale,
                                       check_and_unscale_to_fp32, get_status)
from minigrad.amp.step import StepReport, underflow_stats
from minigrad.amp.functional import (init_status, all_finite, LossScaler, StaticLossScaler,
                                     DynamicLossScaler)
from minigrad.amp.grad_scaler import GradScaler, OptState
from minigrad.amp.autocast import autocast
from minigrad.amp.managers import LossScaleManager, FixedLossScaleManager, DynamicLossScaleManager
from minigrad.amp.build import build_train_network, cast_network

__all__ = ["ScaleCore", "float_status", "alloc_status", "clear_status", "check_overflow",
           "check_and_unscale", "check_and_unscale_to_fp32", "get_status", "StepReport", "underflow_stats", "init_status", "all_finite", "LossScaler",
           "StaticLossScaler", "DynamicLossScaler", "GradScaler", "OptState", "autocast",
           "LossScaleManager", "FixedLossScaleManager", "DynamicLossScaleManager",
           "build_train_network", "cast_network"]
