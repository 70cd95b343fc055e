"""The training cells refuse bad arguments before they bind or change anything: after the error,
the network, the optimizer (THOR included: the train cells bind it to their loss) and an update
cell are as they were, every attribute and every bit (``helpers.state.reachable_state``)."""
import numpy as np
import pytest

from helpers.state import reachable_state
from minigrad import Tensor, nn


def _parts(thor=False):
    net = nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 3)])
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    if thor:
        opt = nn.thor(net, learning_rate=Tensor(np.float32(0.1)), damping=Tensor(np.float32(0.03)),
                      momentum=0.9, fisher="mc")
    else:
        opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    return nn.WithLossCell(net, loss), opt


def test_with_loss_cell_refuses_a_loss_class():
    net = nn.Dense(4, 3)
    before = reachable_state(net)
    with pytest.raises(TypeError, match="loss_fn"):
        nn.WithLossCell(net, nn.MSELoss)
    assert reachable_state(net) == before


@pytest.mark.parametrize("thor", [False, True], ids=["momentum", "thor"])
@pytest.mark.parametrize("kwargs, error, match", [
    (dict(sens=0.0), ValueError, "sens"),
    (dict(sens="1"), TypeError, "sens"),
    (dict(optimizer="sgd"), TypeError, "optimizer"),
    (dict(network=np.ones(3)), TypeError, "network"),
], ids=["sens-zero", "sens-str", "optimizer", "network"])
def test_train_one_step_cell_refuses_before_binding(thor, kwargs, error, match):
    net_with_loss, opt = _parts(thor)
    before = reachable_state(net_with_loss, opt)
    args = dict(network=net_with_loss, optimizer=opt) | kwargs
    with pytest.raises(error, match=match):
        nn.TrainOneStepCell(**args)
    assert reachable_state(net_with_loss, opt) == before


def test_train_one_step_cell_refuses_an_optimizer_of_another_network():
    net_with_loss, opt = _parts()
    _, other = _parts()
    before = reachable_state(net_with_loss, opt, other)
    with pytest.raises(ValueError, match="built from the parameters of the network"):
        nn.TrainOneStepCell(net_with_loss, other)
    assert reachable_state(net_with_loss, opt, other) == before


@pytest.mark.parametrize("thor", [False, True], ids=["momentum", "thor"])
@pytest.mark.parametrize("kwargs, error, match", [
    (dict(scale_sense=1024.0), TypeError, "must be Cell or Tensor"),
    (dict(scale_sense=Tensor(np.ones((2,), np.float32))), ValueError, r"\(1,\) or \(\)"),
    (dict(scale_sense=Tensor(np.float32(-1.0))), ValueError, "scale_sense"),
    (dict(track_underflow="yes"), TypeError, "track_underflow"),
    (dict(max_consecutive_skips=0), ValueError, "max_consecutive_skips"),
], ids=["scale-float", "scale-shape", "scale-negative", "track-underflow", "skips"])
def test_loss_scale_cell_refuses_before_binding(thor, kwargs, error, match):
    net_with_loss, opt = _parts(thor)
    update_cell = nn.DynamicLossScaleUpdateCell(2.0 ** 12, 2, 1000)
    before = reachable_state(net_with_loss, opt, update_cell)
    args = dict(network=net_with_loss, optimizer=opt, scale_sense=update_cell) | kwargs
    with pytest.raises(error, match=match):
        nn.TrainOneStepWithLossScaleCell(**args)
    assert reachable_state(net_with_loss, opt, update_cell) == before


def test_the_reachable_state_shows_what_binding_a_thor_optimizer_changes():
    """The checks above can fail: an accepted THOR train cell hooks the loss and binds THOR."""
    net_with_loss, opt = _parts(thor=True)
    before = reachable_state(net_with_loss, opt)
    nn.TrainOneStepWithLossScaleCell(net_with_loss, opt, Tensor(np.float32(1024.0)))
    assert reachable_state(net_with_loss, opt) != before


def test_convert_to_thor_net_refuses_a_grouped_conv_and_converts_nothing():
    net = nn.SequentialCell([nn.Dense(4, 4), nn.Conv2d(4, 4, 3, group=2)])
    before = reachable_state(net)
    with pytest.raises(ValueError, match="group=2"):
        nn.ConvertNetUtils().convert_to_thor_net(net)
    assert reachable_state(net) == before
