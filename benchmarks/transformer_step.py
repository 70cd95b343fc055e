"""A transformer training step and a MultiheadAttention forward+backward, minigrad beside PyTorch
CPU and hand-written NumPy.

1. The char LM of ``examples/train_char_lm.py`` (2 pre-LN blocks, width 128, 4 heads, context
   64, batch 16, causal mask, Adam): minigrad in fp32 (``TrainOneStepCell``) and at O2
   (``amp.build_train_network``: fp16 network, dynamic loss scaling), PyTorch in fp32 (and with
   autocast + GradScaler, for reference), from the same weights on the same batch.
2. ``nn.MultiheadAttention(128, 4)`` forward + backward at T = 256 (batch 8, no mask) against
   the same computation written by hand in NumPy (projections, softmax, weighted sum and every
   gradient) and ``torch.nn.MultiheadAttention``.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/transformer_step.py \\
        --json benchmarks/results/transformer_step.json

Goals (medians of one run): minigrad fp32 step <= 1.0x PyTorch's; O2 <= 1.25x minigrad's fp32
step; MultiheadAttention <= 1.2x hand-written NumPy.
"""
import argparse
import math
import os
import sys

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)
import minigrad  # noqa: E402
from minigrad import Tensor, amp, nn  # noqa: E402
import _timing  # noqa: E402
import train_char_lm as lm  # noqa: E402

BATCH, CONTEXT, WIDTH, HEADS, LAYERS = 16, 64, 128, 4, 2
MHA_BATCH, MHA_LENGTH = 8, 256


# ---- 1. the training step ---------------------------------------------------------------------
def step_data(seed=0):
    rng = numpy.random.default_rng(seed)
    x = rng.integers(0, len(lm.VOCAB), (BATCH, CONTEXT)).astype(numpy.int32)
    y = rng.integers(0, len(lm.VOCAB), BATCH * CONTEXT).astype(numpy.int32)
    return x, y


def fresh_model(seed=0):
    minigrad.set_seed(seed)
    return lm.CharGPT(len(lm.VOCAB), CONTEXT, WIDTH, HEADS, LAYERS)


def minigrad_step(x, y, level):
    """One Adam step of the char LM at ``level`` ("O0" or "O2"), as a closure."""
    net = fresh_model()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Adam(net.trainable_params(), 1e-4)
    # a scale that never overflows here: every timed step does the whole update
    manager = amp.DynamicLossScaleManager(2 ** 10, scale_window=10 ** 6) if level == "O2" else None
    train = amp.build_train_network(net, opt, loss, level=level, loss_scale_manager=manager)
    xt, yt = Tensor(x), Tensor(y)

    def step():
        return train(xt, yt)
    return step


def torch_step(torch, x, y, autocast=False):
    """The same step in PyTorch (``compare_char_lm.torch_twin`` of the same initial weights)."""
    import compare_char_lm
    model = compare_char_lm.torch_twin(torch, fresh_model())
    opt = torch.optim.Adam(model.parameters(), 1e-4)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, enabled=autocast)
    xt, yt = torch.tensor(x).long(), torch.tensor(y).long()

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(model(xt), yt)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return step


# ---- 2. MultiheadAttention forward + backward --------------------------------------------------
def attention_data(seed=1):
    rng = numpy.random.default_rng(seed)
    x = rng.standard_normal((MHA_BATCH, MHA_LENGTH, WIDTH)).astype(numpy.float32)
    g = rng.standard_normal((MHA_BATCH, MHA_LENGTH, WIDTH)).astype(numpy.float32)
    return x, g


def minigrad_attention(x, g):
    minigrad.set_seed(0)
    layer = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
    xt = Tensor(x, requires_grad=True)
    gt = Tensor(g)

    def run():
        out, _ = layer(xt, xt, xt, need_weights=False)
        out.backward(gt)
    return run, layer


def numpy_attention(x, g, layer):
    """The same forward and backward by hand: every gradient the layer's backward gives."""
    w_in, b_in = layer.in_proj_weight.asnumpy(), layer.in_proj_bias.asnumpy()
    w_out, b_out = layer.out_proj.weight.asnumpy(), layer.out_proj.bias.asnumpy()
    n, t, e = x.shape
    d = e // HEADS
    scale = numpy.float32(1 / math.sqrt(d))

    def heads(a):
        return a.reshape(n, t, HEADS, d).transpose(0, 2, 1, 3)

    def merge(a):
        return a.transpose(0, 2, 1, 3).reshape(n, t, e)

    def run():
        flat = x.reshape(-1, e)
        qkv = flat @ w_in.T + b_in
        q, k, v = (heads(a) for a in numpy.split(qkv.reshape(n, t, 3 * e), 3, axis=-1))
        qs = q * scale
        p = qs @ k.swapaxes(-1, -2)
        p -= p.max(axis=-1, keepdims=True)
        numpy.exp(p, out=p)
        p /= p.sum(axis=-1, keepdims=True)
        o = merge(p @ v).reshape(-1, e)
        out = o @ w_out.T + b_out  # noqa: F841 (the forward's result)
        g2 = g.reshape(-1, e)
        grads = {"out_w": g2.T @ o, "out_b": g2.sum(axis=0)}
        go = heads((g2 @ w_out).reshape(n, t, e))
        dv = p.swapaxes(-1, -2) @ go
        ds = go @ v.swapaxes(-1, -2)
        ds -= (ds * p).sum(axis=-1, keepdims=True)
        ds *= p
        dq = (ds @ k) * scale
        dk = ds.swapaxes(-1, -2) @ qs
        dqkv = numpy.concatenate([merge(a) for a in (dq, dk, dv)], axis=-1).reshape(-1, 3 * e)
        grads.update(in_w=dqkv.T @ flat, in_b=dqkv.sum(axis=0), x=dqkv @ w_in)
        return grads
    return run


