"""Conv-net training steps, minigrad vs PyTorch CPU, side by side in one run.

The nets of ``_cnn_nets.py`` (vgg, resnet8, digits), each trained in fp32 and at AMP level O2
(fp16 network, fp32 master weights and BatchNorm, dynamic loss scale starting at 2**10, so no
step overflows), with softmax cross-entropy and SGD (learning rate 0.01), the same weights and
batch in both frameworks, and the same thread count (``--threads``, default: the BLAS's).
PyTorch's O2 counterpart is ``autocast("cpu", float16)`` with a ``GradScaler``.

    python benchmarks/cnn_step.py [--json benchmarks/results/cnn_step.json]
    python benchmarks/cnn_step.py --device gpu --json out/cnn_step_gpu.json   # minigrad on CuPy

It prints and records:

1. steps: median ms per step of each framework, the ratio minigrad / PyTorch, and minigrad's
   O2 / fp32 ratio. PyTorch runs in a worker process; the two take turns net by net (minigrad's
   fp32 and O2 blocks of steps back to back, a pause for idle threads to stop spinning,
   PyTorch's fp32 and O2 blocks, for ``--rounds`` rounds), so that machine noise hits both
   alike and each ratio compares steps taken seconds apart.
2. phases: where a step's time goes (ms per step): conv forward and backward (and, within them,
   the conv GEMMs), pooling, BatchNorm, activations (ReLU), the optimizer, and the rest (loss,
   Dense, residual adds, autograd). minigrad's are timed around its ops (a separate run);
   PyTorch's come from ``torch.profiler`` (inclusive times of the same ops, with the
   profiler's own overhead).
3. gemms: the conv GEMMs inside a minigrad step against the same products (shapes, dtypes and
   memory orders) timed alone. Convolutions that run minigrad's direct kernels (up to 64
   channels in and out, on the CPU with the host library; ``ops/_image_host.py``) make no BLAS
   product: their time is in the conv phases, not here (a net with no conv GEMM has no ratio).
4. memory: the peak resident memory one step adds (MB; Linux: the high-water mark over the
   step minus the resident size before it, after returning freed heap memory to the OS), and
   for minigrad the peak of NumPy's traced allocations (``tracemalloc``).

Goals: fp32 step <= 1.0x PyTorch (all nets); O2 step <= 1.25x minigrad fp32 (vgg, resnet8);
conv GEMMs in a step <= 1.2x alone; peak step memory <= 1.2x PyTorch's. ``--device gpu`` times
minigrad's steps alone (CUDA events), a few of each, to show the CuPy path runs.
"""
import argparse
import contextlib
import ctypes
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import _cnn_nets as nets  # noqa: E402
import _timing  # noqa: E402

PRECISIONS = ("fp32", "O2")
LR = 0.01
INIT_SCALE = 2.0 ** 10
PAUSE = 0.15  # seconds between the frameworks' blocks: OpenBLAS's idle threads spin ~0.1 s
PHASES = ("conv forward", "conv backward", "conv GEMMs", "pooling forward", "pooling backward",
          "batchnorm forward", "batchnorm backward", "activations forward",
          "activations backward", "optimizer", "rest", "step")


