"""TensorFlow's loss-scaling API (``tf.mixed_precision.experimental``) on minigrad's one scaler core."""
from minigrad.mixed_precision.loss_scale import LossScale, FixedLossScale, DynamicLossScale, get
from minigrad.mixed_precision.loss_scale_optimizer import LossScaleOptimizer

import sys

experimental = sys.modules[__name__]  # so that tf's mixed_precision.experimental.X spelling works

__all__ = ["LossScale", "FixedLossScale", "DynamicLossScale", "get", "LossScaleOptimizer"]