def torch_attention(torch, x, g, layer):
    twin = torch.nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.tensor(layer.in_proj_weight.asnumpy()))
        twin.in_proj_bias.copy_(torch.tensor(layer.in_proj_bias.asnumpy()))
        twin.out_proj.weight.copy_(torch.tensor(layer.out_proj.weight.asnumpy()))
        twin.out_proj.bias.copy_(torch.tensor(layer.out_proj.bias.asnumpy()))
    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(g)

    def run():
        out, _ = twin(xt, xt, xt, need_weights=False)
        out.backward(gt)
    return run


def check_attention_agrees(x, g):
    """The hand-written gradients equal the layer's (so both time the same computation)."""
    run, layer = minigrad_attention(x, g)
    xt = Tensor(x, requires_grad=True)
    out, _ = layer(xt, xt, xt, need_weights=False)
    out.backward(Tensor(g))
    grads = numpy_attention(x, g, layer)()
    pairs = [(xt.grad, grads["x"].reshape(x.shape)), (layer.in_proj_weight.grad, grads["in_w"]),
             (layer.out_proj.weight.grad, grads["out_w"])]
    for mine, theirs in pairs:
        numpy.testing.assert_allclose(mine.asnumpy(), theirs, rtol=1e-3, atol=1e-3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--repeat", type=int, default=20, help="timed rounds (medians reported)")
    args = parser.parse_args()
    _timing.warn_if_busy()
    torch = _timing.optional_torch()

    x, y = step_data()
    steps = {"minigrad fp32": minigrad_step(x, y, "O0"), "minigrad O2": minigrad_step(x, y, "O2")}
    times = _timing.time_interleaved(steps, repeat=args.repeat, warmup=3)
    if torch is not None:  # on its own: its OpenMP workers spin and would slow what runs next
        times["torch fp32"] = _timing.time_it(torch_step(torch, x, y), repeat=args.repeat,
                                              warmup=3)
        times["torch autocast fp16"] = _timing.time_it(torch_step(torch, x, y, autocast=True),
                                                       repeat=args.repeat, warmup=3)
    base = times["minigrad fp32"]
    torch_base = times.get("torch fp32")
    step_rows = [{"run": name, "ms_per_step": t * 1e3, "ratio_to_minigrad_fp32": t / base,
                  "ratio_to_torch_fp32": t / torch_base if torch_base else None}
                 for name, t in times.items()]
    print(f"transformer step: {LAYERS} blocks, width {WIDTH}, {HEADS} heads, context {CONTEXT}, "
          f"batch {BATCH}, Adam")
    _timing.print_table(step_rows, ["run", "ms_per_step", "ratio_to_minigrad_fp32",
                                    "ratio_to_torch_fp32"])

    ax, ag = attention_data()
    check_attention_agrees(ax, ag)
    run, layer = minigrad_attention(ax, ag)
    attention = {"minigrad": run, "numpy (hand-written)": numpy_attention(ax, ag, layer)}
    attention_times = _timing.time_interleaved(attention, repeat=args.repeat, warmup=2)
    if torch is not None:
        attention_times["torch"] = _timing.time_it(torch_attention(torch, ax, ag, layer),
                                                   repeat=args.repeat, warmup=2)
    numpy_time = attention_times["numpy (hand-written)"]
    attention_rows = [{"run": name, "ms": t * 1e3, "ratio_to_numpy": t / numpy_time}
                      for name, t in attention_times.items()]
    print(f"\nMultiheadAttention({WIDTH}, {HEADS}) forward + backward, batch {MHA_BATCH}, "
          f"T = {MHA_LENGTH}")
    _timing.print_table(attention_rows, ["run", "ms", "ratio_to_numpy"])
    if torch is None:
        print("PyTorch not installed: no PyTorch rows (pip install torch==2.13.0)")
    if args.json:
        summary = {"fp32_vs_torch": times["minigrad fp32"] / torch_base if torch_base else None,
                   "o2_vs_fp32": times["minigrad O2"] / base,
                   "attention_vs_numpy": attention_times["minigrad"] / numpy_time}
        _timing.write_json(args.json, {"benchmark": "transformer_step", "summary": summary,
                                       "step": {"batch": BATCH, "context": CONTEXT,
                                                "width": WIDTH, "heads": HEADS,
                                                "layers": LAYERS, "rows": step_rows},
                                       "attention": {"batch": MHA_BATCH, "length": MHA_LENGTH,
                                                     "rows": attention_rows}})


if __name__ == "__main__":
    main()
