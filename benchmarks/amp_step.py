"""Mixed-precision training step and loss-scaler overhead, minigrad vs PyTorch CPU, in one run.

1. step: one training step of the 784-512-512-10 MLP (ReLU, softmax cross-entropy, SGD),
   batch 128 — minigrad fp32 (``TrainOneStepCell``), minigrad O2 (``build_train_network``:
   fp16 network, fp32 loss and master weights, dynamic loss scale), PyTorch fp32 and PyTorch
   ``autocast(cpu, float16)`` + ``GradScaler``.
2. scaler: the scaler's own work per step over that MLP's gradients (669,706 fp32 values):
   ``unscale_`` + ``step`` (a no-op optimizer) + ``update``, minigrad ``GradScaler`` vs
   PyTorch ``GradScaler``; both restore the gradients from a copy first (so the values do not
   shrink into subnormals), and the copy alone is timed in the same rounds: "without copy" is
   the median of each round's difference.
3. phases: where each step's time goes (forward + backward, overflow check, optimizer, the
   rest), timed in a separate run for the fp32 and the O2 step, with the difference, and the
   process's CPU seconds per wall second during those steps.

    python benchmarks/amp_step.py [--json benchmarks/results/amp_step.json] [--repeat 30]

Goals: O2 step <= 1.25 x minigrad fp32 step; minigrad scaler overhead <= PyTorch's. PyTorch runs
in a separate process of this interpreter when torch imports here, else of the interpreter named
by ``MINIGRAD_TORCH_PYTHON``; without either the PyTorch columns say so and the rest still runs.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minigrad  # noqa: E402
from minigrad import nn, amp  # noqa: E402
import _timing  # noqa: E402

SIZES = (784, 512, 512, 10)
BATCH = 128
LR = 0.01


def mlp():
    minigrad.set_seed(0)
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers += [nn.Dense(fan_in, fan_out)] + ([nn.ReLU()] if i < len(SIZES) - 2 else [])
    return nn.SequentialCell(layers)


def batch():
    rng = numpy.random.default_rng(0)
    return (minigrad.Tensor(rng.standard_normal((BATCH, SIZES[0])).astype(numpy.float32)),
            minigrad.Tensor(rng.integers(0, SIZES[-1], BATCH).astype(numpy.int32)))


def minigrad_steps(repeat):
    x, y = batch()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    net = mlp()
    fp32 = nn.TrainOneStepCell(nn.WithLossCell(net, loss),
                               nn.SGD(net.trainable_params(), LR)).set_train()
    net = mlp()
    o2 = amp.build_train_network(net, nn.SGD(net.trainable_params(), LR), loss, level="O2")
    for _ in range(40):          # let the default 2**24 scale settle (early steps are skipped)
        o2(x, y)
    skipped_before = o2.core.consecutive_skips
    # interleaved (one fp32 step, one O2 step per round): machine noise hits both alike
    seconds = _timing.time_interleaved({"fp32": lambda: fp32(x, y), "O2": lambda: o2(x, y)},
                                       repeat=repeat, warmup=5)
    result = {"minigrad_fp32_ms": seconds["fp32"] * 1e3, "minigrad_O2_ms": seconds["O2"] * 1e3}
    result["O2_scale"] = float(o2.scale_sense.data)
    result["O2_skipped_while_timed"] = bool(o2.last_report.skipped or skipped_before)
    result["breakdown_ms"] = {"fp32": phases(fp32, x, y, repeat), "O2": phases(o2, x, y, repeat)}
    return result


def phases(cell, x, y, repeat):
    """Median ms per step of each phase of ``cell``'s step: forward + backward, the overflow
    check (loss-scaled cells), the optimizer, and the rest (the step's median minus those).

    Timed apart from the step ratio above: the wrappers add a little to every step."""
    samples = {"step": [], "forward_backward": [], "overflow_check": [], "optimizer": []}

    def timed(name, fn):
        def run(*args, **kwargs):
            start = time.perf_counter()
            result = fn(*args, **kwargs)
            samples[name].append(time.perf_counter() - start)
            return result
        return run
    cell.loss_and_grads = timed("forward_backward", cell.loss_and_grads)
    if hasattr(cell, "get_overflow_status"):
        cell.get_overflow_status = timed("overflow_check", cell.get_overflow_status)
    cell.optimizer.apply_gradients = timed("optimizer", cell.optimizer.apply_gradients)
    try:
        for _ in range(5):
            cell(x, y)
        for values in samples.values():
            values.clear()
        cpu, wall = time.process_time(), time.perf_counter()  # process_time: every thread
        for _ in range(repeat):
            timed("step", cell)(x, y)
        cpu_seconds = time.process_time() - cpu
        # process CPU seconds per wall second: about 2 on 2 cores means OpenBLAS's worker spins
        # on the second core through the whole step, not only inside the GEMMs
        cpu_share = cpu_seconds / (time.perf_counter() - wall)
    finally:  # the instance attributes shadowed the methods: remove them
        for name in ("loss_and_grads", "get_overflow_status"):
            cell.__dict__.pop(name, None)
        cell.optimizer.__dict__.pop("apply_gradients", None)
    medians = {name: statistics.median(values) * 1e3 for name, values in samples.items() if values}
    medians["rest"] = medians["step"] - sum(v for k, v in medians.items() if k != "step")
    medians["cpu_per_wall_second"] = cpu_share
    return medians


class _NoOpOptimizer:
    def __init__(self, params):
        self.parameters = tuple(params)

    def step(self):
        pass


def minigrad_scaler(repeat):
    net = mlp()
    params = net.trainable_params()
    rng = numpy.random.default_rng(1)
    pristine = [rng.standard_normal(p.shape).astype(numpy.float32) for p in params]
    for p, g in zip(params, pristine):
        p.grad = minigrad.Tensor(g.copy())
    scaler = amp.GradScaler()
    opt = _NoOpOptimizer(params)

    def restore():
        for p, g in zip(params, pristine):
            numpy.copyto(p.grad.data, g)

    def one():
        restore()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
    # interleaved, so that the copy subtracted in each round was timed next to that round's step
    samples = _timing.sample_interleaved({"scaler": one, "copy": restore}, repeat=repeat, warmup=5)
    return {"minigrad_scaler_ms": statistics.median(samples["scaler"]) * 1e3,
            "minigrad_copy_ms": statistics.median(samples["copy"]) * 1e3,
            "minigrad_scaler_without_copy_ms": statistics.median(
                s - c for s, c in zip(samples["scaler"], samples["copy"])) * 1e3,
            "n_values": int(sum(g.size for g in pristine))}


TORCH_SCRIPT = r"""
import json, statistics, sys, time
import torch
repeat = int(sys.argv[1])
torch.manual_seed(0)
def median_ms(fn, warmup=5):
    for _ in range(warmup): fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter(); fn(); ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)
