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
# (`optimizer.last_report`) which layers refreshed when: every `frequency` steps (MindSpore's
# rule), or, with the THOR paper's trace rule, only when a layer's curvature has moved.
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
# A 64-128-128-10 MLP, batches of 64 digits in the same order, three optimizers:
# Momentum; THOR refreshing every `FREQUENCY` steps; THOR with the trace rule
# (`refresh="trace"`): a layer refreshes when tr(A)·tr(G) has moved by more than
# `omega1` = 10 % since its last refresh.

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
THOR_SETTINGS = {"THOR": {"frequency": FREQUENCY},
                 "THOR, trace rule": {"frequency": FREQUENCY, "refresh": "trace", "omega1": 0.1}}
results = {"Momentum": momentum}
nets = {}
for name, settings in THOR_SETTINGS.items():
    nets[name] = network()
    optimizer = nn.thor(nets[name], learning_rate=Tensor(numpy.float32(0.02)),
                        damping=Tensor(numpy.float32(0.03)), momentum=0.9, **settings)
    results[name] = train(nets[name], optimizer)

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


print(f"{'optimizer':16s} {'steps to target':>15s} {'seconds to target':>17s} "
      f"{'final loss':>10s} {'test acc':>8s} {'ms / step':>9s} {'layer refreshes':>15s}")
reached = {}
for name, (losses, seconds, reports, correct) in results.items():
    below = numpy.flatnonzero(smoothed(losses) < TARGET)
    refreshes = "-" if reports[0] is None else str(sum(len(r.refreshed) for r in reports))
    reached[name] = int(below[0]) if below.size else None
    steps_text = f"{below[0] + 1}" if below.size else "not reached"
    seconds_text = f"{seconds[below[0]]:.2f}" if below.size else "-"
    print(f"{name:16s} {steps_text:>15s} {seconds_text:>17s} {smoothed(losses)[-1]:10.3f} "
          f"{correct:8.3f} {1e3 * seconds[-1] / STEPS:9.2f} {refreshes:>15s}")

# %% [markdown]
# ## What THOR's step report says
# `optimizer.last_report` after every step: refresh (factors and inverses recomputed) or reuse,
# per layer, with the traces of A and G, the damping and the time spent.

# %%
common.heading("THOR's step reports")
thor_reports = results["THOR"][2]
for report in thor_reports[:3] + [thor_reports[FREQUENCY]]:
    print(report.summary())
print(f"\nthe full report of step {thor_reports[FREQUENCY].step} (a refresh step):")
print(thor_reports[FREQUENCY])
for name in THOR_SETTINGS:
    print(f"{name}: refresh steps {[r.step for r in results[name][2] if r.refresh]}")
trace_reports = results["THOR, trace rule"][2]
print("\nthe trace rule's report of its second step (delta: how far each layer's tr(A)·tr(G) "
      "moved):")
print(trace_reports[1])

# %% [markdown]
# ## The picture
# Left: loss against steps; middle: against wall-clock seconds (THOR's refresh steps cost more);
# right: which layers refreshed their inverses at which step, under each rule.

# %%
fig, (by_step, by_time, refresh) = plt.subplots(1, 3, figsize=(16, 4.8), constrained_layout=True)
colors = {"Momentum": "tab:blue", "THOR": "tab:orange", "THOR, trace rule": "tab:green"}
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
shapes = {p.name: p.shape for p in nets["THOR"].trainable_params()}
for offset, name in zip((0.15, -0.15), THOR_SETTINGS):
    for row, layer in enumerate(layer_names):
        hits = [r.step for r in results[name][2]
                if layer in r.layers and r.layers[layer].action == "refresh"]
        refresh.plot(hits, [row + offset] * len(hits), "|", markersize=9, markeredgewidth=2,
                     color=colors[name], label=f"{name}: refreshed" if row == 0 else None)
refresh.set_yticks(range(len(layer_names)),
                   [f"{name}\n{shapes[name][1]} -> {shapes[name][0]}" for name in layer_names])
refresh.set_ylim(-0.7, len(layer_names) - 0.1)
refresh.set_xlim(-1, STEPS + 1)
refresh.set_xlabel("THOR step (optimizer.last_report.step, from 1)")
refresh.set_title("inverse refreshes per layer (reused in between)", fontsize=10)
refresh.legend(fontsize="small", loc="upper right")
fig.suptitle("THOR vs Momentum on the same MLP and batches")
common.save(fig, args.out, "thor_vs_momentum.png")
