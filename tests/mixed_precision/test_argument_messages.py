"""The TensorFlow face's argument checks beyond what the API walk pins: a loss scale given to
``Policy`` or ``LossScaleOptimizer`` is refused under that argument's name (TF's "Could not
interpret loss scale identifier" message kept), and TF 2.4's keywords are checked under theirs
before any loss scale is made."""
import numpy as np
import pytest

from minigrad import mixed_precision, nn
from minigrad.mixed_precision import LossScaleOptimizer


def _opt():
    return nn.SGD(nn.Dense(3, 2).trainable_params(), 0.1)


def test_a_loss_scale_is_refused_under_the_argument_it_came_in():
    with pytest.raises(ValueError, match=r"Policy: Could not interpret loss scale identifier: "
                                         r"'abc' \(loss_scale must be"):
        mixed_precision.Policy("mixed_float16", loss_scale="abc")
    with pytest.raises(ValueError, match=r"LossScaleOptimizer: loss_scale must be at least 1 "
                                         r"and finite \(a fixed loss scale\), got 0.5"):
        LossScaleOptimizer(_opt(), 0.5)
    with pytest.raises(ValueError, match=r"identifier must be at least 1 and finite"):
        mixed_precision.get(float("inf"))
    with pytest.raises(ValueError, match=r"identifier must be a float32 value"):
        mixed_precision.get(1e39)
    with pytest.raises(ValueError, match=r"Could not interpret loss scale identifier: \{\}"):
        mixed_precision.get({})  # neither a FixedLossScale's config nor a DynamicLossScale's


def test_tf24_keywords_are_checked_under_their_names():
    with pytest.raises(ValueError, match=r"loss_scale must be True, or False with initial_scale"):
        LossScaleOptimizer(_opt(), False)
    assert float(LossScaleOptimizer(_opt(), False, initial_scale=8).loss_scale) == 8.0
    with pytest.raises(ValueError, match=r"initial_scale must be at least 1 for a fixed loss "
                                         r"scale \(dynamic=False\), got 0.5"):
        LossScaleOptimizer(_opt(), dynamic=False, initial_scale=0.5)
    assert float(LossScaleOptimizer(_opt(), dynamic=True, initial_scale=0.5).loss_scale) == 0.5
    with pytest.raises(TypeError, match=r"initial_scale must be a finite float in \(0.0, inf\), "
                                        r"got 'big'"):
        LossScaleOptimizer(_opt(), initial_scale="big")
    with pytest.raises(ValueError, match=r"dynamic_growth_steps must be a whole number, got 2.5"):
        LossScaleOptimizer(_opt(), dynamic_growth_steps=2.5)
    with pytest.raises(ValueError, match=r"dynamic_growth_steps must be a positive int, got 0"):
        LossScaleOptimizer(_opt(), dynamic_growth_steps=0)
    with pytest.raises(TypeError, match=r"dynamic must be a bool, got array"):
        LossScaleOptimizer(_opt(), dynamic=np.ones(2))
    with pytest.raises(TypeError, match=r"optimizer must be a minigrad Optimizer .*, got 'sgd'"):
        LossScaleOptimizer("sgd")
    lso = LossScaleOptimizer(_opt(), dynamic_growth_steps=3.0)  # TF converts with int()
    assert lso.loss_scale.increment_period == 3


def test_set_global_policy_names_policy():
    before = mixed_precision.global_policy()
    try:
        with pytest.raises(ValueError, match=r"policy must be one of \[.*\], got 'mixed_float8'"):
            mixed_precision.set_global_policy("mixed_float8")
        with pytest.raises(TypeError, match=r"policy must be a Policy, a policy's name or None, "
                                            r"got 16 \(int\)"):
            mixed_precision.set_global_policy(16)
        assert mixed_precision.global_policy() == before  # nothing half-applied
    finally:
        mixed_precision.set_global_policy(before)
