# %% [markdown]
# # Lesson 4 — `TrainOneStepWithLossScaleCell`, step by step
#
# MindSpore's loss-scaled training cell does five things per call:
#
# 1. `loss = network(x, y)` (returned unscaled);
# 2. backprop seeded with the scale S: the gradients are S·dL/dw (in fp16 for an fp16 network);
# 3. every gradient × 1/S in fp32, fused with an inf/NaN check into a sticky float status;
# 4. the update cell adjusts S: halve it on overflow, double it after `scale_window` clean steps;
# 5. the optimizer runs only if nothing overflowed; otherwise parameters and optimizer state
#    stay bit-identical.
#
# After every call `cell.last_report` says what happened. This lesson trains an fp16 MLP on the
# digits and prints every report: an initial scale that is too high, a scale that grows, a
# batch with a broken pixel (a non-finite *loss*, which no scale can fix), and the guard that
# stops a run that can only skip.
#
#     python lessons/04_loss_scale_cell.py [--out FOLDER] [--quick]

# %%
"""Lesson 4: TrainOneStepWithLossScaleCell step by step, printing each last_report."""
import common
import numpy

import minigrad
from minigrad import Tensor, amp, nn
from minigrad.amp import plots
from minigrad.dataset import load_digits

args = common.parse_args(__doc__)
plt = common.pyplot()

# %% [markdown]
# ## An fp16 network and its loss-scaled cell
# `amp.cast_network` makes the parameters and the compute fp16 (AMP level O2); the optimizer
# keeps fp32 master weights. The scale starts at 2**24, far too high, and grows after every 4
# clean steps. `track_underflow=True` adds per-parameter underflow shares to each report.

# %%
minigrad.set_seed(0)
(x_train, y_train), _ = load_digits(split=0.2, seed=0)
net = amp.cast_network(nn.SequentialCell([nn.Dense(64, 128), nn.ReLU(), nn.Dense(128, 10)]),
                       minigrad.float16, keep_batchnorm_fp32=True)
loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
update = nn.DynamicLossScaleUpdateCell(loss_scale_value=2 ** 24, scale_factor=2, scale_window=4)
cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, loss_fn), optimizer,
                                        scale_sense=update, track_underflow=True)
print("parameters:", [p.name for p in cell.weights], "dtypes:",
      sorted({str(p.dtype) for p in cell.weights}))


def batch(step, size=32):
    """The ``step``-th batch of 32 digits, as fp16 images and int labels."""
    start = (step * size) % (len(x_train) - size)
    return (Tensor(x_train[start:start + size].astype(numpy.float16)),
            Tensor(y_train[start:start + size]))


def snapshot():
    """The parameters' and optimizer state's bytes: equal snapshots mean bit-identical."""
    state = optimizer.state_dict()
    return ([p.asnumpy().tobytes() for p in net.trainable_params()],
            {k: v.tobytes() if isinstance(v, numpy.ndarray) else v for k, v in state.items()})


# %% [markdown]
# ## Step by step
# One call per step; the report after each. The broken batch (an inf pixel) comes at step
# `BROKEN`: its *loss* is not finite, so the report says `nonfinite_loss`, not
# `gradient_overflow`. On applied steps the line adds the share of weight-gradient values that
# are 0 in fp16: true zeros (blank border pixels, inactive ReLUs) and flushed values alike.

# %%
common.heading("one call per step, then cell.last_report")
steps = 24 if args.quick else 60
BROKEN = 15   # 1-based, as the reports count steps
reports, losses = [], []
for step in range(steps):
    x, y = batch(step)
    if step + 1 == BROKEN:
        x = Tensor(x.asnumpy().copy())
        x.asnumpy()[0, 0] = numpy.inf
    before = snapshot()
    loss, overflow, scale = cell(x, y)
    report = cell.last_report
    reports.append(report)
    losses.append(float(loss.asnumpy()))
    line = f"{report}"
    if report.skipped:
        unchanged = snapshot() == before
        line += f"  | parameters and optimizer state bit-identical: {unchanged}"
    else:
        zeros = {name.split(".")[-2] + "." + name.split(".")[-1]: f"{stats['zero']:.1%}"
                 for name, stats in report.underflow.items() if name.endswith("weight")}
        line += f"  | loss {losses[-1]:.3f}, weight-gradient values 0 in fp16: {zeros}"
    print(line)

