"""The tasks of ``benchmarks/thor.py`` and one training run: the four networks and data sets,
the optimizers as the benchmark builds them, the timed run to a training-loss target, and the
score of a grid point (the median over seeds of the steps to the target)."""
import math
import statistics
import time

import numpy

import minigrad
from minigrad import Tensor, nn

# ---- tasks ----------------------------------------------------------------------------------
class Task:
    def __init__(self, name, build, loss, x, y, batch, target, budget, eval_every, grids):
        self.name, self.build, self.loss = name, build, loss
        self.x, self.y, self.batch, self.target = x, y, batch, target
        self.budget, self.eval_every, self.grids = budget, eval_every, grids


def _seq(*cells):
    return nn.SequentialCell(list(cells))


def _dense(i, o, **kw):
    return nn.Dense(i, o, weight_init="xavier_uniform", **kw)


def _conv(i, o):
    return nn.Conv2d(i, o, 3, has_bias=True, weight_init="xavier_uniform")


def tasks(quick):
    from minigrad.dataset import load_digits
    (x, y), _ = load_digits(split=0.2, seed=0)
    ce = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    rng = numpy.random.default_rng(0)
    xr = (rng.standard_normal((512, 24)) * numpy.geomspace(1, 1 / math.sqrt(300), 24))
    wr = rng.standard_normal((24, 4))
    yr = xr @ wr + 0.05 * rng.standard_normal((512, 4))

    def lr3(c):
        return [c / 2, c, c * 2]
    out = [
        Task("autoencoder", lambda: _seq(
            _dense(64, 128), nn.Tanh(), _dense(128, 64), nn.Tanh(), _dense(64, 16),
            _dense(16, 64), nn.Tanh(), _dense(64, 128), nn.Tanh(), _dense(128, 64)),
             nn.MSELoss(), x, x, 128, 0.01, 2500, 20,
             {"momentum": {"lr": lr3(0.6)}, "adam": {"lr": lr3(0.004)},
              "thor": {"lr": lr3(0.1), "damping": [3e-3, 1e-2, 3e-2], "momentum": [0.0, 0.9],
                       "options": {"refresh": "trace", "omega1": 0.01}}}),
        Task("mlp", lambda: _seq(_dense(64, 128), nn.Tanh(), _dense(128, 128), nn.Tanh(),
                                 _dense(128, 10)),
             ce, x, y.astype(numpy.int32), 128, 0.02, 2000, 10,
             {"momentum": {"lr": lr3(0.4)}, "adam": {"lr": lr3(0.004)},
              "thor": {"lr": lr3(0.02), "damping": [1e-3, 1e-2, 1e-1], "momentum": [0.0, 0.9],
                       "options": {"frequency": 10}}}),
        Task("cnn", lambda: _seq(_conv(1, 8), nn.Tanh(),
                                 _conv(8, 16), nn.Tanh(), nn.Flatten(),
                                 _dense(1024, 10)),
             ce, x.reshape(-1, 1, 8, 8), y.astype(numpy.int32), 128, 0.02, 2000, 10,
             {"momentum": {"lr": lr3(0.1)}, "adam": {"lr": lr3(0.003)},
              "thor": {"lr": lr3(0.01), "damping": [1e-3, 1e-2, 1e-1], "momentum": [0.0, 0.9],
                       "options": {"frequency": 10}}}),
        Task("linreg", lambda: nn.Dense(24, 4, weight_init="zeros", has_bias=False),
             nn.MSELoss(), xr.astype(numpy.float32), yr.astype(numpy.float32), 64, 0.005, 600, 5,
             {"momentum": {"lr": lr3(0.25)}, "adam": {"lr": lr3(0.05)},
              "thor": {"lr": lr3(0.2), "damping": [1e-4, 1e-3, 1e-2], "momentum": [0.0, 0.9],
                       "fisher": ["empirical", "mc"], "options": {"frequency": 5}}}),
    ]
    if quick:
        for task in out:
            task.budget, task.x, task.y = 30, task.x[:256], task.y[:256]
            for grid in task.grids.values():
                grid["lr"] = grid["lr"][1:2]
                if "damping" in grid:
                    grid["damping"], grid["momentum"] = grid["damping"][1:2], [0.9]
    return out


# ---- one training run -----------------------------------------------------------------------
def make_optimizer(kind, net, hp):
    if kind == "momentum":
        return nn.Momentum(net.trainable_params(), hp["lr"], 0.9)
    if kind == "adam":
        return nn.Adam(net.trainable_params(), hp["lr"])
    return nn.thor(net, Tensor(numpy.float32(hp["lr"])), Tensor(numpy.float32(hp["damping"])),
                   float(hp["momentum"]), fisher=hp.get("fisher", "empirical"),
                   **hp.get("options", {}))


def full_loss(task, net):
    with minigrad.no_grad():
        return float(task.loss(net(Tensor(task.x)), Tensor(task.y)).asnumpy())


def train(task, kind, hp, seed, stop_at=None):
    """Steps and seconds to the target (None when missed) from ``seed``'s weights and order."""
    minigrad.set_seed(seed)
    net = task.build()
    opt = make_optimizer(kind, net, hp)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, task.loss), opt)
    order = numpy.random.default_rng(1000 + seed)
    per_epoch = len(task.x) // task.batch
    phases = dict.fromkeys(("factors", "inverses", "precondition", "update"), 0.0)  # + sampling
    seconds, steps, refreshes, reached, first = 0.0, 0, 0, None, full_loss(task, net)
    limit = task.budget if stop_at is None else min(task.budget, stop_at)
    while steps < limit and reached is None:
        perm = order.permutation(len(task.x))
        for b in range(per_epoch):
            idx = perm[b * task.batch:(b + 1) * task.batch]
            xb, yb = Tensor(task.x[idx]), Tensor(task.y[idx])
            start = time.perf_counter()
            step(xb, yb)
            seconds += time.perf_counter() - start
            steps += 1
            report = getattr(opt, "last_report", None)
            if report is not None:
                for key, value in report.seconds.items():
                    phases[key] = phases.get(key, 0.0) + value
                refreshes += len(report.refreshed)
            if steps % task.eval_every == 0:
                loss = full_loss(task, net)
                if not math.isfinite(loss) or loss > 1e3 * max(first, 1e-3):
                    limit = steps  # diverged
                    break
                if loss <= task.target:
                    reached = steps
                    break
            if steps >= limit:
                break
    result = {"steps": reached, "seconds": seconds if reached else None, "run_steps": steps,
              "ms_per_step": 1e3 * seconds / max(steps, 1)}
    if kind == "thor":
        layer_steps = steps * len(opt.blocks)
        result.update(refreshes=refreshes, refresh_share=refreshes / max(layer_steps, 1),
                      phase_seconds=phases,
                      forward_backward_seconds=seconds - sum(phases.values()))
    return result


# ---- scoring -----------------------------------------------------------------------------------
def score(runs, budget):
    return statistics.median(r["steps"] if r["steps"] else 2 * budget for r in runs)
