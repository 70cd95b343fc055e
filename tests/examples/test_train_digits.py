"""examples/train_digits.py reaches >= 97% test accuracy on scikit-learn's digits, fp32 and fp16
(O2), bf16 within 0.5 points of fp32, and trains from MNIST and CIFAR-10 files (written here in
their real formats); its flags are checked before any training."""

import functools
import importlib.util

import numpy
import pytest

from helpers import REPO_ROOT
from helpers.dataset_files import cifar_bytes, write, write_mnist

_PATH = REPO_ROOT / "examples" / "train_digits.py"


def _example():
    spec = importlib.util.spec_from_file_location("train_digits", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=None)
def _accuracy(model, amp_level, dtype="float16"):
    """The example's test accuracy, each run once per session (the fp32 runs serve two tests)."""
    return _example().run(model, amp_level=amp_level, dtype=dtype, progress=False, verbose=False)


@pytest.mark.parametrize("amp_level", ["O0", "O2"])
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_digits_example_reaches_97_percent(model, amp_level):
    pytest.importorskip("sklearn")
    accuracy = _accuracy(model, amp_level)
    assert accuracy >= 0.97, f"{model} at {amp_level}: test accuracy {accuracy:.4f} < 0.97"


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_digits_bf16_without_loss_scaling_is_within_half_a_percent_of_fp32(model):
    """bf16 (O2: bf16 network, fp32 master weights, no loss scale) against fp32 (O0), same seed:
    test accuracies within 0.5 percentage points."""
    pytest.importorskip("sklearn")
    pytest.importorskip("ml_dtypes")
    fp32, bf16 = _accuracy(model, "O0"), _accuracy(model, "O2", "bfloat16")
    assert abs(bf16 - fp32) <= 0.005, f"{model}: bf16 {bf16:.4f}, fp32 {fp32:.4f}"


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


def _learnable_mnist(count, seed):
    """MNIST-format files whose class shows as a bright square at its own place on noise."""
    rng = numpy.random.default_rng(seed)
    labels = rng.integers(0, 10, count).astype(numpy.uint8)
    images = rng.integers(0, 60, (count, 28, 28)).astype(numpy.uint8)
    for image, label in zip(images, labels):
        row, col = divmod(int(label), 5)
        image[4 + 12 * row:8 + 12 * row, 2 + 5 * col:6 + 5 * col] = 255
    return images, labels


def _learnable_cifar(count, seed):
    """CIFAR-10-format images whose class is their colour (crops and flips keep it)."""
    rng = numpy.random.default_rng(seed)
    palette = numpy.random.default_rng(99).integers(0, 256, (10, 3))
    labels = rng.integers(0, 10, count).astype(numpy.uint8)
    noise = rng.integers(-30, 30, (count, 32, 32, 3))
    images = numpy.clip(palette[labels][:, None, None, :] + noise, 0, 255).astype(numpy.uint8)
    return images, labels


def test_mnist_files_train_the_mlp(tmp_path):
    write_mnist(tmp_path, "train", *_learnable_mnist(400, 0))
    write_mnist(tmp_path, "test", *_learnable_mnist(100, 1), gz=True)
    accuracy = _example().run("mlp", epochs=2, mnist=str(tmp_path), progress=False,
                              verbose=False)
    assert accuracy >= 0.9


def test_cifar10_files_train_the_cnn_from_the_command_line(tmp_path, capsys):
    for i, name in enumerate([f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]):
        write(tmp_path / name, cifar_bytes(*_learnable_cifar(60, i)))
    results = _example().main(["--model", "cnn", "--epochs", "2", "--no-progress",
                               "--cifar10", str(tmp_path)])
    assert results["cnn"] >= 0.8
    assert "cnn (O0) on CIFAR-10: test accuracy" in capsys.readouterr().out


def test_mnist_and_cifar10_are_exclusive(tmp_path, capsys):
    with pytest.raises(SystemExit):
        _example().main(["--mnist", str(tmp_path), "--cifar10", str(tmp_path)])
    assert "not allowed with argument" in capsys.readouterr().err


def test_fp8_flag_trains_and_prints_the_tensor_report(capsys):
    pytest.importorskip("sklearn")
    results = _example().main(["--model", "mlp", "--epochs", "1", "--fp8", "current",
                               "--no-progress"])
    assert 0.5 < results["mlp"] <= 1
    out = capsys.readouterr().out
    assert "mlp (O0, FP8 current): test accuracy" in out
    assert "net.fc1.input" in out and "net.fc2.grad_output" in out and "float8_e5m2" in out


@pytest.mark.slow
def test_fp8_delayed_mlp_is_within_one_percent_of_fp32():
    pytest.importorskip("sklearn")
    example = _example()
    fp32 = example.run("mlp", progress=False, verbose=False)
    fp8 = example.run("mlp", progress=False, verbose=False, fp8_recipe="delayed")
    assert abs(fp8 - fp32) <= 0.01, f"FP8 delayed: {fp8:.4f} against fp32 {fp32:.4f}"
