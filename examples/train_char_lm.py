"""Train a small GPT, character by character, on the Python standard library's own sources.

    python examples/train_char_lm.py                     # O2 (fp16, dynamic loss scaling)
    python examples/train_char_lm.py --amp-level O0      # the same run in fp32
    python examples/train_char_lm.py --face torch        # the PyTorch-style loop (GradScaler)
    python examples/train_char_lm.py --face tensorflow   # the TF-style loop (LossScaleOptimizer)
    python examples/train_char_lm.py --steps 300         # a shorter run

Every Python install carries the text: the top-level ``.py`` files of the standard library
(``sysconfig.get_paths()["stdlib"]``), in sorted order, every tenth file held out for
validation. The model: token and position embeddings, ``nn.TransformerEncoder`` blocks
(pre-LayerNorm, causal mask), a final LayerNorm and a linear head; AdamWeightDecay with weight
decay on the matrices, a linear warm-up then a cosine decay of the learning rate, gradients
clipped to a global norm of 1. It prints progress, the validation loss in bits per character,
the loss-scale story (which steps were skipped and why) and a sample of generated code.

The three faces train the same way (same batches, same scale rule): ``mindspore``
(``nn.TrainOneStepWithLossScaleCell``), ``torch`` (``amp.GradScaler``) and ``tensorflow``
(``mixed_precision.LossScaleOptimizer``); ``tests/examples/test_train_char_lm.py`` checks that
they give the same trajectory.
"""
import argparse
import math
import os
import sysconfig
import time

import numpy

import minigrad
from minigrad import Tensor, amp, nn, ops
from minigrad.amp import GradScaler
from minigrad.autograd import value_and_grad
from minigrad.mixed_precision import DynamicLossScale, LossScaleOptimizer
from minigrad.nn.init import Normal

# ---- the text -----------------------------------------------------------------------------------
# newline, the 95 printable ASCII characters, and one id for everything else (tabs, non-ASCII)
VOCAB = "\n" + "".join(map(chr, range(32, 127))) + "\N{REPLACEMENT CHARACTER}"
_ID_OF_BYTE = numpy.full(256, len(VOCAB) - 1, numpy.int32)
_ID_OF_BYTE[10] = 0
_ID_OF_BYTE[32:127] = numpy.arange(1, 96)


def encode(text):
    """Character ids (int32) of ``text``."""
    return _ID_OF_BYTE[numpy.frombuffer(text.encode("ascii", "replace"), numpy.uint8)]


def decode(ids):
    return "".join(VOCAB[i] for i in ids)


def load_corpus(folder=None, validation_every=10):
    """``(train_ids, validation_ids, train_files, validation_files)`` from the sorted top-level
    ``.py`` files of ``folder`` (default: this Python's standard library); every
    ``validation_every``-th file is held out."""
    folder = sysconfig.get_paths()["stdlib"] if folder is None else folder
    names = sorted(name for name in os.listdir(folder) if name.endswith(".py"))
    if not names:
        raise ValueError(f"no .py files in {folder!r}")
    parts = {True: [], False: []}
    for i, name in enumerate(names):
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
            parts[i % validation_every == validation_every - 1].append((name, f.read()))
    train, held_out = parts[False], parts[True]
    return (encode("\n".join(text for _, text in train)),
            encode("\n".join(text for _, text in held_out)),
            [name for name, _ in train], [name for name, _ in held_out])


def batches(data, batch_size, context, seed):
    """Endless random windows of ``data``: (ids (batch, context), next ids (batch·context,))."""
    rng = numpy.random.default_rng(seed)
    offsets = numpy.arange(context + 1)
    while True:
        window = data[rng.integers(0, len(data) - context - 1, batch_size)[:, None] + offsets]
        yield window[:, :-1], numpy.ascontiguousarray(window[:, 1:]).reshape(-1)


def validation_set(data, context, count):
    """``count`` windows spread evenly over ``data``, as (ids, next ids)."""
    starts = numpy.linspace(0, len(data) - context - 1, count).astype(numpy.int64)
    window = data[starts[:, None] + numpy.arange(context + 1)]
    return window[:, :-1], numpy.ascontiguousarray(window[:, 1:]).reshape(-1)


