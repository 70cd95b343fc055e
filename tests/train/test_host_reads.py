"""``Model.train`` on the GPU, counted on the strict device: every callback together costs one
more read per step (the loss, read once and shared), ``ModelCheckpoint`` reads the state it
saves, and a checkpoint written from the GPU loads on the CPU and back, bit for bit."""
import numpy

import minigrad
from minigrad import Model, amp, nn
from minigrad.dataset import NumpySlicesDataset
from minigrad.testing.strict_device import strict_device
from minigrad.train import load_checkpoint, load_param_into_net, save_checkpoint
from minigrad.train.callback import (Callback, CheckpointConfig, History, LossMonitor,
                                     LossScaleMonitor, ModelCheckpoint, ProgressBar, TimeMonitor)


class _Reads(Callback):
    """Records the reads of each step (counted from the step's begin to its end)."""

    def __init__(self, counter):
        self.counter, self.per_step = counter, []

    def on_train_step_begin(self, run_context):
        self.counter.reset()

    def on_train_step_end(self, run_context):
        self.per_step.append(self.counter.count)


def _model():
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 4)])
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                  nn.Momentum(net.trainable_params(), 0.01, 0.9), amp_level="O2",
                  loss_scale_manager=amp.DynamicLossScaleManager(2.0 ** 10, 2, 2))
    return net, model


def _dataset():
    rng = numpy.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(numpy.float32)
    return NumpySlicesDataset({"x": x, "y": x[:, :4].argmax(1).astype(numpy.int32)},
                              shuffle=False).batch(16)


def test_model_train_with_every_callback(tmp_path, capsys):
    with strict_device() as reads:
        minigrad.set_context(device_target="GPU")
        net, model = _model()
        counter = _Reads(reads)
        checkpoint = ModelCheckpoint("m", str(tmp_path), CheckpointConfig(save_checkpoint_steps=3))
        callbacks = [counter, LossMonitor(2), TimeMonitor(), History(), LossScaleMonitor(1),
                     ProgressBar(use_tqdm=False), checkpoint, _Reads(reads)]
        model.train(2, _dataset(), callbacks=callbacks)
        per_step = callbacks[-1].per_step
        assert net.trainable_params()[0].device == "GPU"
    assert per_step[0] == 2  # the overflow flag, then the loss for all callbacks together
    assert per_step[1] == 2 and per_step[3] == 2
    assert per_step[2] > 2  # a checkpoint step also reads what it saves
    assert "loss is" in capsys.readouterr().out


def test_a_gpu_checkpoint_loads_on_the_cpu_and_back(tmp_path):
    path = str(tmp_path / "gpu.ckpt")
    with strict_device():
        minigrad.set_context(device_target="GPU")
        net, model = _model()
        model.train(1, _dataset())
        gpu_values = {p.name: p.asnumpy() for p in net.trainable_params()}
        save_checkpoint(net, path)
    minigrad.set_context(device_target="CPU")
    cpu_net, _ = _model()
    load_param_into_net(cpu_net, load_checkpoint(path))
    for p in cpu_net.trainable_params():
        assert p.device == "CPU"
        numpy.testing.assert_array_equal(p.asnumpy(), gpu_values[p.name])
    save_checkpoint(cpu_net, str(tmp_path / "cpu.ckpt"))
    with strict_device():
        minigrad.set_context(device_target="GPU")
        back, _ = _model()
        load_param_into_net(back, load_checkpoint(str(tmp_path / "cpu.ckpt")))
        for p in back.trainable_params():
            assert p.device == "GPU"
            numpy.testing.assert_array_equal(p.asnumpy(), gpu_values[p.name])
