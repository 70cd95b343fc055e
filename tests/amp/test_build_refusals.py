"""The network builders of ``minigrad.amp`` refuse bad arguments before they change anything:
after the error, the network, the optimizer and the manager are as they were, every attribute
and every bit (``helpers.state.reachable_state``)."""
import numpy as np
import pytest

from helpers.state import reachable_state
from minigrad import amp, nn


class _BNNet(nn.Cell):
    """Dense -> BatchNorm1d -> Dense: the normalization cell is what O2 treats apart."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 3)
        self.bn = nn.BatchNorm1d(3)
        self.out = nn.Dense(3, 2)

    def construct(self, x):
        return self.out(self.bn(self.fc(x)))


def _net_and_optimizer():
    net = _BNNet()
    return net, nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)


@pytest.mark.parametrize("call, error, match", [
    (lambda net, opt, other: amp.build_train_network(net, other, nn.MSELoss(), level="O2"),
     ValueError, "built from the parameters of the network"),
    (lambda net, opt, other: amp.build_train_network(net, opt, nn.MSELoss, level="O2"),
     TypeError, "loss_fn"),
    (lambda net, opt, other: amp.build_train_network(net, "sgd", nn.MSELoss(), level="O2"),
     TypeError, "optimizer"),
    (lambda net, opt, other: amp.build_train_network(net, opt, nn.MSELoss(), level="O5"),
     ValueError, "level"),
    (lambda net, opt, other: amp.build_train_network(net, opt, nn.MSELoss(), level="O2",
                                                     loss_scale_manager=128),
     TypeError, "loss_scale_manager"),
    (lambda net, opt, other: amp.build_train_network(net, opt, nn.MSELoss(), level="O2",
                                                     keep_batchnorm_fp32="yes"),
     TypeError, "keep_batchnorm_fp32"),
    (lambda net, opt, other: amp.build_train_network(net, opt, nn.MSELoss(), level="O2",
                                                     boost_level="O1"),
     ValueError, "boost_level"),
], ids=["optimizer-of-another-network", "loss-class", "optimizer-str", "level", "manager",
        "keep-batchnorm", "boost"])
def test_build_train_network_refuses_before_casting(call, error, match):
    net, opt = _net_and_optimizer()
    other, _ = _net_and_optimizer()
    other_opt = nn.SGD(other.trainable_params(), 0.1)
    before = reachable_state(net, opt, other, other_opt)
    with pytest.raises(error, match=match):
        call(net, opt, other_opt)
    assert reachable_state(net, opt, other, other_opt) == before
    assert net.fc.weight.dtype == np.float32 and net.fc._cast_dtype is None


@pytest.mark.parametrize("args, error, match", [
    (("O2", "float64"), ValueError, "dtype"),
    (("O4",), ValueError, "amp_level"),
    ((2,), TypeError, "amp_level"),
], ids=["dtype", "level", "level-type"])
def test_auto_mixed_precision_refuses_before_casting(args, error, match):
    net, opt = _net_and_optimizer()
    before = reachable_state(net, opt)
    with pytest.raises(error, match=match):
        amp.auto_mixed_precision(net, *args)
    assert reachable_state(net, opt) == before
    with pytest.raises(TypeError, match="network must be a Cell, got "):
        amp.auto_mixed_precision([net], "O2")


@pytest.mark.parametrize("args, match", [
    (("float64", False), "cast_model_type"),
    (("float16", "no"), "keep_batchnorm_fp32"),
], ids=["cast-type", "keep-batchnorm"])
def test_cast_network_refuses_before_casting(args, match):
    net, opt = _net_and_optimizer()
    before = reachable_state(net, opt)
    with pytest.raises(TypeError, match=match):
        amp.cast_network(net, *args)
    assert reachable_state(net, opt) == before


def test_the_reachable_state_shows_what_a_build_changes():
    """The check above can fail: an accepted build changes the reachable state."""
    net, opt = _net_and_optimizer()
    before = reachable_state(net, opt)
    amp.build_train_network(net, opt, nn.MSELoss(), level="O2")
    assert reachable_state(net, opt) != before
