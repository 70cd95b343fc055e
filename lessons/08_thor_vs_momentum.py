# %% [markdown]
# # Lesson 8 — THOR vs Momentum
#
# THOR (Trace-based Hardware-driven layer-ORiented natural gradient, Chen et al., AAAI 2021)
# preconditions each layer's gradient with the inverses of two small Kronecker factors,
# A = E[a aᵀ] of the layer's inputs and G = E[D Dᵀ] of the gradients at its output:
# `g̃ = G⁻¹ · g · A⁻¹`. Inverting them is costly, so THOR refreshes them only every `frequency`
# steps and reuses the stored inverses in between. This lesson trains the same MLP on the
# digits with Momentum and with `nn.thor`, draws both loss curves against steps and against
# seconds, counts steps and seconds to a target loss, and shows from THOR's step report
# (`optimizer.last_report`) which layers refreshed when.
#
#     python lessons/08_thor_vs_momentum.py [--out FOLDER] [--quick]

# %%
"""Lesson 8: THOR vs Momentum on the same model: loss curves, time to target, refresh steps."""
import sys
import time

import common
import numpy

import minigrad
from minigrad import Tensor, nn
from minigrad.dataset import load_digits

args = common.parse_args(__doc__)
if not hasattr(nn, "thor"):
    print("lesson 8 needs THOR (minigrad.nn.thor), which this minigrad does not have yet: "
          "nothing to show")
    sys.exit(0)
plt = common.pyplot()

# %% [markdown]
# ## The same model, data and step count for both
# A 64-128-128-10 MLP, batches of 64 digits in the same order. THOR refreshes its inverses
# every `FREQUENCY` steps.

# %%
STEPS = 60 if args.quick else 300
FREQUENCY = 10 if args.quick else 20
TARGET = 0.1          # training loss (running mean over 10 steps) counted as "reached"
(x_train, y_train), (x_test, y_test) = load_digits(split=0.2, seed=0)
order = numpy.random.default_rng(0).permutation(len(x_train))
BATCHES = [(Tensor(x_train[order[i:i + 64]]), Tensor(y_train[order[i:i + 64]]))
           for i in (64 * step % (len(x_train) - 64) for step in range(STEPS))]


def network():
    minigrad.set_seed(0)
    init = "he_uniform"
    return nn.SequentialCell([nn.Dense(64, 128, weight_init=init), nn.ReLU(),
                              nn.Dense(128, 128, weight_init=init), nn.ReLU(),
                              nn.Dense(128, 10, weight_init=init)])


def train(net, optimizer):
    """Train for STEPS steps; return per-step losses, cumulative seconds and THOR reports."""
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step_cell = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), optimizer)
    losses, seconds, reports = [], [], []
    start = time.perf_counter()
    for x, y in BATCHES:
        losses.append(float(step_cell(x, y).asnumpy()))
        seconds.append(time.perf_counter() - start)
        reports.append(getattr(optimizer, "last_report", None))
    correct = (net(Tensor(x_test)).asnumpy().argmax(axis=1) == y_test).mean()
    return numpy.array(losses), numpy.array(seconds), reports, correct


momentum_net = network()
momentum = train(momentum_net, nn.Momentum(momentum_net.trainable_params(), learning_rate=0.05,
                                           momentum=0.9))
thor_net = network()
thor_optimizer = nn.thor(thor_net, learning_rate=Tensor(numpy.float32(0.02)),
                         damping=Tensor(numpy.float32(0.03)), momentum=0.9, frequency=FREQUENCY)
thor = train(thor_net, thor_optimizer)

# %% [markdown]
# ## Steps and seconds to the target loss

# %%
common.heading(f"{STEPS} steps each; target: running-mean training loss below {TARGET}")


def smoothed(losses, width=10):
    """Each step's running mean: its loss and those of up to ``width - 1`` steps before it."""
    total = numpy.concatenate([[0.0], numpy.cumsum(losses)])
    end = numpy.arange(1, losses.size + 1)
    start = numpy.maximum(end - width, 0)
    return (total[end] - total[start]) / (end - start)


