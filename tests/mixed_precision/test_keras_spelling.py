"""TF's loss-scaling faces: the experimental API's conversions and refusals as TF has them,
and TF >= 2.4's Keras spelling (LossScaleOptimizer keywords, properties, Policy)."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, mixed_precision, nn
from minigrad.autograd import value_and_grad
from minigrad.mixed_precision import DynamicLossScale, LossScaleOptimizer


def _opt():
    minigrad.set_seed(0)
    net = nn.Dense(3, 2)
    return net, nn.SGD(net.trainable_params(), 0.1)


def test_increment_period_goes_through_int_as_tf():
    assert DynamicLossScale(increment_period=2.0).increment_period == 2
    assert type(DynamicLossScale(increment_period=np.float32(4.0)).increment_period) is int
    with pytest.raises(ValueError, match="increment_period"):
        DynamicLossScale(increment_period=float("inf"))
    with pytest.raises(TypeError, match="increment_period"):
        DynamicLossScale(increment_period="2")
    with pytest.raises(ValueError, match=r"increment_period must be an int, or a whole float "
                                         r"<= 2\*\*53, got 4.6e\+16"):
        DynamicLossScale(increment_period=4.6e16)
    assert DynamicLossScale(increment_period=2 ** 60).increment_period == 2 ** 60


def test_a_loss_scale_optimizer_cannot_wrap_another_as_tf():
    _, opt = _opt()
    with pytest.raises(ValueError, match="cannot wrap another LossScaleOptimizer"):
        LossScaleOptimizer(LossScaleOptimizer(opt))


@pytest.mark.parametrize("value", [np.float32(128.0), np.int64(128), np.float64(128.0)])
def test_numpy_scalar_loss_scales_are_taken_as_their_number(value):
    _, opt = _opt()
    lso = LossScaleOptimizer(opt, value)
    assert float(lso.loss_scale) == 128.0 and not lso.dynamic


def test_keras_2_4_keywords_build_the_same_dynamic_scale():
    _, opt = _opt()
    lso = mixed_precision.LossScaleOptimizer(opt, dynamic=True, initial_scale=2 ** 15,
                                             dynamic_growth_steps=2000)
    assert lso.dynamic and lso.initial_scale == 2 ** 15 and lso.dynamic_growth_steps == 2000
    assert float(lso.loss_scale) == 2 ** 15 and lso.loss_scale.numpy() == np.float32(2 ** 15)
    assert lso.dynamic_counter == 0
    default = LossScaleOptimizer(opt, True)  # TF 2.4's positional (inner_optimizer, dynamic)
    assert default.dynamic and float(default.loss_scale) == 2 ** 15


def test_keras_fixed_scale_and_its_errors():
    _, opt = _opt()
    fixed = LossScaleOptimizer(opt, dynamic=False, initial_scale=64)
    assert not fixed.dynamic and fixed.dynamic_counter is None and float(fixed.loss_scale) == 64
    with pytest.raises(ValueError, match="initial_scale"):
        LossScaleOptimizer(opt, dynamic=False)
    with pytest.raises(ValueError, match="dynamic_growth_steps"):
        LossScaleOptimizer(opt, dynamic=False, initial_scale=8, dynamic_growth_steps=10)
    with pytest.raises(TypeError, match="not both"):
        LossScaleOptimizer(opt, "dynamic", initial_scale=8)
    with pytest.raises(TypeError, match="dynamic must be a bool"):
        LossScaleOptimizer(opt, dynamic="yes")


def test_dynamic_counter_counts_clean_steps():
    net, opt = _opt()
    lso = LossScaleOptimizer(opt, dynamic=True, initial_scale=8, dynamic_growth_steps=3)
    x = Tensor(np.ones((2, 3), np.float32))
    for k in range(1, 3):
        loss, grads = value_and_grad(lambda x: lso.get_scaled_loss((net(x) ** 2).mean()), None,
                                     lso.parameters)(x)
        assert lso.apply_gradients(zip(lso.get_unscaled_gradients(grads), lso.parameters))
        assert lso.dynamic_counter == k


def test_policy_names_and_refusals():
    assert mixed_precision.Policy("mixed_float16").compute_dtype == "float16"
    assert mixed_precision.Policy("mixed_float16").variable_dtype == "float32"
    with pytest.raises(ValueError, match="mixed_float8"):
        mixed_precision.Policy("mixed_float8")
    with pytest.raises(TypeError, match="name must be one of"):
        mixed_precision.Policy(16)
