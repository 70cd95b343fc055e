"""Overflow check (float status) throughput: minigrad against its peers and a plain copy.

Side by side in one run, on the same arrays:

* minigrad ``check_overflow`` (read only) and ``check_and_unscale`` (read + write, in place);
* PyTorch's fused ``torch._amp_foreach_non_finite_check_and_unscale_`` (when torch is installed);
* NumPy idioms on CPU (``isfinite(x).all()``, the integer bit mask whole and in blocks), CuPy
  idioms on GPU (``isfinite(x).all()``, the bit mask);
* a plain copy of the same bytes: the memory-bandwidth yardstick.

    python benchmarks/overflow.py --device cpu --sizes 16M --dtypes float16,float32 \\
        --json benchmarks/results/overflow_cpu.json
    python benchmarks/overflow.py --device gpu --json $OUT/overflow_gpu.json

Reported per method: the median time of a call, GB/s of gradient bytes (array bytes / time),
GB/s of memory traffic (x2 for methods that write), that traffic as a % of the copy's, and
speed ratios (other's time / this time) against the fused PyTorch kernel and ``isfinite().all()``.
Every method works on the same array (the fused ones in place, taking turns with inv_scale
0.5 and 2 so that the data stays as it was), and the methods are interleaved round by round so
that machine noise and cache state hit them alike; on CPU three passes over all cases are pooled,
so that a burst of noise spoils at most a third of any median. GPU timings use CUDA events and
sizes well above L2; the cases are all-finite, one inf in the middle, and all inf.
"""
import argparse
import functools
import itertools
import os
import statistics
import sys

import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minigrad import backend  # noqa: E402
from minigrad.amp import _status_numpy, float_status as fs  # noqa: E402
from minigrad import _native  # noqa: E402
import _timing  # noqa: E402

DEFAULTS = {"cpu": {"sizes": "16M", "cases": "finite", "repeat": 11, "number": 1, "passes": 3},
            "gpu": {"sizes": "128M,512M", "cases": "finite,one-inf,all-inf", "repeat": 15,
                    "number": 10, "passes": 1}}
CASES = ("finite", "one-inf", "all-inf")
TORCH_FUSED = "torch fused check+unscale"
ISFINITE = "isfinite(x).all()"
COPY = "copy (yardstick)"


def parse_size(text):
    """``"16M"`` -> 16 * 2**20 elements (suffixes K, M, G), or a plain integer."""
    text = text.strip().upper()
    scale = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    if not number.isdigit() or int(number) <= 0:
        raise argparse.ArgumentTypeError(f"size must be a positive count like 16M, got {text!r}")
    return int(number) * scale


