"""``amp.auto_mixed_precision(network, amp_level)``: MindSpore 2.x's compute dtypes per level,
Parameters left float32, outputs cast to float32, no loss scaling."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, amp, nn


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 6)
        self.bn = nn.BatchNorm1d(6)
        self.relu = nn.ReLU()
        self.out = nn.Dense(6, 3)

    def construct(self, x):
        return self.out(self.relu(self.bn(self.fc(x))))


def _dtypes_seen(net):
    seen = {}
    for name, cell in net.cells_and_names():
        if name:
            cell.register_forward_hook(lambda c, i, o, name=name: seen.__setitem__(name, o.dtype))
    return seen


X = Tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))


def test_o0_returns_the_network_unchanged():
    net = _Net()
    assert amp.auto_mixed_precision(net) is net
    assert amp.auto_mixed_precision(net, "O0") is net
    assert net(X).dtype == minigrad.float32


@pytest.mark.parametrize("level", ["O2", "O3"])
def test_o2_o3_compute_in_fp16_with_fp32_parameters_and_an_fp32_output(level):
    net = _Net()
    params = list(net.trainable_params())
    seen = _dtypes_seen(net)
    model = amp.auto_mixed_precision(net, level)
    assert model is not net and model._backbone is net
    assert list(model.trainable_params()) == params                  # same objects, names
    assert [p.name for p in model.trainable_params()] == [p.name for p in params]
    net.set_train()
    out = model(X)
    assert out.dtype == minigrad.float32
    assert seen["fc"] == seen["out"] == minigrad.float16              # Dense computes in fp16
    assert seen["relu"] == minigrad.float16                           # BatchNorm's output: fp16
    assert all(p.dtype == minigrad.float32 for p in net.get_parameters())
    grads = minigrad.grad(lambda x: model(x).sum(), None, model.trainable_params())(X)
    assert [g.dtype for g in grads] == [minigrad.float32] * len(params)


def test_o2_keeps_batchnorm_in_float32_inside():
    net = _Net()
    seen = {}
    net.bn.register_forward_pre_hook(lambda c, i: seen.__setitem__("bn_in", i[0].dtype))
    amp.auto_mixed_precision(net, "O2")(X)
    assert seen["bn_in"] == minigrad.float32
    net3 = _Net()
    net3.bn.register_forward_pre_hook(lambda c, i: seen.__setitem__("bn3_in", i[0].dtype))
    amp.auto_mixed_precision(net3, "O3")(X)
    assert seen["bn3_in"] == minigrad.float16


def test_o1_runs_the_white_list_ops_under_autocast():
    net = _Net()
    seen = _dtypes_seen(net)
    out = amp.auto_mixed_precision(net, "O1")(X)
    assert seen["fc"] == minigrad.float16 and out.dtype == minigrad.float32
    assert all(p.dtype == minigrad.float32 for p in net.get_parameters())


def test_the_fp16_network_matches_a_by_hand_fp16_computation():
    net = nn.Dense(4, 3)
    def as16(a):
        return a.astype(np.float16).astype(np.float32)

    # fp16 operands, an fp32 product plus the fp16 bias, rounded to fp16 once
    expected = (as16(X.asnumpy()) @ as16(net.weight.asnumpy()).T
                + as16(net.bias.asnumpy())).astype(np.float16)
    out = amp.auto_mixed_precision(net, "O3")(X)
    np.testing.assert_array_equal(out.asnumpy(), expected.astype(np.float32))
