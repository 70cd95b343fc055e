"""examples/train_digits.py reaches >= 97% test accuracy on scikit-learn's digits, fp32 and fp16
(O2); its flags are checked before any training."""

import importlib.util

import pytest

from helpers import REPO_ROOT

_PATH = REPO_ROOT / "examples" / "train_digits.py"


def _example():
    spec = importlib.util.spec_from_file_location("train_digits", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("amp_level", ["O0", "O2"])
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_digits_example_reaches_97_percent(model, amp_level):
    pytest.importorskip("sklearn")
    accuracy = _example().run(model, amp_level=amp_level, progress=False, verbose=False)
    assert accuracy >= 0.97, f"{model} at {amp_level}: test accuracy {accuracy:.4f} < 0.97"


def test_command_line_runs_both_models_briefly(capsys):
    results = _example().main(["--model", "both", "--epochs", "1", "--no-progress"])
    assert sorted(results) == ["cnn", "mlp"] and all(0.5 < a <= 1 for a in results.values())
    out = capsys.readouterr().out
    assert "mlp (O0): test accuracy" in out and "cnn (O0): test accuracy" in out


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--epochs", "0"),
        ("--epochs", "-1"),
        ("--epochs", "two"),
        ("--batch-size", "0"),
        ("--batch-size", "-5"),
    ],
)
def test_train_digits_rejects_a_non_positive_flag_naming_it(flag, value, capsys):
    """--epochs 0 trained the default 20 epochs silently; -1 and --batch-size 0 ended in a traceback
    from cosine_decay_lr ('decay_epoch') or the dataset, after loading the data."""
    module = _example()
    module.run = lambda *a, **k: pytest.fail("trained despite a bad flag")
    with pytest.raises(SystemExit) as info:
        module.main(["--model", "mlp", flag, value, "--no-progress"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "positive int" in err and value in err


def test_train_digits_run_refuses_zero_epochs():
    with pytest.raises(ValueError, match="epochs.*positive int.*0"):
        _example().run("mlp", epochs=0, progress=False, verbose=False)
