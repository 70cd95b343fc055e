"""One fp32 training step of a 784-512-512-10 MLP (ReLU, softmax cross-entropy, SGD), batch 128.

Side by side in one run: minigrad (``nn`` Cells + ``TrainOneStepCell``), the same step written by
hand in NumPy (the floor for any NumPy engine: the same matmuls, no graph), and PyTorch CPU eager.

    python benchmarks/mlp_step.py [--json benchmarks/results/mlp_step.json]

Goal: minigrad / hand-written NumPy <= 1.10. PyTorch is optional (``pip install torch==2.13.0``).
"""
import argparse
import os
import sys

import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minigrad  # noqa: E402
from minigrad import nn  # noqa: E402
import _timing  # noqa: E402

SIZES = (784, 512, 512, 10)
BATCH = 128
LR = 0.01


def data(seed=0):
    rng = numpy.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(numpy.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(numpy.int32)
    weights = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        scale = 1.0 / fan_in ** 0.5  # a Python float: a NumPy float64 scalar would upcast (NEP 50)
        weights.append((rng.standard_normal((fan_out, fan_in)) * scale).astype(numpy.float32))
        weights.append(numpy.zeros(fan_out, numpy.float32))
    return x, y, weights


def minigrad_train(x, y, weights, optimizer=None):
    """The MLP in a TrainOneStepCell with SGD (or ``optimizer(net)``): (a closure running one
    step on ``x``, ``y``, the cell)."""
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layer = nn.Dense(fan_in, fan_out)
        layer.weight.set_data(weights[2 * i])
        layer.bias.set_data(weights[2 * i + 1])
        layers += [layer, nn.ReLU()] if i < len(SIZES) - 2 else [layer]
    net = nn.SequentialCell(layers)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.SGD(net.trainable_params(), LR) if optimizer is None else optimizer(net)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)
    train.set_train()
    xt, yt = minigrad.Tensor(x), minigrad.Tensor(y)
    return (lambda: train(xt, yt)), train


def minigrad_step(x, y, weights):
    return minigrad_train(x, y, weights)[0]


def numpy_step(x, y, weights):
    """Forward, backward and SGD by hand: y = x Wᵀ + b per layer, ReLU between, mean CE loss."""
    params = [w.copy() for w in weights]
    n_layers = len(params) // 2
    onehot = numpy.eye(SIZES[-1], dtype=numpy.float32)[y]

    def step():
        acts = [x]
        for i in range(n_layers):
            z = acts[-1] @ params[2 * i].T + params[2 * i + 1]
            acts.append(numpy.maximum(z, 0) if i < n_layers - 1 else z)
        logits = acts[-1]
        shifted = logits - logits.max(axis=1, keepdims=True)
        exp = numpy.exp(shifted)
        prob = exp / exp.sum(axis=1, keepdims=True)
        loss = -(numpy.log(prob) * onehot).sum() / BATCH
        g = (prob - onehot) / BATCH
        for i in reversed(range(n_layers)):
            gw, gb = g.T @ acts[i], g.sum(axis=0)
            if i > 0:
                g = (g @ params[2 * i]) * (acts[i] > 0)
            params[2 * i] -= LR * gw
            params[2 * i + 1] -= LR * gb
        return loss
    return step


def torch_step(torch, x, y, weights, wrap=None):
    """The same MLP step in PyTorch; ``wrap(net)`` wraps the network (e.g. in DDP)."""
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layer = torch.nn.Linear(fan_in, fan_out)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(weights[2 * i]))
            layer.bias.copy_(torch.from_numpy(weights[2 * i + 1]))
        layers += [layer, torch.nn.ReLU()] if i < len(SIZES) - 2 else [layer]
    net = torch.nn.Sequential(*layers)
    net = net if wrap is None else wrap(net)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(numpy.int64))

    def step():
        opt.zero_grad()
        loss = loss_fn(net(xt), yt)
        loss.backward()
        opt.step()
        return loss
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--repeat", type=int, default=30, help="timed steps (median is reported)")
    args = parser.parse_args()
    _timing.warn_if_busy()

    x, y, weights = data()
    steps = {"minigrad": minigrad_step(x, y, weights),
             "numpy (hand-written)": numpy_step(x, y, weights)}
    # minigrad and NumPy interleaved, so that machine noise hits them alike; PyTorch after them,
    # on its own: its OpenMP workers spin after each step and would slow whatever runs next
    times = _timing.time_interleaved(steps, repeat=args.repeat)
    torch = _timing.optional_torch()
    if torch is not None:
        times[f"torch {torch.__version__}"] = _timing.time_it(torch_step(torch, x, y, weights),
                                                               repeat=args.repeat)
    numpy_ms = times["numpy (hand-written)"] * 1e3
    torch_ms = times[f"torch {torch.__version__}"] * 1e3 if torch is not None else None
    rows = [{"framework": name, "ms_per_step": t * 1e3,
             "ratio_to_numpy": t * 1e3 / numpy_ms,
             "ratio_to_torch": t * 1e3 / torch_ms if torch_ms else None}
            for name, t in times.items()]
    _timing.print_table(rows, ["framework", "ms_per_step", "ratio_to_numpy", "ratio_to_torch"])
    if torch is None:
        print("PyTorch not installed: compared with hand-written NumPy only "
              "(pip install torch==2.13.0)")
    if args.json:
        _timing.write_json(args.json, {"benchmark": "mlp_step", "sizes": SIZES, "batch": BATCH,
                                       "dtype": "float32", "rows": rows})


if __name__ == "__main__":
    main()
