"""One training step of a GEMM-bound MLP (or a CNN) in fp32 and at AMP level O2, minigrad
beside PyTorch.

The MLP has ``--layers`` Dense layers of ``--width`` units (ReLU) and a 10-way head, batch
``--batch``, softmax cross-entropy, Momentum 0.9. ``--net vgg`` (or ``resnet8``, ``digits``)
takes a conv net of ``benchmarks/_cnn_nets.py`` instead, on its batch, with ``cnn_step.py``'s
minigrad step (SGD) and the same PyTorch net and weights. Side by side in one run:

* minigrad fp32 (``TrainOneStepCell``) and O2 (``amp.build_train_network(level="O2")``: fp16
  network on the tensor cores, fp32 master weights, dynamic loss scaling);
* PyTorch fp32 and ``torch.autocast(float16)`` + ``torch.amp.GradScaler`` (on the GPU, when
  PyTorch has CUDA).

Each step is timed from the host until the device has finished it (an O2 step reads its
overflow flag; the other steps are followed by a synchronisation). The JSON holds the medians,
the ratios (goals on one GPU: minigrad O2 <= 0.6x its fp32 step, <= 1.5x PyTorch's AMP step) and
the host reads per step, counted on the strict device (``minigrad.testing.strict_device``) with
the same model code at a small size.

    python benchmarks/gpu_step.py --device gpu --json gpu_step.json   # 4096 wide, batch 1024
    python benchmarks/gpu_step.py --device cpu                        # 256 wide, batch 64
    python benchmarks/gpu_step.py --device gpu --net vgg --json gpu_step_vgg.json
"""
import argparse
import os
import sys

import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minigrad  # noqa: E402
from minigrad import Tensor, amp, backend, nn  # noqa: E402
from minigrad.testing.strict_device import strict_device  # noqa: E402
import _timing  # noqa: E402

SIZES = {"gpu": (4096, 1024), "cpu": (256, 64)}  # default (width, batch) per device
CLASSES = 10
LR = 0.01


def minigrad_step(device, width, layers, batch, level):
    """A callable running one minigrad step at ``level`` ("O0" or "O2") on ``device``."""
    minigrad.set_context(device_target=device)
    minigrad.set_seed(0)
    cells = []
    for _ in range(layers):
        cells += [nn.Dense(width, width), nn.ReLU()]
    net = nn.SequentialCell(cells + [nn.Dense(width, CLASSES)])
    opt = nn.Momentum(net.trainable_params(), LR, 0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    manager = amp.DynamicLossScaleManager(2.0 ** 16, 2, 2000) if level == "O2" else None
    train = amp.build_train_network(net, opt, loss, level=level, loss_scale_manager=manager)
    rng = numpy.random.default_rng(0)
    x = Tensor(rng.standard_normal((batch, width)).astype(numpy.float32), device=device)
    y = Tensor(rng.integers(0, CLASSES, batch).astype(numpy.int32), device=device)
    return lambda: train(x, y)


def cnn_step(device, name, level):
    """A callable running one minigrad step of conv net ``name`` at ``level`` on ``device``
    (``cnn_step.py``'s step: SGD, dynamic loss scaling at O2)."""
    import cnn_step
    minigrad.set_context(device_target=device)
    step, _ = cnn_step.minigrad_step(name, "fp32" if level == "O0" else "O2")
    return step


def host_reads(level, net="mlp"):
    """Host reads of one step at ``level`` (after a first step), on the strict device."""
    with strict_device() as reads:
        step = (minigrad_step("GPU", 64, 2, 16, level) if net == "mlp" else
                cnn_step("GPU", "digits" if net == "digits" else net, level))
        step()
        reads.reset()
        step()
        return reads.count


def torch_cnn_step(torch, device, name, use_amp):
    """One PyTorch step of conv net ``name`` on ``device`` (autocast + GradScaler with
    ``use_amp``), with ``_cnn_nets``' weights and batch."""
    import _cnn_nets as nets
    import cnn_step
    torch.manual_seed(0)
    net = nets.torch_net(torch, name).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=cnn_step.LR)
    x, y = (torch.from_numpy(a).to(device) for a in nets.batch(name))
    loss_fn = torch.nn.CrossEntropyLoss()
    scaler = (torch.amp.GradScaler("cuda", init_scale=cnn_step.INIT_SCALE,
                                   growth_interval=10 ** 6) if use_amp else None)

    def step():
        opt.zero_grad(set_to_none=True)
        if scaler is None:
            loss_fn(net(x), y).backward()
            opt.step()
            return
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step


