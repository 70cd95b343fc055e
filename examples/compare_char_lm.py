"""The char LM of ``train_char_lm.py`` three ways from the same weights and batches: minigrad in
fp32, minigrad at O2 (fp16, dynamic loss scaling), and PyTorch in fp32; prints the validation
loss of each (bits per character) and the ratios.

    python examples/compare_char_lm.py                 # 2000 steps each, about 10 minutes here
    python examples/compare_char_lm.py --steps 500

PyTorch (``pip install torch``) runs the same model (``torch.nn.TransformerEncoder``, pre-LN,
causal mask), the same AdamWeightDecay rule (MindSpore's: no bias correction, decay on the
matrices), warm-up + cosine schedule and clipping (``clip_grad_norm_``); without PyTorch the
script compares fp32 with O2 only.
"""
import argparse
import math
import os
import sys

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_char_lm as lm  # noqa: E402

_TORCH_NAME = {"embedding_table": "weight", "gamma": "weight", "beta": "bias"}


def torch_twin(torch, net):
    """A PyTorch module computing what ``net`` (a ``CharGPT``) computes, from its weights."""
    width = net.token.embedding_size
    layer = net.blocks.layers[0]
    heads = layer.self_attn.num_heads
    ff = layer.linear1.out_channels

    class TorchCharGPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.token = torch.nn.Embedding(net.vocab_size, width)
            self.position = torch.nn.Embedding(net.context, width)
            block = torch.nn.TransformerEncoderLayer(width, heads, ff, dropout=0.0,
                                                     batch_first=True, norm_first=True)
            self.blocks = torch.nn.TransformerEncoder(block, len(net.blocks.layers),
                                                      norm=torch.nn.LayerNorm(width),
                                                      enable_nested_tensor=False)
            self.head = torch.nn.Linear(width, net.vocab_size)
            mask = torch.nn.Transformer.generate_square_subsequent_mask(net.context)
            self.register_buffer("mask", mask)

        def forward(self, ids):
            t = ids.shape[1]
            x = self.token(ids) + self.position(torch.arange(t))
            x = self.blocks(x, mask=self.mask[:t, :t], is_causal=True)
            return self.head(x).reshape(-1, net.vocab_size)

    twin = TorchCharGPT()
    state = {}
    for name, p in net.parameters_and_names():
        head, _, last = name.rpartition(".")
        state[f"{head}.{_TORCH_NAME.get(last, last)}"] = torch.tensor(
            p.asnumpy().astype(numpy.float32))
    twin.load_state_dict(state, strict=False)  # strict=False: the mask buffer is not a weight
    return twin


def torch_run(torch, net, corpus, steps, batch_size, context, learning_rate, seed,
              weight_decay=0.1, max_norm=1.0, eval_windows=64, **_):
    """Train ``torch_twin(net)`` as ``lm.run`` trains ``net`` with the same keywords (fp32);
    [(step, bits/char)] at ``lm.run``'s evaluation steps."""
    model = torch_twin(torch, net)
    params = list(model.parameters())
    decay = {id(p) for p in params if p.ndim >= 2}
    moments = {id(p): (torch.zeros_like(p), torch.zeros_like(p)) for p in params}
    rates = lm.learning_rates(steps, learning_rate, max(1, steps // 20))
    eval_every = max(1, steps // 8)
    train_ids, held_out = corpus[0], corpus[1]
    val_x, val_y = lm.validation_set(held_out, context, eval_windows)
    data = lm.batches(train_ids, batch_size, context, seed)
    validation = []
    for i in range(1, steps + 1):
        x, y = next(data)
        model.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(torch.tensor(x).long()),
                                                 torch.tensor(y).long())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm)
        lr = rates[i - 1]
        with torch.no_grad():  # AdamWeightDecay (MindSpore): no bias correction
            for p in params:
                m, v = moments[id(p)]
                m.mul_(0.9).add_(p.grad, alpha=0.1)
                v.mul_(0.95).addcmul_(p.grad, p.grad, value=0.05)
                if id(p) in decay:
                    p.mul_(1 - lr * weight_decay)
                p.sub_(lr * m / (v.sqrt() + 1e-8))
        if i % eval_every == 0 or i == steps:
            with torch.no_grad():
                total = 0.0
                for j in range(0, len(val_x), 32):
                    xs = torch.tensor(val_x[j:j + 32]).long()
                    ys = torch.tensor(val_y[j * context:(j + 32) * context]).long()
                    total += float(torch.nn.functional.cross_entropy(model(xs), ys)) * len(xs)
            validation.append((i, total / len(val_x) / math.log(2)))
    return validation


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    lm.add_arguments(parser)
    config, _ = lm.parse(parser, argv)
    corpus = lm.load_corpus()
    columns = {}
    print(f"{config['steps']} steps each, seed {config['seed']}", flush=True)
    fp32 = lm.run(amp_level="O0", corpus=corpus, verbose=False, sample_length=0, **config)
    columns["minigrad fp32"] = fp32["validation"]
    print(f"minigrad fp32 done in {fp32['seconds']:.0f} s", flush=True)
    o2 = lm.run(amp_level="O2", corpus=corpus, verbose=False, sample_length=0, **config)
    columns["minigrad O2"] = o2["validation"]
    skipped = sum(r.skipped for r in o2["reports"])
    print(f"minigrad O2 done in {o2['seconds']:.0f} s ({skipped} steps skipped)", flush=True)
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed: comparing minigrad fp32 and O2 only")
    if torch is not None:
        import minigrad
        minigrad.set_seed(config["seed"])  # the initial weights of the minigrad runs
        net = lm.CharGPT(len(lm.VOCAB), config["context"], config["width"], config["heads"],
                         config["layers"])
        columns["PyTorch fp32"] = torch_run(torch, net, corpus, **config)
    names = list(columns)
    print("\nvalidation loss, bits per character")
    print("  step  " + "  ".join(f"{n:>14}" for n in names) + "  O2 / fp32"
          + ("  minigrad / PyTorch" if "PyTorch fp32" in columns else ""))
    rows = zip(*columns.values())
    for row in rows:
        step = row[0][0]
        values = [v for _, v in row]
        line = f"{step:6d}  " + "  ".join(f"{v:14.4f}" for v in values)
        line += f"  {values[1] / values[0]:9.4f}"
        if len(values) > 2:
            line += f"  {values[0] / values[2]:19.4f}"
        print(line)
    return columns


if __name__ == "__main__":
    main()
