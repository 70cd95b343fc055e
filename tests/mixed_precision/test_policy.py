"""Keras dtype policies: the cells created under one compute in its compute dtype and keep their
Parameters in its variable dtype; plain tensor arithmetic is untouched; TF 2.1-2.3's
``Policy(name, loss_scale=)``; ``Model`` scales the loss as Keras's ``fit`` does."""
import numpy as np
import pytest

import minigrad
from minigrad import Model, Tensor, mixed_precision, nn
from minigrad import dtype as mstype
from minigrad.mixed_precision import DynamicLossScale, FixedLossScale, LossScaleOptimizer, Policy


@pytest.fixture
def mixed_float16():
    mixed_precision.set_global_policy("mixed_float16")
    yield mixed_precision.global_policy()
    mixed_precision.set_global_policy(None)


def test_a_policy_does_not_change_tensor_arithmetic(mixed_float16):
    assert float((Tensor(256, mstype.float16) ** 2).asnumpy()) == np.inf       # overflow
    assert float((Tensor(1e-5, mstype.float16) ** 2).asnumpy()) == 0.0        # underflow
    x, w = Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones((3, 4), np.float32))
    assert minigrad.ops.matmul(x, w).dtype == mstype.float32


def test_layers_created_under_mixed_float16_compute_in_fp16_with_fp32_weights(mixed_float16):
    dense = nn.Dense(4, 3, activation="relu")
    softmax = nn.Softmax().to_float(mstype.float32)   # Keras's Activation(..., dtype="float32")
    assert dense.dtype_policy == Policy("mixed_float16") and dense.weight.dtype == mstype.float32
    x = Tensor(np.ones((2, 4), np.float32))
    hidden = dense(x)
    assert hidden.dtype == mstype.float16 and softmax(hidden).dtype == mstype.float32
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    assert loss.dtype_policy is None                              # a loss is not a layer
    grads = minigrad.grad(lambda v: dense(v).sum(), None, dense.trainable_params())(x)
    assert [g.dtype for g in grads] == [mstype.float32, mstype.float32]


def test_only_cells_created_under_the_policy_take_it():
    before = nn.Dense(2, 2)
    mixed_precision.set_global_policy("mixed_float16")
    try:
        during = nn.Dense(2, 2)
    finally:
        mixed_precision.set_global_policy("float32")
    after = nn.Dense(2, 2)
    x = Tensor(np.ones((1, 2), np.float32))
    assert before(x).dtype == after(x).dtype == mstype.float32 and during(x).dtype == mstype.float16
    assert before.dtype_policy is None and after.dtype_policy is None
    assert mixed_precision.global_policy() == Policy("float32")


def test_the_float16_policy_keeps_parameters_in_fp16():
    mixed_precision.set_global_policy(Policy("float16"))
    try:
        dense = nn.Dense(3, 2)
    finally:
        mixed_precision.set_global_policy(None)
    assert dense.weight.dtype == dense.bias.dtype == mstype.float16
    assert dense(Tensor(np.ones((1, 3), np.float32))).dtype == mstype.float16


def test_policy_loss_scales_of_tf_2_1_to_2_3():
    default = Policy("mixed_float16")
    assert isinstance(default.loss_scale, DynamicLossScale)
    assert default.loss_scale.initial_loss_scale == 2 ** 15
    assert default.loss_scale.increment_period == 2000
    assert repr(default) == '<Policy "mixed_float16">'
    fixed = Policy("mixed_float16", loss_scale=1024)
    assert isinstance(fixed.loss_scale, FixedLossScale) and float(fixed.loss_scale) == 1024.0
    assert repr(fixed) == '<Policy "mixed_float16", loss_scale=FixedLossScale(1024.0)>'
    assert Policy("float32").loss_scale is None and Policy("float16").loss_scale is None
    assert Policy("mixed_float16", loss_scale=None).loss_scale is None
    assert isinstance(Policy("float32", loss_scale="dynamic").loss_scale, DynamicLossScale)
    with pytest.raises(ValueError, match="loss scale identifier"):
        Policy("mixed_float16", loss_scale="static")
    with pytest.raises(ValueError, match="mixed_float8"):
        Policy("mixed_float8")


def _digits_parts(policy):
    minigrad.set_seed(0)
    mixed_precision.set_global_policy(policy)
    try:
        net = nn.SequentialCell([nn.Dense(64, 32, activation="relu"), nn.Dense(32, 10)])
    finally:
        mixed_precision.set_global_policy(None)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return net, loss, nn.Momentum(net.trainable_params(), 0.05, 0.9)


def test_model_scales_the_loss_of_a_mixed_float16_network_as_keras_fit():
    from minigrad.dataset import NumpySlicesDataset, load_digits
    (x, y), _ = load_digits()
    net, loss, opt = _digits_parts("mixed_float16")
    model = Model(net, loss, opt)
    cell = model.train_network
    assert isinstance(cell, nn.TrainOneStepWithLossScaleCell)
    policy_scale = net.dtype_policy.loss_scale
    assert cell.core is policy_scale.core and float(cell.scale_sense.asnumpy()) == 2 ** 15
    data = NumpySlicesDataset((x[:256], y[:256]), shuffle=False).batch(32)
    model.train(1, data)
    assert float(policy_scale()) == float(cell.scale_sense.asnumpy())
    assert cell.last_report is not None and net.cells()[0].weight.dtype == mstype.float32


def test_model_takes_a_loss_scale_optimizer_and_a_float32_network_is_plain():
    net, loss, opt = _digits_parts(None)
    assert isinstance(Model(net, loss, opt).train_network, nn.TrainOneStepCell)
    assert not isinstance(Model(net, loss, opt).train_network, nn.TrainOneStepWithLossScaleCell)
    lso = LossScaleOptimizer(opt, 256)
    cell = Model(net, loss, lso).train_network
    assert isinstance(cell, nn.TrainOneStepWithLossScaleCell) and cell.optimizer is opt
    assert cell.core is lso.loss_scale.core
    net16, loss16, opt16 = _digits_parts(Policy("mixed_float16", loss_scale=None))
    assert not isinstance(Model(net16, loss16, opt16).train_network,
                          nn.TrainOneStepWithLossScaleCell)


def test_model_refuses_an_amp_level_on_top_of_a_policy():
    net, loss, opt = _digits_parts("mixed_float16")
    with pytest.raises(ValueError, match="scales the loss already"):
        Model(net, loss, opt, amp_level="O2")
    with pytest.raises(ValueError, match="scales the loss already"):
        Model(net, loss, opt, loss_scale_manager=minigrad.FixedLossScaleManager())
