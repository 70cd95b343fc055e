"""Data-parallel training step on 2 MPI ranks: minigrad vs PyTorch DDP (gloo), and the
all-reduce against a plain mpi4py Allreduce of the same buffer.

The 784-512-512-10 MLP (ReLU, softmax cross-entropy, SGD), fp32, batch 128 per rank, one BLAS
thread per rank. In one ``mpirun`` job, each rank builds both trainings and times them in
interleaved rounds (machine noise hits both alike):

* minigrad: ``TrainOneStepCell`` in data-parallel mode (gradients averaged by
  ``nn.DistributedGradReducer``, one all-reduce per bucket, after backward; the buckets in
  memory the ranks share, the default on one machine), the same with MPI's ``Allreduce``
  (``all_reduce_shared_memory=False``), the same with the reducer's ``overlap=True`` (DDP's
  1 MiB first bucket, its all-reduce started during backward), and, for the compute alone, the
  same step stand-alone (no all-reduce);
* PyTorch ``DistributedDataParallel`` on the gloo backend (2 processes, same model and batch)
  and, for its compute alone, the same PyTorch step without DDP;
* ``mpi4py`` ``Allreduce`` of one float32 buffer of the gradients' size: the limit of an
  all-reduce by MPI messages; and ``communication.all_reduce_`` of a shared row of that size
  (``all_reduce_buffer``) alone.

    python benchmarks/parallel.py [--quick] [--thor] [--bind core] [--json FILE]

It starts ``mpirun -np 2`` itself (``--ranks``; as root with ``--allow-run-as-root``), with the
Python running it: use one with mpi4py (``pip install ".[mpi]"``) and, for the peer, PyTorch
(``pip install torch==2.13.0``); without PyTorch it says so and times minigrad alone.

Goals: the all-reduce share of minigrad's step <= 10%; minigrad's step / DDP's step <= 1.0.
The share is the time each rank's step is blocked in all-reduce calls (a shared-memory
reduction, a blocking ``Allreduce``, starting an ``Iallreduce``, testing or waiting for it),
over its step time, averaged over the ranks (``..._max_over_ranks`` and ``..._per_rank`` beside
it); it includes the wait for the slower rank.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import _timing  # noqa: E402
import mlp_step  # noqa: E402 - the same MLP, batch and data as the one-process step benchmark

SIZES, BATCH, LR = mlp_step.SIZES, mlp_step.BATCH, mlp_step.LR  # batch per rank
STEP, OVERLAP = "minigrad 2-rank step", "minigrad 2-rank step, overlap=True"
VIA_MPI = "minigrad 2-rank step, MPI Allreduce"
IN_STEP = "all-reduce inside the minigrad step"  # time blocked in it
IN_OVERLAP = "all-reduce inside the overlap=True step"
IN_VIA_MPI = "all-reduce inside the MPI Allreduce step"
IN = {STEP: IN_STEP, OVERLAP: IN_OVERLAP, VIA_MPI: IN_VIA_MPI}
SHARED_ALONE = "shared-memory all-reduce (same bytes)"
THOR_EVERY = "THOR 2-rank refresh + reuse steps, every rank inverts"
THOR_SHARED = "THOR 2-rank refresh + reuse steps, distributed_inversion"
INV_EVERY, INV_SHARED = "THOR inversion, every rank", "THOR inversion, distributed_inversion"
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


# ---- the driver: start the ranks --------------------------------------------------------------
def launch(args):
    mpirun = os.path.join(os.path.dirname(sys.executable), "mpirun")
    if not os.path.exists(mpirun):
        raise SystemExit(f"no mpirun beside {sys.executable}: pip install '.[mpi]'")
    env = dict(os.environ, **{name: "1" for name in THREAD_VARS})
    if args.spin:  # Open MPI's default; minigrad's init() otherwise sets 1 (yield while waiting)
        env["OMPI_MCA_mpi_yield_when_idle"] = "0"
    command = [mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", args.bind,
               "-np", str(args.ranks), sys.executable, os.path.abspath(__file__),
               "--rank-worker"] + sys.argv[1:]
    return subprocess.call(command, env=env)


# ---- on every rank -----------------------------------------------------------------------------
def thor_steps(x, y, weights):
    """Two closures, each running a THOR refresh step and a reuse step (frequency 2) in
    data-parallel mode: every rank inverting every layer, and the inversions shared out
    (``distributed_inversion``); with THOR's seconds of inversion, per closure."""
    import numpy

    import minigrad
    from minigrad import nn

    def thor(net):
        return nn.thor(net, minigrad.Tensor(numpy.float32(LR)),
                       minigrad.Tensor(numpy.float32(0.03)), 0.9, frequency=2, batch_size=BATCH)
    steps, inversion = {}, {}
    for shared in (False, True):
        step, train = mlp_step.minigrad_train(x, y, weights, optimizer=thor)
        inversion[shared] = []

        def pair(step=step, opt=train.optimizer, shared=shared):
            # THOR reads the context at each step (its factor reduction and this choice)
            minigrad.set_auto_parallel_context(parallel_mode="data_parallel",
                                               distributed_inversion=shared)
            step()
            inversion[shared].append(opt.last_report.seconds["inverses"])
            step()
            minigrad.reset_auto_parallel_context()
        steps[shared] = pair
    return steps, inversion


