# %% [markdown]
# # Lesson 1 — fp16 up close
#
# A float16 value has 1 sign bit, 5 exponent bits and 10 fraction bits. That buys a range from
# 6e-8 to 65504 and about three decimal digits. This lesson looks at every one of the 31,743
# positive finite fp16 values (subnormals included): where they lie, how far apart they are,
# why `1 + 1e-4` is `1` in fp16, and why small gradients vanish.
#
#     python lessons/01_fp16_up_close.py [--out FOLDER] [--quick]
#
# (It takes seconds either way: `--quick` changes nothing here.)

# %%
"""Lesson 1: fp16 up close: range, subnormals, spacing, rounding, and vanishing gradients."""
import common
import numpy

import minigrad
from minigrad import Tensor

args = common.parse_args(__doc__)
plt = common.pyplot()

# %% [markdown]
# ## The limits
# `numpy.finfo` knows them. Above 65504 there is only `inf`; below 6.1e-5 the values are
# *subnormal* (evenly spaced, fewer significant bits); below 6e-8 there is only 0.

# %%
common.heading("fp16's limits")
info = numpy.finfo(numpy.float16)
print(f"largest finite value  {float(info.max):.6g}   (= (2 - 2**-10) * 2**15)")
print(f"smallest normal       {float(info.tiny):.6g}   (= 2**-14)")
print(f"smallest subnormal    {float(info.smallest_subnormal):.6g}   (= 2**-24)")
print(f"machine epsilon       {float(info.eps):.6g}   (= 2**-10: the gap just above 1)")
with numpy.errstate(over="ignore"):  # rounding to inf is what we want to see
    for x in (65504.0, 65519.0, 65520.0, 1e5):
        print(f"fp16({x:g}) = {float(numpy.float16(x)):g}")

# %% [markdown]
# ## Every positive fp16 value
# Reading the bit patterns 0x0001 ... 0x7BFF as float16 lists them all, in increasing order.
# The gap to the next value doubles every binade (power of two) in the normal range, and is a
# constant 2**-24 among the subnormals.

# %%
common.heading("every positive finite fp16 value")
bits = numpy.arange(0x0001, 0x7C00, dtype=numpy.uint16)   # 0x7C00 is +inf
values = bits.view(numpy.float16).astype(numpy.float64)
gaps = numpy.diff(numpy.append(values, 65536.0))  # gap to the next value (65536: inf's place)
subnormal = values < info.tiny
print(f"{values.size} positive finite values: {int(subnormal.sum())} subnormal, "
      f"{int((~subnormal).sum())} normal")
print(f"{int((values < 1).sum())} of them ({(values < 1).mean():.0%}) lie below 1")
for x in (6e-8, 1e-5, 1e-3, 1.0, 1000.0, 60000.0):
    i = numpy.searchsorted(values, x)
    print(f"near {x:<8g} the gap between neighbours is {gaps[i]:.3g} "
          f"(relative {gaps[i] / values[i]:.2g})")

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
left.loglog(values[subnormal], gaps[subnormal], ".", markersize=2, color="tab:orange",
            label="subnormal values (gap fixed at 2**-24 = 6e-8)")
left.loglog(values[~subnormal], gaps[~subnormal], ".", markersize=2, color="tab:blue",
            label="normal values (gap doubles every binade)")
common.mark_fp16_limits(left)
left.set_xlabel("fp16 value (log scale, no unit)")
left.set_ylabel("gap to the next fp16 value (log scale)")
left.set_title("absolute spacing of all 31,743 positive fp16 values")
left.legend(fontsize="small", loc="upper left")
right.semilogx(values, gaps / values, ".", markersize=2, color="tab:purple",
               label="gap / value (relative rounding step)")
right.axhline(info.eps, color="gray", linestyle=":", label="2**-10 = 9.8e-4 (10 fraction bits)")
right.axhline(info.eps / 2, color="gray", linestyle="-.", label="2**-11 = 4.9e-4")
common.mark_fp16_limits(right)
right.set_yscale("log")
right.set_xlabel("fp16 value (log scale, no unit)")
right.set_ylabel("relative spacing (log scale)")
right.set_title("relative spacing: 2**-11 to 2**-10 for normals, up to 1 for subnormals")
right.legend(fontsize="small", loc="upper right")
common.save(fig, args.out, "fp16_spacing.png")

# %% [markdown]
# ## Why `1 + 1e-4` is `1`
# Next to 1 the fp16 values are 2**-10 = 0.000977 apart. 1.0001 is closer to 1 than to
# 1.000977, so it rounds back to 1. minigrad keeps the tensor's dtype when you add a Python
# float (the scalar is *weak*), exactly as fp16 hardware would.

