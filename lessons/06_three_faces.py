# %% [markdown]
# # Lesson 6 — one core, three faces
#
# minigrad speaks the loss-scaling APIs of MindSpore, TensorFlow and PyTorch. Under each face
# sits the same update rule (`minigrad.amp.ScaleCore`) and the same float-status check. So the
# same fp16 training, written three ways, gives the same loss scale, the same skipped steps and
# the same weights. This lesson runs it three times, draws the three trajectories on one plot
# and prints the name map between the faces.
#
#     python lessons/06_three_faces.py [--out FOLDER] [--quick]

# %%
"""Lesson 6: the same fp16 training through the MindSpore, TensorFlow and PyTorch faces."""
import common
import numpy

import minigrad
from minigrad import Tensor, amp, nn, value_and_grad
from minigrad.amp import GradScaler
from minigrad.dataset import load_digits
from minigrad.mixed_precision import DynamicLossScale, LossScaleOptimizer

args = common.parse_args(__doc__)
plt = common.pyplot()

# %% [markdown]
# ## The same model, data and scale rule
# An fp16 MLP on the digits; scale starts at 2**20 (too high: the first steps overflow), is
# halved on overflow and doubled after 8 clean steps.

# %%
STEPS = 40 if args.quick else 200
INITIAL_SCALE, FACTOR, WINDOW = 2.0 ** 20, 2.0, 8
(x_train, y_train), _ = load_digits(split=0.2, seed=0)
STARTS = [32 * step % (len(x_train) - 32) for step in range(STEPS)]
BATCHES = [(Tensor(x_train[i:i + 32].astype(numpy.float16)), Tensor(y_train[i:i + 32]))
           for i in STARTS]


def fresh():
    """The same fp16 network and Momentum optimizer for every face (same seed)."""
    minigrad.set_seed(0)
    net = amp.cast_network(nn.SequentialCell([nn.Dense(64, 128), nn.ReLU(), nn.Dense(128, 10)]),
                           minigrad.float16, keep_batchnorm_fp32=True)
    return net, nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)


LOSS = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")


def mindspore_face():
    net, optimizer = fresh()
    cell = nn.TrainOneStepWithLossScaleCell(
        nn.WithLossCell(net, LOSS), optimizer,
        scale_sense=nn.DynamicLossScaleUpdateCell(INITIAL_SCALE, FACTOR, WINDOW))
    for x, y in BATCHES:
        loss, overflow, scale = cell(x, y)           # returns the scale this step used
        yield float(loss.asnumpy()), float(scale.asnumpy()), bool(overflow.asnumpy())
    yield net


def tensorflow_face():
    net, optimizer = fresh()
    lso = LossScaleOptimizer(optimizer, DynamicLossScale(INITIAL_SCALE, WINDOW, FACTOR))
    scaled_loss = value_and_grad(lambda x, y: lso.get_scaled_loss(LOSS(net(x), y)), None,
                                 lso.parameters)
    for x, y in BATCHES:
        scale = float(lso.loss_scale().asnumpy())    # read before the step: it may change
        value, grads = scaled_loss(x, y)
        applied = lso.apply_gradients(zip(lso.get_unscaled_gradients(grads), lso.parameters))
        yield float(value.asnumpy()) / scale, scale, not applied
    yield net


def pytorch_face():
    net, optimizer = fresh()
    scaler = GradScaler(INITIAL_SCALE, growth_factor=FACTOR, backoff_factor=1 / FACTOR,
                        growth_interval=WINDOW)
    for x, y in BATCHES:
        scale = scaler.get_scale()
        optimizer.zero_grad()
        loss = LOSS(net(x), y)
        scaler.scale(loss).backward()
        applied = scaler.step(optimizer)
        scaler.update()
        yield float(loss.asnumpy()), scale, not applied
    yield net


common.heading(f"{STEPS} steps through each face")
runs = {}
for face, run in (("MindSpore", mindspore_face), ("TensorFlow", tensorflow_face),
                  ("PyTorch", pytorch_face)):
    *records, net = list(run())
    losses, scales, skipped = (numpy.array(column) for column in zip(*records))
    runs[face] = losses, scales, skipped, [p.asnumpy() for p in net.trainable_params()]
    print(f"{face:10s}: {int(skipped.sum())} of {STEPS} steps skipped, scale {scales[0]:g} -> "
          f"{scales[-1]:g}, last loss {losses[-1]:.4f}")
