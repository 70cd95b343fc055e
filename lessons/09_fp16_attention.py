# %% [markdown]
# # Lesson 9 — fp16 inside attention
#
# Attention is where fp16 bites hardest in a transformer. Four things to see:
#
# 1. **the logits' range**: the scores q·k grow with the square of the activations, and a naive
#    fp16 matmul stores them in fp16, where anything above 65504 is inf;
# 2. **the -1e9 mask trap**: an additive mask of -1e9 is -inf in fp16; a query whose keys are
#    all masked then gets NaN weights (and in fp32, uniform weights over the padding);
# 3. **softmax in fp16 vs fp32**: exp and the row sum in fp16 lose bits as rows get longer;
# 4. **what the step report shows** when attention overflows in a training step: a
#    non-finite *loss*, which no loss scale can fix, against a gradient overflow, which the
#    scale fixes.
#
# minigrad's `ops.scaled_dot_product_attention` (under `nn.MultiheadAttention`) keeps the
# scores, the mask and the softmax in fp32 and rounds only its output to fp16; a mask value of
# -inf or below -65504 removes the key, and a query with no key left gets zeros.
#
#     python lessons/09_fp16_attention.py [--out FOLDER] [--quick]

# %%
"""Lesson 9: fp16 inside attention: logit range, the -1e9 mask trap, softmax, the step report."""
import common
import numpy

import minigrad
from minigrad import Tensor, amp, nn, ops
from minigrad.nn.init import Normal

args = common.parse_args(__doc__)
plt = common.pyplot()
rng = numpy.random.default_rng(0)

# %% [markdown]
# ## 1. The logits' range against fp16's
# With q and k of d = 64 entries of size σ, a score q·k has a spread of about σ²·√d = 8σ². As
# training sharpens attention, q and k grow; at σ = 32 the largest raw scores already pass
# 65504. Scaling q by 1/√d before the product (what PyTorch does) buys a factor of 8; computing
# the product in fp32 (what minigrad does) removes the limit.

# %%
common.heading("attention scores against fp16's largest value, 65504")
d, length = 64, 64 if args.quick else 256
sigmas = (1, 8, 32, 64)
raw_scores = {}
print(f"{'sigma':>6s} {'largest |q.k|':>14s} {'> 65504 raw':>12s} {'> 65504 after q/sqrt(d)':>24s}")
for sigma in sigmas:
    q = rng.standard_normal((length, d)) * sigma
    k = rng.standard_normal((length, d)) * sigma
    scores = q @ k.T
    raw_scores[sigma] = scores.ravel()
    over_raw = numpy.mean(numpy.abs(scores) > common.FP16_MAX)
    over_scaled = numpy.mean(numpy.abs(scores / numpy.sqrt(d)) > common.FP16_MAX)
    print(f"{sigma:6d} {numpy.abs(scores).max():14.4g} {over_raw:12.2%} {over_scaled:24.2%}")
fig, ax = plt.subplots(figsize=(10, 5), constrained_layout=True)
bins = numpy.arange(-6, 22, 0.5)
for sigma, color in zip(sigmas, ("tab:blue", "tab:green", "tab:orange", "tab:purple")):
    magnitude = numpy.log2(numpy.abs(raw_scores[sigma]) + 1e-12)
    ax.hist(magnitude, bins=bins, alpha=0.55, color=color, label=f"q, k entries of size {sigma}")
ax.axvline(numpy.log2(common.FP16_MAX), color="tab:red", linestyle="--", linewidth=1.2,
           label="log2(65504): fp16 overflows to inf")
ax.set_xlabel("log2 |q · k|  (raw attention scores, d = 64)")
ax.set_ylabel("count")
ax.set_title("attention scores grow with the square of the activations; fp16 stops at 65504")
ax.legend(fontsize="small")
common.save(fig, args.out, "attention_logit_range.png")

# %% [markdown]
# ## 2. The -1e9 mask trap
# Padding is usually masked by adding a large negative number. In fp16, -1e9 is -inf. A row
# with some keys left is still fine (exp(-inf) = 0), but a query whose keys are *all* masked
# (a padded position) becomes NaN: the row maximum is -inf and -inf - (-inf) is NaN. In fp32
# the same row gives uniform weights over the padding, which is wrong too, only quietly.
# A smaller mask such as -1e4 keeps fp16 finite, but does not mask once scores reach 1e4.

# %%
common.heading("the -1e9 mask trap")
with numpy.errstate(over="ignore"):
    print(f"fp16(-1e9) = {numpy.float16(-1e9)}")


def softmax(row, dtype):
    """softmax of one row computed entirely in ``dtype`` (as a naive fp16 kernel would)."""
    row = numpy.asarray(row, dtype)
    with numpy.errstate(invalid="ignore", over="ignore"):
        e = numpy.exp(row - row.max())
        return e / e.sum(dtype=dtype)


