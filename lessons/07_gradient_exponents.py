# %% [markdown]
# # Lesson 7 — where the gradients fall in fp16's range, layer by layer
#
# In the spirit of Fig. 3 of Micikevicius et al., "Mixed Precision Training" (ICLR 2018): take
# the true (fp32) gradients of a trained network, histogram the binary exponents of their
# magnitudes per layer, and lay fp16's range over them. At scale 1 part of them fall below
# 2**-24 and would flush to zero in fp16; multiplying by a loss scale S = 2**k moves every
# exponent up by k, into the representable range, as long as the largest stays below 65504.
#
# The shares printed here (and written to `underflow_shares.json`, beside the gradients in
# `gradients.npz`) are those of `minigrad.amp.plots.gradient_exponents`.
#
#     python lessons/07_gradient_exponents.py [--out FOLDER] [--quick]

# %%
"""Lesson 7: per-layer gradient-exponent histograms against fp16's range, with underflow shares."""
import json
import os

import common
import numpy

import minigrad
from minigrad import Model, Tensor, nn, value_and_grad
from minigrad.amp import plots
from minigrad.dataset import NumpySlicesDataset, load_digits
from minigrad.train import Accuracy

args = common.parse_args(__doc__)
plt = common.pyplot()

# %% [markdown]
# ## A small CNN, trained in fp32
# Gradients shrink as a network learns (confident predictions give small errors), so we train
# first and look at the gradients afterwards.

# %%
minigrad.set_seed(0)
(x_train, y_train), (x_test, y_test) = load_digits(split=0.2, seed=0, flatten=False)


