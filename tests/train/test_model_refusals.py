"""``Model`` and ``ConvertModelUtils.convert_to_thor_model`` refuse bad arguments before they
build anything: after the error the network and the optimizer are as they were, every
attribute and every bit (``helpers.state.reachable_state``), though ``Model`` casts the network
in place at AMP level O2 once it accepts."""
import numpy as np
import pytest

from helpers.state import reachable_state
from minigrad import Model, Tensor, nn
from minigrad.train import Accuracy, ConvertModelUtils


def _parts():
    net = nn.SequentialCell([nn.Dense(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dense(8, 3)])
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    return net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), opt


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(loss_fn=None, metrics={"acc": Accuracy()}), ValueError, "metrics"),
    (dict(eval_network=nn.Dense(4, 3), eval_indexes=[0, 1]), ValueError, "eval_indexes"),
    (dict(loss_scale_manager=1024), TypeError, "loss_scale_manager"),
    (dict(keep_batchnorm_fp32="no"), TypeError, "keep_batchnorm_fp32"),
    (dict(amp_level="O9"), ValueError, "amp_level"),
    (dict(boost_level="O1"), NotImplementedError, "boost_level"),
    (dict(metrics={"acc": "accuracy-ish"}), (TypeError, ValueError), "acc"),
], ids=["metrics-without-loss", "eval-indexes", "manager", "keep-batchnorm", "amp-level", "boost",
        "metric"])
def test_model_refuses_before_casting_the_network(kwargs, error, match):
    net, loss, opt = _parts()
    before = reachable_state(net, loss, opt)
    args = dict(loss_fn=loss, optimizer=opt, amp_level="O2") | kwargs
    with pytest.raises(error, match=match):
        Model(net, **args)
    assert reachable_state(net, loss, opt) == before


def test_model_refuses_an_optimizer_of_another_network_before_casting():
    net, loss, opt = _parts()
    other, _, other_opt = _parts()
    before = reachable_state(net, opt, other, other_opt)
    with pytest.raises(ValueError, match="built from the parameters of the network"):
        Model(net, loss, other_opt, amp_level="O2")
    assert reachable_state(net, opt, other, other_opt) == before


def test_an_accepted_model_casts_the_network_so_the_checks_can_fail():
    net, loss, opt = _parts()
    before = reachable_state(net, loss, opt)
    Model(net, loss, opt, amp_level="O2")
    assert reachable_state(net, loss, opt) != before
    assert net.cells()[0].weight.dtype == np.float16


def test_convert_to_thor_model_refuses_before_casting():
    net, loss, _ = _parts()
    thor = nn.thor(net, Tensor(np.float32(0.1)), Tensor(np.float32(0.03)), 0.9)
    model = Model(net, loss, thor)
    before = reachable_state(net, loss, thor)
    with pytest.raises(ValueError, match="metrics"):
        ConvertModelUtils.convert_to_thor_model(model, net, None, thor, metrics={"acc"},
                                                amp_level="O2")
    assert reachable_state(net, loss, thor) == before


@pytest.mark.parametrize("kwargs", [
    dict(epoch=0), dict(callbacks="LossMonitor"), dict(sink_size=0), dict(initial_epoch=1),
    dict(train_dataset=[(np.ones((2, 4), np.float32),), 3]), dict(train_dataset=[]),
], ids=["epoch", "callbacks", "sink-size", "initial-epoch", "a-batch-of-an-int", "empty"])
def test_train_refuses_before_touching_the_model(kwargs):
    """Model.train checks every argument before it sets the network's mode or runs a step: the
    model, its network and its optimizer are as they were after the error."""
    net, loss, opt = _parts()
    model = Model(net, loss, opt)
    data = [(np.ones((2, 4), np.float32), np.zeros(2, np.int32))]
    net.set_train(False)
    before = reachable_state(model)
    with pytest.raises((TypeError, ValueError)):
        model.train(**{"epoch": 1, "train_dataset": data, **kwargs})
    assert reachable_state(model) == before
