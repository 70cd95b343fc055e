"""minigrad.train.callback at run time: LossMonitor's period, ModelCheckpoint's prefixes and
final saves, and train mode after an eval run by a callback."""
import contextlib
import io
import os

import numpy
import numpy as np
import pytest

import minigrad
from minigrad import Model, Tensor, nn
from minigrad.dataset import NumpySlicesDataset
from minigrad.optim import Momentum
from minigrad.train import (
    Accuracy,
    Callback,
    CheckpointConfig,
    LossMonitor,
    ModelCheckpoint,
    load_checkpoint,
)


class DropNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 8)
        self.drop = nn.Dropout(keep_prob=0.5)
        self.fc2 = nn.Dense(8, 3)

    def construct(self, x):
        return self.fc2(self.drop(self.fc1(x)))


def _data(n=20, batch=4):
    rng = numpy.random.default_rng(0)
    x = rng.standard_normal((n, 4)).astype(numpy.float32)
    y = rng.integers(0, 3, n).astype(numpy.int32)
    return NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(batch)


def _model(**kwargs):
    minigrad.set_seed(0)
    net = DropNet()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = Momentum(net.trainable_params(), 0.01, 0.9)
    return Model(net, loss, optimizer, **kwargs), net, optimizer


def test_train_steps_run_in_train_mode_after_an_eval_inside_a_callback():
    """MindSpore checks the train network's mode before every step (_check_network_mode), so an
    eval run by a callback (the usual 'evaluate at epoch end') does not leave Dropout/BatchNorm in
    inference mode for the rest of training."""
    model, net, _ = _model(metrics={"acc": Accuracy()})
    data = _data()

    class EvalAtEpochEnd(Callback):
        def on_train_epoch_end(self, run_context):
            model.eval(data)

    modes = []  # Dropout's mode in every forward pass (train steps and eval batches)
    net.drop.register_forward_hook(lambda cell, inputs, output: modes.append(cell.training))
    model.train(2, data, callbacks=[EvalAtEpochEnd()])
    assert modes == [True] * 5 + [False] * 5 + [True] * 5 + [False] * 5
    modes.clear()
    model.predict(Tensor(numpy.zeros((1, 4), numpy.float32)))  # predict also switches to eval
    model.train(1, data)
    assert modes == [False] + [True] * 5


def test_loss_monitor_period_counts_steps_over_all_epochs():
    """MindSpore prints when cur_step_num - last printed step >= per_print_times (global steps),
    showing the step within the epoch; with 5 steps per epoch and a period of 2 the prints are at
    global steps 2, 4, 6, 8, 10 = epoch 1 steps 2, 4 and epoch 2 steps 1, 3, 5."""
    model, _, _ = _model()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model.train(2, _data(), callbacks=[LossMonitor(2)])
    printed = [line.split(",")[0] for line in out.getvalue().splitlines()]
    assert printed == ["epoch: 1 step: 2", "epoch: 1 step: 4", "epoch: 2 step: 1",
                       "epoch: 2 step: 3", "epoch: 2 step: 5"]
    # the same monitor in a second train() (steps counted from 1 again) keeps the period
    monitor, out = LossMonitor(3), io.StringIO()
    with contextlib.redirect_stdout(out):
        model.train(2, _data(), callbacks=[monitor])
        model.train(1, _data(), callbacks=[monitor])
    printed = [line.split(",")[0] for line in out.getvalue().splitlines()]
    assert printed == [
        "epoch: 1 step: 3",
        "epoch: 2 step: 1",
        "epoch: 2 step: 4",
        "epoch: 1 step: 3",
    ]