reference = runs["MindSpore"]
for face in ("TensorFlow", "PyTorch"):
    losses, scales, skipped, weights = runs[face]
    same_weights = all(numpy.array_equal(a, b) for a, b in zip(weights, reference[3]))
    print(f"{face} vs MindSpore: same scales {numpy.array_equal(scales, reference[1])}, "
          f"same skipped steps {numpy.array_equal(skipped, reference[2])}, "
          f"bit-identical weights {same_weights}, largest loss difference "
          f"{numpy.abs(losses - reference[0]).max():.2g}")

# %% [markdown]
# ## The name map
# The same concept under each face's name (all three live in minigrad):

# %%
NAME_MAP = [
    ("concept", "MindSpore", "TensorFlow", "PyTorch"),
    ("dynamic scaler", "nn.DynamicLossScaleUpdateCell", "mixed_precision.DynamicLossScale",
     "amp.GradScaler"),
    ("initial scale", "loss_scale_value", "initial_loss_scale", "init_scale"),
    ("growth factor", "scale_factor", "multiplier", "growth_factor"),
    ("backoff on overflow", "1 / scale_factor", "1 / multiplier", "backoff_factor"),
    ("clean steps to grow", "scale_window", "increment_period", "growth_interval"),
    ("fixed scale", "nn.FixedLossScaleUpdateCell", "mixed_precision.FixedLossScale",
     "(none: GradScaler is dynamic)"),
    ("with Model", "DynamicLossScaleManager", "-", "-"),
    ("scale the loss", "inside the cell (sens)", "get_scaled_loss(loss)", "scaler.scale(loss)"),
    ("unscale gradients", "inside the cell", "get_unscaled_gradients(g)", "scaler.unscale_(opt)"),
    ("apply or skip", "cell(x, y) -> overflow", "apply_gradients(...) -> bool",
     "scaler.step(opt) -> bool"),
    ("update the scale", "inside the cell", "inside apply_gradients", "scaler.update()"),
    ("current scale", "cell.scale_sense", "lso.loss_scale()", "scaler.get_scale()"),
    ("what happened", "cell.last_report", "lso.last_report", "scaler.last_report"),
]
widths = [max(len(row[i]) for row in NAME_MAP) for i in range(4)]
for i, row in enumerate(NAME_MAP):
    print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    if i == 0:
        print("  ".join("-" * width for width in widths))

# %% [markdown]
# ## The picture
# Three faces, one trajectory: the lines lie on top of each other (drawn with different widths
# and styles so that all three stay visible).

# %%
fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7.5), sharex=True, constrained_layout=True)
steps = numpy.arange(1, STEPS + 1)
styles = {"MindSpore": ("tab:blue", "-", 5), "TensorFlow": ("tab:orange", "--", 3),
          "PyTorch": ("black", ":", 1.5)}
for face, (losses, scales, skipped, _) in runs.items():
    color, style, width = styles[face]
    top.step(steps, scales, where="post", color=color, linestyle=style, linewidth=width,
             label=f"{face} face: {int(skipped.sum())} skipped")
    bottom.plot(steps, losses, color=color, linestyle=style, linewidth=width, label=f"{face} face")
hit = reference[2]
top.scatter(steps[hit], reference[1][hit], marker="x", color="tab:red", zorder=5, s=40,
            label="skipped step (gradient overflow, all three faces)")
top.set_yscale("log", base=2)
top.set_ylim(reference[1].min() / 1.5, reference[1].max() * 6)   # room for the legend
top.set_ylabel("loss scale S (log2 axis)")
top.set_title("the same fp16 training through three APIs: one scale trajectory")
top.legend(fontsize="small", loc="upper right", ncol=2)
log = common.log_scale_if_wide(bottom, numpy.concatenate([run[0] for run in runs.values()]))
bottom.set_xlabel("training step")
bottom.set_ylabel(f"training loss (cross-entropy, nats{log})")
bottom.set_title("and one loss curve")
bottom.legend(fontsize="small", loc="lower left")
common.save(fig, args.out, "three_faces.png")