# ---- the model ----------------------------------------------------------------------------------
class CharGPT(nn.Cell):
    """ids (N, T) -> next-character logits (N·T, vocab): embeddings, causal pre-LN blocks, head.

    The blocks are ``nn.TransformerEncoder`` copies of one ``nn.TransformerEncoderLayer``
    (batch first, GPT's pre-LayerNorm order, feed-forward width 4·width) with the causal mask
    (``is_causal=True``), then a final LayerNorm.
    """

    def __init__(self, vocab_size, context, width=128, heads=4, layers=2, dropout=0.0):
        super().__init__()
        self.vocab_size, self.context = vocab_size, context
        self.token = nn.Embedding(vocab_size, width, embedding_table=Normal(0.02))
        self.position = nn.Embedding(context, width, embedding_table=Normal(0.02))
        block = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, norm=nn.LayerNorm((width,),
                                                                             epsilon=1e-5))
        self.head = nn.Dense(width, vocab_size, weight_init=Normal(0.02))
        self.positions = numpy.arange(context, dtype=numpy.int32)

    def construct(self, ids):
        x = self.token(ids) + self.position(Tensor(self.positions[:ids.shape[1]]))
        x = self.blocks(x, is_causal=True)
        return ops.reshape(self.head(x), (-1, self.vocab_size))


def learning_rates(steps, peak, warmup):
    """Per step: a linear warm-up to ``peak`` over ``warmup`` steps, then a cosine decay to
    ``peak / 10`` at the last step."""
    rates = []
    for i in range(steps):
        if i < warmup:
            rates.append(peak * (i + 1) / warmup)
        else:
            progress = (i - warmup) / max(1, steps - 1 - warmup)
            rates.append(peak * (0.1 + 0.45 * (1 + math.cos(math.pi * progress))))
    return rates


def make_optimizer(net, rates, weight_decay):
    """AdamWeightDecay with weight decay on the matrices (embeddings, projections) only."""
    params = net.trainable_params()
    matrices = [p for p in params if p.ndim >= 2]
    others = [p for p in params if p.ndim < 2]
    return nn.AdamWeightDecay([{"params": matrices, "weight_decay": weight_decay},
                               {"params": others, "weight_decay": 0.0}],
                              learning_rate=rates, beta1=0.9, beta2=0.95, eps=1e-8)


# ---- the three faces ----------------------------------------------------------------------------
# Each face returns step(x, y) -> (loss, report): the loss as a float, and the loss-scaling
# face's StepReport (None in fp32). Gradients are clipped to a global norm of ``max_norm`` after
# unscaling; an overflowed step is not clipped (an inf norm would turn every gradient into NaN
# and hide which one overflowed), and it is skipped anyway.

class _ClippingCell:
    """MindSpore's train cells have no clipping switch (its model zoo subclasses them, as here).
    ``grad_reducer`` receives the unscaled gradients before the overflow check and the
    optimizer; this subclass clips them there."""
    max_norm = 1.0

    def grad_reducer(self, grads):
        if not amp.all_finite(grads):
            return grads
        return ops.clip_by_global_norm(grads, self.max_norm)


class ClippedTrainStep(_ClippingCell, nn.TrainOneStepCell):
    """``nn.TrainOneStepCell`` with gradient clipping."""


class ClippedLossScaledStep(_ClippingCell, nn.TrainOneStepWithLossScaleCell):
    """``nn.TrainOneStepWithLossScaleCell`` with gradient clipping."""


def mindspore_face(net, loss_fn, optimizer, scaled, scale, window, max_norm):
    with_loss = nn.WithLossCell(net, loss_fn)
    if scaled:
        cell = ClippedLossScaledStep(with_loss, optimizer, nn.DynamicLossScaleUpdateCell(
            loss_scale_value=scale, scale_factor=2, scale_window=window))
    else:
        cell = ClippedTrainStep(with_loss, optimizer)
    cell.max_norm = max_norm
    cell.set_train()

    def step(x, y):
        if scaled:
            loss, _, _ = cell(x, y)
            return float(loss.asnumpy()), cell.last_report
        return float(cell(x, y).asnumpy()), None
    return step