def torch_ddp_step(torch, rank, size, port, x, y, weights):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=size)
    return mlp_step.torch_step(torch, x, y, weights,
                               wrap=torch.nn.parallel.DistributedDataParallel)


class TimedComm:
    """The group's communicator, with the seconds its caller is blocked in all-reduces counted:
    in ``Allreduce``, in starting an ``Iallreduce`` and in testing or waiting for its request
    (what a step spends in communication, whether or not it overlaps backward)."""

    def __init__(self, comm):
        self.comm, self.seconds, self.calls = comm, 0.0, 0

    def timed(self, fn, *args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def Allreduce(self, *args, **kwargs):
        self.calls += 1
        return self.timed(self.comm.Allreduce, *args, **kwargs)

    def Iallreduce(self, *args, **kwargs):
        self.calls += 1
        return TimedRequest(self.timed(self.comm.Iallreduce, *args, **kwargs), self)

    def __getattr__(self, name):
        return getattr(self.comm, name)


class TimedRequest:
    """A request of ``TimedComm.Iallreduce``: its ``Test`` and ``Wait`` are timed too."""

    def __init__(self, request, timer):
        self.request, self.timer = request, timer

    def Test(self):
        return self.timer.timed(self.request.Test)

    def Wait(self):
        return self.timer.timed(self.request.Wait)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(args):
    import numpy

    import minigrad
    from minigrad import communication, nn
    from minigrad.communication import shared_memory
    communication.init()
    rank, size = communication.get_rank(), communication.get_group_size()
    # each rank its own batch (and initial weights: the optimizer and DDP broadcast rank 0's)
    x, y, weights = mlp_step.data(seed=rank)
    local, _ = mlp_step.minigrad_train(x, y, weights)  # stand-alone: the compute of a step
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    parallel, train = mlp_step.minigrad_train(x, y, weights)
    overlapped, overlapped_train = mlp_step.minigrad_train(x, y, weights)
    overlapped_train.grad_reducer = nn.DistributedGradReducer(overlapped_train.weights,
                                                              overlap=True)
    minigrad.set_auto_parallel_context(all_reduce_shared_memory=False)
    via_mpi, _ = mlp_step.minigrad_train(x, y, weights)
    thor, inversion = thor_steps(x, y, weights) if args.thor else ({}, {})
    minigrad.reset_auto_parallel_context()
    reducer = train.grad_reducer
    n_bytes = sum(b.size * b.dtype.itemsize for b in reducer.buckets)
    buffer = numpy.ones(n_bytes // 4, numpy.float32)
    group = communication.management.current()
    mpi = group.MPI

    def plain_allreduce():
        group.comm.Allreduce(mpi.IN_PLACE, buffer, op=mpi.SUM)

    row = communication.all_reduce_buffer(buffer.size, numpy.float32)  # a shared row, same bytes
    row[...] = 1.0

    def shared_allreduce():
        communication.all_reduce_(row, "sum")

    steps = {"minigrad local step (no all-reduce)": local, STEP: parallel, VIA_MPI: via_mpi,
             OVERLAP: overlapped, "mpi4py Allreduce (same bytes)": plain_allreduce,
             SHARED_ALONE: shared_allreduce}
    if thor:
        steps[THOR_EVERY], steps[THOR_SHARED] = thor[False], thor[True]
    torch = None if args.no_torch else _timing.optional_torch()
    if torch is not None:
        torch.set_num_threads(1)
        port = communication.broadcast_object(free_port() if rank == 0 else None)
        steps[f"torch {torch.__version__} DDP gloo 2-rank step"] = torch_ddp_step(
            torch, rank, size, port, x, y, weights)
        steps["torch local step (no DDP)"] = mlp_step.torch_step(torch, x, y, weights)
    load_before = os.getloadavg()
    timed = group.comm = TimedComm(group.comm)
    reduce_in_shared_memory = shared_memory.SharedRows.reduce
    shared_memory.SharedRows.reduce = (  # a shared-memory all-reduce is timed as one too
        lambda rows, *args: timed.timed(reduce_in_shared_memory, rows, *args))
    # the step's own all-reduce seconds, read from the timed communicator per round
    samples = {name: [] for name in steps}
    in_step = {name: [] for name in IN}
    for fn in steps.values():
        fn()
    for _ in range(args.repeat):
        for name, fn in steps.items():
            communication.barrier()
            before = timed.seconds
            start = time.perf_counter()
            for _ in range(args.number):
                fn()
            samples[name].append((time.perf_counter() - start) / args.number)
            if name in in_step:
                in_step[name].append((timed.seconds - before) / args.number)
    group.comm = timed.comm
    shared_memory.SharedRows.reduce = reduce_in_shared_memory
    medians = {name: statistics.median(v) for name, v in samples.items()}
    for name, inside in IN.items():
        medians[inside] = statistics.median(in_step[name])
    for shared, name in ((False, INV_EVERY), (True, INV_SHARED)):
        if inversion:
            medians[name] = statistics.median(inversion[shared])
    every = communication.all_gather_object(medians)
    if rank == 0:
        report(args, every, n_bytes, (len(reducer.buckets),
                                      len(overlapped_train.grad_reducer.buckets)),
               load_before, torch)


def blas_info():
    """The BLAS libraries NumPy loaded (threadpoolctl), or why they are unknown."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    return threadpool_info()


def report(args, every, n_bytes, buckets, load_before, torch):
    buckets, n_overlap = buckets
    rank0 = every[0]
    step = rank0[STEP]
    ddp = next((v for k, v in rank0.items() if "DDP" in k), None)
    in_step = statistics.mean(r[IN_STEP] for r in every)  # blocked per step, over the ranks
    plain = rank0["mpi4py Allreduce (same bytes)"]
    # the share of each rank's step it spends blocked in all-reduces (the rank that ends its
    # backward first waits for the other inside them): averaged over the ranks, and the largest
    shares = [r[IN_STEP] / r[STEP] for r in every]
    shares_overlap = [r[IN_OVERLAP] / r[OVERLAP] for r in every]
    shares_mpi = [r[IN_VIA_MPI] / r[VIA_MPI] for r in every]
    rows = [{"what": name, "ms": seconds * 1e3,
             "ms_max_over_ranks": max(r[name] for r in every) * 1e3}
            for name, seconds in rank0.items()]
    _timing.print_table(rows, ["what", "ms", "ms_max_over_ranks"])
    ratios = {
        "allreduce_share_of_step": statistics.mean(shares),
        "allreduce_share_of_step_max_over_ranks": max(shares),
        "allreduce_share_of_step_per_rank": shares,
        "allreduce_share_overlap_true": statistics.mean(shares_overlap),
        "allreduce_share_mpi_allreduce": statistics.mean(shares_mpi),
        "mpi_allreduce_step_over_step": rank0[VIA_MPI] / step,
        "overlap_true_step_over_step": rank0[OVERLAP] / step, "buckets_overlap_true": n_overlap,
        "step_overhead_vs_local": step / rank0["minigrad local step (no all-reduce)"] - 1,
        "minigrad_step_over_ddp": step / ddp if ddp else None,
        "ddp_overhead_vs_local": ddp / rank0["torch local step (no DDP)"] - 1 if ddp else None,
        "bytes_per_step": n_bytes, "buckets_per_step": buckets,
        "allreduce_GBps_in_step": n_bytes / in_step / 1e9,
        "allreduce_GBps_plain_mpi4py": n_bytes / plain / 1e9,
        "allreduce_in_step_over_plain": in_step / plain,
        "shared_memory_allreduce_over_plain": rank0[SHARED_ALONE] / plain,
    }
    if THOR_EVERY in rank0:
        ratios["thor_steps_distributed_over_every_rank"] = rank0[THOR_SHARED] / rank0[THOR_EVERY]
        ratios["thor_inversion_distributed_over_every_rank"] = (rank0[INV_SHARED]
                                                                / rank0[INV_EVERY])
    for key, value in ratios.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    if torch is None:
        print("PyTorch not installed (or --no-torch): minigrad timed without the DDP peer "
              "(pip install torch==2.13.0)")
    if args.json:
        _timing.write_json(args.json, {
            "benchmark": "parallel", "sizes": SIZES, "batch_per_rank": BATCH,
            "ranks": len(every), "dtype": "float32", "rows": rows, "ratios": ratios,
            "repeat": args.repeat, "number": args.number,
            "load_average_before": load_before, "load_average_after": os.getloadavg(),
            "blas": blas_info(), "threads": {k: os.environ.get(k) for k in THREAD_VARS},
            "OMPI_MCA_mpi_yield_when_idle": os.environ.get("OMPI_MCA_mpi_yield_when_idle"),
            "bind_to": args.bind,
            "torch_threads": torch.get_num_threads() if torch is not None else None})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="write the results here (rank 0)")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=30, help="timed rounds (median reported)")
    parser.add_argument("--number", type=int, default=5, help="steps per round")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 2 steps")
    parser.add_argument("--no-torch", action="store_true", help="leave the PyTorch peer out")
    parser.add_argument("--thor", action="store_true",
                        help="also time THOR (frequency 2) with every rank inverting every "
                             "layer and with distributed_inversion")
    parser.add_argument("--spin", action="store_true",
                        help="ranks spin while waiting in MPI (Open MPI's default) instead of "
                             "yielding the CPU (what communication.init() asks for)")
    parser.add_argument("--bind", choices=("none", "core"), default="none",
                        help="mpirun --bind-to: none (default: the scheduler moves the ranks; "
                             "best beside other work) or core (a core per rank, for an idle "
                             "machine with a core per rank)")
    parser.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.repeat, args.number = 3, 2
    if not args.rank_worker:
        raise SystemExit(launch(args))
    measure(args)


if __name__ == "__main__":
    main()
