"""The training runs the MPI tests compare: run by every rank under ``mpirun -np 2`` (data
parallel, each rank its half of each global batch) and by the test process itself (one process,
the whole global batch) for the reference.

    mpirun -np 2 python mpi_worker.py OUT_DIR            # every scenario, OUT_DIR/rank{r}.pkl
    mpirun -np 2 python mpi_worker.py OUT_DIR fail       # rank 1 raises at its third step
    mpirun -np 2 python mpi_worker.py OUT_DIR mismatch   # rank 1 builds a different model
    mpirun -np 2 python mpi_worker.py OUT_DIR gpu        # CuPy arrays (host staging; NCCL too
                                                         # with a GPU per rank)

Each rank seeds its initialisation with its own seed: the reducer's broadcast of rank 0's
parameters is what makes the ranks start identical, and rank 0's seed is the reference's.
"""
import os
import pickle
import sys

import numpy

import minigrad
from minigrad import Tensor, communication, mixed_precision, nn
from minigrad.amp import GradScaler
from minigrad.communication import shared_memory
from minigrad.dataset import NumpySlicesDataset
from minigrad.train import CheckpointConfig, LossMonitor, ModelCheckpoint

STEPS, BATCH = 4, 8          # per-rank batch; the reference takes 2 * BATCH rows per step
SEED = 7                     # rank r initialises from SEED + r
POISON_STEP = 2              # the step whose gradients hold inf on the poisoned rank
BUCKET_MB = 512 / 2 ** 20    # 512-byte buckets: the 6-64-3 MLP of run_counts in two


def data(n=STEPS * 2 * BATCH, features=6, classes=3):
    rng = numpy.random.default_rng(0)
    return (rng.standard_normal((n, features)).astype(numpy.float32),
            rng.integers(0, classes, n).astype(numpy.int32))


class MLP(nn.Cell):
    """6-8-3; ``poison`` turns the gradient at the hidden layer into inf (an overflow that
    reaches every parameter below it, with a finite loss); ``unused``: a last layer the forward
    never calls (its parameters get no gradient)."""

    def __init__(self, hidden=8, unused=False):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Dense(6, hidden), nn.ReLU(), nn.Dense(hidden, 3)
        if unused:
            self.fc3 = nn.Dense(3, 3)
        self.poison = False

    def construct(self, x):
        h = self.fc1(x)
        if self.poison:
            h.register_hook(lambda g: g * numpy.float32(numpy.inf))
        return self.fc2(self.act(h))


def loss_fn():
    return nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")


def batches(rank, size, batch):
    """(x, y) of each step: rank ``rank``'s shard of the data (rows rank, rank + size, ...)."""
    x, y = data()
    ds = NumpySlicesDataset((x, y), shuffle=False, num_shards=size, shard_id=rank).batch(batch)
    return list(ds.create_tuple_iterator())[:STEPS]


def params(net):
    return {p.name: p.data.copy() for p in net.get_parameters()}


def report(r):
    return None if r is None else (r.skipped, r.reason, r.scale_before, r.scale_after,
                                   r.inf_params, r.nan_params)


def run_fp32_cell(rank, size, batch):
    minigrad.set_seed(SEED + rank)
    net = MLP()
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn()), opt)
    losses = [float(train(x, y).asnumpy()) for x, y in batches(rank, size, batch)]
    return {"params": params(net), "losses": losses}


def run_o2_model(rank, size, batch):
    minigrad.set_seed(SEED + rank)
    net = MLP()
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    manager = minigrad.DynamicLossScaleManager(init_loss_scale=2.0 ** 10, scale_window=2)
    model = minigrad.Model(net, loss_fn(), opt, amp_level="O2", loss_scale_manager=manager)
    x, y = data()
    ds = NumpySlicesDataset((x, y), shuffle=False, num_shards=size, shard_id=rank).batch(batch)
    model.train(1, ds)
    return {"params": params(net), "scale": manager.get_loss_scale()}


