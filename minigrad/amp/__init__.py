"""Mixed precision: one loss-scale core, one float-status path, three faces.

* MindSpore: ``nn.TrainOneStepWithLossScaleCell`` with ``nn.DynamicLossScaleUpdateCell`` /
  ``nn.FixedLossScaleUpdateCell``; ``FixedLossScaleManager`` / ``DynamicLossScaleManager``;
  ``build_train_network`` and the AMP levels O0-O3; functional ``all_finite``, ``init_status``,
  ``StaticLossScaler``, ``DynamicLossScaler``; ``auto_mixed_precision`` (the compute dtypes of
  a level, without loss scaling).
* TensorFlow: ``minigrad.mixed_precision`` (``LossScale``, ``FixedLossScale``,
  ``DynamicLossScale``, ``get``, ``LossScaleOptimizer``).
* PyTorch: ``GradScaler``, ``autocast`` and ``custom_fwd``/``custom_bwd``.

All of them decide with ``ScaleCore`` (``core.py``), unscale and check through the one
float-status API (``float_status.py``: the functions and ``OverflowStatus``, whose host fast
path is inside it; every decision passes ``_reduce_overflow``) and leave a ``StepReport``
(``core.py`` too) in ``last_report``: applied or skipped, gradient overflow vs non-finite loss,
scale before/after, the parameters holding inf and NaN. ``minigrad.amp.plots`` draws the
scale's trajectory and where gradient values fall in fp16's range (matplotlib, optional).

Layers: the amp core (``core.py``: the scale rule and the step report; ``float_status.py`` with
``_status_buffer``, ``_status_launch`` and ``_status_numpy``: the overflow status) works on arrays
and sits below ``optim``; the faces (``managers``, ``build``, ``grad_scaler``, ``autocast``,
``functional``, ``plots``) sit above ``nn``. ``import minigrad.amp`` loads the core and the
faces that need no network (``autocast``, ``functional``, ``managers``); ``build_train_network``,
``cast_network``, ``auto_mixed_precision``, ``GradScaler`` and ``OptState`` load theirs on first
access (PEP 562), so the
float-status functions and ``autocast`` come without the network and optimizer layers.
"""
import importlib

from minigrad.amp import float_status
from minigrad.amp.autocast import autocast, custom_bwd, custom_fwd
from minigrad.amp.core import ScaleCore, StepReport, underflow_stats
from minigrad.amp.float_status import (
    OverflowStatus,
    alloc_status,
    check_and_unscale,
    check_and_unscale_to_fp32,
    check_overflow,
    clear_status,
    get_status,
)
from minigrad.amp.functional import (
    DynamicLossScaler,
    LossScaler,
    StaticLossScaler,
    all_finite,
    init_status,
)
from minigrad.amp.managers import DynamicLossScaleManager, FixedLossScaleManager, LossScaleManager

# the faces that build on nn and optim, by module: loaded on first access
_FACES = {
    "minigrad.amp.build": ("build_train_network", "cast_network", "auto_mixed_precision"),
    "minigrad.amp.grad_scaler": ("GradScaler", "OptState"),
}
_FACE_OF = {name: module for module, names in _FACES.items() for name in names}


def __getattr__(name):
    module = _FACE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'minigrad.amp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_FACE_OF))


__all__ = ["ScaleCore", "float_status", "alloc_status", "clear_status", "check_overflow",
           "check_and_unscale", "check_and_unscale_to_fp32", "get_status", "OverflowStatus",
           "StepReport", "underflow_stats", "init_status", "all_finite", "LossScaler",
           "StaticLossScaler", "DynamicLossScaler", "GradScaler", "OptState", "autocast",
           "custom_fwd", "custom_bwd",
           "LossScaleManager", "FixedLossScaleManager", "DynamicLossScaleManager",
           "build_train_network", "cast_network", "auto_mixed_precision"]
