"""Data-parallel training on 2 real MPI ranks (``mpirun -np 2``, ``mpi_worker.py``).

One launch runs every training scenario (the ranks' results are pickled); each test compares
the two ranks bit for bit, and the ranks with one process that trains on the global batch.
Two more launches check that a failing rank, or a model that differs across ranks, ends the job.
"""
import importlib.util
import pickle
import time
from pathlib import Path

import numpy
import pytest

import minigrad
from helpers import NO_GPU
from helpers.mpi import launch
from minigrad import backend

WORKER = Path(__file__).with_name("mpi_worker.py")
_spec = importlib.util.spec_from_file_location("mpi_worker", WORKER)
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)

FACES = ("cell", "grad_scaler", "tf")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """The two ranks' results of every scenario."""
    out = tmp_path_factory.mktemp("mpi")
    returncode, output = launch(WORKER, out, timeout=120)
    assert returncode == 0, output
    results = []
    for rank in range(2):
        with open(out / f"rank{rank}.pkl", "rb") as f:
            results.append(pickle.load(f))
    results[0]["output"] = output  # both ranks' stdout and stderr, as mpirun forwards them
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
        if minigrad.dtype.HAS_LOWP:  # in float32 and back: [1, 3] and [2, 6] average exactly
            assert got["bf16_mean"].dtype == minigrad.dtype.bfloat16
            assert got["bf16_mean"].tolist() == [1.5, 4.5]
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


def test_thor_bit_identical_and_matches_one_process(ranks, reference):
    if ranks[0]["thor"] is None:
        pytest.skip("nn.thor is not in this minigrad")
    assert_bit_identical(ranks[0]["thor"]["params"], ranks[1]["thor"]["params"])
    assert_close(ranks[0]["thor"]["params"], reference["thor"]["params"], 1e-5, 1e-6)
    # the gradients' one bucket every step; on the refresh steps (1 and 3, frequency 2) one
    # all-reduce more per split_indices group of factors ([0, 1]: a group per layer)
    assert ranks[0]["thor"]["allreduce_per_step"] == [1 + 2, 1, 1 + 2, 1]
    # every rank inverts both layers at both refreshes
    assert [r["thor"]["inverted"] for r in ranks] == [[["fc1.weight", "fc2.weight"]] * 2] * 2


def test_thor_with_distributed_inversion_shares_the_layers_and_gives_the_same_step(ranks,
                                                                                  reference):
    if ranks[0]["thor_shared"] is None:
        pytest.skip("nn.thor is not in this minigrad")
    shared = [r["thor_shared"] for r in ranks]
    # fc1's blocks (6 + 8 wide) cost more than fc2's (8 + 3): rank 0 inverts fc1, rank 1 fc2
    assert [s["inverted"] for s in shared] == [[["fc1.weight"]] * 2, [["fc2.weight"]] * 2]
    assert_bit_identical(shared[0]["params"], shared[1]["params"])
    assert_bit_identical(shared[0]["params"], ranks[0]["thor"]["params"])
    assert_close(shared[0]["params"], reference["thor_shared"]["params"], 1e-5, 1e-6)


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


@pytest.mark.parametrize("cell", ["plain", "overlapped", "scaled", "plain_mpi", "scaled_mpi"])
def test_one_all_reduce_per_bucket(ranks, cell):
    counts = ranks[0]["counts"][cell]
    assert counts["buckets"] > 1  # the small bucket size splits the model
    flag = 1 if cell.startswith("scaled") else 0  # the loss-scaled step all-reduces its flag too
    assert counts["per_step"] == [counts["buckets"] + flag] * worker.STEPS
    # on one machine the buckets are reduced in shared memory, unless overlapped or switched off
    in_shared_memory = cell in ("plain", "scaled")
    assert counts["shared"] == [counts["buckets"] if in_shared_memory else 0] * worker.STEPS
    for name in ("per_step", "started", "shared", "reported_at_start", "buckets"):
        assert ranks[1]["counts"][cell][name] == counts[name]


@pytest.mark.parametrize("cell", ["plain", "scaled"])
def test_shared_memory_and_mpi_all_reduces_give_the_same_training(ranks, cell):
    # two ranks: a + b is the same sum whichever rank adds it, so the paths agree bit for bit
    counts = ranks[0]["counts"]
    assert_bit_identical(counts[cell]["params"], counts[f"{cell}_mpi"]["params"])
    assert_bit_identical(counts[cell]["params"], ranks[1]["counts"][cell]["params"])


