"""The examples of MindSpore 2.x's docstrings in ``nn/wrap/loss_scale.py`` and ``amp.py`` (and
``train/amp.py``), ported with ``mindspore`` replaced by ``minigrad``, and a subclass that writes
out the 2.x cell's ``start_overflow_check`` (an int32 status cleared by ``NPUClearFloatStatusV2``).
The examples of
TrainOneStepWithLossScaleCell's first form and of DynamicLossScaleUpdateCell are in
``test_doc_examples.py``, DynamicLossScaler's in ``test_loss_scale_rules.py``."""
import numpy as np
import pytest

import minigrad
import minigrad as mindspore
from minigrad import Parameter, Tensor, amp, nn, ops
from minigrad import dtype as mstype
# mindspore.ops.operations.math_ops in MindSpore 2.x
from minigrad.ops import NPUClearFloatStatusV2, NPUGetFloatStatusV2
from helpers.models import LeNet5


class Net(nn.Cell):
    def __init__(self, in_features, out_features):
        super(Net, self).__init__()
        self.weight = Parameter(Tensor(np.ones([in_features, out_features]).astype(np.float32)),
                                name='weight')
        self.matmul = ops.MatMul()

    def construct(self, x):
        output = self.matmul(x, self.weight)
        return output


def test_fixed_loss_scale_update_cell_example():
    in_features, out_features = 16, 10
    net = Net(in_features, out_features)
    loss = nn.MSELoss()
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    net_with_loss = nn.WithLossCell(net, loss)
    manager = nn.FixedLossScaleUpdateCell(loss_scale_value=2**12)
    train_network = nn.TrainOneStepWithLossScaleCell(net_with_loss, optimizer, scale_sense=manager)
    input = Tensor(np.ones([out_features, in_features]), mindspore.float32)
    labels = Tensor(np.ones([out_features,]), mindspore.float32)
    output = train_network(input, labels)
    loss_value, overflow, scale = output
    assert not bool(overflow.asnumpy()) and float(scale.asnumpy()) == 2**12
    assert manager.get_loss_scale() == 2**12


def test_train_one_step_with_loss_scale_cell_tensor_example_and_set_sense_scale():
    """The docstring's second form: a Tensor scale_sense [1024], then set_sense_scale([1])."""
    size, in_features, out_features = 16, 16, 10
    net = Net(in_features, out_features)
    loss = nn.MSELoss()
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    net_with_loss = nn.WithLossCell(net, loss)
    inputs = Tensor(np.ones([size, in_features]).astype(np.float32))
    label = Tensor(np.zeros([size, out_features]).astype(np.float32))
    scaling_sens = Tensor([1024], dtype=mstype.float32)
    train_network = nn.TrainOneStepWithLossScaleCell(net_with_loss, optimizer,
                                                     scale_sense=scaling_sens)
    output = train_network(inputs, label)
    assert output[2].shape == (1,) and float(output[2].asnumpy()[0]) == 1024.0

    # update scaling sens and train the network
    scaling_sens = Tensor([1], dtype=mstype.float32)
    train_network.set_sense_scale(scaling_sens)
    output = train_network(inputs, label)
    assert float(output[2].asnumpy()[0]) == 1.0 and not bool(output[1].asnumpy())


def test_static_loss_scaler_example():
    loss_scaler = amp.StaticLossScaler(scale_value=2**10)
    loss_value = Tensor([1.], mindspore.float32)
    scaled_loss_value = loss_scaler.scale(loss_value)
    assert str(scaled_loss_value) == "[1024.]"
    grads = (Tensor(np.array([1.5, 1.0]), mindspore.float16),
             Tensor(np.array([1.2]), mindspore.float16))
    unscaled_grads = loss_scaler.unscale(grads)
    assert [g.dtype for g in unscaled_grads] == [mstype.float16, mstype.float16]
    np.testing.assert_array_equal(unscaled_grads[0].asnumpy(),
                                  np.float16([1.4648e-03, 9.7656e-04]))
    np.testing.assert_array_equal(unscaled_grads[1].asnumpy(), np.float16([1.1721e-03]))


def test_all_finite_and_init_status_examples():
    with np.errstate(divide="ignore", invalid="ignore"):
        x = (Tensor(np.array([np.log(-1), 1, np.log(0)])), Tensor(np.array([1.0])))
    output = amp.all_finite(x)
    assert str(output) == "False"
    status = amp.init_status()
    assert str(status) == "[0. 0. 0. 0. 0. 0. 0. 0.]" and status.dtype == mstype.float32


def test_auto_mixed_precision_example():
    network = LeNet5()
    amp_level = "O1"
    net = amp.auto_mixed_precision(network, amp_level)
    out = net(Tensor(np.random.default_rng(0).standard_normal((2, 1, 32, 32)), minigrad.float32))
    assert out.dtype == mstype.float32 and out.shape == (2, 10)