def run_cell_overflow(rank, size, batch, poison_rank):
    minigrad.set_seed(SEED + rank)
    net = MLP()
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    update = nn.DynamicLossScaleUpdateCell(2.0 ** 12, 2, 2)
    train = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, loss_fn()), opt, update)
    reports = []
    for step, (x, y) in enumerate(batches(rank, size, batch)):
        net.poison = step == POISON_STEP and rank == poison_rank
        _, overflow, scale = train(x, y)
        reports.append((bool(overflow.asnumpy()), float(scale.asnumpy()))
                       + report(train.last_report))
    return {"params": params(net), "reports": reports}


def run_grad_scaler_overflow(rank, size, batch, poison_rank):
    minigrad.set_seed(SEED + rank)
    net = MLP()
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    scaler, loss = GradScaler(init_scale=2.0 ** 12, growth_interval=2), loss_fn()
    reports = []
    for step, (x, y) in enumerate(batches(rank, size, batch)):
        net.poison = step == POISON_STEP and rank == poison_rank
        opt.zero_grad()
        scaler.scale(loss(net(x), y)).backward()
        stepped = scaler.step(opt)
        scaler.update()
        reports.append((stepped, scaler.get_scale()) + report(scaler.last_report))
    return {"params": params(net), "reports": reports}


def run_tf_overflow(rank, size, batch, poison_rank):
    minigrad.set_seed(SEED + rank)
    net = MLP()
    opt = mixed_precision.LossScaleOptimizer(nn.Momentum(net.trainable_params(), 0.1, 0.9),
                                             mixed_precision.DynamicLossScale(2.0 ** 12, 2))
    loss = loss_fn()
    reports = []
    for step, (x, y) in enumerate(batches(rank, size, batch)):
        net.poison = step == POISON_STEP and rank == poison_rank
        _, grads = minigrad.value_and_grad(lambda a, b: opt.get_scaled_loss(loss(net(a), b)),
                                           None, opt.parameters)(x, y)
        applied = opt.apply_gradients(zip(opt.get_unscaled_gradients(grads), opt.parameters))
        reports.append((applied, float(opt.loss_scale())) + report(opt.last_report))
    return {"params": params(net), "reports": reports}


def run_thor(rank, size, batch, shared=False):
    """THOR (refreshing its factors every 2 steps, one all-reduce group per layer) in a
    TrainOneStepCell, with the Allreduce calls of each step and the layers this rank inverted;
    ``shared``: with the context's distributed_inversion. None without nn.thor."""
    if not hasattr(nn, "thor"):
        return None
    from minigrad.thor import refresh as thor_refresh
    inverted, invert_together = [], thor_refresh.invert_together

    def counted(jobs):
        inverted.append(sorted(block.name for block, _, _ in jobs))
        return invert_together(jobs)
    thor_refresh.invert_together = counted
    minigrad.set_auto_parallel_context(distributed_inversion=shared)
    try:
        out = _thor_steps(rank, size, batch)
    finally:
        thor_refresh.invert_together = invert_together
        minigrad.set_auto_parallel_context(distributed_inversion=False)
    out["inverted"] = inverted
    return out


def _thor_steps(rank, size, batch):
    minigrad.set_seed(SEED + rank)
    net = MLP()
    opt = nn.thor(net, Tensor(numpy.float32(0.05)), Tensor(numpy.float32(0.01)), 0.9,
                  frequency=2, batch_size=batch, split_indices=[0, 1])  # a group per layer
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn()), opt)
    per_step = []
    with CountingComm() as counter:
        for x, y in batches(rank, size, batch):
            before = counter.allreduce
            train(x, y)
            per_step.append(counter.allreduce - before)
    return {"params": params(net), "allreduce_per_step": per_step}