# %%
common.heading("1 + 1e-4 in fp16")
one = Tensor(numpy.ones(1, numpy.float16))
for small in (1e-4, 4.8e-4, 4.9e-4, 1e-3):
    result = one + small
    print(f"fp16: 1 + {small:g} = {float(result.asnumpy()[0]):.7f}  ({result.dtype}); "
          f"fp32 gives {float(numpy.float32(1) + numpy.float32(small)):.7f}")
print("an update smaller than half a gap is lost: this is why optimizers keep fp32 master weights")

# %%
near = values[(values > 0.9955) & (values < 1.0045)]
fig, ax = plt.subplots(figsize=(11, 3.4), constrained_layout=True)
ax.vlines(near, -0.2, 0.2, color="tab:blue", label="representable fp16 values")
ax.plot([1 + 1e-4], [0.55], "v", markersize=10, color="tab:red", label="1 + 1e-4 (exact value)")
ax.annotate("1 + 1e-4 rounds to the nearest fp16 value: 1.0", xy=(1.0, 0.22), xytext=(1.0006, 0.7),
            fontsize=10, arrowprops={"arrowstyle": "->", "color": "tab:red"})
below, above = 1 - 2.0 ** -11, 1 + 2.0 ** -10
for start, stop, text, align in ((below, 1.0, "gap 2**-11 = 0.00049 ", "right"),
                                 (1.0, above, " gap 2**-10 = 0.00098", "left")):
    ax.annotate("", xy=(start, -0.4), xytext=(stop, -0.4), arrowprops={"arrowstyle": "<->"})
    ax.text(start if align == "right" else stop, -0.62, text, ha=align, fontsize=9)
ax.set_ylim(-1, 1)
ax.set_yticks([])
ax.set_xlabel("value (no unit)")
ax.set_title("the fp16 number line around 1: the nearest neighbour of 1 is 1.000977")
ax.legend(loc="upper left", fontsize="small")
common.save(fig, args.out, "fp16_number_line_near_1.png")

# %% [markdown]
# ## Why small gradients vanish
# A gradient below 2**-25 (3e-8) rounds to 0 in fp16; up to 6.1e-5 it keeps only a few
# bits. Here an fp16 parameter gets a gradient of 1e-8 through minigrad's autograd engine:
# the engine stores a gradient in its tensor's dtype, so it comes back as exactly 0.

# %%
common.heading("a gradient of 1e-8 in fp16")
for dtype in (minigrad.float32, minigrad.float16):
    w = minigrad.Parameter(numpy.ones(4, dtype), name="w")
    loss = (w * 1e-4 * 1e-4).sum()          # d loss / d w = 1e-8 for every element
    loss.backward()
    print(f"{dtype!s:8s} gradient: {w.grad.asnumpy()}")
true = numpy.logspace(-9, -4, 2000)
rounded = true.astype(numpy.float16).astype(numpy.float64)
print(f"of {true.size} values spread evenly (in log) over [1e-9, 1e-4]: "
      f"{(rounded == 0).mean():.0%} become 0 in fp16, "
      f"{((rounded > 0) & (rounded < info.tiny)).mean():.0%} subnormal")

# %%
fig, ax = plt.subplots(figsize=(9, 5), constrained_layout=True)
shown = numpy.where(rounded > 0, rounded, numpy.nan)
ax.loglog(true, true, color="gray", linewidth=1, label="exact (no rounding)")
ax.loglog(true, shown, color="tab:blue", label="value after rounding to fp16")
flushed = rounded == 0
ax.hlines(1.2e-8, true[flushed].min(), true[flushed].max(), color="tab:red", linewidth=4,
          label=f"stored as 0 ({flushed.mean():.0%} of these values; drawn at the bottom, "
                "a log axis has no 0)")
ax.axvline(2.0 ** -25, color="gray", linestyle=":", label="3e-8 = 2**-25: below it, 0")
common.mark_fp16_limits(ax, span=(1e-9, 1e-4))
ax.set_xlim(1e-9, 1e-4)
ax.set_ylim(1e-8, 2e-4)
ax.set_xlabel("true value, e.g. a gradient (log scale)")
ax.set_ylabel("value stored in fp16 (log scale)")
ax.set_title("small values in fp16: staircase of subnormals, then flush to 0 below 3e-8")
ax.legend(fontsize="small", loc="upper left")
common.save(fig, args.out, "fp16_small_values.png")