def test_build_train_network_example():
    network = LeNet5()
    net_loss = nn.SoftmaxCrossEntropyWithLogits(reduction="mean")
    net_opt = nn.Momentum(network.trainable_params(), learning_rate=0.01, momentum=0.9)
    amp_level = "O3"
    net = amp.build_train_network(network, net_opt, net_loss, amp_level)
    x = Tensor(np.random.default_rng(0).standard_normal((4, 1, 32, 32)), minigrad.float32)
    labels = Tensor(np.eye(10, dtype=np.float32)[:4])
    loss = net(x, labels)
    assert isinstance(net, nn.TrainOneStepCell) and network.fc1.weight.dtype == mstype.float16
    assert loss.dtype == mstype.float32 and np.isfinite(float(loss.asnumpy()))


# ---- a subclass with MindSpore 2.x's start_overflow_check, written out --------------------------
class ClearingTrainOneStepWithLossScaleCell(nn.TrainOneStepWithLossScaleCell):
    """The ``start_overflow_check`` of MindSpore 2.x's ``TrainOneStepWithLossScaleCell``, written
    into a subclass as its docstring invites ("user-defined training network based on this
    class can also call this interface"): an int32 status of 8 zeros, cleared with
    ``NPUClearFloatStatusV2`` after the loss (``mindspore.ops.operations.math_ops`` there)."""

    def start_overflow_check(self, pre_cond, compute_input):
        status = Tensor([0] * 8, mstype.int32)
        status = ops.depend(status, pre_cond)
        # clear overflow buffer
        clear_status = NPUClearFloatStatusV2()(status)
        compute_input = ops.depend(compute_input, clear_status)
        return status, compute_input


@pytest.mark.parametrize("make_optimizer", [
    lambda params: nn.Momentum(params, learning_rate=0.1, momentum=0.9),  # unscales in its step
    lambda params: nn.RMSProp(params, learning_rate=0.01),                # takes unscaled grads
], ids=["Momentum", "RMSProp"])
def test_a_cell_that_clears_an_int32_status_trains_and_skips_overflows(make_optimizer):
    """The docstring's first example (a DynamicLossScaleUpdateCell as ``scale_sense``) on the
    subclass above: clean steps train at 2**12, an overflowing input is skipped (weights
    untouched) and halves the scale, and the int32 status comes back cleared."""
    in_features, out_features = 16, 10
    net = Net(in_features, out_features)
    loss = nn.MSELoss()
    optimizer = make_optimizer(net.trainable_params())
    net_with_loss = nn.WithLossCell(net, loss)
    manager = nn.DynamicLossScaleUpdateCell(loss_scale_value=2**12, scale_factor=2,
                                            scale_window=1000)
    train_network = ClearingTrainOneStepWithLossScaleCell(net_with_loss, optimizer,
                                                          scale_sense=manager)
    input = Tensor(np.ones([out_features, in_features]), mindspore.float32)
    labels = Tensor(np.ones([out_features, ]), mindspore.float32)
    before = net.weight.asnumpy().copy()
    loss_value, overflow, scale = train_network(input, labels)
    assert not bool(overflow.asnumpy()) and float(scale.asnumpy()) == 2**12
    assert not np.array_equal(net.weight.asnumpy(), before)
    trained = net.weight.asnumpy().copy()
    loss_value, overflow, scale = train_network(input * np.inf, labels)
    assert bool(overflow.asnumpy()) and float(scale.asnumpy()) == 2**12
    assert np.array_equal(net.weight.asnumpy(), trained)
    assert manager.get_loss_scale() == 2**11
    loss_value, overflow, scale = train_network(input, labels)
    assert not bool(overflow.asnumpy()) and float(scale.asnumpy()) == 2**11


def test_npu_clear_float_status_v2_zeroes_an_int32_status_and_get_says_what_to_use():
    status = Tensor([0, 3, 0, 0, 0, 0, 0, 1], mstype.int32)
    assert NPUClearFloatStatusV2()(status) is status
    assert status.asnumpy().tolist() == [0] * 8
    with pytest.raises(TypeError, match=r"status must have dtype int32.*float32"):
        NPUClearFloatStatusV2()(Tensor(np.zeros(8, np.float32)))
    with pytest.raises(ValueError, match=r"status must have shape \(8,\), got \(4,\)"):
        NPUClearFloatStatusV2()(Tensor([0] * 4, mstype.int32))
    with pytest.raises(TypeError, match=r"must be an int32 Tensor of shape \(8,\), got list"):
        NPUClearFloatStatusV2()([0] * 8)
    with pytest.raises(NotImplementedError, match=r"no overflow register.*get_overflow_status"):
        NPUGetFloatStatusV2()(status)
