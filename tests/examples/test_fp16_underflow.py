"""examples/fp16_underflow.py on a small setting: fp16 without loss scaling stalls, with it
converges; its flags are checked before any training."""

import importlib.util
import sys

import pytest

from helpers import REPO_ROOT

PATH = REPO_ROOT / "examples" / "fp16_underflow.py"


def _load():
    """A fresh copy of the example module (a test may replace its functions)."""
    spec = importlib.util.spec_from_file_location("fp16_underflow", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example():
    return _load()


def test_fp16_without_loss_scaling_stalls_because_gradients_underflow(example):
    losses, net = example.train("fp16", steps=40)
    assert losses[-1] == losses[0]  # not a single useful update
    assert example.gradient_zero_share(net, 1.0) == 1.0  # every gradient value flushed to 0


def test_dynamic_loss_scaling_converges_like_fp32(example):
    fp32, _ = example.train("fp32", steps=40)
    scaled, net = example.train("fp16+scaling", steps=40)
    assert fp32[-1] < 0.01 * fp32[0]
    assert scaled[-1] < 0.01 * scaled[0]
    assert example.gradient_zero_share(net, 2.0**16) < 0.1
    assert net.last_report.skipped is False


def test_the_plots_are_saved(example, tmp_path):
    pytest.importorskip("matplotlib")
    _, net = example.train("fp16+scaling", steps=5)
    assert len(net.reports) == 5
    example.plot(tmp_path / "underflow.png", net)
    assert (tmp_path / "underflow.png").stat().st_size > 10_000


@pytest.mark.parametrize("value", ["0", "-3"])
def test_fp16_underflow_rejects_non_positive_steps(value, capsys):
    """--steps 0 trained three runs and then raised IndexError on losses[0]."""
    module = _load()
    module.train = lambda *a, **k: pytest.fail("trained despite a bad --steps")
    with pytest.raises(SystemExit) as info:
        module.main(["--steps", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --steps" in err and "positive int" in err and value in err


def test_fp16_underflow_checks_the_plot_folder_before_training(tmp_path, capsys):
    """--plot into a missing folder trained all three runs and then died in PIL's open()."""
    module = _load()
    module.train = lambda *a, **k: pytest.fail("trained before checking --plot")
    target = tmp_path / "no_such_folder" / "u.png"
    with pytest.raises(SystemExit) as info:
        module.main(["--steps", "5", "--plot", str(target)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--plot" in err and str(target.parent) in err and "does not exist" in err


def test_fp16_underflow_without_matplotlib_says_so_before_training(tmp_path, monkeypatch, capsys):
    module = _load()
    module.train = lambda *a, **k: pytest.fail("trained before checking that --plot can draw")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(SystemExit) as info:
        module.main(["--steps", "5", "--plot", str(tmp_path / "u.png")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--plot" in err and "matplotlib" in err
