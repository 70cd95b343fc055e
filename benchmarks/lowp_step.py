"""What fp16, bfloat16 and FP8 cost on the CPU: one training step of the fp32 MLP of
``mlp_step.py`` (784-512-512-10, batch 128) and of the VGG-style net of ``cnn_step.py`` (batch 64
of 3x32x32) in each format, beside PyTorch's fp32 and bfloat16-autocast steps.

    python benchmarks/lowp_step.py [--json benchmarks/results/lowp_step.json]

minigrad's rows: fp32 (AMP level O0); fp16 at O2 with a dynamic loss scale; bfloat16 at O2 (no
loss scale, as in the peers); FP8 with delayed and with current scaling (HYBRID: E4M3 forward,
E5M2 backward) under ``fp8.fp8_autocast`` on the fp32 network. Every ratio is a step's time over
minigrad's fp32 step of the same net in the same run.

None of these formats is meant to be fast on a CPU: NumPy has no bfloat16 or FP8 arithmetic, so
bf16 and FP8 GEMMs run in fp32 after a conversion, and the conversions are the overhead this
measures. It is the price of seeing the numerics exactly on a laptop, not a speed-up.
"""
import argparse
import os
import sys

import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minigrad  # noqa: E402
from minigrad import amp, fp8, nn  # noqa: E402
import _cnn_nets  # noqa: E402
import _timing  # noqa: E402
import mlp_step  # noqa: E402

NETS = ("mlp", "vgg")
MODES = ("fp32", "fp16 O2", "bf16 O2", "FP8 delayed", "FP8 current")
LR = 0.01


class _FP8(nn.Cell):
    """``net`` with its Dense and Conv2d GEMMs in FP8 under ``recipe``."""

    def __init__(self, net, recipe):
        super().__init__()
        self.net = net
        self.recipe = recipe

    def construct(self, x):
        with fp8.fp8_autocast(fp8_recipe=self.recipe):
            return self.net(x)


def _net_and_batch(name):
    """(fresh minigrad network with the benchmark's weights, images, labels)."""
    if name == "mlp":
        x, y, weights = mlp_step.data()
        layers = []
        for i, (fan_in, fan_out) in enumerate(zip(mlp_step.SIZES[:-1], mlp_step.SIZES[1:])):
            layer = nn.Dense(fan_in, fan_out)
            layer.weight.set_data(weights[2 * i])
            layer.bias.set_data(weights[2 * i + 1])
            layers += [layer, nn.ReLU()] if i < len(mlp_step.SIZES) - 2 else [layer]
        return nn.SequentialCell(layers), x, y.astype(numpy.int32)
    x, y = _cnn_nets.batch(name)
    return _cnn_nets.minigrad_net(name), x, y.astype(numpy.int32)


def minigrad_step(name, mode):
    """A closure running one training step of net ``name`` in ``mode``."""
    net, x, y = _net_and_batch(name)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    if mode.startswith("FP8"):
        recipe = fp8.DelayedScaling() if mode == "FP8 delayed" else fp8.CurrentScaling()
        net = _FP8(net, recipe)
    opt = nn.Momentum(net.trainable_params(), learning_rate=LR, momentum=0.9)
    if mode == "fp16 O2":
        train = amp.build_train_network(net, opt, loss, level="O2")
    elif mode == "bf16 O2":
        train = amp.build_train_network(net, opt, loss, level="O2", dtype=minigrad.bfloat16)
    else:
        train = amp.build_train_network(net, opt, loss, level="O0")
    train.set_train()
    xt, yt = minigrad.Tensor(x), minigrad.Tensor(y)
    return lambda: train(xt, yt)


def torch_step(torch, name, bf16):
    """PyTorch's step of the same net, in fp32 or under ``autocast("cpu", torch.bfloat16)``."""
    if name == "mlp":
        x, y, weights = mlp_step.data()
        layers = []
        for i, (fan_in, fan_out) in enumerate(zip(mlp_step.SIZES[:-1], mlp_step.SIZES[1:])):
            layer = torch.nn.Linear(fan_in, fan_out)
            with torch.no_grad():
                layer.weight.copy_(torch.from_numpy(weights[2 * i]))
                layer.bias.copy_(torch.from_numpy(weights[2 * i + 1]))
            layers += [layer, torch.nn.ReLU()] if i < len(mlp_step.SIZES) - 2 else [layer]
        net = torch.nn.Sequential(*layers)
    else:
        x, y = _cnn_nets.batch(name)
        net = _cnn_nets.torch_net(torch, name)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(numpy.asarray(y, numpy.int64))

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(net(xt), yt)
        loss.backward()
        opt.step()
        return loss
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--repeat", type=int, default=15, help="timed steps (median is reported)")
    args = parser.parse_args()
    _timing.warn_if_busy()
    torch = _timing.optional_torch()
    rows = []
    for name in NETS:
        # minigrad's modes interleaved, so that machine noise hits them alike; PyTorch after
        times = _timing.time_interleaved({m: minigrad_step(name, m) for m in MODES},
                                         repeat=args.repeat)
        if torch is not None:
            for label, bf16 in (("torch fp32", False), ("torch bf16 autocast", True)):
                times[label] = _timing.time_it(torch_step(torch, name, bf16), repeat=args.repeat)
        base = {"minigrad": times["fp32"], "torch": times.get("torch fp32")}
        for mode, t in times.items():
            own = base["torch"] if mode.startswith("torch") else base["minigrad"]
            rows.append({"net": name, "mode": mode, "ms_per_step": t * 1e3,
                         "ratio_to_own_fp32": t / own})
    _timing.print_table(rows, ["net", "mode", "ms_per_step", "ratio_to_own_fp32"])
    if torch is None:
        print("PyTorch not installed: minigrad's rows only (pip install torch==2.13.0)")
    if args.json:
        _timing.write_json(args.json, {"benchmark": "lowp_step", "nets": list(NETS),
                                       "rows": rows, "torch_available": torch is not None})


if __name__ == "__main__":
    main()