# ---- memory, shared by both processes ------------------------------------------------------
def _status_kb(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def step_peak_mb(step, release=None):
    """The resident memory one call of ``step`` adds at its peak, in MB: the high-water mark
    over the call minus the resident size before it, after a warm-up call and with freed heap
    memory handed back to the OS (``malloc_trim``), so that the step's allocations are counted
    and none it could reuse (``release``, if given, is called first to drop what a framework
    keeps for reuse). None where that cannot be measured (not Linux with glibc)."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
        step()
        if release is not None:
            release()
        gc.collect()
        trim(0)
        before = _status_kb("VmRSS")
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM to the current resident size
        step()
        return (_status_kb("VmHWM") - before) / 1024
    except (OSError, KeyError, AttributeError):
        return None


# ---- minigrad --------------------------------------------------------------------------------
def minigrad_step(name, precision):
    """(one training step as a closure, its cell) of net ``name`` on its batch."""
    import minigrad
    from minigrad import amp, nn

    minigrad.set_seed(0)
    net = nets.minigrad_net(name)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.SGD(net.trainable_params(), LR)
    if precision == "fp32":
        cell = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt).set_train()
    else:
        manager = amp.DynamicLossScaleManager(init_loss_scale=INIT_SCALE, scale_window=10 ** 6)
        cell = amp.build_train_network(net, opt, loss, level="O2", loss_scale_manager=manager)
    x, y = nets.batch(name)
    device = minigrad.get_context("device_target")
    xt = minigrad.Tensor(x, device=device)
    yt = minigrad.Tensor(y.astype(numpy.int32), device=device)
    return (lambda: cell(xt, yt)), cell


def _skipped(cell):
    report = getattr(cell, "last_report", None)
    return bool(report is not None and report.skipped)


@contextlib.contextmanager
def _timed_methods(targets, totals):
    """Within the block, every call of ``owner.attribute`` for (owner, attribute, key) in
    ``targets`` adds its seconds to ``totals[key]``."""
    saved = []

    def wrap(fn, key):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                totals[key] = totals.get(key, 0.0) + time.perf_counter() - start
        return timed
    try:
        for owner, attribute, key in targets:
            saved.append((owner, attribute, owner.__dict__.get(attribute)))
            setattr(owner, attribute, wrap(getattr(owner, attribute), key))
        yield
    finally:
        for owner, attribute, original in reversed(saved):
            if original is None:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, original)


def minigrad_phases(step, cell, steps):
    """Median ms per step of each phase (``PHASES``), and the conv GEMMs of one step as
    (left shape, left order, right shape, right order, dtype)."""
    from minigrad.ops import conv, math, normalization, pooling

    gemms = []

    def record(lefts, rights, *outs):
        gemms.extend((a.shape, _order(a), b.shape, _order(b), a.dtype.str)
                     for a, b in zip(lefts, rights))
        return products(lefts, rights, *outs)
    products = conv._products
    targets = [(conv, "_products", "conv GEMMs")]
    for kind, classes in (("conv", [conv.Conv2d]), ("pooling", [pooling.MaxPool2d,
                                                                 pooling.AvgPool2d]),
                          ("batchnorm", [normalization.Normalize]), ("activations", [math.ReLU])):
        targets += [(cls, f"{way}ward", f"{kind} {way}ward") for cls in classes
                    for way in ("for", "back")]
    targets.append((cell.optimizer, "apply_gradients", "optimizer"))
    samples = {key: [] for key in PHASES}
    for k in range(steps + 2):  # two warm-up steps
        totals = {}
        with _timed_methods(targets, totals):
            start = time.perf_counter()
            step()
            totals["step"] = time.perf_counter() - start
        if k < 2:
            continue
        for key in PHASES:
            if key != "rest":
                samples[key].append(totals.get(key, 0.0))
    conv._products = record
    try:
        step()
    finally:
        conv._products = products
    medians = {key: statistics.median(v) * 1e3 for key, v in samples.items() if v}
    measured = sum(v for key, v in medians.items() if key not in ("step", "conv GEMMs"))
    medians["rest"] = medians["step"] - measured
    return medians, gemms


def _order(a):
    return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "strided"


def gemms_alone(gemms, repeat):
    """Seconds of the products ``gemms`` (as ``minigrad_phases`` records them) timed alone on
    fresh arrays of the same shapes, dtypes and memory orders (median of ``repeat`` rounds)."""
    rng = numpy.random.default_rng(0)

    def operand(shape, order, dtype):
        a = rng.standard_normal(shape).astype(dtype)
        return numpy.asfortranarray(a) if order == "F" else a
    pairs = [(operand(sa, oa, dt), operand(sb, ob, dt)) for sa, oa, sb, ob, dt in gemms]
    return _timing.time_it(lambda: [a @ b for a, b in pairs], repeat=repeat)


def minigrad_memory(step):
    """(peak resident MB a step adds, peak MB of NumPy's traced allocations in a step). The
    pool of reusable conv temporaries (``minigrad.ops._scratch``) is emptied before the
    measured step, so the step allocates them again and both figures count them."""
    from minigrad.ops import _scratch

    resident = step_peak_mb(step, release=_scratch.clear)
    tracemalloc.start()
    try:
        step()
        _scratch.clear()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        step()
        traced = (tracemalloc.get_traced_memory()[1] - before) / 2 ** 20
    finally:
        tracemalloc.stop()
    return resident, traced


# ---- PyTorch, in a worker process ----------------------------------------------------------
def torch_step(torch, name, precision):
    """One PyTorch training step of net ``name`` as a closure (as ``minigrad_step``)."""
    torch.manual_seed(0)
    net = nets.torch_net(torch, name)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    x, y = (torch.from_numpy(a) for a in nets.batch(name))
    loss_fn = torch.nn.CrossEntropyLoss()
    if precision == "fp32":
        def step():
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            return loss
        return step
    scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE, growth_interval=10 ** 6)

    def amp_step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = loss_fn(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return amp_step


# inclusive profiler events of each phase: the forward op, and the engine's call of its node
_NODE = "^autograd::engine::evaluate_function: "
TORCH_EVENTS = {"conv forward": "^aten::conv2d$",
                "conv backward": _NODE + "ConvolutionBackward",
                "pooling forward": "^aten::max_pool2d$",
                "pooling backward": _NODE + "MaxPool2DWithIndicesBackward",
                "batchnorm forward": "^aten::batch_norm$",
                "batchnorm backward": _NODE + "NativeBatchNormBackward",
                "activations forward": "^aten::relu$",
                "activations backward": _NODE + "ReluBackward",
                "optimizer": "^Optimizer\\.step#"}


def torch_phases(torch, step, steps):
    """ms per step of each phase from ``torch.profiler`` (inclusive CPU times)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    for _ in range(2):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            with record_function("cnn_step"):
                step()
    totals = {e.key: e.cpu_time_total for e in prof.key_averages()}
    out = {phase: sum(t for key, t in totals.items() if re.search(pattern, key)) / steps / 1e3
           for phase, pattern in TORCH_EVENTS.items()}
    out["step"] = totals["cnn_step"] / steps / 1e3
    out["rest"] = out["step"] - sum(v for k, v in out.items() if k != "step")
    return out


def torch_worker(threads):
    """Serve the parent's requests (one JSON object a line) until 'quit'."""
    import torch

    torch.set_num_threads(threads)
    steps = {}
    for line in sys.stdin:
        request = json.loads(line)
        if request["cmd"] == "quit":
            break
        key = (request["net"], request["precision"])
        if key not in steps:
            steps[key] = torch_step(torch, *key)
            for _ in range(3):
                steps[key]()
        step = steps[key]
        if request["cmd"] == "steps":
            reply = {"seconds": [_timing.wall_timer(step, 1) for _ in range(request["count"])]}
        elif request["cmd"] == "phases":
            reply = torch_phases(torch, step, request["count"])
        else:
            reply = {"peak_mb": step_peak_mb(step)}
        print(json.dumps(reply), flush=True)
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads()}),
          flush=True)


