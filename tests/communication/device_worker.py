"""Data parallel with device arrays, run by every rank under ``mpirun``:

    mpirun -np 2 python device_worker.py OUT_DIR strict   # the strict device on every rank:
                                                          # MPI stages the buckets through host
    mpirun -np 1 python device_worker.py OUT_DIR nccl     # a real GPU: NCCL on a group of one

Each rank writes ``OUT_DIR/<mode><rank>.pkl``: its parameters after the steps, the host reads
of each step, and (nccl) the collectives' results.
"""
import os
import pickle
import sys

import numpy

import minigrad
from minigrad import Tensor, amp, communication, nn

STEPS, BATCH = 3, 8


def train(rank, size, reads=None):
    """A loss-scaled data-parallel step on the GPU, STEPS times; the parameters on the host and
    the host reads of each step (when ``reads`` counts them)."""
    minigrad.set_context(device_target="GPU")
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    minigrad.set_seed(7 + rank)  # the optimizer's broadcast of rank 0's values aligns the ranks
    net = nn.SequentialCell([nn.Dense(6, 16), nn.ReLU(), nn.Dense(16, 3)])
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    manager = amp.DynamicLossScaleManager(2.0 ** 10, 2, 100)
    step = amp.build_train_network(net, opt, loss, level="O2", loss_scale_manager=manager)
    assert isinstance(step.grad_reducer, nn.DistributedGradReducer)
    rng = numpy.random.default_rng(rank)
    per_step = []
    for _ in range(STEPS):
        x = Tensor(rng.standard_normal((BATCH, 6)).astype(numpy.float32))
        y = Tensor(rng.integers(0, 3, BATCH).astype(numpy.int32))
        if reads is not None:
            reads.reset()
        step(x, y)
        per_step.append(None if reads is None else list(reads.sites))
    return {p.name: p.asnumpy() for p in net.trainable_params()}, per_step


def nccl_collectives():
    """NCCL's own all-reduce and broadcast on a group of one (``communication.all_reduce``
    returns a group of one's input without a collective, so the binding is called directly)."""
    from minigrad.backend import cupy
    from minigrad.communication import _nccl, management
    group = management.current()
    out = {}
    for name in _nccl._TYPES:
        x = cupy.arange(5).astype(name)
        _nccl.all_reduce_(group, x, "sum")
        _nccl.broadcast_(group, x, 0)
        cupy.cuda.get_current_stream().synchronize()
        out[name] = cupy.asnumpy(x).tolist()
    out["all_reduce"] = communication.all_reduce(cupy.asarray([1.0, 10.0])).get().tolist()
    return out


def main(out_dir, mode):
    if mode == "strict":
        from minigrad.testing.strict_device import strict_device
        communication.init("mpi")
        with strict_device() as reads:
            result = {"params": None, "reads": None}
            result["params"], result["reads"] = train(communication.get_rank(),
                                                      communication.get_group_size(), reads)
    else:
        communication.init("nccl")
        result = {"collectives": nccl_collectives()}
        result["params"], _ = train(communication.get_rank(), communication.get_group_size())
        minigrad.reset_auto_parallel_context()
        result["alone"], _ = train(0, 1)
    rank = communication.get_rank()
    with open(os.path.join(out_dir, f"{mode}{rank}.pkl"), "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
