"""TensorFlow's loss-scaling API on minigrad's one scaler core: ``tf.mixed_precision.experimental``
(``LossScale``, ``FixedLossScale``, ``DynamicLossScale``, ``get``, ``LossScaleOptimizer(opt,
loss_scale)``) and TF >= 2.4's Keras spelling (``LossScaleOptimizer(opt, dynamic=True,
initial_scale=..., dynamic_growth_steps=...)``, ``Policy``, ``set_global_policy``)."""
import sys

from minigrad.mixed_precision.loss_scale import DynamicLossScale, FixedLossScale, LossScale, get
from minigrad.mixed_precision.loss_scale_optimizer import LossScaleOptimizer
from minigrad.mixed_precision.policy import Policy, global_policy, set_global_policy

experimental = sys.modules[__name__]  # so that tf's mixed_precision.experimental.X spelling works

__all__ = ["LossScale", "FixedLossScale", "DynamicLossScale", "get", "LossScaleOptimizer",
           "Policy", "global_policy", "set_global_policy"]