def test_overlapped_all_reduces_start_during_backward_and_give_the_same_step(ranks):
    plain, overlapped = ranks[0]["counts"]["plain"], ranks[0]["counts"]["overlapped"]
    # overlap=True: every bucket but the last starts while backward has not made every gradient
    assert overlapped["started"] == [overlapped["buckets"] - 1] * worker.STEPS
    assert overlapped["reported_at_start"] and all(
        0 < n < overlapped["n_params"] for n in overlapped["reported_at_start"])
    # the default: every bucket reduced by a blocking all-reduce after backward
    assert plain["started"] == [0] * worker.STEPS and plain["reported_at_start"] == []
    assert_bit_identical(plain["params"], overlapped["params"])
    assert_bit_identical(overlapped["params"], ranks[1]["counts"]["overlapped"]["params"])
    minigrad.reset_auto_parallel_context()
    one = worker.run_counts(0, 1, 2 * worker.BATCH, worker.BUCKET_MB)["plain"]  # global batch
    assert_close(plain["params"], one["params"], rtol=1e-5, atol=1e-6)


def test_an_unreported_first_bucket_is_started_after_backward_in_bucket_order(ranks):
    # fc3 (never called) holds the last parameters, so it is in the first bucket: that bucket
    # never fills during backward, so none starts before backward ends; then it starts (fc3 as
    # zeros) and the last bucket is reduced at once
    unused = ranks[0]["counts"]["overlapped_unused"]
    assert unused["buckets"] == 2
    assert unused["started"] == [1] * worker.STEPS
    assert unused["reported_at_start"] == [unused["n_params"] - 2] * worker.STEPS
    plain = ranks[0]["counts"]["plain"]["params"]
    assert_bit_identical({k: v for k, v in unused["params"].items() if "fc3" not in k}, plain)
    assert_bit_identical(unused["params"], ranks[1]["counts"]["overlapped_unused"]["params"])


def test_a_raising_rank_ends_the_job_with_its_message():
    start = time.monotonic()
    returncode, output = launch(WORKER, "unused", "fail", timeout=60)
    assert time.monotonic() - start < 60
    assert returncode != 0
    assert "[minigrad rank 1 of 2] Traceback" in output
    assert "ValueError: rank 1 fails on purpose at step 2" in output


def test_a_model_that_differs_across_ranks_is_refused_at_start():
    returncode, output = launch(WORKER, "unused", "mismatch", timeout=60)
    assert returncode != 0
    assert ("data parallel: the model differs across ranks at parameter 0: rank 0 has "
            "'fc1.weight' of shape (8, 6) and dtype float32, rank 1 has 'fc1.weight' of shape "
            "(9, 6)") in output


def test_shuffled_shards_are_disjoint_and_cover_the_data(ranks):
    # the ranks were seeded differently; rank 0's shuffle seed is broadcast to both
    shards = [r["callbacks"]["shuffled"] for r in ranks]
    assert len(shards[0]) == len(shards[1]) == 5
    assert sorted(shards[0] + shards[1]) == list(range(10))


def test_logs_and_checkpoints_are_written_by_rank_zero_unless_asked(ranks):
    steps = worker.STEPS  # 64 rows, 32 per rank, batches of 8
    assert ranks[0]["output"].count("epoch: 1 step: ") == steps  # LossMonitor(1): rank 0 only
    assert ranks[0]["callbacks"]["shared"] == [f"net-1_{s}.ckpt" for s in range(2, steps + 1, 2)]
    assert ranks[1]["callbacks"]["shared"] == ranks[0]["callbacks"]["shared"]
    for r in ranks:  # the callback asked to run on every rank wrote into each rank's directory
        assert r["callbacks"]["own"] == [f"own-1_{s}.ckpt" for s in range(2, steps + 1, 2)]


def test_every_rank_loads_the_checkpoint(ranks):
    for r in ranks:
        assert_bit_identical(r["callbacks"]["loaded"], ranks[0]["callbacks"]["params"])


@pytest.mark.gpu
@NO_GPU
@pytest.mark.parametrize("backend_name", ["mpi", "nccl"])
def test_cupy_arrays_on_two_ranks(tmp_path, backend_name):
    if backend_name == "nccl" and backend.cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("NCCL needs a GPU per rank (2 GPUs)")
    returncode, output = launch(WORKER, tmp_path, "gpu", backend_name, timeout=120)
    assert returncode == 0, output
    ranks = []
    for rank in range(2):
        with open(tmp_path / f"gpu{backend_name}{rank}.pkl", "rb") as f:
            ranks.append(pickle.load(f))
    for r in ranks:
        assert r["sum"].tolist() == [3.0, 30.0]
        assert r["broadcast"].tolist() == [2.0, 20.0]
    assert_bit_identical(ranks[0]["params"], ranks[1]["params"])
