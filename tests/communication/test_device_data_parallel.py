"""Data parallel with device arrays. On every machine: 2 MPI ranks on the strict device
(``minigrad.testing.strict_device``), whose buckets MPI stages through the host: the ranks stay
bit-identical, and a loss-scaled step reads the device twice (the one gradient bucket staged to
the host for MPI, and the overflow flag). On a GPU: a group of one over NCCL through CuPy
(``cupy.cuda.nccl``), its collectives and a data-parallel step equal to one process's.

What one GPU cannot test: NCCL across two or more GPUs (``test_cupy_arrays_on_two_ranks`` in
``test_data_parallel.py`` runs it where there are two), and NCCL's speed against MPI staging."""
import pickle
from pathlib import Path

import numpy
import pytest

from helpers import NO_GPU
from helpers.mpi import launch

WORKER = Path(__file__).with_name("device_worker.py")
READS_PER_STEP_STAGED = 2  # one per gradient bucket (one here), then the overflow flag


def _results(tmp_path, mode, ranks):
    returncode, output = launch(WORKER, tmp_path, mode, timeout=120, ranks=ranks)
    assert returncode == 0, output
    out = []
    for rank in range(ranks):
        with open(tmp_path / f"{mode}{rank}.pkl", "rb") as f:
            out.append(pickle.load(f))
    return out


def test_mpi_stages_device_buckets_through_the_host(tmp_path):
    ranks = _results(tmp_path, "strict", 2)
    for name, value in ranks[0]["params"].items():
        numpy.testing.assert_array_equal(ranks[1]["params"][name], value)
    for rank in ranks:
        for sites in rank["reads"]:
            assert len(sites) == READS_PER_STEP_STAGED, sites
            assert sites[0].startswith("communication/collectives.py")


@pytest.mark.gpu
@NO_GPU
def test_nccl_on_a_group_of_one(tmp_path):
    from minigrad.communication import _nccl
    if _nccl._module() is None:
        pytest.skip("CuPy has no NCCL (cupy.cuda.nccl.available is False)")
    (rank,) = _results(tmp_path, "nccl", 1)
    collectives = rank["collectives"]
    for name in _nccl._TYPES:
        assert collectives[name] == list(range(5)), name
    assert collectives["all_reduce"] == [1.0, 10.0]
    for name, value in rank["alone"].items():
        numpy.testing.assert_array_equal(rank["params"][name], value)
