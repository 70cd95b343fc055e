"""examples/fp16_underflow.py on a small setting: fp16 without loss scaling stalls, with it converges."""
import importlib.util

import pytest

from helpers import REPO_ROOT

PATH = REPO_ROOT / "examples" / "fp16_underflow.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("fp16_underflow", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fp16_without_loss_scaling_stalls_because_gradients_underflow(example):
    losses, net = example.train("fp16", steps=40)
    assert losses[-1] == losses[0]                       # not a single useful update
    assert example.gradient_zero_share(net, 1.0) == 1.0  # every gradient value flushed to 0


def test_dynamic_loss_scaling_converges_like_fp32(example):
    fp32, _ = example.train("fp32", steps=40)
    scaled, net = example.train("fp16+scaling", steps=40)
    assert fp32[-1] < 0.01 * fp32[0]
    assert scaled[-1] < 0.01 * scaled[0]
    assert example.gradient_zero_share(net, 2.0 ** 16) < 0.1
    assert net.last_report.skipped is False


def test_the_plots_are_saved(example, tmp_path):
    pytest.importorskip("matplotlib")
    _, net = example.train("fp16+scaling", steps=5)
    assert len(net.reports) == 5
    example.plot(tmp_path / "underflow.png", net)
    assert (tmp_path / "underflow.png").stat().st_size > 10_000