class CNN(nn.Cell):
    """(1, 8, 8) -> conv 3x3 x8 -> pool -> conv 3x3 x16 -> pool -> dense 10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, pad_mode="same", has_bias=True, weight_init="he_uniform",
                               bias_init="zeros")
        self.conv2 = nn.Conv2d(8, 16, 3, pad_mode="same", has_bias=True, weight_init="he_uniform",
                               bias_init="zeros")
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(16 * 2 * 2, 10, weight_init="he_uniform", bias_init="zeros")

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        return self.fc(self.flatten(x))


net = CNN()
loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
model = Model(net, loss_fn, optimizer, metrics={"acc": Accuracy()})
epochs = 2 if args.quick else 15
model.train(epochs, NumpySlicesDataset((x_train, y_train), shuffle=True).batch(32))
accuracy = model.eval(NumpySlicesDataset((x_test, y_test)).batch(256))["acc"]
print(f"trained {epochs} epochs in fp32: test accuracy {accuracy:.1%}")

# %% [markdown]
# ## The true gradients of one batch
# Weight gradients come from `value_and_grad`; the gradients at each layer's *output* (the
# activation gradients of the paper's figure) from a forward hook that registers a tensor hook.

# %%
activation_grads = {}


def record_output_gradient(name):
    def forward_hook(cell, inputs, output):
        def tensor_hook(grad):
            activation_grads[name] = grad.asnumpy().copy()
        output.register_hook(tensor_hook)
    return forward_hook


for name in ("conv1", "conv2", "fc"):
    getattr(net, name).register_forward_hook(record_output_gradient(f"{name} output"))
x, y = Tensor(x_train[:256]), Tensor(y_train[:256])
_, (_, weight_grads) = value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=0,
                                      weights=net.trainable_params())(x, y)
gradients = dict(activation_grads)
gradients.update({p.name: g.asnumpy() for p, g in zip(net.trainable_params(), weight_grads)
                  if p.name.endswith("weight")})
for name, g in gradients.items():
    magnitude = numpy.abs(g[g != 0])
    print(f"{name:16s} {g.size:6d} values, |g| from {magnitude.min():.1e} to {magnitude.max():.1e}")

# %% [markdown]
# ## Choosing the scale
# The largest power of two that keeps the largest scaled gradient at or below 65504 / 2 (one
# binade of headroom: what a dynamic scaler settles near).

# %%
largest = max(float(numpy.abs(g).max()) for g in gradients.values())
k = int(numpy.floor(numpy.log2(common.FP16_MAX / 2 / largest)))
scale = 2.0 ** k
print(f"largest |gradient| {largest:.3g}: chosen scale S = 2**{k} = {scale:g} "
      f"(largest scaled value {largest * scale:.0f} <= 65504)")

# %% [markdown]
# ## Shares that underflow, per layer
# "flushed": nonzero values that become 0 in fp16; "subnormal": values kept with fewer than 11
# significant bits; "overflow": values that become inf.

# %%
common.heading("share of each layer's gradient values, rounded once to fp16")
print(f"{'tensor':16s} | {'S = 1: flushed':>14s} {'subnormal':>9s} | "
      f"{f'S = 2**{k}: flushed':>17s} {'subnormal':>9s} {'overflow':>8s}")
shares = {}
for name, g in gradients.items():
    at_one = plots.gradient_exponents(g, 1.0)["fp16"]
    at_scale = plots.gradient_exponents(g, scale)["fp16"]
    shares[name] = {"1": at_one, str(scale): at_scale}
    print(f"{name:16s} | {at_one['flushed']:14.2%} {at_one['subnormal']:9.2%} | "
          f"{at_scale['flushed']:17.2%} {at_scale['subnormal']:9.2%} {at_scale['overflow']:8.2%}")
numpy.savez(os.path.join(args.out, "gradients.npz"), **gradients)
with open(os.path.join(args.out, "underflow_shares.json"), "w", encoding="utf-8") as file:
    json.dump({"scale": scale, "shares": shares}, file, indent=1)
print(f"shares written to {os.path.join(args.out, 'underflow_shares.json')}")

# %% [markdown]
# ## The picture
# One panel per tensor: the share of its values per binary exponent, at scale 1 (blue) and at
# the chosen scale (orange), over fp16's regions: flushed to 0 (red), subnormal (orange),
# normal (green), overflow (red). The bars are `plots.gradient_exponents`'s histogram.

# %%
REGIONS = ((-numpy.inf, -24.5, "tab:red", "flushed to 0 in fp16"),
           (-24.5, -14.5, "tab:orange", "subnormal in fp16"),
           (-14.5, 15.5, "tab:green", "normal in fp16"),
           (15.5, numpy.inf, "tab:red", None))
histograms = {name: [plots.gradient_exponents(g, s) for s in (1.0, scale)]
              for name, g in gradients.items()}
low = min(int(h["exponents"].min()) for pair in histograms.values() for h in pair) - 2
high = 20
fig, axes = plt.subplots(len(gradients), 1, figsize=(13, 2.5 * len(gradients)), sharex=True,
                         constrained_layout=True)
for ax, (name, pair) in zip(axes, histograms.items()):
    for start, stop, color, text in REGIONS:
        ax.axvspan(max(start, low), min(stop, high), color=color, alpha=0.08, linewidth=0,
                   label=text if ax is axes[0] else None)
    for hist, label, color in zip(pair, ("scale 1", f"scale 2**{k}"), ("tab:blue", "tab:orange")):
        fp16 = hist["fp16"]
        ax.bar(hist["exponents"], hist["counts"] / hist["total"], width=0.9, alpha=0.7, color=color,
               label=f"{label}: {fp16['flushed']:.1%} flush to 0, "
                     f"{fp16['subnormal']:.1%} subnormal, "
                     f"{fp16['overflow']:.1%} overflow")
    common.mark_fp16_limits(ax, exponents=True, labels=ax is axes[0])
    ax.set_xlim(low, high)
    ax.set_yscale("log")
    ax.set_ylabel("share of values (log)")
    ax.set_title(f"{name}: {pair[0]['total']} gradient values", fontsize=10)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
axes[-1].set_xlabel("binary exponent e of |gradient| x scale (a bar at e: values in "
                    "[2**e, 2**(e+1)))")
fig.suptitle("per-layer gradient magnitudes against fp16's range, at scale 1 and at the loss "
             "scale (after Micikevicius et al., ICLR 2018, Fig. 3)")
common.save(fig, args.out, "gradient_exponents.png")