def test_model_checkpoint_takes_a_new_prefix_when_files_of_an_earlier_run_exist(tmp_path):
    """MindSpore's ModelCheckpoint renames its prefix (CKP -> CKP_1, CKP_2, ...) when the directory
    already holds <prefix>-*.ckpt files, so a second run never overwrites (or rotates away) the
    first run's checkpoints."""
    old = tmp_path / "CKP-1_5.ckpt"
    old.write_bytes(b"the first run's checkpoint")
    (tmp_path / "CKPX-1_5.ckpt").write_bytes(b"another prefix")
    model, _, _ = _model()
    config = CheckpointConfig(save_checkpoint_steps=5, keep_checkpoint_max=1)
    ckpt = ModelCheckpoint(directory=tmp_path, config=config)
    model.train(2, _data(), callbacks=[ckpt])
    assert old.read_bytes() == b"the first run's checkpoint"
    assert set(os.listdir(tmp_path)) == {"CKPX-1_5.ckpt", "CKP-1_5.ckpt", "CKP_1-2_5.ckpt"}
    assert ckpt.latest_ckpt_file_name == str(tmp_path / "CKP_1-2_5.ckpt")
    # a third run goes on to CKP_2
    ckpt2 = ModelCheckpoint(directory=tmp_path, config=config)
    model.train(1, _data(), callbacks=[ckpt2])
    assert ckpt2.latest_ckpt_file_name == str(tmp_path / "CKP_2-1_5.ckpt")
    assert (tmp_path / "CKP_1-2_5.ckpt").exists()


def _xy(n=20):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = rng.integers(0, 3, n).astype(np.int32)
    return x, y


def _dense_model(level="O0"):
    net = nn.Dense(4, 3)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return net, opt, Model(net, loss, opt, amp_level=level)


def _ds(batch=5):
    return NumpySlicesDataset(_xy(), column_names=["x", "y"], shuffle=False).batch(batch)


def test_reused_modelcheckpoint_saves_the_final_step_of_every_train_call(tmp_path):
    # the docstring: a final checkpoint is written at the end of training unless the last step
    # was just saved. A callback reused for a second train() of the same length starts counting
    # afresh: remembering the first run's last saved step number would skip the second run's
    # final save and leave the first run's weights in the file.
    net, _, model = _dense_model()
    ckpt = ModelCheckpoint("A", str(tmp_path), CheckpointConfig(save_checkpoint_steps=100))
    model.train(1, _ds(), callbacks=[ckpt])
    model.train(1, _ds(), callbacks=[ckpt])
    saved = load_checkpoint(ckpt.latest_ckpt_file_name)
    np.testing.assert_array_equal(saved["weight"].asnumpy(), net.weight.asnumpy())
    np.testing.assert_array_equal(saved["bias"].asnumpy(), net.bias.asnumpy())


def test_callback_arguments_are_named_with_their_value(tmp_path):
    import re

    from minigrad.train import ProgressBar, RunContext

    def raises(error, message):
        return pytest.raises(error, match=re.escape(message))

    with raises(ValueError, "CheckpointConfig: save_checkpoint_steps must be a positive int when "
                            "save_checkpoint_seconds is 0 (set save_checkpoint_steps or "
                            "save_checkpoint_seconds), got None"):
        CheckpointConfig(save_checkpoint_steps=None)
    with raises(TypeError, "CheckpointConfig: saved_network must be a Cell or None, got 'net' "
                           "(str)"):
        CheckpointConfig(saved_network="net")
    with raises(ValueError, "CheckpointConfig: append_info must be a list of 'epoch_num', "
                            "'step_num' and dicts, or None, got ['epoch']"):
        CheckpointConfig(append_info=["epoch"])
    with raises(TypeError, "append_info must be a list of 'epoch_num', 'step_num' and dicts, or "
                           "None, got 'epoch_num' (str)"):
        CheckpointConfig(append_info="epoch_num")
    assert CheckpointConfig(append_info=("epoch_num", {"lr": 0.1})).append_info == [
        "epoch_num", {"lr": 0.1}]
    with raises(ValueError, "ModelCheckpoint: directory must be a non-empty str or os.PathLike "
                            "path or None, got ''"):
        ModelCheckpoint(directory="")
    with raises(TypeError, "ProgressBar: file must be a stream with a write method (sys.stdout, "
                           "an open text file) or None, got 'log.txt' (str)"):
        ProgressBar(file="log.txt")
    ProgressBar(file=io.StringIO())
    with raises(TypeError, "RunContext: original_args must be a dict (the cb_params), got "
                           "[1] (list)"):
        RunContext([1])
