"""Review session 3e: the new user's journey (README, examples' flags, seed examples, common mistakes).

Tests of the examples and the README, then the library bugs the journey found (common mistakes
that gave raw NumPy or AttributeError tracebacks, a half-applied O2 build), each fixed since.
"""
import importlib.util
import sys
import pathlib

import numpy as np
import pytest

import minigrad
from minigrad import Model, Tensor, nn
from minigrad.dataset import NumpySlicesDataset
from helpers import REPO_ROOT

ROOT = REPO_ROOT


def _example(name):
    spec = importlib.util.spec_from_file_location(f"_review3e_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- examples/train_digits.py: every flag value is checked before any training -------------------

@pytest.mark.parametrize("flag, value", [("--epochs", "0"), ("--epochs", "-1"), ("--epochs", "two"),
                                         ("--batch-size", "0"), ("--batch-size", "-5")])
def test_train_digits_rejects_a_non_positive_flag_naming_it(flag, value, capsys):
    """--epochs 0 trained the default 20 epochs silently; -1 and --batch-size 0 ended in a traceback
    from cosine_decay_lr ('decay_epoch') or the dataset, after loading the data."""
    module = _example("train_digits")
    module.run = lambda *a, **k: pytest.fail("trained despite a bad flag")
    with pytest.raises(SystemExit) as info:
        module.main(["--model", "mlp", flag, value, "--no-progress"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "positive int" in err and value in err


def test_train_digits_run_refuses_zero_epochs():
    with pytest.raises(ValueError, match="epochs.*positive int.*0"):
        _example("train_digits").run("mlp", epochs=0, progress=False, verbose=False)


# --- examples/fp16_underflow.py --------------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "-3"])
def test_fp16_underflow_rejects_non_positive_steps(value, capsys):
    """--steps 0 trained three runs and then raised IndexError on losses[0]."""
    module = _example("fp16_underflow")
    module.train = lambda *a, **k: pytest.fail("trained despite a bad --steps")
    with pytest.raises(SystemExit) as info:
        module.main(["--steps", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --steps" in err and "positive int" in err and value in err


def test_fp16_underflow_checks_the_plot_folder_before_training(tmp_path, capsys):
    """--plot into a missing folder trained all three runs and then died in PIL's open()."""
    module = _example("fp16_underflow")
    module.train = lambda *a, **k: pytest.fail("trained before checking --plot")
    target = tmp_path / "no_such_folder" / "u.png"
    with pytest.raises(SystemExit) as info:
        module.main(["--steps", "5", "--plot", str(target)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--plot" in err and str(target.parent) in err and "does not exist" in err


def test_fp16_underflow_without_matplotlib_says_so_before_training(tmp_path, monkeypatch, capsys):
    module = _example("fp16_underflow")
    module.train = lambda *a, **k: pytest.fail("trained before checking that --plot can draw")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(SystemExit) as info:
        module.main(["--steps", "5", "--plot", str(tmp_path / "u.png")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--plot" in err and "matplotlib" in err


# --- bugs the journey found in the library (each was a strict xfail until its fix) -----------------

def test_dense_given_a_list_says_what_it_expected():
    with pytest.raises(TypeError, match="Tensor"):
        nn.Dense(4, 3)([[1.0, 2.0, 3.0, 4.0]])


def test_a_failed_o2_build_leaves_the_network_unchanged():
    net = nn.Dense(4, 2)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    with pytest.raises(TypeError):
        Model(net, "mse", opt, amp_level="O2")
    assert net.weight.dtype == np.float32 and net.bias.dtype == np.float32


@pytest.mark.parametrize("level", ["O0", "O2"])
def test_a_loss_class_instead_of_an_instance_is_refused_when_building(level):
    net = nn.Dense(4, 2)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    with pytest.raises(TypeError, match="loss_fn.*MSELoss"):
        Model(net, nn.MSELoss, opt, amp_level=level)


def test_training_on_a_dataset_without_batches_is_an_error():
    net = nn.Dense(4, 2)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    data = NumpySlicesDataset((np.ones((3, 4), np.float32), np.ones((3, 2), np.float32)))
    with pytest.raises(ValueError, match="(?i)empty|no batch|size 0|dataset"):
        Model(net, nn.MSELoss(), opt).train(1, data.batch(8, drop_remainder=True))


def test_set_sense_scale_with_a_wrong_shape_names_sens():
    net = nn.Dense(4, 2)
    cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()),
                                            nn.Momentum(net.trainable_params(), 0.1, 0.9),
                                            Tensor(np.ones((1,), np.float32)))
    with pytest.raises(ValueError, match=r"sens.*\(3,\).*\(1,\)"):
        cell.set_sense_scale(Tensor(np.ones((3,), np.float32)))


def test_load_checkpoint_of_a_directory_says_it_is_a_directory(tmp_path):
    with pytest.raises((ValueError, IsADirectoryError), match="(?i)directory|folder"):
        minigrad.load_checkpoint(str(tmp_path))


def test_tensor_of_a_string_names_data():
    for bad in ("abc", None, {"a": 1}, [1, "a"]):
        with pytest.raises(TypeError, match="Tensor data must be a number"):
            Tensor(bad)
    with pytest.raises(ValueError, match="nested lists of equal lengths"):
        Tensor([[1.0, 2.0], [3.0]])
    assert Tensor(2.5).dtype == np.float32 and Tensor([1, 2]).dtype == np.int64  # defaults kept


def test_mse_loss_shape_mismatch_names_logits_and_labels():
    with pytest.raises(ValueError, match=r"(?s)logits.*labels|labels.*logits"):
        nn.MSELoss()(Tensor(np.ones((4, 3), np.float32)), Tensor(np.ones((4, 2), np.float32)))
