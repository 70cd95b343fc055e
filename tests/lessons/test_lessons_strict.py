"""The lessons' code paths on the GPU: each lesson that trains or checks on the device runs in
quick mode on the strict device (``minigrad.testing.strict_device``, the context's device
"GPU"), where an implicit host conversion anywhere in minigrad or the lesson is a TypeError.
Lesson 1 (the fp16 number line) and lesson 7 (histograms of host arrays) compute on the host;
lesson 8 (THOR against Momentum and the exact curvature products) takes half a minute here and
is marked ``slow``."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO_ROOT

RUNNER = Path(__file__).with_name("strict_runner.py")
LESSONS = sorted((REPO_ROOT / "lessons").glob("0*.py"))
ON_DEVICE = {"02", "03", "04", "05", "06", "09"}
SLOW = {"08"}


def _cases():
    for path in LESSONS:
        number = path.name[:2]
        if number in ON_DEVICE:
            yield pytest.param(path, id=path.stem)
        elif number in SLOW:
            yield pytest.param(path, id=path.stem, marks=pytest.mark.slow)


@pytest.mark.parametrize("lesson", list(_cases()))
def test_lesson_runs_on_the_strict_device(lesson, tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("sklearn")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), MPLBACKEND="Agg",
               OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, str(RUNNER), str(lesson), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.strip().splitlines()[-1].startswith("host reads: ")