# %% [markdown]
# The report's fields, for the last step:

# %%
last = reports[-1]
for field in ("step", "skipped", "reason", "scale_before", "scale_after", "inf_params",
              "nan_params"):
    print(f"  {field:13s} {getattr(last, field)!r}")
first_weight = next(iter(last.underflow))
print(f"  underflow     {{{first_weight!r}: {last.underflow[first_weight]}, ...}}")
broken = reports[BROKEN - 1]
print(f"the broken batch: skipped={broken.skipped}, reason={broken.reason!r}; "
      f"NaN in {list(broken.nan_params)}")

# %% [markdown]
# ## A run that can only skip
# If every batch is broken, a dynamic scale just halves forever. `max_consecutive_skips=K`
# stops after K skips in a row with the cause in the message.

# %%
common.heading("max_consecutive_skips")
guarded = nn.TrainOneStepWithLossScaleCell(
    nn.WithLossCell(net, loss_fn), optimizer, scale_sense=nn.FixedLossScaleUpdateCell(1024.0),
    max_consecutive_skips=3)
bad = Tensor(numpy.full((4, 64), numpy.inf, numpy.float16))
try:
    for _ in range(5):
        guarded(bad, Tensor(y_train[:4]))
        print(guarded.last_report)
except RuntimeError as error:
    print(f"RuntimeError: {error}")

# %% [markdown]
# ## The picture
# Top: the scale (log axis) with skipped steps marked, as `minigrad.amp.plots` draws it from the
# reports. Middle: the largest scaled gradient of each step (`max_abs` in the report's underflow
# statistics) against fp16's 65504: above it, inf, and the step is skipped. Bottom: the loss.

# %%
fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(10, 9.5), sharex=True,
                                          constrained_layout=True)
plots.plot_scale_trajectory(reports, ax=top)
top.scatter([broken.step], [broken.scale_before], s=140, facecolors="none",
            edgecolors="tab:purple", linewidths=2, label="skipped: non-finite loss (inf pixel)")
top.set_xlabel("")
top.set_ylabel("loss scale S (log2 axis)")
top.set_title("TrainOneStepWithLossScaleCell: scale per step, from cell.last_report")
top.legend(fontsize="small", loc="upper right")
largest = numpy.array([max(stats["max_abs"] for stats in r.underflow.values()) for r in reports])
largest[~numpy.isfinite(largest)] = numpy.inf              # NaN counts as overflowed too
shown = numpy.minimum(largest, 2 * common.FP16_MAX)       # inf drawn just above the line
middle.semilogy([r.step for r in reports], shown, "o", markersize=4, color="tab:blue",
                label="largest |scaled gradient| of the step (inf/NaN drawn at 2 x 65504)")
common.mark_fp16_limits(middle, axis="y", span=(largest.min() / 2, numpy.inf))
middle.set_ylabel("|gradient| x S in fp16 (log)")
middle.set_title("a step is skipped when its scaled gradients no longer fit fp16")
middle.legend(fontsize="small", loc="lower left")
applied = [r.step for r in reports if not r.skipped]
bottom.plot(applied, [losses[s - 1] for s in applied], "o-", markersize=3, label="applied steps")
bottom.set_xlabel("step")
bottom.set_ylabel("training loss (cross-entropy, nats)")
bottom.set_title("the loss moves only on applied steps")
bottom.legend(fontsize="small")
common.save(fig, args.out, "loss_scale_cell_steps.png")
