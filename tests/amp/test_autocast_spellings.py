"""autocast as PyTorch 2.x spells it, and its op lists (the labels on the Function classes)."""
import importlib

import numpy as np
import pytest

import minigrad
from minigrad import Tensor, ops
from minigrad._config import config
from minigrad.autograd.function import Function
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


def test_the_op_lists_are_the_labelled_function_classes():
    from minigrad.nn.loss import SoftmaxCrossEntropy  # defines the loss's Function class
    low, fp32 = autocast_module.labelled_ops()
    assert {cls.__name__ for cls in low} == {"MatMul", "Dense", "Conv2d", "Attention"}
    assert {cls.__name__ for cls in fp32} == {
        "Softmax", "LogSoftmax", "Exp", "Log", "Pow", "Sum", "Mean", "Normalize",
        "SoftmaxCrossEntropy"}
    assert all(cls.autocast == "low" for cls in low) and all(c.autocast == "fp32" for c in fp32)
    assert ops.linalg.MatMul in low and ops.math.Exp in fp32 and SoftmaxCrossEntropy in fp32
    assert ops.math.ReLU not in low + fp32


def test_a_function_class_with_an_unknown_label_is_an_error():
    with pytest.raises(ValueError, match=r"Half\.autocast must be one of .*got 'fp16'"):
        type("Half", (Function,), {"autocast": "fp16"})