results = {"Momentum": momentum, "THOR": thor}
print(f"{'optimizer':10s} {'steps to target':>15s} {'seconds to target':>17s} "
      f"{'final loss':>10s} {'test acc':>8s} {'ms / step':>9s}")
reached = {}
for name, (losses, seconds, _, correct) in results.items():
    below = numpy.flatnonzero(smoothed(losses) < TARGET)
    reached[name] = int(below[0]) if below.size else None
    steps_text = f"{below[0] + 1}" if below.size else "not reached"
    seconds_text = f"{seconds[below[0]]:.2f}" if below.size else "-"
    print(f"{name:10s} {steps_text:>15s} {seconds_text:>17s} {smoothed(losses)[-1]:10.3f} "
          f"{correct:8.3f} {1e3 * seconds[-1] / STEPS:9.2f}")

# %% [markdown]
# ## What THOR's step report says
# `optimizer.last_report` after every step: refresh (factors and inverses recomputed) or reuse,
# per layer, with the traces of A and G, the damping and the time spent.

# %%
common.heading("THOR's step reports")
thor_reports = thor[2]
for report in thor_reports[:3] + [thor_reports[FREQUENCY]]:
    print(report.summary())
print(f"\nthe full report of step {thor_reports[FREQUENCY].step} (a refresh step):")
print(thor_reports[FREQUENCY])
refresh_steps = [r.step for r in thor_reports if r.refresh]
print(f"refresh steps: {refresh_steps}")

# %% [markdown]
# ## The picture
# Left: loss against steps; middle: against wall-clock seconds (THOR's refresh steps cost more);
# right: which layers refreshed their inverses at which step.

# %%
fig, (by_step, by_time, refresh) = plt.subplots(1, 3, figsize=(16, 4.8), constrained_layout=True)
colors = {"Momentum": "tab:blue", "THOR": "tab:orange"}
for name, (losses, seconds, _, correct) in results.items():
    steps = numpy.arange(1, losses.size + 1)
    by_step.plot(steps, losses, color=colors[name], alpha=0.3, linewidth=1)
    by_step.plot(steps, smoothed(losses), color=colors[name], linewidth=2,
                 label=f"{name} (test accuracy {correct:.1%})")
    by_time.plot(seconds, smoothed(losses), color=colors[name], linewidth=2, label=name)
    if reached[name] is not None:
        by_step.plot(reached[name] + 1, TARGET, "o", color=colors[name], markersize=8)
        by_time.plot(seconds[reached[name]], TARGET, "o", color=colors[name], markersize=8)
for ax in (by_step, by_time):
    ax.axhline(TARGET, color="gray", linestyle=":", label=f"target loss {TARGET}")
    ax.set_yscale("log")
    ax.set_ylabel("training loss (cross-entropy, nats, log)")
    ax.legend(fontsize="small")
by_step.set_xlabel("training step (batches of 64 digits)")
by_step.set_title("loss per step (thin: each step; bold: mean of 10; dot: target)",
                  fontsize=10)
by_time.set_xlabel("wall-clock time (s)")
by_time.set_title("loss per second of training")
layer_names = list(thor_reports[0].layers)
shapes = {p.name: p.shape for p in thor_net.trainable_params()}
for row, name in enumerate(layer_names):
    hits = [r.step for r in thor_reports
            if name in r.layers and r.layers[name].action == "refresh"]
    refresh.plot(hits, [row] * len(hits), "|", markersize=14, markeredgewidth=2,
                 color="tab:orange", label="inverses refreshed" if row == 0 else None)
refresh.set_yticks(range(len(layer_names)),
                   [f"{name}\n{shapes[name][1]} -> {shapes[name][0]}" for name in layer_names])
refresh.set_ylim(-0.7, len(layer_names) - 0.3)
refresh.set_xlim(-1, STEPS + 1)
refresh.set_xlabel("THOR step (optimizer.last_report.step)")
refresh.set_title(f"inverse refreshes per layer (frequency {FREQUENCY}; reused in between)",
                  fontsize=10)
refresh.legend(fontsize="small", loc="upper right")
fig.suptitle("THOR vs Momentum on the same MLP and batches")
common.save(fig, args.out, "thor_vs_momentum.png")
