"""A skipped loss-scaled step leaves BatchNorm's moving statistics bit-identical, in all three
faces, whether the inf comes with the input or appears in an activation (an fp16 overflow)."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.amp import GradScaler, autocast, build_train_network
from minigrad.autograd import value_and_grad
from minigrad.mixed_precision import LossScaleOptimizer


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 6)
        self.bn = nn.BatchNorm1d(6)
        self.out = nn.Dense(6, 2)

    def construct(self, x):
        return self.out(nn.ReLU()(self.bn(self.fc(x))))


def _batch(bad=None):
    x = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    if bad == "input":
        x[3, 1] = np.inf
    return Tensor(x), Tensor(np.zeros((8, 2), np.float32))


def _stats(net):
    return [net.bn.moving_mean.asnumpy().copy(), net.bn.moving_variance.asnumpy().copy()]


def _overflowing_activation(net):
    """Make the first layer's fp16 (autocast or O2) output overflow to inf on a finite input."""
    w = net.fc.weight.asnumpy()
    net.fc.weight.set_data(np.full_like(w, 3e4))


def _bit_identical(a, b):
    return all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


def _clean_then_skipped(net, step, bad):
    """A clean ``step`` (True: applied), then the bad one (after making an activation overflow,
    for ``bad="activation"``), which must be skipped (False). Returns the network, the moving
    statistics before the skipped step, and a clean step to run after it."""
    x, y = _batch()
    assert step(x, y)
    if bad == "activation":
        _overflowing_activation(net)
    before = _stats(net)
    with np.errstate(all="ignore"):
        assert step(*_batch(bad)) is False
    return net, before, lambda: step(x, y)


def _cell_face(bad):
    minigrad.set_seed(0)
    net = _Net().set_train()
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    train = build_train_network(net, opt, nn.MSELoss(), level="O2")
    train.set_sense_scale(Tensor(np.float32(1.0)))  # a clean first step

    def step(x, y):
        train(x, y)
        return not train.last_report.skipped

    return _clean_then_skipped(net, step, bad)


def _scaler_face(bad):
    minigrad.set_seed(0)
    net = _Net().set_train()
    opt = nn.SGD(net.trainable_params(), 0.01)
    scaler = GradScaler(init_scale=1.0)
    loss_fn = nn.MSELoss()

    def step(x, y):
        opt.zero_grad()
        with autocast():
            loss = loss_fn(net(x), y)
        scaler.scale(loss).backward()
        applied = scaler.step(opt)
        scaler.update()
        return applied

    return _clean_then_skipped(net, step, bad)


def _tf_face(bad):
    minigrad.set_seed(0)
    net = _Net().set_train()
    lso = LossScaleOptimizer(nn.SGD(net.trainable_params(), 0.01), dynamic=False, initial_scale=1)
    loss_fn = nn.MSELoss()

    def step(x, y):
        with autocast():
            _, grads = value_and_grad(lambda x, y: lso.get_scaled_loss(loss_fn(net(x), y)), None,
                                      lso.parameters)(x, y)
        return lso.apply_gradients(zip(lso.get_unscaled_gradients(grads), lso.parameters))

    return _clean_then_skipped(net, step, bad)


@pytest.mark.parametrize("bad", ["input", "activation"])
@pytest.mark.parametrize("face", [_cell_face, _scaler_face, _tf_face],
                         ids=["MindSpore cell", "PyTorch GradScaler", "TF LossScaleOptimizer"])
def test_a_skipped_step_leaves_the_moving_statistics_bit_identical(face, bad):
    net, before, clean_step = face(bad)
    after = _stats(net)
    assert _bit_identical(before, after)
    assert all(np.isfinite(a).all() for a in after)
    if bad == "input":  # a clean step afterwards still updates them
        clean_step()
        assert not _bit_identical(before, _stats(net))


def test_statistics_outside_a_loss_scaled_step_are_kept():
    """A forward pass in training mode (BatchNorm calibration) keeps what it wrote."""
    net = _Net().set_train()
    before = _stats(net)
    net(_batch()[0])
    assert not _bit_identical(before, _stats(net))
