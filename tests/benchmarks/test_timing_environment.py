"""Every benchmark's JSON records the load average and the BLAS library and thread count, and
warns on a busy machine; ``amp_step.py`` runs PyTorch from the current interpreter when it can."""
import json
import os
import sys

import pytest

from helpers import REPO_ROOT  # noqa: I001  (before the benchmark imports it enables)

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import _timing  # noqa: E402
import amp_step  # noqa: E402

TIMED = ["amp_step.py", "fastcast.py", "mlp_step.py", "overhead.py"]


def test_written_json_records_load_and_blas(tmp_path):
    _timing.warn_if_busy()
    path = tmp_path / "x.json"
    _timing.write_json(str(path), {"rows": []})
    machine = json.loads(path.read_text())["machine"]
    assert len(machine["load_average_start"]) == 3 and len(machine["load_average_end"]) == 3
    assert isinstance(machine["busy"], bool)
    blas = machine["blas"]
    pytest.importorskip("threadpoolctl")
    assert blas["source"].startswith("threadpoolctl")
    assert blas["blas"] and all(isinstance(p["num_threads"], int) for p in blas["blas"])


def test_a_busy_machine_is_warned_about(monkeypatch, capsys):
    monkeypatch.setattr(os, "getloadavg", lambda: (64.0, 10.0, 1.0))
    assert _timing.warn_if_busy() is True
    assert "warning: load average 64.0" in capsys.readouterr().err
    assert _timing.machine()["busy"] is True
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert _timing.warn_if_busy() is False and capsys.readouterr().err == ""


@pytest.mark.parametrize("script", TIMED)
def test_every_timed_benchmark_warns_and_writes_through_the_shared_helper(script):
    text = (REPO_ROOT / "benchmarks" / script).read_text()
    assert "_timing.warn_if_busy()" in text
    assert "_timing.write_json(" in text and "json.dump(" not in text


def test_amp_step_runs_pytorch_from_this_interpreter_when_torch_imports(monkeypatch, tmp_path):
    monkeypatch.setattr(_timing, "optional_torch", lambda: object())
    assert amp_step.torch_interpreter() == sys.executable
    monkeypatch.setattr(_timing, "optional_torch", lambda: None)
    monkeypatch.delenv("MINIGRAD_TORCH_PYTHON", raising=False)
    assert amp_step.torch_interpreter() is None
    assert "not run" in amp_step.torch_results(1)["torch"]
    other = tmp_path / "python"
    other.write_text("")
    monkeypatch.setenv("MINIGRAD_TORCH_PYTHON", str(other))
    assert amp_step.torch_interpreter() == str(other)