def make_array(xp, n, dtype, case):
    pattern = xp.asarray((numpy.random.default_rng(0).standard_normal(1 << 20) * 8).astype(dtype))
    x = xp.tile(pattern, -(-n // pattern.size))[:n]  # built on the device: no huge transfer
    if case == "one-inf":
        x[n // 2] = numpy.inf
    elif case == "all-inf":
        x.fill(numpy.inf)
    return x


def alternating_inv_scale():
    """Calls alternate 0.5 and 2.0, so repeated in-place unscaling leaves the data as it was."""
    return functools.partial(next, itertools.cycle((0.5, 2.0)))


def minigrad_methods(x, inv):
    status = fs.alloc_status(x)
    return {"minigrad check": (lambda: fs.check_overflow(status, x), False),
            "minigrad check+unscale": (lambda: fs.check_and_unscale(status, [x], inv()), True)}


def array_methods(xp, x):
    """The idioms one writes with NumPy (CPU) or CuPy (GPU) alone, and the copy yardstick."""
    utype, magnitude, largest = _status_numpy._BITS[x.dtype]
    bits = x.view(utype)
    target = xp.empty_like(x)
    methods = {ISFINITE: (lambda: xp.isfinite(x).all(), False),
               "bit mask (x & 0x7f..).max()": (lambda: (bits & utype(magnitude)).max() > largest,
                                                False),
               COPY: (lambda: xp.copyto(target, x), True)}
    if xp is numpy:
        methods["bit mask in blocks (minigrad fallback)"] = (
            lambda: _status_numpy.has_nonfinite(x), False)
    return methods


def torch_methods(torch, xp, x, inv):
    device = "cuda" if xp is not numpy else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        return {}
    grads = torch.from_dlpack(x) if device == "cuda" else torch.from_numpy(x)  # shares x
    found_inf = torch.zeros(1, device=device)
    scales = {v: torch.full((1,), v, device=device) for v in (0.5, 2.0)}

    def fused():
        torch._amp_foreach_non_finite_check_and_unscale_([grads], found_inf, scales[inv()])
    methods = {TORCH_FUSED: (fused, True)}
    if device == "cpu":  # torch's copy uses all cores: a fairer yardstick than NumPy's
        copy_target = torch.empty_like(grads)
        methods["torch copy_ (yardstick)"] = (lambda: copy_target.copy_(grads), True)
    return methods


def measure(args, xp, torch, timer):
    """Rows for every (dtype, size, case); each pass over all of them adds ``repeat`` rounds,
    so that a burst of machine noise spoils at most one pass of each median."""
    configs = [(dtype, n, case) for dtype in args.dtypes for n in args.sizes for case in args.cases]
    samples, writes = {config: {} for config in configs}, {}
    for _ in range(args.passes):
        for config in configs:
            dtype, n, case = config
            x = make_array(xp, n, dtype, case)
            inv = alternating_inv_scale()  # shared: the fused methods take turns on x
            methods = {**minigrad_methods(x, inv), **array_methods(xp, x)}
            if torch is not None:
                methods.update(torch_methods(torch, xp, x, inv))
            writes.update((name, w) for name, (_, w) in methods.items())
            timed = _timing.sample_interleaved({k: fn for k, (fn, _) in methods.items()},
                                               repeat=args.repeat, number=args.number,
                                               warmup=2, timer=timer)
            for name, values in timed.items():
                samples[config].setdefault(name, []).extend(values)
            del x, methods
    rows = []
    for (dtype, n, case), by_method in samples.items():
        times = {name: statistics.median(values) for name, values in by_method.items()}
        rows.extend(summarize(dtype, n, case, n * dtype.itemsize, writes, times))
    return rows


def summarize(dtype, n, case, nbytes, writes, times):
    copy_traffic = max(2 * nbytes / t for name, t in times.items() if "yardstick" in name)
    rows = []
    for name, t in times.items():
        traffic = nbytes * (2 if writes[name] else 1) / t
        rows.append({"dtype": str(numpy.dtype(dtype)), "n": n, "case": case, "method": name,
                     "ms": t * 1e3, "gb_s": nbytes / t / 1e9, "traffic_gb_s": traffic / 1e9,
                     "pct_of_copy": 100 * traffic / copy_traffic,
                     "x_vs_torch_fused": times[TORCH_FUSED] / t if TORCH_FUSED in times else None,
                     "x_vs_isfinite": times[ISFINITE] / t})
    return rows


def headline_ratios(rows):
    """The figures the goals are stated in, per (dtype, n, case)."""
    out = []
    groups = {}
    for row in rows:
        groups.setdefault((row["dtype"], row["n"], row["case"]), {})[row["method"]] = row
    for (dtype, n, case), by_method in groups.items():
        check, fused = by_method["minigrad check"], by_method["minigrad check+unscale"]
        torch_fused = by_method.get(TORCH_FUSED)
        out.append({"dtype": dtype, "n": n, "case": case,
                    "check_gb_s": check["gb_s"], "check_pct_of_copy": check["pct_of_copy"],
                    "check_unscale_gb_s": fused["gb_s"],
                    "torch_fused_gb_s": torch_fused["gb_s"] if torch_fused else None,
                    "check_unscale_vs_torch_fused": fused["x_vs_torch_fused"],
                    "check_vs_isfinite": check["x_vs_isfinite"],
                    "check_unscale_vs_isfinite": fused["x_vs_isfinite"]})
    return out


def environment(args, xp, torch):
    info = {"device": args.device, "minigrad_engine": "cuda kernels" if xp is not numpy else (
        "host kernels" if _native.host_library() is not None
        else f"numpy fallback ({_native.host_library_error()})")}
    if xp is numpy and _native.host_library() is not None:
        info["minigrad_host_threads"] = _native.host_threads()
    if xp is not numpy:
        props = xp.cuda.runtime.getDeviceProperties(xp.cuda.Device().id)
        name = props["name"]
        info.update(gpu=name.decode() if isinstance(name, bytes) else name, cupy=xp.__version__,
                    cuda_runtime=xp.cuda.runtime.runtimeGetVersion(),
                    l2_bytes=props.get("l2CacheSize"))
    if torch is not None:
        info.update(torch=torch.__version__, torch_threads=torch.get_num_threads())
    return info


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--sizes", help="element counts, comma separated (16M = 16 * 2**20); "
                        "default 16M on cpu, 128M,512M on gpu")
    parser.add_argument("--dtypes", default="float16,float32")
    parser.add_argument("--cases", help=f"comma separated from {CASES}; default finite on cpu, "
                        "all three on gpu")
    parser.add_argument("--repeat", type=int, help="timed rounds per pass; medians are reported")
    parser.add_argument("--number", type=int, help="calls per timed round")
    parser.add_argument("--passes", type=int, help="passes over all cases (medians pool them); "
                        "default 3 on cpu, 1 on gpu")
    parser.add_argument("--json", help="write rows and ratios here")
    args = parser.parse_args(argv)
    _timing.warn_if_busy()
    defaults = DEFAULTS[args.device]
    args.sizes = [parse_size(s) for s in (args.sizes or defaults["sizes"]).split(",")]
    args.cases = (args.cases or defaults["cases"]).split(",")
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"--cases must be among {CASES}, got {unknown}")
    args.dtypes = [numpy.dtype(d) for d in args.dtypes.split(",")]
    args.repeat = args.repeat or defaults["repeat"]
    args.number = args.number or defaults["number"]
    args.passes = args.passes or defaults["passes"]

    if args.device == "gpu":
        if not backend.CUDA_AVAILABLE:
            parser.error(f"--device gpu needs CuPy and a GPU: {backend.CUPY_IMPORT_ERROR}")
        xp, timer = backend.cupy, _timing.cuda_event_timer(backend.cupy)
    else:
        xp, timer = numpy, _timing.wall_timer
    torch = _timing.optional_torch()
    info = environment(args, xp, torch)
    print(", ".join(f"{k}: {v}" for k, v in info.items()))
    if torch is None:
        print("PyTorch not installed: no fused PyTorch peer in this run (pip install torch)")

    rows = measure(args, xp, torch, timer)
    _timing.print_table(rows, ["dtype", "n", "case", "method", "ms", "gb_s", "traffic_gb_s",
                               "pct_of_copy", "x_vs_torch_fused", "x_vs_isfinite"])
    ratios = headline_ratios(rows)
    print()
    _timing.print_table(ratios, ["dtype", "n", "case", "check_gb_s", "check_pct_of_copy",
                                 "check_unscale_gb_s", "torch_fused_gb_s",
                                 "check_unscale_vs_torch_fused", "check_vs_isfinite"])
    if args.json:
        _timing.write_json(args.json, {
            "benchmark": "overflow", "command": " ".join(["python", *sys.argv]),
            "environment": info, "repeat": args.repeat,
            "number": args.number, "passes": args.passes, "statistic": "median",
            "units": {"gb_s": "array bytes / s / 1e9",
                      "traffic_gb_s": "bytes read+written / s / 1e9",
                      "x_vs_*": "peer time / this time (>1: this is faster)"},
            "ratios": ratios, "rows": rows})
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