def torch_step(torch, device, width, layers, batch, use_amp):
    torch.manual_seed(0)
    parts = []
    for _ in range(layers):
        parts += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    net = torch.nn.Sequential(*parts, torch.nn.Linear(width, CLASSES)).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 16) if use_amp else None
    x = torch.randn(batch, width, device=device)
    y = torch.randint(0, CLASSES, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        if scaler is None:
            loss_fn(net(x), y).backward()
            opt.step()
            return
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step


def synchronised(fn, sync):
    def run():
        fn()
        sync()
    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "gpu"], default="gpu")
    parser.add_argument("--width", type=int, default=None)
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--net", choices=["mlp", "vgg", "resnet8", "digits"], default="mlp",
                        help="the MLP (default) or a conv net of benchmarks/_cnn_nets.py")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    width, batch = SIZES[args.device]
    width, batch = args.width or width, args.batch or batch
    device = "GPU" if args.device == "gpu" else "CPU"
    if device == "GPU":
        backend.check_device("GPU")  # a clear error without CuPy or a GPU
        sync = backend.cupy.cuda.Device().synchronize
    else:
        _timing.warn_if_busy()

        def sync():
            return None
    if args.net == "mlp":
        def ours(level):
            return minigrad_step(device, width, args.layers, batch, level)

        def theirs(use_amp):
            return torch_step(torch, "cuda", width, args.layers, batch, use_amp)
    else:
        def ours(level):
            return cnn_step(device, args.net, level)

        def theirs(use_amp):
            return torch_cnn_step(torch, "cuda", args.net, use_amp)
    fns = {"minigrad fp32": synchronised(ours("O0"), sync),
           "minigrad O2": synchronised(ours("O2"), sync)}
    torch = _timing.optional_torch()
    if torch is not None and device == "GPU" and torch.cuda.is_available():
        fns["torch fp32"] = synchronised(theirs(False), torch.cuda.synchronize)
        fns["torch amp"] = synchronised(theirs(True), torch.cuda.synchronize)
    seconds = _timing.time_interleaved(fns, repeat=args.repeat, number=3, warmup=2)
    reads = {"O0": host_reads("O0", args.net), "O2": host_reads("O2", args.net)}
    rows = [{"step": name, "ms": 1e3 * s, "vs minigrad fp32": s / seconds["minigrad fp32"]}
            for name, s in seconds.items()]
    _timing.print_table(rows, ["step", "ms", "vs minigrad fp32"])
    ratios = {"o2_vs_fp32": seconds["minigrad O2"] / seconds["minigrad fp32"]}
    if "torch amp" in seconds:
        ratios["o2_vs_torch_amp"] = seconds["minigrad O2"] / seconds["torch amp"]
        ratios["fp32_vs_torch_fp32"] = seconds["minigrad fp32"] / seconds["torch fp32"]
    print("ratios:", {k: round(v, 3) for k, v in ratios.items()}, "host reads per step:", reads)
    if args.json:
        _timing.write_json(args.json, {
            "benchmark": "gpu_step", "device": device, "net": args.net,
            **({"width": width, "batch": batch, "layers": args.layers} if args.net == "mlp"
               else {}), "ms": {k: 1e3 * v for k, v in seconds.items()},
            "ratios": ratios, "host_reads_per_step": reads,
            "goals": ({"o2_vs_fp32": 0.6, "o2_vs_torch_amp": 1.5, "host_reads_O2": 1}
                      if args.net == "mlp" else {"host_reads_O2": 1})})
    return ratios


if __name__ == "__main__":
    main()