class CountingComm:
    """Within ``with CountingComm() as counter:`` the group's communicator is this wrapper, which
    counts its all-reduces, blocking (``Allreduce``) or started (``Iallreduce``), and those in
    shared memory (``SharedRows.reduce``); ``started`` and ``shared`` count those kinds alone.
    Without ``init`` nothing is counted."""

    def __init__(self, probe=None):
        self.group = communication.management.current()
        self.comm = None if self.group is None else self.group.comm
        self.allreduce, self.started, self.shared = 0, 0, 0
        self.probe, self.probes = probe, []  # probe(): what to record at each Iallreduce
        self._reduce = shared_memory.SharedRows.reduce

    def __enter__(self):
        if self.group is not None:
            self.group.comm = self

            def counted(rows, *args):
                self.allreduce += 1
                self.shared += 1
                return self._reduce(rows, *args)
            shared_memory.SharedRows.reduce = counted
        return self

    def __exit__(self, *exc):
        if self.group is not None:
            self.group.comm = self.comm
            shared_memory.SharedRows.reduce = self._reduce

    def Allreduce(self, *args, **kwargs):
        self.allreduce += 1
        return self.comm.Allreduce(*args, **kwargs)

    def Iallreduce(self, *args, **kwargs):
        self.allreduce += 1
        self.started += 1
        if self.probe is not None:
            self.probes.append(self.probe())
        return self.comm.Iallreduce(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.comm, name)


def overlapped(net, opt):
    """A TrainOneStepCell whose reducer starts its all-reduces during backward."""
    train = nn.TrainOneStepCell(net, opt)
    train.grad_reducer = nn.DistributedGradReducer(opt.parameters, overlap=True)
    return train


def scaled(net, opt):
    return nn.TrainOneStepWithLossScaleCell(net, opt, Tensor(numpy.float32(8.0)))


# the "_mpi" cells are made with all_reduce_shared_memory=False: their buckets go through MPI
TRAIN_CELLS = {"plain": nn.TrainOneStepCell, "overlapped": overlapped,
               "overlapped_unused": overlapped, "scaled": scaled,
               "plain_mpi": nn.TrainOneStepCell, "scaled_mpi": scaled}


def run_counts(rank, size, batch, bucket_mb):
    """All-reduce calls per step of the fp32 cell (all-reduces after backward, or started during
    it) and of the loss-scaled cell, with small buckets; at each started all-reduce, how many
    gradients the overlapping reducer had been given."""
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                       comm_fusion={"allreduce": {"mode": "size",
                                                                  "config": bucket_mb}})
    out = {}
    for name, make_cell in TRAIN_CELLS.items():
        minigrad.set_auto_parallel_context(all_reduce_shared_memory=not name.endswith("_mpi"))
        minigrad.set_seed(SEED + rank)
        net = MLP(hidden=64, unused=name.endswith("unused"))
        opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
        train = make_cell(nn.WithLossCell(net, loss_fn()), opt)
        reducer = train.grad_reducer
        per_step, started, shared = [], [], []
        with CountingComm(probe=lambda r=reducer: (
                None if r._reported is None else len(r._reported))) as counter:
            for x, y in batches(rank, size, batch):
                before = counter.allreduce, counter.started, counter.shared
                train(x, y)
                per_step.append(counter.allreduce - before[0])
                started.append(counter.started - before[1])
                shared.append(counter.shared - before[2])
        out[name] = {"per_step": per_step, "buckets": len(reducer.buckets), "started": started,
                     "shared": shared, "reported_at_start": counter.probes,
                     "params": params(net), "n_params": len(reducer.weights)}
    minigrad.reset_auto_parallel_context()
    return out


def run_collectives(rank):
    """Each collective once, with rank-dependent inputs."""
    base = numpy.array([1.0, 10.0], numpy.float32) * (rank + 1)
    out = {name: communication.all_reduce(base, name) for name in ("sum", "mean", "max", "min")}
    out["fp16_sum"] = communication.all_reduce(numpy.array([30000.0], numpy.float16))  # > 65504/2
    if minigrad.dtype.HAS_LOWP:  # a float dtype whose NumPy kind is not "f"
        out["bf16_mean"] = communication.all_reduce(
            numpy.array([1.0, 3.0], minigrad.dtype.bfloat16) * (rank + 1), "mean")
    out["any"] = [communication.any_rank(False), communication.any_rank(rank == 1)]
    out["bool_or"] = communication.all_reduce(numpy.array([rank == 1, False]))
    out["broadcast"] = communication.broadcast(numpy.full((2, 2), float(rank)), root=1)
    out["gather"] = communication.all_gather(numpy.array([rank, 10 * rank]))
    out["objects"] = communication.all_gather_object({"rank": rank})
    out["ranks"] = (communication.get_rank(), communication.get_group_size())
    return out


