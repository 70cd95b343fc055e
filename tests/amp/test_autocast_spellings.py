"""autocast as PyTorch 2.x spells it, and its op tables (every entry exists)."""
import importlib

import numpy as np
import pytest

import minigrad
from minigrad import Tensor, ops
from minigrad._config import config
from minigrad.amp import autocast

autocast_module = importlib.import_module("minigrad.amp.autocast")


@pytest.mark.parametrize("make", [
    lambda: autocast("cpu"),
    lambda: autocast(device_type="cpu", dtype=minigrad.float16),
    lambda: autocast("cpu", minigrad.float16),
    lambda: autocast("CPU", enabled=True, cache_enabled=False),
    lambda: autocast(),
    lambda: autocast(minigrad.float16),
])
def test_pytorch_2_spellings_run_matmuls_in_fp16(make):
    x = Tensor(np.ones((2, 3), np.float32))
    w = Tensor(np.ones((3, 4), np.float32))
    with make():
        assert config.autocast_dtype == minigrad.float16
        assert ops.matmul(x, w).dtype == minigrad.float16
    assert config.autocast_dtype is None


def test_autocast_cpu_with_enabled_false_is_off():
    with autocast("cpu", enabled=False):
        assert config.autocast_dtype is None


@pytest.mark.parametrize("make, error, match", [
    (lambda: autocast("cuda"), ValueError, "device_type"),
    (lambda: autocast("cpu", dtype=np.float64), TypeError, "'dtype' must be float16"),
    (lambda: autocast("cpu", cache_enabled=1), TypeError, "cache_enabled"),
    (lambda: autocast("cpu", device_type="cpu"), TypeError, "device_type"),
    (lambda: autocast("cpu", minigrad.float16, dtype=minigrad.float16), TypeError, "'dtype'"),
])
def test_wrong_spellings_name_the_argument_at_fault(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_the_labels_on_the_function_classes_are_what_autocast_acts_on():
    low, fp32 = autocast_module.labelled_ops()
    names = lambda classes: {f"{c.__module__}.{c.__qualname__}" for c in classes}
    assert names(low) == {"minigrad.ops.linalg.MatMul", "minigrad.ops.linalg.Dense",
                          "minigrad.ops.conv.Conv2d"}
    assert names(fp32) == {
        "minigrad.ops.activation.Softmax", "minigrad.ops.activation.LogSoftmax",
        "minigrad.ops.math.Exp", "minigrad.ops.math.Log", "minigrad.ops.arithmetic.Pow",
        "minigrad.ops.reduction.Sum", "minigrad.ops.reduction.Mean",
        "minigrad.ops.normalization.Normalize", "minigrad.nn.loss.SoftmaxCrossEntropy"}

    class Square(minigrad.autograd.Function):  # a user's op takes a label the same way
        autocast = "fp32"

        def forward(self, x):
            self.x = x
            return x * x

        def backward(self, g):
            return 2 * g * self.x

    assert Square in autocast_module.labelled_ops()[1]
    x = minigrad.Tensor(np.ones(3, np.float16))
    with autocast("cpu"):
        assert Square.apply(x).dtype == minigrad.float32
