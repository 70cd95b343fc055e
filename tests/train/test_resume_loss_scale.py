"""Resuming a loss-scaled run restores the exact scale trajectory: ModelCheckpoint saves the train
cell's scale and counters, ``load_checkpoint(net=model.train_network)`` restores them; a custom
loop saves ``GradScaler.state_dict()`` through ``append_dict``."""
import os

import numpy
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.amp import DynamicLossScaleManager, GradScaler
from minigrad.dataset import NumpySlicesDataset
from minigrad.train import (
    CheckpointConfig,
    LossScaleMonitor,
    Model,
    ModelCheckpoint,
    load_checkpoint,
    save_checkpoint,
)
from minigrad.train.checkpoint import CheckpointMismatchWarning


def _data():
    rng = numpy.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype(numpy.float32)
    y = rng.integers(0, 3, 32).astype(numpy.int32)
    return NumpySlicesDataset((x, y), shuffle=False).batch(8)


def _build():
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 3)])
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    # a scale that starts far too high: the first steps overflow, later ones grow it back
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), opt,
                  amp_level="O2", loss_scale_manager=DynamicLossScaleManager(2.0 ** 24, 2, 3))
    return net, opt, model


def test_an_o2_run_resumed_from_model_checkpoint_continues_bit_identically(tmp_path):
    net, opt, model = _build()
    monitor = LossScaleMonitor()
    ckpt = ModelCheckpoint(directory=str(tmp_path),
                           config=CheckpointConfig(save_checkpoint_steps=8, keep_checkpoint_max=5))
    model.train(4, _data(), callbacks=[ckpt, monitor])
    assert sum(monitor.overflows[:8]) >= 4 and monitor.scales[8] < 2.0 ** 24  # scale moved
    net2, opt2, resumed = _build()
    load_checkpoint(os.path.join(tmp_path, "CKP-2_4.ckpt"), net=resumed.train_network,
                    optimizer=opt2)
    monitor2 = LossScaleMonitor()
    resumed.train(4, _data(), callbacks=[monitor2], initial_epoch=2)
    assert monitor2.scales == monitor.scales[8:] and monitor2.overflows == monitor.overflows[8:]
    for a, b in zip(net.get_parameters(), net2.get_parameters()):
        assert a.asnumpy().tobytes() == b.asnumpy().tobytes(), a.name

    # loading into the backbone alone restarts the scale: the warning names what was left out
    _, _, backbone_only = _build()
    with pytest.warns(CheckpointMismatchWarning, match="scale_sense"):
        load_checkpoint(os.path.join(tmp_path, "CKP-2_4.ckpt"), net=backbone_only._network)


def test_grad_scaler_state_round_trips_through_append_dict(tmp_path):
    def run(scaler, w, steps):
        scales = []
        for _ in range(steps):
            loss = (w * Tensor(numpy.float16(30000.0))).sum()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            scales.append(scaler.get_scale())
        return scales
    minigrad.set_seed(0)
    w = minigrad.Parameter(numpy.ones(4, numpy.float16), name="w")
    opt = nn.SGD([w], 1e-6)
    scaler = GradScaler(init_scale=2.0 ** 16, growth_interval=2)
    run(scaler, w, 3)
    path = save_checkpoint({"w": w}, tmp_path / "s", append_dict=scaler.state_dict())
    reference = run(scaler, w, 4)
    restored = GradScaler()
    params = load_checkpoint(path)
    restored.load_state_dict({k: v for k, v in params.items() if k != "w"})
    w.set_data(params["w"].asnumpy())
    assert run(restored, w, 4) == reference