class TorchWorker:
    """The PyTorch side: a worker process of this interpreter, or None when torch is missing."""

    def __init__(self, threads):
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        # its stderr (the profiler's log lines) is shown only if it fails
        self.errors = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([sys.executable, __file__, "--torch-worker", "--threads",
                                      str(threads)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.errors, text=True,
                                     env=env)

    def ask(self, **request):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.errors.seek(0)
            raise RuntimeError(f"the PyTorch worker ended:\n{self.errors.read()}")
        return json.loads(line)

    def close(self):
        self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
        self.proc.stdin.flush()
        info = json.loads(self.proc.stdout.readline())
        self.proc.wait(timeout=60)
        return info


# ---- the run ---------------------------------------------------------------------------------
def blas_threads():
    pools = _timing.blas_info().get("blas") or []
    counts = [p.get("num_threads") for p in pools if isinstance(p, dict) and p.get("num_threads")]
    return counts[0] if counts else os.cpu_count()


def cpu_run(args):
    threads = args.threads or blas_threads()
    limit = contextlib.nullcontext()
    if args.threads:
        import threadpoolctl
        limit = threadpoolctl.threadpool_limits(args.threads)
    with limit:
        worker = TorchWorker(threads) if _timing.optional_torch() is not None else None
        try:
            result = measure(args, worker, threads)
        finally:
            info = worker.close() if worker is not None else {
                "torch": "not installed (pip install torch==2.13.0)"}
    return {**result, "torch": info}


def measure(args, worker, threads):
    configs = [(name, precision) for name in args.nets for precision in PRECISIONS]
    steps, cells, samples, block = {}, {}, {}, {}
    for key in configs:
        steps[key], cells[key] = minigrad_step(*key)
        for _ in range(3):
            steps[key]()
        seconds = _timing.wall_timer(steps[key], 3) / 3
        block[key] = max(2, round(args.block_seconds / seconds))
        samples[key] = {"minigrad": [], "torch": [], "skipped": 0}
    # each round: a net's minigrad blocks back to back (fp32, then O2: the O2 / fp32 ratio
    # compares steps seconds apart), then PyTorch's blocks of the same net
    for _ in range(args.rounds):
        for name in args.nets:
            keys = [(name, precision) for precision in PRECISIONS]
            for key in keys:
                for _ in range(block[key]):
                    samples[key]["minigrad"].append(_timing.wall_timer(steps[key], 1))
                    samples[key]["skipped"] += _skipped(cells[key])
            for key in keys if worker is not None else ():
                time.sleep(PAUSE)
                reply = worker.ask(cmd="steps", net=key[0], precision=key[1], count=block[key])
                samples[key]["torch"] += reply["seconds"]
                time.sleep(PAUSE)
    rows = []
    for (name, precision), s in samples.items():
        mg = statistics.median(s["minigrad"]) * 1e3
        th = statistics.median(s["torch"]) * 1e3 if s["torch"] else None
        rows.append({"net": name, "precision": precision, "minigrad_ms": mg, "torch_ms": th,
                     "ratio_to_torch": mg / th if th else None, "steps": len(s["minigrad"]),
                     "minigrad_skipped_steps": s["skipped"]})
    by_key = {(r["net"], r["precision"]): r for r in rows}
    for name in args.nets:
        by_key[name, "O2"]["ratio_O2_to_fp32"] = (by_key[name, "O2"]["minigrad_ms"]
                                                 / by_key[name, "fp32"]["minigrad_ms"])
    phases, gemms, memory = {}, {}, {}
    for key in configs:
        label = f"{key[0]} {key[1]}"
        count = max(3, block[key])
        mine, recorded = minigrad_phases(steps[key], cells[key], count)
        phases[label] = {"minigrad": mine}
        if worker is not None:
            time.sleep(PAUSE)
            phases[label]["torch"] = worker.ask(cmd="phases", net=key[0], precision=key[1],
                                               count=count)
        # a net whose convolutions all run the direct kernels makes no conv GEMM
        alone = gemms_alone(recorded, max(5, count)) * 1e3 if recorded else None
        gemms[label] = {"in_step_ms": mine["conv GEMMs"], "alone_ms": alone,
                        "ratio": mine["conv GEMMs"] / alone if recorded else None,
                        "products": len(recorded)}
        resident, traced = minigrad_memory(steps[key])
        memory[label] = {"minigrad_peak_mb": resident, "minigrad_traced_peak_mb": traced}
        if worker is not None:
            theirs = worker.ask(cmd="memory", net=key[0], precision=key[1])["peak_mb"]
            memory[label]["torch_peak_mb"] = theirs
            memory[label]["ratio"] = resident / theirs if resident and theirs else None
    return {"threads": threads, "rounds": args.rounds, "steps": rows, "phases": phases,
            "gemms": gemms, "memory": memory}


def report(result):
    print(f"threads: {result['threads']}; {result['torch']}")
    _timing.print_table(result["steps"], ["net", "precision", "minigrad_ms", "torch_ms",
                                          "ratio_to_torch", "ratio_O2_to_fp32", "steps",
                                          "minigrad_skipped_steps"])
    print("\nphases, ms per step (minigrad / torch; torch's from its profiler)")
    labels = list(result["phases"])
    rows = []
    for phase in PHASES:
        row = {"phase": phase}
        for label in labels:
            both = result["phases"][label]
            theirs = both.get("torch", {}).get(phase)
            row[label] = f"{both['minigrad'][phase]:.2f}" + (
                "" if theirs is None else f" / {theirs:.2f}")
        rows.append(row)
    _timing.print_table(rows, ["phase"] + labels)
    print("\nconv GEMMs, ms per step")
    _timing.print_table([{"config": k, **v} for k, v in result["gemms"].items()],
                        ["config", "in_step_ms", "alone_ms", "ratio", "products"])
    print("\npeak memory a step adds, MB")
    _timing.print_table([{"config": k, **v} for k, v in result["memory"].items()],
                        ["config", "minigrad_peak_mb", "torch_peak_mb", "ratio",
                         "minigrad_traced_peak_mb"])


def gpu_run(args):
    """minigrad's steps on the GPU (CuPy arrays), timed with CUDA events: a few of each."""
    import minigrad
    from minigrad import backend

    if not backend.CUDA_AVAILABLE:
        sys.exit(f"--device gpu needs CuPy and a GPU: {backend.CUPY_IMPORT_ERROR}")
    minigrad.set_context(device_target="GPU")
    timer = _timing.cuda_event_timer(backend.cupy)
    rows = []
    for name in args.nets:
        for precision in PRECISIONS:
            step, cell = minigrad_step(name, precision)
            ms = _timing.time_it(step, repeat=args.gpu_steps, warmup=3, timer=timer) * 1e3
            out = step()  # fp32: the loss; O2: (loss, overflow, scale)
            loss = float((out[0] if isinstance(out, tuple) else out).asnumpy())
            rows.append({"net": name, "precision": precision, "minigrad_ms": ms,
                         "loss": loss, "skipped": _skipped(cell)})
    _timing.print_table(rows, ["net", "precision", "minigrad_ms", "loss", "skipped"])
    return {"steps": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--nets", default=",".join(nets.NETS),
                        help=f"comma-separated subset of {','.join(nets.NETS)}")
    parser.add_argument("--rounds", type=int, default=5, help="turns each framework takes")
    parser.add_argument("--block-seconds", type=float, default=0.4,
                        help="about how long each turn runs one configuration")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for both frameworks (default: the BLAS's own count)")
    parser.add_argument("--gpu-steps", type=int, default=10, help="timed steps per config (GPU)")
    parser.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        return torch_worker(args.threads)
    args.nets = args.nets.split(",")
    unknown = set(args.nets) - set(nets.NETS)
    if unknown:
        parser.error(f"--nets: unknown {sorted(unknown)}; choose from {list(nets.NETS)}")
    _timing.warn_if_busy()
    result = {"benchmark": "cnn_step", "device": args.device, "batch": nets.BATCH,
              "numpy": numpy.__version__}
    if args.device == "gpu":
        result.update(gpu_run(args))
    else:
        result.update(cpu_run(args))
        report(result)
    if args.json:
        _timing.write_json(args.json, result)


if __name__ == "__main__":
    main()