scores = numpy.array([2.0, 1.0, 0.5, -1.0])
all_masked = numpy.full(4, -1e9)
with numpy.errstate(over="ignore"):
    half_masked = (scores + all_masked).astype(numpy.float16)
print(f"naive fp16 softmax, every key masked with -1e9: {softmax(half_masked, numpy.float16)}")
print(f"fp32 softmax of the same row:                 {softmax(scores + all_masked, numpy.float32)}"
      "  (uniform over padding)")
q = Tensor(rng.standard_normal((1, 4)).astype(numpy.float16))
k = Tensor(rng.standard_normal((4, 4)).astype(numpy.float16))
v = Tensor(rng.standard_normal((4, 4)).astype(numpy.float16))
with numpy.errstate(over="ignore"):
    mask = Tensor(all_masked[None].astype(numpy.float16))
out, weights = ops.scaled_dot_product_attention(q, k, v, mask, need_weights=True)
print(f"minigrad (fp16, the mask rule): weights {weights.asnumpy()[0]}, output "
      f"{out.asnumpy()[0]}")
large = numpy.array([20000.0, 30000.0])
print(f"scores {large} with a -1e4 mask on the second key: weights "
      f"{softmax(large + [0.0, -1e4], numpy.float32)}  (the 'masked' key still wins)")
panels = {"fp16, -1e9 (naive)": softmax(half_masked, numpy.float16),
          "fp32, -1e9": softmax(scores + all_masked, numpy.float32),
          "minigrad fp16, -1e9": weights.asnumpy()[0].astype(numpy.float32)}
fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True, constrained_layout=True)
for ax, (name, w) in zip(axes, panels.items()):
    shown = numpy.nan_to_num(w, nan=0.0)
    bars = ax.bar(range(4), shown, color=["tab:red" if numpy.isnan(x) else "tab:blue" for x in w])
    for bar, value in zip(bars, w):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.02,
                "NaN" if numpy.isnan(value) else f"{value:.2f}", ha="center", fontsize=11,
                fontweight="bold")
    ax.set_xticks(range(4))
    ax.set_title(name)
    ax.set_xlabel("key (all four masked)")
    ax.set_ylim(0, 1)
axes[0].set_ylabel("attention weight")
fig.suptitle("a query whose every key is masked: NaN in naive fp16, uniform over padding in "
             "fp32, zeros under minigrad's rule")
common.save(fig, args.out, "attention_mask_trap.png")

# %% [markdown]
# ## 3. Softmax in fp16 vs fp32
# Even with the maximum subtracted, a softmax computed in fp16 rounds every exp and every
# partial sum to 11 bits. A kernel that adds the row up in order (as a simple loop does) lets
# the rounding of each addition pile up, and once the running sum is large the small terms
# stop counting at all (1 + 1e-4 is 1 in fp16): the longer the row, the worse. minigrad
# computes the softmax in fp32 and rounds each weight once.

# %%
common.heading("softmax error against float64, by row length")
lengths = [16, 64, 256, 1024] if args.quick else [16, 64, 256, 1024, 4096, 16384]
NAIVE, OURS = "naive fp16 (exp and a running sum in fp16)", "minigrad (fp32 inside, rounded once)"
errors = {NAIVE: [], OURS: []}


def naive_softmax(row):
    """exp, a left-to-right running sum and the division, all in fp16."""
    e = numpy.exp(row - row.max())
    return e / numpy.cumsum(e, dtype=numpy.float16)[-1]


for n in lengths:
    row = (rng.standard_normal(n) * 2).astype(numpy.float16)
    exact = softmax(row.astype(numpy.float64), numpy.float64)
    naive = naive_softmax(row).astype(numpy.float64)
    ours = ops.softmax(Tensor(row[None])).asnumpy()[0].astype(numpy.float64)
    # the error of the weights' total: 1 exactly, whatever the length
    errors[NAIVE].append(abs(naive.sum() - exact.sum()))
    errors[OURS].append(abs(ours.sum() - exact.sum()))
    print(f"row of {n:6d}: |sum of weights - 1|: naive fp16 {errors[NAIVE][-1]:.2e}, "
          f"minigrad {errors[OURS][-1]:.2e}")
fig, ax = plt.subplots(figsize=(9, 5), constrained_layout=True)
for (name, values), marker in zip(errors.items(), ("o", "s")):
    ax.loglog(lengths, numpy.maximum(values, 1e-8), marker=marker, label=name)
ax.axhline(2.0 ** -11, color="gray", linestyle=":", label="fp16's relative spacing, 2**-11")
ax.set_xlabel("row length (keys)")
ax.set_ylabel("|sum of the weights - 1|")
ax.set_title("softmax of fp16 scores: computed in fp16 vs in fp32")
ax.legend()
common.save(fig, args.out, "softmax_fp16_vs_fp32.png")


