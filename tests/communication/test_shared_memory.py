"""``communication.shared_memory``: gradient buckets all-reduced in memory the ranks share, on 2
and 3 real MPI ranks (``shared_memory_worker.py``), and the checks of ``all_reduce_buffer``."""
import pickle
import time
from pathlib import Path

import numpy
import pytest

import minigrad
from helpers.mpi import launch
from minigrad import communication

WORKER = Path(__file__).with_name("shared_memory_worker.py")
OPS = ("sum", "mean", "max", "min", "prod")
SIZES = (1, 17, 1000)


def run(tmp_path, ranks, *args):
    returncode, output = launch(WORKER, tmp_path, *args, timeout=120, ranks=ranks)
    assert returncode == 0, output
    results = []
    for rank in range(ranks):
        with open(tmp_path / f"rank{rank}.pkl", "rb") as f:
            results.append(pickle.load(f))
    return results, output


@pytest.fixture(scope="module", params=[2, 3], ids=["2 ranks", "3 ranks"])
def ranks(request, tmp_path_factory):
    return run(tmp_path_factory.mktemp("shared"), request.param)[0]


def same_bits(a, b):
    return a.dtype == b.dtype and numpy.array_equal(a.view(numpy.uint8), b.view(numpy.uint8))


def test_every_op_gives_every_rank_the_same_bits_as_mpi_would_within_rounding(ranks):
    two = len(ranks) == 2
    for r in ranks:
        assert r["size"] == len(ranks)
        for dtype in ("float32", "float64"):
            for size in SIZES:
                assert r["ops"][dtype, size, "in window"]
                for op in OPS:
                    got, mpi = r["ops"][dtype, size, op]
                    assert same_bits(got, ranks[0]["ops"][dtype, size, op][0])  # every rank
                    if two or op in ("max", "min"):  # a + b is one sum in any order
                        assert same_bits(got, mpi), (dtype, size, op)
                    else:  # three terms of size ~1: MPI may combine them in another order
                        eps = numpy.finfo(dtype).eps
                        numpy.testing.assert_allclose(got, mpi, rtol=4 * eps, atol=16 * eps)


def test_inf_plus_minus_inf_is_a_quiet_nan_and_mismatched_sizes_are_refused(ranks):
    for r in ranks:
        values, warned = r["ops"]["inf"]
        # quiet: the overflow check reports it, not NumPy
        assert numpy.isnan(values[0]) and values[1] == 1.0 and warned == 0
        asked = ", ".join(f"({10 + k}, '<f4')" for k in range(len(ranks)))
        assert f"ranks ask for different buffers (size, dtype) [{asked}]" in r["ops"]["mismatch"]


def test_training_across_release_and_init_makes_new_windows_and_keeps_the_old_readable(ranks):
    for r in ranks:
        assert r["training"]["in window"] and r["across_release"]["in window"]
        assert r["across_release"]["first_bucket_readable"]
        for name, value in r["across_release"]["params"].items():
            assert same_bits(value, ranks[0]["training"]["params"][name]), name


def test_without_a_window_the_job_ends_with_a_message_that_names_the_switch(tmp_path):
    start = time.monotonic()
    returncode, output = launch(WORKER, tmp_path, "nowindow", timeout=60)
    assert returncode != 0 and time.monotonic() - start < 60
    assert "RuntimeError: all_reduce_buffer: no shared window of " in output
    assert "set_auto_parallel_context(all_reduce_shared_memory=False)" in output
    assert "aborting the MPI job" in output


def test_all_reduce_buffer_checks_its_arguments():
    minigrad.reset_auto_parallel_context()
    # check_dtype's rule: not a dtype at all is a TypeError, a dtype (or a name) other than
    # NumPy's bool, int, uint and float ones a ValueError
    for dtype, error in ((None, TypeError), (object, TypeError), ("no such dtype", ValueError),
                         (numpy.str_, ValueError), (numpy.complex64, ValueError)):
        with pytest.raises(error, match=r"all_reduce_buffer: dtype must be one of \['bool', "
                                        r"'int8', .*'float64'\].*, got "):
            communication.all_reduce_buffer(3, dtype)
    with pytest.raises(TypeError, match="all_reduce_buffer: shared must be a bool, got 'yes'"):
        communication.all_reduce_buffer(3, numpy.float32, shared="yes")
    assert communication.all_reduce_buffer(3, numpy.int8, shared=True).dtype == numpy.int8
