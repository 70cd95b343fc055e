"""Review session 3m: run-time behaviour of callbacks, checkpoints and dataset iterators."""
import os

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.dataset import NumpySlicesDataset
from minigrad.train import (Callback, CheckpointConfig, LossMonitor, Model, ModelCheckpoint,
                            load_checkpoint)


def _data(n=20):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = rng.integers(0, 3, n).astype(np.int32)
    return x, y


def _model(level="O0"):
    net = nn.Dense(4, 3)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return net, opt, Model(net, loss, opt, amp_level=level)


def _ds(batch=5):
    return NumpySlicesDataset(_data(), column_names=["x", "y"], shuffle=False).batch(batch)


# ---- ModelCheckpoint ------------------------------------------------------------------------------
def test_reused_modelcheckpoint_saves_the_final_step_of_every_train_call(tmp_path):
    # the docstring: a final checkpoint is written at the end of training unless the last step
    # was just saved. A callback reused for a second train() of the same length used to remember
    # the first run's last saved step number and skip the second run's final save, leaving the
    # first run's weights in the file.
    net, _, model = _model()
    ckpt = ModelCheckpoint("A", str(tmp_path), CheckpointConfig(save_checkpoint_steps=100))
    model.train(1, _ds(), callbacks=[ckpt])
    model.train(1, _ds(), callbacks=[ckpt])
    saved = load_checkpoint(ckpt.latest_ckpt_file_name)
    np.testing.assert_array_equal(saved["weight"].asnumpy(), net.weight.asnumpy())
    np.testing.assert_array_equal(saved["bias"].asnumpy(), net.bias.asnumpy())