def torch_face(net, loss_fn, optimizer, scaled, scale, window, max_norm):
    scaler = GradScaler(init_scale=scale, growth_factor=2.0, backoff_factor=0.5,
                        growth_interval=window, enabled=scaled)
    params = net.trainable_params()
    net.set_train()

    def step(x, y):
        optimizer.zero_grad()
        loss = loss_fn(net(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        try:  # raises before touching the gradients when their norm is inf/NaN
            nn.utils.clip_grad_norm_(params, max_norm, error_if_nonfinite=True)
        except RuntimeError:
            pass  # an overflowed step: scaler.step skips it
        scaler.step(optimizer)
        scaler.update()
        return float(loss.asnumpy()), scaler.last_report if scaled else None
    return step


def tensorflow_face(net, loss_fn, optimizer, scaled, scale, window, max_norm):
    lso = LossScaleOptimizer(optimizer, DynamicLossScale(scale, window, 2.0)) if scaled else None
    params = optimizer.parameters
    net.set_train()

    def scaled_loss(x, y):
        loss = loss_fn(net(x), y)
        return (lso.get_scaled_loss(loss) if scaled else loss), loss
    grad_fn = value_and_grad(scaled_loss, None, params, has_aux=True)

    def step(x, y):
        (_, loss), grads = grad_fn(x, y)
        if scaled:
            grads = lso.get_unscaled_gradients(grads)
        if amp.all_finite(grads):
            grads = ops.clip_by_global_norm(grads, max_norm)
        if scaled:
            lso.apply_gradients(zip(grads, params))
            return float(loss.asnumpy()), lso.last_report
        optimizer(grads)
        return float(loss.asnumpy()), None
    return step


FACES = {"mindspore": mindspore_face, "torch": torch_face, "tensorflow": tensorflow_face}


# ---- evaluation and sampling --------------------------------------------------------------------
def bits_per_char(net, loss_fn, x, y, batch_size=32):
    """Mean cross-entropy of ``net`` on (x, y) in bits per character, in evaluation mode."""
    net.set_train(False)
    total = 0.0
    with minigrad.no_grad():
        for i in range(0, len(x), batch_size):
            loss = loss_fn(net(Tensor(x[i:i + batch_size])),
                           Tensor(y[i * x.shape[1]:(i + batch_size) * x.shape[1]]))
            total += float(loss.asnumpy()) * len(x[i:i + batch_size])
    net.set_train(True)
    return total / len(x) / math.log(2)


def generate(net, prompt, length, temperature=0.8, seed=0):
    """``prompt`` followed by ``length`` sampled characters."""
    rng = numpy.random.default_rng(seed)
    ids = list(encode(prompt))
    net.set_train(False)
    with minigrad.no_grad():
        for _ in range(length):
            window = numpy.array(ids[-net.context:], numpy.int32)[None]
            logits = net(Tensor(window)).asnumpy()[-1].astype(numpy.float64) / temperature
            p = numpy.exp(logits - logits.max())
            ids.append(int(rng.choice(len(p), p=p / p.sum())))
    net.set_train(True)
    return decode(ids)


def scale_story(reports):
    """What the loss scale did, in a few lines (``reports``: one StepReport per step)."""
    if not reports:
        return ["no loss scaling (fp32)"]
    skipped = [r for r in reports if r.skipped]
    lines = [f"loss scale {reports[0].scale_before:.0f} -> {reports[-1].scale_after:.0f}; "
             f"{len(skipped)} of {len(reports)} steps skipped"]
    grown = [r.step for r in reports if r.scale_after > r.scale_before]
    if grown:
        lines.append(f"  scale doubled after {len(grown)} clean windows (steps {grown[:8]}"
                     f"{' ...' if len(grown) > 8 else ''})")
    for r in skipped[:10]:
        line = f"  step {r.step}: skipped ({r.reason}), scale {r.scale_before:.0f} -> " \
               f"{r.scale_after:.0f}"
        for kind, names in (("inf", r.inf_params), ("NaN", r.nan_params)):
            if names:
                shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more"
                                                if len(names) > 3 else "")
                line += f"; {kind} in {shown}"
        lines.append(line)
    if len(skipped) > 10:
        lines.append(f"  ... and {len(skipped) - 10} more skipped steps")
    return lines


# ---- the run ------------------------------------------------------------------------------------
def run(steps=2000, amp_level="O2", face="mindspore", batch_size=16, context=64, width=128,
        heads=4, layers=2, dropout=0.0, learning_rate=1e-3, weight_decay=0.1, warmup=None,
        max_norm=1.0, init_scale=2.0 ** 16, scale_window=500, eval_every=None, eval_windows=64,
        sample_length=300, seed=0, corpus=None, verbose=True):
    """Train and return a dict: ``losses`` and ``reports`` (one per step), ``validation``
    [(step, bits per character)], ``sample`` (generated text), ``net``, ``seconds``.

    ``corpus``: ``load_corpus()``'s result (loaded when None).
    """
    if amp_level not in ("O0", "O2"):
        raise ValueError(f"run: amp_level must be 'O0' or 'O2', got {amp_level!r}")
    if face not in FACES:
        raise ValueError(f"run: face must be one of {sorted(FACES)}, got {face!r}")
    say = print if verbose else (lambda *a, **k: None)
    train_ids, held_out, train_files, held_out_files = corpus or load_corpus()
    say(f"text: {len(train_files)} standard-library files ({len(train_ids):,} characters) for "
        f"training, {len(held_out_files)} ({len(held_out):,}) for validation; "
        f"vocabulary {len(VOCAB)}")
    minigrad.set_seed(seed)
    net = CharGPT(len(VOCAB), context, width, heads, layers, dropout)
    if amp_level == "O2":  # fp16 network, LayerNorm kept fp32; the optimizer keeps fp32 masters
        amp.cast_network(net, minigrad.float16, keep_batchnorm_fp32=True)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")  # computed in fp32
    warmup = max(1, steps // 20) if warmup is None else warmup
    optimizer = make_optimizer(net, learning_rates(steps, learning_rate, warmup), weight_decay)
    step = FACES[face](net, loss_fn, optimizer, amp_level == "O2", init_scale, scale_window,
                       max_norm)
    eval_every = eval_every or max(1, steps // 8)
    val_x, val_y = validation_set(held_out, context, eval_windows)
    say(f"model: {sum(p.size for p in net.trainable_params()):,} parameters, {layers} blocks, "
        f"width {width}, {heads} heads, context {context}; {amp_level}, face {face}, "
        f"{steps} steps of batch {batch_size}")
    losses, reports, validation = [], [], []
    start = last = time.perf_counter()
    data = batches(train_ids, batch_size, context, seed)
    for i in range(1, steps + 1):
        x, y = next(data)
        loss, report = step(Tensor(x), Tensor(y))
        losses.append(loss)
        if report is not None:
            reports.append(report)
        if i % eval_every == 0 or i == steps:
            bits = bits_per_char(net, loss_fn, val_x, val_y)
            validation.append((i, bits))
            now = time.perf_counter()
            scale = f", loss scale {report.scale_after:.0f}" if report is not None else ""
            say(f"step {i:5d}/{steps}: train loss {numpy.mean(losses[-eval_every:]):.3f}, "
                f"validation {bits:.3f} bits/char{scale}, "
                f"{(now - last) / eval_every * 1e3:.0f} ms/step", flush=True)
            last = now
    seconds = time.perf_counter() - start
    say(f"trained in {seconds:.0f} s; final validation {validation[-1][1]:.3f} bits/char")
    for line in scale_story(reports):
        say(line)
    sample = generate(net, "def ", sample_length, seed=seed) if sample_length else ""
    if sample:
        say("sample (temperature 0.8):\n" + sample)
    return {"losses": losses, "reports": reports, "validation": validation, "sample": sample,
            "net": net, "seconds": seconds}


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {text!r}")
    return value


def add_arguments(parser):
    """The run's flags (shared with ``compare_char_lm.py``): steps, the model's sizes, the
    learning rate and the seed."""
    parser.add_argument("--steps", type=_positive_int, default=2000)
    parser.add_argument("--batch-size", type=_positive_int, default=16)
    parser.add_argument("--context", type=_positive_int, default=64)
    parser.add_argument("--width", type=_positive_int, default=128)
    parser.add_argument("--heads", type=_positive_int, default=4)
    parser.add_argument("--layers", type=_positive_int, default=2)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)


def parse(parser, argv):
    """``parser``'s arguments, with --heads checked against --width; a dict of ``run``'s
    keywords for the shared flags and the namespace."""
    args = parser.parse_args(argv)
    if args.width % args.heads:
        parser.error(f"argument --heads: {args.heads} does not divide --width {args.width}")
    return dict(steps=args.steps, batch_size=args.batch_size, context=args.context,
                width=args.width, heads=args.heads, layers=args.layers,
                learning_rate=args.learning_rate, seed=args.seed), args


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--amp-level", choices=["O0", "O2"], default="O2",
                        help="O2 (default): fp16 network, dynamic loss scaling; O0: fp32")
    parser.add_argument("--face", choices=sorted(FACES), default="mindspore",
                        help="which loss-scaling API drives the step")
    config, args = parse(parser, argv)
    return run(amp_level=args.amp_level, face=args.face, **config)


if __name__ == "__main__":
    main()
