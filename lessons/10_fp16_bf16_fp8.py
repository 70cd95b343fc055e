# %% [markdown]
# # Lesson 10 — fp16, bf16 and FP8 side by side
#
# Mixed precision is three formats now, not one. Four things to see:
#
# 1. **the number lines**: where each format has values (range), how far apart they are
#    (spacing) and where the subnormals start: fp16 (5 exponent bits), bf16 (8, fp32's range),
#    FP8 E4M3 (4, max 448) and E5M2 (5, max 57344);
# 2. **the bf16 accumulation trap**: bf16 has fp32's range, so it needs no loss scaling, but only
#    8 significant bits: a running sum in bf16 stops growing at 256;
# 3. **digits in fp32, fp16 with loss scaling, bf16, and FP8** with delayed and current scaling
#    (Transformer Engine's recipes, HYBRID: E4M3 forward, E5M2 gradients), their loss curves and
#    test accuracy, and what the FP8 casts did to each tensor;
# 4. **a layer where delayed scaling lags**: its scale comes from earlier steps' amax, so when
#    the activations jump, the step of the jump clips, and current scaling does not.
#
#     python lessons/10_fp16_bf16_fp8.py [--out FOLDER] [--quick]

# %%
"""Lesson 10: fp16, bf16 and FP8 side by side: number lines, accumulation, digits, lag."""
import common
import numpy

import minigrad
from minigrad import Tensor, amp, fp8, nn
from minigrad.dataset import load_digits

args = common.parse_args(__doc__)
plt = common.pyplot()
try:
    import ml_dtypes
except ImportError:
    print('this lesson needs ml_dtypes for bf16 and FP8: pip install ".[lowp]"')
    raise SystemExit(0)

# %% [markdown]
# ## 1. Four number lines
# Every format below is a sign, an exponent and a mantissa. The exponent bits set the range
# (how many binades, powers of two, it covers); the mantissa bits set the spacing inside a
# binade (relative spacing 2^-mantissa bits). Below the smallest normal value the spacing stops
# shrinking: those are the subnormals, with fewer and fewer significant bits.

# %%
common.heading("the four formats")
FORMATS = {"fp16": numpy.float16, "bf16": ml_dtypes.bfloat16,
           "FP8 E4M3": ml_dtypes.float8_e4m3fn, "FP8 E5M2": ml_dtypes.float8_e5m2}


def positive_values(dtype):
    """Every positive finite value of a 16- or 8-bit float format, ascending."""
    bits = numpy.arange(2 ** (8 * numpy.dtype(dtype).itemsize), dtype=numpy.uint64)
    raw = bits.astype(numpy.uint16 if numpy.dtype(dtype).itemsize == 2 else numpy.uint8)
    with numpy.errstate(invalid="ignore"):  # the NaN patterns
        values = raw.view(dtype).astype(numpy.float64)
    return numpy.unique(values[numpy.isfinite(values) & (values > 0)])


print(f"{'format':9s} {'max':>10s} {'min normal':>11s} {'min subnormal':>14s} {'eps':>8s} "
      f"{'binades':>8s}")
lines = {}
for name, dtype in FORMATS.items():
    info = ml_dtypes.finfo(dtype)
    values = positive_values(dtype)
    lines[name] = values
    binades = numpy.log2(float(info.max) / float(info.smallest_subnormal))
    print(f"{name:9s} {float(info.max):10.4g} {float(info.smallest_normal):11.3g} "
          f"{float(info.smallest_subnormal):14.3g} {float(info.eps):8.3g} {binades:8.1f}")
fig, ax = plt.subplots(figsize=(11, 5), constrained_layout=True)
for (name, values), color in zip(lines.items(), ("tab:blue", "tab:green", "tab:red",
                                                  "tab:orange")):
    ax.loglog(values[:-1], numpy.diff(values) / values[:-1], ".", markersize=2, color=color,
              label=f"{name}: {values.size} positive values")
ax.set_xlabel("value")
ax.set_ylabel("relative spacing to the next value")
ax.set_title("range and spacing: bf16 spans fp32's range with 8 bits; FP8 spans 17 (E4M3) or "
             "32 (E5M2) binades")
ax.legend(fontsize="small", markerscale=6)
common.save(fig, args.out, "number_lines.png")

# %% [markdown]
# ## 2. The bf16 accumulation trap
# bf16 keeps 8 significant bits, so the spacing at 256 is 2: adding 1 to 256 rounds back to
# 256. A running sum of 10,000 values near 0.5 in bf16 therefore stops at 256, whatever comes
# next. Accumulating in fp32 and rounding the total once gives the right answer, which is why
# minigrad's low-precision rule runs sums, matmuls and convolutions in fp32 and rounds once.

# %%
common.heading("a running sum of 10,000 uniform values in [0, 1)")
uniform = numpy.random.default_rng(0).uniform(size=10_000)
in_bf16 = numpy.sum(uniform.astype(ml_dtypes.bfloat16))
in_fp32 = numpy.sum(uniform.astype(ml_dtypes.bfloat16), dtype=numpy.float32)
print(f"bf16(256) + bf16(1) = {ml_dtypes.bfloat16(256) + ml_dtypes.bfloat16(1)}")
print(f"sum in bf16: {in_bf16}; in fp32, rounded once: {ml_dtypes.bfloat16(in_fp32)}; "
      f"float64: {uniform.sum():.1f}")

