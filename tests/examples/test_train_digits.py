"""examples/train_digits.py reaches >= 97% test accuracy on scikit-learn's digits, fp32 and fp16 (O2)."""
import importlib.util

import pytest

from helpers import REPO_ROOT

pytest.importorskip("sklearn")

_PATH = REPO_ROOT / "examples" / "train_digits.py"


def _example():
    spec = importlib.util.spec_from_file_location("train_digits", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("amp_level", ["O0", "O2"])
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_digits_example_reaches_97_percent(model, amp_level):
    accuracy = _example().run(model, amp_level=amp_level, progress=False, verbose=False)
    assert accuracy >= 0.97, f"{model} at {amp_level}: test accuracy {accuracy:.4f} < 0.97"


def test_command_line_runs_both_models_briefly(capsys):
    results = _example().main(["--model", "both", "--epochs", "1", "--no-progress"])
    assert sorted(results) == ["cnn", "mlp"] and all(0.5 < a <= 1 for a in results.values())
    out = capsys.readouterr().out
    assert "mlp (O0): test accuracy" in out and "cnn (O0): test accuracy" in out
