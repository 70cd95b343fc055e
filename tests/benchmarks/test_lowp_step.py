"""``benchmarks/lowp_step.py``: every format's step runs, learns and keeps its dtypes."""
import sys

import numpy
import pytest

from helpers import REPO_ROOT  # noqa: I001  (before the benchmark import it enables)

pytest.importorskip("ml_dtypes")
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import lowp_step  # noqa: E402
import mlp_step  # noqa: E402


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(mlp_step, "SIZES", (12, 8, 8, 3))
    monkeypatch.setattr(mlp_step, "BATCH", 16)


@pytest.mark.parametrize("mode", lowp_step.MODES)
@pytest.mark.parametrize("name", ["mlp", "digits"])
def test_each_format_steps_and_lowers_the_loss(small, name, mode):
    step = lowp_step.minigrad_step(name, mode)
    first = _loss(step())
    for _ in range(15):
        last = _loss(step())
    assert numpy.isfinite(first) and numpy.isfinite(last)
    assert last < first, (name, mode, first, last)


def _loss(out):
    loss = out[0] if isinstance(out, tuple) else out
    return float(loss.asnumpy())


def test_torch_rows_use_the_same_net_and_formats(small):
    torch = pytest.importorskip("torch")
    for bf16 in (False, True):
        step = lowp_step.torch_step(torch, "mlp", bf16)
        first = step().item()
        for _ in range(15):
            last = step().item()
        assert last < first
