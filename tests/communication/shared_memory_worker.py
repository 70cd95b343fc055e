"""The shared-memory all-reduce on real ranks, for ``test_shared_memory.py``.

    mpirun -np N python shared_memory_worker.py OUT_DIR          # OUT_DIR/rank{r}.pkl
    mpirun -np 2 python shared_memory_worker.py OUT_DIR nowindow # no window can be mapped

``all``: ``all_reduce_`` of shared rows against MPI's ``Allreduce`` per (dtype, size, op), inf
+ -inf, a size that differs across ranks, and a training cell trained on across ``release()``
and a new ``init()``. ``nowindow``: Open MPI's shared-memory directory does not exist, so no
window can be mapped and the first step ends the job.
"""
import os
import pickle
import sys
import warnings

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_worker  # noqa: E402 - the data, the network and the batches of the other MPI tests

import minigrad  # noqa: E402
from minigrad import communication, nn  # noqa: E402
from minigrad.communication import shared_memory  # noqa: E402

SIZES = (1, 17, 1000)  # 17 float32: 16 columns (a cache line) for rank 0, the rest for rank 1


def run_ops(rank):
    group = communication.management.current()
    out = {}
    for dtype in (numpy.float32, numpy.float64):
        for size in SIZES:
            values = numpy.random.default_rng(rank).standard_normal(size).astype(dtype)
            row = communication.all_reduce_buffer(size, dtype)
            out[dtype.__name__, size, "in window"] = shared_memory.rows_of(group, row) is not None
            for op in communication.REDUCE_OPS:
                row[...] = values
                assert communication.all_reduce_(row, op) is row
                out[dtype.__name__, size, op] = row.copy(), communication.all_reduce(values, op)
    row = communication.all_reduce_buffer(2, numpy.float32)
    row[...] = [numpy.inf if rank == 0 else -numpy.inf, 1.0]  # an overflowed step's gradients
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out["inf"] = communication.all_reduce_(row, "mean").copy(), len(caught)
    try:
        communication.all_reduce_buffer(10 + rank, numpy.float32)
    except ValueError as error:
        out["mismatch"] = str(error)
    return out


def run_training(rank, size, across_release):
    """The fp32 cell of ``mpi_worker.run_fp32_cell``; with ``across_release`` the group is
    released and joined again after the first step, and the first step's bucket is read after
    that."""
    minigrad.set_seed(mpi_worker.SEED + rank)
    net = mpi_worker.MLP()
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, mpi_worker.loss_fn()), opt)
    out = {}
    for step, (x, y) in enumerate(mpi_worker.batches(rank, size, mpi_worker.BATCH)):
        train(x, y)
        if across_release and step == 0:
            first = train.grad_reducer.buckets[0].buffer
            kept = first.copy()
            communication.release()
            communication.init()
            out["first_bucket_readable"] = bool(numpy.array_equal(first, kept))
    bucket = train.grad_reducer.buckets[0].buffer
    out["in window"] = shared_memory.rows_of(communication.management.current(),
                                             bucket) is not None
    out["params"] = mpi_worker.params(net)
    return out


def main(out_dir, what="all"):
    if what == "nowindow":
        os.environ["OMPI_MCA_osc_sm_backing_directory"] = os.path.join(out_dir, "missing")
    communication.init()
    rank, size = communication.get_rank(), communication.get_group_size()
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    if what == "nowindow":
        run_training(rank, size, False)  # raises at the first step: the job ends
        return
    out = {"ops": run_ops(rank), "training": run_training(rank, size, False),
           "across_release": run_training(rank, size, True)}
    out["size"] = size
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(out, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