def mlp():
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 10))
x = torch.randn(128, 784); y = torch.randint(0, 10, (128,))
m32 = mlp(); o32 = torch.optim.SGD(m32.parameters(), lr=0.01)
def fp32():
    o32.zero_grad(); torch.nn.functional.cross_entropy(m32(x), y).backward(); o32.step()
m16 = mlp(); o16 = torch.optim.SGD(m16.parameters(), lr=0.01); scaler = torch.amp.GradScaler("cpu")
def amp_step():
    o16.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(m16(x), y)
    scaler.scale(loss).backward(); scaler.step(o16); scaler.update()
out = {"torch_fp32_ms": median_ms(fp32), "torch_amp_fp16_ms": median_ms(amp_step)}
# the scaler alone, on the same number of gradient values, a no-op optimizer
params = list(mlp().parameters())
pristine = [torch.randn_like(p) for p in params]
for p, g in zip(params, pristine): p.grad = g.clone()
class NoOp(torch.optim.Optimizer):
    def __init__(self, ps): super().__init__(ps, {})
    def step(self, closure=None): return None
noop = NoOp(params); s2 = torch.amp.GradScaler("cpu")
s2.scale(torch.ones(()))  # the scaler makes its scale at the first scale()
def restore():
    for p, g in zip(params, pristine): p.grad.copy_(g)
def one():
    restore(); s2.unscale_(noop); s2.step(noop); s2.update()
for _ in range(5): one(); restore()
ones, copies = [], []
for _ in range(repeat):  # interleaved, as minigrad's
    t = time.perf_counter(); one(); ones.append((time.perf_counter() - t) * 1e3)
    t = time.perf_counter(); restore(); copies.append((time.perf_counter() - t) * 1e3)