# %% [markdown]
# ## 3. Digits in fp32, fp16 with loss scaling, bf16, and FP8
# The same MLP and the same batches, five ways: fp32; fp16 (AMP level O2, fp32 master weights,
# dynamic loss scaling); bf16 (O2 with `dtype=minigrad.bfloat16`: no loss scale, as in the peers,
# since bf16's range is fp32's); and FP8 GEMMs under `fp8.fp8_autocast` with Transformer Engine's
# delayed scaling (`DelayedScaling`, history 1024, `"max"`) and current scaling. The FP8 runs
# quantize each Dense layer's input and weight to E4M3 and its output gradient to E5M2, then
# multiply the dequantized values in fp32: the numerics of FP8 training, not its speed (on a CPU
# it is slower than fp32).

# %%
common.heading("digits: fp32, fp16 + loss scaling, bf16, FP8 delayed, FP8 current")
(x_train, y_train), (x_test, y_test) = load_digits(split=0.2, seed=0)
epochs, batch = (2, 32) if args.quick else (15, 32)


class FP8Network(nn.Cell):
    """``net`` with its Dense GEMMs in FP8 under ``recipe``."""

    def __init__(self, net, recipe):
        super().__init__()
        self.net, self.recipe = net, recipe

    def construct(self, x):
        with fp8.fp8_autocast(fp8_recipe=self.recipe):
            return self.net(x)


def train(run):
    minigrad.set_seed(0)
    mlp = nn.SequentialCell([nn.Dense(64, 128, weight_init="he_uniform", bias_init="zeros"),
                             nn.ReLU(),
                             nn.Dense(128, 10, weight_init="he_uniform", bias_init="zeros")])
    net = {"FP8 delayed": lambda: FP8Network(mlp, fp8.DelayedScaling()),
           "FP8 current": lambda: FP8Network(mlp, fp8.CurrentScaling())}.get(run, lambda: mlp)()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    if run == "fp16 + loss scaling":
        manager = amp.DynamicLossScaleManager(init_loss_scale=2 ** 16, scale_window=200)
        step = amp.build_train_network(net, opt, loss_fn, level="O2", loss_scale_manager=manager)
    elif run == "bf16":
        step = amp.build_train_network(net, opt, loss_fn, level="O2", dtype=minigrad.bfloat16)
    else:
        step = amp.build_train_network(net, opt, loss_fn, level="O0")
    order = numpy.random.default_rng(0)
    losses = []
    for _ in range(epochs):
        for i in numpy.array_split(order.permutation(len(y_train)), len(y_train) // batch):
            out = step(Tensor(x_train[i]), Tensor(y_train[i]))
            losses.append(float((out[0] if isinstance(out, tuple) else out).asnumpy()))
    logits = net(Tensor(x_test.astype(net.trainable_params()[0].dtype))).asnumpy()
    return net, losses, float((logits.argmax(1) == y_test).mean())


runs = {}
for run in ("fp32", "fp16 + loss scaling", "bf16", "FP8 delayed", "FP8 current"):
    runs[run] = train(run)
    print(f"{run:20s} test accuracy {runs[run][2]:.4f}, last loss {runs[run][1][-1]:.6f}")
print("\nwhat the FP8 casts did in the last step (FP8 delayed):")
print(fp8.format_report(fp8.tensor_report(runs["FP8 delayed"][0])))
fig, ax = plt.subplots(figsize=(11, 5), constrained_layout=True)
for (run, (_, losses, accuracy)), color in zip(runs.items(), ("black", "tab:blue", "tab:green",
                                                               "tab:red", "tab:orange")):
    smooth = numpy.convolve(losses, numpy.ones(10) / 10, mode="valid")
    ax.plot(smooth, color=color, label=f"{run} (test accuracy {accuracy:.3f})")
ax.set_yscale("log")
ax.set_xlabel("step")
ax.set_ylabel("training loss (mean of 10 steps, log)")
ax.set_title("the same MLP on digits in fp32, fp16 with loss scaling, bf16, and FP8 (HYBRID)")
ax.legend(fontsize="small")
common.save(fig, args.out, "digits_fp32_fp16_fp8.png")

# %% [markdown]
# ## 4. Delayed scaling lags an amax jump
# Delayed scaling picks this step's scale from the amax of earlier steps (no extra pass over
# the tensor), then records this step's amax. When the activations grow suddenly (a new data
# distribution, a learning-rate spike), the step of the jump casts with the old scale, and
# everything above 448 / scale is clipped to ±448. The next step's scale has caught up.
# Current scaling reads this step's amax first, so it never clips, at the cost of a second
# pass over the tensor. The plot draws each tensor's amax (solid) against the largest amax its
# scale allows, 448 / scale (dashed): where the solid line is above the dashed one, values clip.

# %%
common.heading("a Dense layer whose input jumps 100x at step 6")
clip = {}
for name, recipe in (("delayed", fp8.DelayedScaling(amax_history_len=16)),
                     ("current", fp8.CurrentScaling())):
    minigrad.set_seed(0)
    layer = nn.SequentialCell([nn.Dense(32, 16)])
    data = numpy.random.default_rng(1)
    shares = []
    for step in range(10):
        x = data.standard_normal((8, 32)).astype(numpy.float32) * (100.0 if step >= 5 else 1.0)
        with fp8.fp8_autocast(fp8_recipe=recipe):
            layer(Tensor(x)).sum().backward()
        shares.append(fp8.tensor_report(layer)[0]["clipped"])
    clip[name] = layer
    print(f"{name:8s} share of the input clipped per step: "
          f"{' '.join(f'{s:.0%}' for s in shares)}")
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True, constrained_layout=True)
for ax, (name, layer) in zip(axes, clip.items()):
    fp8.plots.plot_history(layer, axes=[ax])
    ax.set_title(f"{name} scaling: amax and 448 / scale (E4M3) or 57344 / scale (E5M2)",
                 fontsize=9)
common.save(fig, args.out, "delayed_scaling_lag.png")
