"""``--device GPU`` of the examples, on the strict device everywhere and on a real GPU where
there is one: the training runs on the device and learns."""
import importlib.util

import pytest

from helpers import GPU_KINDS, REPO_ROOT, gpu_of

pytest.importorskip("sklearn")


def _example(name):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_train_digits_on_the_gpu(kind, capsys):
    with gpu_of(kind):
        results = _example("train_digits").main(["--model", "mlp", "--epochs", "2",
                                                 "--amp-level", "O2", "--no-progress",
                                                 "--device", "gpu"])
    assert results["mlp"] > 0.8
    assert "mlp (O2): test accuracy" in capsys.readouterr().out


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_train_thor_on_the_gpu(kind):
    with gpu_of(kind):
        results = _example("train_thor").main(["--target", "0.3", "--max-steps", "60",
                                               "--device", "GPU"])
    assert results["THOR"]["accuracy"] > 0.5
