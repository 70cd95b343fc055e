"""minigrad.amp.build_train_network: its keyword checks and the O1 level, which casts the
network itself so that eval and predict run at the level too."""
import numpy as np
import pytest

import minigrad
from helpers.models import TinyMLP, cross_entropy
from minigrad import Model, Tensor, amp, nn
from minigrad.train.metrics import Accuracy


class _BNNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 3)
        self.bn = nn.BatchNorm1d(3)

    def construct(self, x):
        return self.bn(self.fc(x))


@pytest.mark.parametrize("kwargs, name", [
    (dict(keep_batchnorm_fp32="yes"), "keep_batchnorm_fp32"),
    (dict(keep_batchnorm_fp32=0), "keep_batchnorm_fp32"),
    (dict(keep_batchnorm_fp32=None), "keep_batchnorm_fp32"),
    (dict(cast_model_type=np.float64), "cast_model_type"),
    (dict(cast_model_type=np.int32), "cast_model_type"),
    (dict(cast_model_type=None), "cast_model_type"),
])
def test_build_train_network_checks_the_kwargs_types(kwargs, name):
    """MindSpore's ``amp.build_train_network`` documents the kwargs "cast_model_type
    (float16/float32), keep_batchnorm_fp32 (bool), loss_scale_manager (LossScaleManager)" and
    checks their types (TypeError): a truthy string is not a bool, float64 or int32 not a
    cast type, and nothing is cast before the error."""
    net = _BNNet()
    with pytest.raises(TypeError, match=name):
        amp.build_train_network(net, nn.SGD(net.trainable_params(), 0.1), nn.MSELoss(), level="O2",
                                **kwargs)
    assert net.fc.weight.dtype == np.float32          # nothing was cast before the error


def test_build_train_network_accepts_both_float_names():
    net = _BNNet()
    amp.build_train_network(net, nn.SGD(net.trainable_params(), 0.1), nn.MSELoss(), level="O2",
                            cast_model_type="float32", keep_batchnorm_fp32=False)
    assert net.fc.weight.dtype == np.float32


def _data(n=32, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, 8).astype(np.float32)
    return Tensor(x), Tensor(x[:, :3].argmax(1).astype(np.int32))


def _record_dtypes(net):
    seen = {}
    for name, cell in net.cells_and_names():
        if name:
            cell.register_forward_hook(lambda c, i, o, name=name: seen.__setitem__(name, o.dtype))
    return seen


def test_o1_model_eval_and_predict_run_white_list_ops_in_fp16():
    minigrad.set_seed(0)
    net = TinyMLP()
    seen = _record_dtypes(net)
    model = Model(net, cross_entropy(), nn.Momentum(net.trainable_params(), 0.05, 0.9),
                  metrics={"acc": Accuracy()}, amp_level="O1")
    x, y = _data()
    model.train_network(x, y)
    assert seen["fc1"] == np.float16 and seen["fc2"] == np.float16   # train step: Dense in fp16
    seen.clear()
    model.eval([(x, y)])
    assert seen["fc1"] == np.float16 and seen["fc2"] == np.float16
    seen.clear()
    model.predict(x)
    assert seen["fc1"] == np.float16 and seen["fc2"] == np.float16
    assert all(p.dtype == np.float32 for p in net.get_parameters())  # O1 keeps fp32 parameters
    assert minigrad._config.config.autocast_dtype is None            # nothing leaks out of a call


def test_o1_build_train_network_casts_the_network_in_place():
    minigrad.set_seed(0)
    net = TinyMLP()
    amp.build_train_network(net, nn.Adam(net.trainable_params()), cross_entropy(), level="O1")
    seen = _record_dtypes(net)
    out = net(_data()[0])
    assert seen["fc1"] == np.float16 and out.dtype == np.float16
    assert minigrad._config.config.autocast_dtype is None