def run_callbacks(rank, out_dir):
    """Model.train with a LossMonitor, a ModelCheckpoint into one shared directory (rank 0
    writes) and one into this rank's own directory (asked to write on every rank); then every
    rank loads rank 0's last checkpoint. Also the rows each rank reads from a shuffled dataset."""
    minigrad.set_seed(SEED + rank)  # a different shuffle seed per rank: rank 0's must win
    shuffled = [int(r[0]) for r in NumpySlicesDataset(numpy.arange(10), shuffle=True)]
    net = MLP()
    model = minigrad.Model(net, loss_fn(), nn.Momentum(net.trainable_params(), 0.1, 0.9))
    shared, own = os.path.join(out_dir, "shared"), os.path.join(out_dir, f"own{rank}")
    config = CheckpointConfig(save_checkpoint_steps=2)
    everyone = ModelCheckpoint(prefix="own", directory=own, config=config)
    everyone.rank_zero_only = False
    x, y = data()
    model.train(1, NumpySlicesDataset((x, y)).batch(BATCH),
                callbacks=[LossMonitor(1), ModelCheckpoint(prefix="net", directory=shared,
                                                           config=config), everyone])
    communication.barrier()  # rank 0 has written its files
    files = sorted(os.listdir(shared))
    loaded = minigrad.load_checkpoint(os.path.join(shared, files[-1]))
    return {"shuffled": shuffled, "shared": files, "own": sorted(os.listdir(own)),
            "loaded": {name: loaded[name].asnumpy() for name in params(net)},
            "params": params(net)}


def scenarios(rank, size, batch):
    """Every scenario's results (the two overflow injections: on rank 1, and on no rank)."""
    out = {"fp32_cell": run_fp32_cell(rank, size, batch),
           "o2_model": run_o2_model(rank, size, batch), "thor": run_thor(rank, size, batch),
           "thor_shared": run_thor(rank, size, batch, shared=True)}
    for poison in (1, None):
        out[f"cell_overflow_{poison}"] = run_cell_overflow(rank, size, batch, poison)
        out[f"grad_scaler_overflow_{poison}"] = run_grad_scaler_overflow(rank, size, batch, poison)
        out[f"tf_overflow_{poison}"] = run_tf_overflow(rank, size, batch, poison)
    return out


def run_gpu(out_dir, backend_name):
    """CuPy arrays through the collectives and a data-parallel step on the GPU."""
    from minigrad.backend import cupy
    rank = communication.get_rank()
    if backend_name == "nccl":
        cupy.cuda.Device(rank).use()
    base = cupy.asarray(numpy.array([1.0, 10.0], numpy.float32)) * (rank + 1)
    out = {"sum": communication.all_reduce(base).get(),
           "broadcast": communication.broadcast(base, root=1).get()}
    minigrad.set_context(device_target="GPU")
    fp32 = run_fp32_cell(rank, communication.get_group_size(), BATCH)
    out["params"] = {k: cupy.asnumpy(v) for k, v in fp32["params"].items()}
    with open(os.path.join(out_dir, f"gpu{backend_name}{rank}.pkl"), "wb") as f:
        pickle.dump(out, f)


def main(out_dir, what="all", backend_name="mpi"):
    communication.init(backend_name)
    rank, size = communication.get_rank(), communication.get_group_size()
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    if what == "fail":
        minigrad.set_seed(SEED)
        net = MLP()
        train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn()),
                                    nn.Momentum(net.trainable_params(), 0.1, 0.9))
        for step, (x, y) in enumerate(batches(rank, size, BATCH) * 100):
            if rank == 1 and step == 2:
                raise ValueError("rank 1 fails on purpose at step 2")
            train(x, y)
        return
    if what == "gpu":
        run_gpu(out_dir, backend_name)
        return
    if what == "mismatch":
        net = MLP(hidden=8 + rank)
        nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn()),
                            nn.Momentum(net.trainable_params(), 0.1, 0.9))
        return
    out = scenarios(rank, size, BATCH)
    out["collectives"] = run_collectives(rank)
    out["callbacks"] = run_callbacks(rank, out_dir)
    out["counts"] = run_counts(rank, size, BATCH, BUCKET_MB)
    out["size"] = size
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(out, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
