# %% [markdown]
# # Lesson 2 — loss scaling by hand
#
# The same gradient three times through minigrad's autograd engine, in an fp16 layer with an
# fp32 loss (the mixed-precision recipe):
#
# 1. **unscaled** (scale 1): gradient values below 6e-8 flush to 0 in fp16;
# 2. **scaled** by S = 2**12: backprop is seeded with S, so every fp16 gradient is S times
#    larger and fits; dividing by S in fp32 gives back the true gradient;
# 3. **overflowed** (S = 2**28): the gradient at the layer's output exceeds 65504 and becomes
#    inf; the matrix product behind it mixes +inf and -inf into NaN. Such a step must be
#    skipped and S lowered, which is what a dynamic loss scaler automates.
#
#     python lessons/02_loss_scaling_by_hand.py [--out FOLDER] [--quick]

# %%
"""Lesson 2: loss scaling by hand: the same fp16 gradient unscaled, scaled and overflowed."""
import common
import numpy

import minigrad
from minigrad import GradOperation, Parameter, Tensor

args = common.parse_args(__doc__)
plt = common.pyplot()

# %% [markdown]
# ## A layer whose gradients span many decades
# The 64 input features have scales from 1e-6 to 1, so the weight gradient of feature j is
# about scale_j times the output error: its values spread over six decades, some below fp16's
# range. The loss (mean squared error) is computed in fp32, as minigrad does for every loss.

# %%
rng = numpy.random.default_rng(0)
batch, features, outputs = (64, 64, 8) if args.quick else (256, 64, 8)
feature_scale = numpy.logspace(-6, 0, features)
x = (rng.standard_normal((batch, features)) * feature_scale).astype(numpy.float32)
w0 = (rng.standard_normal((features, outputs)) * 0.1).astype(numpy.float32)
y = rng.standard_normal((batch, outputs)).astype(numpy.float32)


def loss_of(w, inputs):
    """Mean squared error of ``inputs @ w`` against ``y``, in fp32 whatever ``w``'s dtype."""
    out = (inputs @ w).astype(minigrad.float32)
    return ((out - Tensor(y)) ** 2).mean()


def gradient(dtype, scale):
    """d loss / d w for ``w`` of ``dtype``, backprop seeded with ``scale``: the raw gradient."""
    w = Parameter(w0.astype(dtype), name="w")
    loss = loss_of(w, Tensor(x.astype(dtype)))
    (loss * scale).backward()       # the scaled loss: every gradient is `scale` times larger
    return w.grad.asnumpy()


reference = gradient(numpy.float64, 1.0).reshape(-1)   # the true gradient (float64)
print(f"true gradient magnitudes: from {numpy.abs(reference).min():.2g} "
      f"to {numpy.abs(reference).max():.2g}")

# %% [markdown]
# ## Three runs of the same backward pass
# For each scale S: the fp16 gradient (S times the true one), then divided by S in fp32. The
# division must happen in fp32: the true values do not fit fp16, that is the whole point.

# %%
common.heading("the same gradient at three loss scales")
cases = {"unscaled (S = 1)": 1.0, "scaled (S = 2**12)": 2.0 ** 12,
         "overflowed (S = 2**28)": 2.0 ** 28}
results = {}
print(f"{'case':24s} {'flushed to 0':>13s} {'inf or NaN':>11s} {'median rel. error':>18s}")
for name, scale in cases.items():
    raw = gradient(numpy.float16, scale).reshape(-1)              # fp16, scaled
    recovered = raw.astype(numpy.float32) / numpy.float32(scale)  # unscaled in fp32
    flushed = (raw == 0) & (reference != 0)
    inf = ~numpy.isfinite(raw)
    finite = ~inf & ~flushed
    error = numpy.abs(recovered[finite] - reference[finite]) / numpy.abs(reference[finite])
    results[name] = (scale, recovered, flushed, inf)
    median = f"{numpy.median(error):.2e}" if error.size else "no value left"
    print(f"{name:24s} {flushed.mean():13.1%} {int(inf.sum()):11d} {median:>18s}")

# %% [markdown]
# `loss * S` followed by `backward()` (Torch style) is the same as seeding backprop with S
# (MindSpore's `GradOperation(sens_param=True)`, the way a loss scale enters its train step):

# %%
w = Parameter(w0.astype(numpy.float16), name="w")
(seeded,) = GradOperation(get_by_list=True, sens_param=True)(
    lambda inputs: loss_of(w, inputs), [w])(Tensor(x.astype(numpy.float16)),
                                            Tensor(numpy.float32(2.0 ** 12)))
same = numpy.array_equal(seeded.asnumpy().reshape(-1),
                         gradient(numpy.float16, 2.0 ** 12).reshape(-1))
print("GradOperation with sens = 2**12 gives the same fp16 gradient as "
      f"(loss * 2**12).backward(): {same}")
bad = results["overflowed (S = 2**28)"][3]
print(f"the overflowed gradient holds {int(bad.sum())} inf/NaN values of {bad.size}: a loss-scaled "
      "step skips it and lowers S")

# %% [markdown]
# ## The picture
# Each dot is one weight-gradient value: its true size (x) against what fp16 with loss scale S
# gives back after the division (y). On the diagonal: recovered. At the bottom edge: flushed to
# 0. At the top edge: inf or NaN. The dashed lines are fp16's limits divided by S, i.e. the
# window of true gradients that S lets through.

# %%
CAPTIONS = {"unscaled (S = 1)": "values under 3e-8 flush to 0, under 6.1e-5 lose bits",
            "scaled (S = 2**12)": "every scaled value fits fp16: all recovered",
            "overflowed (S = 2**28)": "output gradient > 65504 became inf; the matmul made NaN"}
fig, axes = plt.subplots(1, 3, figsize=(15, 5), sharey=True, constrained_layout=True)
true = numpy.abs(reference)
low, high = true.min() / 3, true.max() * 3
for ax, (name, (scale, recovered, flushed, inf)) in zip(axes, results.items()):
    ok = ~flushed & ~inf
    ax.loglog(true[ok], numpy.abs(recovered[ok]), ".", markersize=3, color="tab:blue",
              label=f"recovered ({ok.mean():.0%})")
    ax.plot(true[flushed], numpy.full(flushed.sum(), low), "v", markersize=4, color="tab:red",
            label=f"flushed to 0 ({flushed.mean():.0%}; drawn at the bottom)")
    ax.plot(true[inf], numpy.full(inf.sum(), high), "^", markersize=4, color="black",
            label=f"inf or NaN ({inf.mean():.0%}; drawn at the top)")
    ax.plot([low, high], [low, high], color="gray", linewidth=0.8, label="exact")
    for value, text, color in common.FP16_LIMITS:
        if low <= value / scale <= high:
            ax.axvline(value / scale, color=color, linestyle="--", linewidth=1.2,
                       label=f"fp16's {text.split(' (')[0]} / S")
    ax.set_xlim(low / 2, high * 2)
    ax.set_ylim(low / 2, high * 2)
    ax.set_title(f"{name}\n{CAPTIONS[name]}", fontsize=10)
    ax.set_xlabel("true gradient |g| (float64, log scale)")
    ax.legend(fontsize="x-small", loc="lower right")
axes[0].set_ylabel("|fp16 gradient| / S, computed in fp32 (log scale)")
fig.suptitle("one fp16 weight gradient at three loss scales: scaling moves fp16's window over "
             "the true values")
common.save(fig, args.out, "loss_scaling_by_hand.png")
