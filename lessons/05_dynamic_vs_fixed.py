# %% [markdown]
# # Lesson 5 — dynamic vs fixed loss scale over a real run
#
# The same MLP trained on scikit-learn's handwritten digits in fp16 (`Model(amp_level="O2")`)
# with four loss-scale managers:
#
# * **dynamic**, starting at 2**24: halves on every overflow, doubles after `scale_window`
#   clean steps; it finds the largest scale that fits by itself, and keeps probing;
# * **fixed 2**10**: a safe constant, never overflows here, never adapts;
# * **fixed 2**20**: too high; every step overflows and is skipped: the model never learns;
# * **fixed 1**: no scaling at all.
#
# The scale trajectories are drawn with skipped steps marked, beside the loss and the test
# accuracy of each run.
#
#     python lessons/05_dynamic_vs_fixed.py [--out FOLDER] [--quick]

# %%
"""Lesson 5: dynamic vs fixed loss scale over a real digits run, skipped steps marked."""
import time

import common
import numpy

import minigrad
from minigrad import DynamicLossScaleManager, FixedLossScaleManager, Model, nn
from minigrad.dataset import NumpySlicesDataset, load_digits
from minigrad.train import Accuracy, History, LossScaleMonitor

args = common.parse_args(__doc__)
plt = common.pyplot()

# %% [markdown]
# ## The runs
# `LossScaleMonitor` records the scale and the overflow flag of every step; `History` the loss.

# %%
epochs = 1 if args.quick else 12
window = 10 if args.quick else 100
(x_train, y_train), (x_test, y_test) = load_digits(split=0.2, seed=0)
MANAGERS = {
    f"dynamic (from 2**24, window {window})": lambda: DynamicLossScaleManager(2 ** 24, 2, window),
    "fixed 2**10": lambda: FixedLossScaleManager(2.0 ** 10),
    "fixed 2**20": lambda: FixedLossScaleManager(2.0 ** 20),
    "fixed 1 (no scaling)": lambda: FixedLossScaleManager(1.0),
}


def run(make_manager):
    """Train the MLP with one manager; return (monitor, history, test accuracy, seconds)."""
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(64, 256), nn.ReLU(), nn.Dense(256, 10)])
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    model = Model(net, loss, optimizer, metrics={"acc": Accuracy()}, amp_level="O2",
                  loss_scale_manager=make_manager())
    monitor, history = LossScaleMonitor(), History()
    train = NumpySlicesDataset((x_train, y_train), shuffle=True).batch(32)
    start = time.perf_counter()
    model.train(epochs, train, callbacks=[monitor, history])
    seconds = time.perf_counter() - start
    accuracy = model.eval(NumpySlicesDataset((x_test, y_test)).batch(256))["acc"]
    return monitor, history, accuracy, seconds


common.heading(f"{epochs} epochs of the digits MLP in fp16 (O2), one run per manager")
results = {name: run(make) for name, make in MANAGERS.items()}
print(f"{'manager':32s} {'steps':>5s} {'skipped':>7s} {'first S':>9s} {'last S':>9s} "
      f"{'last loss':>9s} {'test acc':>8s} {'seconds':>7s}")
for name, (monitor, history, accuracy, seconds) in results.items():
    print(f"{name:32s} {len(monitor.steps):5d} {sum(monitor.overflows):7d} "
          f"{monitor.scales[0]:9.3g} {monitor.scales[-1]:9.3g} "
          f"{history.epoch_losses[-1]:9.3f} {accuracy:8.3f} {seconds:7.1f}")

# %% [markdown]
# What to read in the table: the dynamic scale spends its first few steps skipping (2**24 is
# far too high), then settles where the scaled gradients just fit fp16 and keeps probing one
# step higher every `scale_window` clean steps (one skip each time). Fixed 2**20 skips every
# step: its loss never moves. On this small problem the gradients are large enough that even
# scale 1 trains; lesson 7 shows where that stops being true.

# %%
fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 8), sharex=True, constrained_layout=True)
colors = dict(zip(MANAGERS, ("tab:blue", "tab:green", "tab:red", "tab:gray")))
styles = dict(zip(MANAGERS, ("-", "--", "-", ":")))
for name, (monitor, history, accuracy, _) in results.items():
    steps = numpy.asarray(monitor.steps)
    scales = numpy.asarray(monitor.scales)
    skipped = numpy.asarray(monitor.overflows)
    top.step(steps, scales, where="post", color=colors[name],
             label=f"{name}: {int(skipped.sum())} of {steps.size} steps skipped")
    top.scatter(steps[skipped], scales[skipped], marker="x", s=25, color=colors[name])
    bottom.plot(steps, history.step_losses, color=colors[name], linestyle=styles[name], linewidth=1,
                label=f"{name}: test accuracy {accuracy:.1%}")
top.scatter([], [], marker="x", color="black", label="x: a skipped step (gradient overflow)")
top.axhline(common.FP16_MAX, color="tab:red", linestyle="--", linewidth=1,
            label="65504 (largest fp16; the scale may exceed it: the loss is fp32)")
top.set_yscale("log", base=2)
top.set_ylabel("loss scale S (log2 axis)")
top.set_title("loss scale per step: dynamic finds the highest scale that fits, "
              "fixed does not adapt")
top.legend(fontsize="x-small", loc="center", bbox_to_anchor=(0.55, 0.56), ncol=2)
log = common.log_scale_if_wide(
    bottom, numpy.concatenate([run[1].step_losses for run in results.values()]))
bottom.set_xlabel("training step (batches of 32 digits)")
bottom.set_ylabel(f"training loss (cross-entropy, nats{log})")
bottom.set_title("training loss per step: fixed 2**10 and fixed 1 coincide (a power-of-two scale "
                 "is exact when nothing underflows)", fontsize=10)
bottom.legend(fontsize="small", loc="lower left")
common.save(fig, args.out, "dynamic_vs_fixed_scale.png")
