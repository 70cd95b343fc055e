"""``benchmarks/gpu_suite.sh`` on a machine without a GPU: it stops at its preflight with one
clear line and a suite.json that says why; and, driven by a stand-in interpreter, it runs every
step even when one fails or hangs past its cap, and records each outcome."""
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from helpers import REPO_ROOT
from minigrad import backend

SUITE = REPO_ROOT / "benchmarks" / "gpu_suite.sh"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and timeout")

# A stand-in for python3: the preflight compiles, the tests hang, the overflow benchmark fails,
# the other benchmarks pass; everything else (the report summariser) is the real interpreter.
STAND_IN = """#!/usr/bin/env bash
case "$*" in
    "-m minigrad.bench kernels"*) echo "kernel table"; exit 0 ;;
    "-m pytest"*) exec sleep 60 ;;
    "-m minigrad.bench overflow"*) echo "overflow: WRONG RESULT: stand-in" >&2; exit 1 ;;
    "-c import pytest_timeout") exit 0 ;;
    *benchmarks/*.py*) echo "ran $*"; exit 0 ;;
esac
exec {python} "$@"
"""


def run_suite(out, python, **env):
    return subprocess.run(["bash", str(SUITE), str(out)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHON": python, **env})


@pytest.mark.skipif(backend.CUDA_AVAILABLE, reason="a GPU is here: the suite would run whole")
def test_without_a_gpu_it_stops_at_the_preflight_with_one_line(tmp_path):
    result = run_suite(tmp_path, sys.executable)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("gpu_suite:")]
    assert lines == [f"gpu_suite: stopped before the tests: compiling through CuPy needs CuPy "
                     f"and a GPU: {backend.CUPY_IMPORT_ERROR}"]
    summary = json.loads((tmp_path / "suite.json").read_text())
    assert summary["steps"] == [] and "needs CuPy and a GPU" in summary["error"]
    assert (tmp_path / "kernels.log").exists() and (tmp_path / "nvidia_smi.txt").exists()


def test_every_step_runs_and_is_recorded_when_one_fails_and_one_hangs(tmp_path):
    python = tmp_path / "python"
    python.write_text(STAND_IN.format(python=sys.executable))
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "out"
    result = run_suite(out, str(python), TEST_CAP="6", BENCH_CAP="20", OVERFLOW_CAP="20")
    assert result.returncode == 1, result.stderr
    summary = json.loads((out / "suite.json").read_text())
    steps = {step["step"]: step for step in summary["steps"]}
    assert steps["gpu_tests"]["exit_code"] == 124 and steps["gpu_tests"]["note"] == "timed out"
    assert steps["gpu_tests"]["seconds"] < 30  # stopped at its cap
    assert steps["overflow"]["exit_code"] == 1
    others = [name for name in steps if name not in ("gpu_tests", "overflow")]
    discovered = [p.stem for p in sorted((REPO_ROOT / "benchmarks").glob("*.py"))
                  if '"--device"' in p.read_text()]
    conv_nets = ["gpu_step_vgg", "gpu_step_resnet8"]  # gpu_step.py on cnn_step.py's nets
    assert others == discovered + conv_nets and all(steps[n]["exit_code"] == 0 for n in others)
    assert "--net vgg" in (out / "gpu_step_vgg.log").read_text()
    assert "overflow: WRONG RESULT: stand-in" in (out / "overflow.log").read_text()
    assert "no pytest report" in (out / "gpu_tests.json").read_text()
    assert (out / "kernels.log").read_text().startswith("kernel table")


def test_the_per_test_timeout_outlasts_the_two_rank_tests():
    text = SUITE.read_text()
    per_test = int(text.split("PER_TEST=${PER_TEST:-")[1].split("}")[0])
    assert per_test > 120  # tests/communication give their two ranks 120 s
    budget = int(text.split("BUDGET=${BUDGET:-")[1].split("}")[0])
    assert budget < 8 * 60  # the whole suite, with room for a rerun in a device loan