# %% [markdown]
# ## 4. What the step report shows when attention overflows
# A one-block model whose attention has grown sharp (its query and key projections scaled up),
# trained at O2 with dynamic loss scaling, twice from the same weights: once with attention
# written from fp16 ops (`matmul`, then `softmax`: the scores are stored in fp16), once with
# `nn.MultiheadAttention`. The naive version's scores pass 65504 in the *forward* pass: the
# loss is NaN, the report says `nonfinite_loss`, and lowering the scale changes nothing. The
# minigrad version trains; its first steps show the other kind of skip, a gradient overflow
# at a too-high initial scale, naming the parameters whose gradients overflowed.

# %%
VOCAB, WIDTH, HEADS, CONTEXT, BATCH = 16, 32, 2, 16, 16
STEPS = 12 if args.quick else 60


def naive_attention(mha, x, mask):
    """``mha``'s self-attention written from fp16 ops: the scores q·kᵀ are a stored fp16
    tensor (the same parameters, and the same formula, as ``mha(x, x, x)``)."""
    n, t, e = x.shape
    d = e // HEADS
    qkv = ops.dense(x, mha.in_proj_weight, mha.in_proj_bias)
    q, k, v = (ops.transpose(ops.reshape(part, (n, t, HEADS, d)), (0, 2, 1, 3))
               for part in ops.split(qkv, 3, axis=-1))
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) * (1 / d ** 0.5) + mask
    out = ops.matmul(ops.softmax(scores), v)
    return mha.out_proj(ops.reshape(ops.transpose(out, (0, 2, 1, 3)), (n, t, e)))


class TinyLM(nn.Cell):
    """Embeddings, one causal attention block (naive or minigrad's), a head."""

    def __init__(self, naive):
        super().__init__()
        minigrad.set_seed(1)
        self.token = nn.Embedding(VOCAB, WIDTH, embedding_table=Normal(1.0))
        self.position = nn.Embedding(CONTEXT, WIDTH, embedding_table=Normal(1.0))
        self.attention = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        self.attention.in_proj_weight.data[:2 * WIDTH] *= 100.0  # sharp attention: large q, k
        self.naive = naive
        self.head = nn.Dense(WIDTH, VOCAB)
        self.mask = numpy.triu(numpy.full((CONTEXT, CONTEXT), -numpy.inf), 1)

    def construct(self, ids):
        x = self.token(ids) + self.position(Tensor(numpy.arange(CONTEXT)))
        mask = Tensor(self.mask.astype(x.dtype))
        if self.naive:
            x = x + naive_attention(self.attention, x, mask)
        else:
            x = x + self.attention(x, x, x, attn_mask=mask, need_weights=False)[0]
        return ops.reshape(self.head(x), (-1, VOCAB))


ids = rng.integers(0, VOCAB, (STEPS, BATCH, CONTEXT)).astype(numpy.int32)
targets = numpy.roll(ids, 1, axis=-1).reshape(STEPS, -1)  # predict the previous token


def train(naive):
    net = amp.cast_network(TinyLM(naive), minigrad.float16, keep_batchnorm_fp32=True)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Adam(net.trainable_params(), 1e-2)
    cell = nn.TrainOneStepWithLossScaleCell(
        nn.WithLossCell(net, loss_fn), opt,
        scale_sense=nn.DynamicLossScaleUpdateCell(2.0 ** 20, 2, 1000))
    cell.set_train()
    reports, losses = [], []
    with numpy.errstate(all="ignore"):
        for step in range(STEPS):
            loss, _, _ = cell(Tensor(ids[step]), Tensor(targets[step]))
            losses.append(float(loss.asnumpy()))
            reports.append(cell.last_report)
    return reports, losses


runs = {"naive fp16 attention": train(naive=True),
        "nn.MultiheadAttention": train(naive=False)}
for name, (reports, losses) in runs.items():
    common.heading(f"step reports, {name}")
    for report in reports[:4]:
        print(report)
    skipped = sum(r.skipped for r in reports)
    print(f"... {skipped} of {len(reports)} steps skipped; last loss {losses[-1]:.3f}")

fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True, constrained_layout=True)
for (name, (reports, losses)), color in zip(runs.items(), ("tab:red", "tab:blue")):
    steps = numpy.arange(1, len(reports) + 1)
    top.semilogy(steps, [r.scale_before for r in reports], color=color, label=name)
    skipped = numpy.array([r.skipped for r in reports])
    top.plot(steps[skipped], [r.scale_before for r in reports if r.skipped], "x", color=color,
             markersize=8)
    finite = numpy.isfinite(losses)
    bottom.plot(steps[finite], numpy.array(losses)[finite], "o-", color=color, markersize=3,
                label=f"{name} ({(~finite).sum()} NaN losses, not drawn)")
top.set_ylabel("loss scale (x: skipped step)")
top.set_title("naive fp16 attention: the loss itself is NaN, the scale keeps falling and "
              "nothing trains;\nminigrad's attention: gradient overflows at a too-high scale, "
              "then training")
top.legend(fontsize="small")
bottom.set_ylabel("training loss")
bottom.set_xlabel("step")
bottom.legend(fontsize="small")
common.save(fig, args.out, "attention_overflow_steps.png")