out["torch_scaler_ms"] = statistics.median(ones); out["torch_copy_ms"] = statistics.median(copies)
out["torch_scaler_without_copy_ms"] = statistics.median(a - b for a, b in zip(ones, copies))
out["torch_version"] = torch.__version__; out["torch_threads"] = torch.get_num_threads()
print(json.dumps(out))
"""


def torch_interpreter():
    """The Python that runs the PyTorch side: this interpreter when ``import torch`` works here
    (``pip install torch==2.13.0`` beside minigrad), else ``$MINIGRAD_TORCH_PYTHON`` when it names
    an existing file; None when neither."""
    if _timing.optional_torch() is not None:
        return sys.executable
    path = os.environ.get("MINIGRAD_TORCH_PYTHON")
    return path if path and os.path.exists(path) else None


def torch_results(repeat):
    python = torch_interpreter()
    if python is None:
        return {"torch": "not run: torch does not import in this interpreter and "
                         "MINIGRAD_TORCH_PYTHON names no interpreter (pip install torch==2.13.0)"}
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    # a fresh process: PyTorch's thread pools and allocator stay out of minigrad's timings
    proc = subprocess.run([python, "-c", TORCH_SCRIPT, str(repeat)], capture_output=True,
                          text=True, env=env, timeout=600)
    if proc.returncode != 0:
        return {"torch": "not run: " + proc.stderr.strip().splitlines()[-1]}
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "torch_python": python}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    _timing.warn_if_busy()
    r = {"numpy": numpy.__version__, "batch": BATCH, "sizes": SIZES}
    r.update(minigrad_steps(args.repeat))
    r.update(minigrad_scaler(args.repeat * 3))
    r.update(torch_results(args.repeat))
    r["ratio_O2_vs_minigrad_fp32"] = r["minigrad_O2_ms"] / r["minigrad_fp32_ms"]
    if "torch_amp_fp16_ms" in r:
        r["ratio_O2_vs_torch_amp_fp16"] = r["minigrad_O2_ms"] / r["torch_amp_fp16_ms"]
        r["ratio_scaler_vs_torch_scaler"] = r["minigrad_scaler_ms"] / r["torch_scaler_ms"]
        r["ratio_scaler_vs_torch_scaler_without_copy"] = (
            r["minigrad_scaler_without_copy_ms"] / r["torch_scaler_without_copy_ms"])

    rows = [("minigrad fp32 step", r["minigrad_fp32_ms"]),
            ("minigrad O2 step (fp16, dynamic scale)", r["minigrad_O2_ms"]),
            ("torch fp32 step", r.get("torch_fp32_ms")),
            ("torch autocast fp16 + GradScaler", r.get("torch_amp_fp16_ms")),
            ("minigrad scaler unscale_+step+update", r["minigrad_scaler_ms"]),
            ("torch scaler unscale_+step+update", r.get("torch_scaler_ms")),
            ("  (gradient restore copy, minigrad / torch)", r["minigrad_copy_ms"]),
            ("", r.get("torch_copy_ms")),
            ("  scaler without the copy, minigrad / torch", r["minigrad_scaler_without_copy_ms"]),
            ("", r.get("torch_scaler_without_copy_ms"))]
    print(f"{'measurement':46s} {'median ms':>10s}")
    for name, value in rows:
        print(f"{name:46s} {'n/a' if value is None else f'{value:10.3f}'}")
    for key in sorted(k for k in r if k.startswith("ratio")):
        print(f"{key:46s} {r[key]:10.3f}")
    phase_names = ("forward_backward", "overflow_check", "optimizer", "rest", "step",
                   "cpu_per_wall_second")
    print(f"\n{'phase (ms, timed apart)':46s} {'fp32':>10s} {'O2':>10s} {'O2 - fp32':>10s}")
    for name in phase_names:
        a, b = (r["breakdown_ms"][kind].get(name, 0.0) for kind in ("fp32", "O2"))
        print(f"{name:46s} {a:10.3f} {b:10.3f} {b - a:+10.3f}")
    if "torch" in r:
        print(r["torch"])
    if args.json:
        _timing.write_json(args.json, r)


if __name__ == "__main__":
    main()
