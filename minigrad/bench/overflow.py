"""``python -m minigrad.bench overflow``: the float-status kernels against their peers and the
memory's ceilings, on a GPU or the CPU, in one run.

For every input (one array of each ``--sizes``, and each model list of ``--lists``) in each
dtype, finite and with one +inf, it times minigrad's check, check+unscale and (fp16)
fp16->fp32 check+unscale; PyTorch's fused ``_amp_foreach_non_finite_check_and_unscale_`` and
``isfinite(x).all()``; CuPy's (or on the CPU NumPy's) ``isfinite(x).all()``; a copy and a
read-only pass over the same memory. Hot mode for every input, cold mode (cache flushed before
each call) for the inputs ``--cold`` names. Every timed call's answer is checked, and a wrong
one fails the run. It prints a table per input and the goals, and writes JSON with every raw
sample (``--json``) and a plot of GB/s against size (``--plot``).
"""
import dataclasses
import signal
import sys

import numpy

from minigrad import backend
from minigrad.bench import cases, environment, methods, report, timing

PRESETS = {  # (sizes, lists, cold inputs) per device; --quick is the GPU suite's short run
    ("gpu", False): ("4K,64K,1M,16M,256M,1G", "resnet50,gpt2-small,1024x16K", "all"),
    ("gpu", True): ("64K,16M,256M,1G", "resnet50,gpt2-small,1024x16K", "256M"),
    ("cpu", False): ("64K,1M,16M", "resnet50", "16M"),
    ("cpu", True): ("64K,16M", "resnet50", "none"),
}
QUICK = dict(warmup=0.02, min_samples=5, max_samples=50, target_spread=0.03, max_time=0.25)
DEFAULT_PEERS = {"gpu": "torch,cupy", "cpu": "torch"}
DTYPES = ("float16", "float32")
CASES = ("finite", "one-inf")
COLUMNS = ["input", "dtype", "case", "mode", "method", "calls", "us_median", "us_min", "us_p90",
           "spread", "host_us_median", "gb_s", "share_read", "share_copy", "share_rated",
           "x_vs_torch_fused"]
UNITS = {
    "us_*": "microseconds per call on the device (GPU: CUDA events, enqueue gaps removed; CPU: "
            "wall clock)",
    "host_us_median": "GPU: host seconds per call spent queuing it; CPU: process CPU seconds per "
                      "call, all threads",
    "spread": "(p90 - p10) / median of the samples",
    "gb_s": "bytes read + written per call / median time / 1e9 (traffic_bytes)",
    "share_*": "gb_s / the read or copy ceiling's gb_s on the same input and mode, or / the "
               "rated bandwidth (memory clock x bus width x 2)",
    "x_vs_torch_fused": "torch fused median / this median (> 1: faster than torch)",
    "samples_us": "every sample, microseconds per call",
}


class PeerMissing(Exception):
    """A peer asked for with --peers cannot run here."""


def add_arguments(parser):
    add = parser.add_argument
    add("--device", choices=("gpu", "cpu"),
        help="where to run (default: gpu when CuPy sees one, else cpu)")
    add("--quick", action="store_true", help="fewer sizes and samples (the GPU suite's run)")
    add("--sizes", help="array sizes in bytes, comma separated (4K, 256M, 1G)")
    add("--lists", help="tensor lists: resnet50, gpt2-small, NxE (N tensors of E elements); "
                        "'none' for no lists")
    add("--dtypes", default="float16,float32")
    add("--cases", default="finite,one-inf", help="finite and/or one-inf")
    add("--cold", help="inputs that also run cold (cache flushed before each call): sizes or "
                       "list names, 'all' or 'none'")
    add("--peers", help="peers to compare with: torch, cupy (GPU only), or 'none'; a peer asked "
                        "for that cannot run fails the run (default: torch,cupy on gpu, torch "
                        "on cpu)")
    add("--json", help="write every row, raw sample and the environment here")
    add("--plot", help="draw GB/s against array size per method into this PNG")
    add("--rated-gb-s", type=float, help="the memory's rated bandwidth in GB/s (default: from "
                                         "the GPU's memory clock and bus width)")
    add("--flush-bytes", type=cases.parse_size,
        help="cold mode's flush buffer (default: 2 x the GPU's L2; 64M on the CPU)")
    for name, kind in (("warmup", float), ("min-samples", int), ("max-samples", int),
                       ("target-spread", float), ("max-time", float)):
        add(f"--{name}", type=kind, help=f"sampling: {name} (see minigrad.bench.timing.Settings)")


def run(args):
    """Run the benchmark ``args`` describe; the process's exit code (0 fine, 1 a wrong result,
    2 a missing peer, 130 interrupted)."""
    device = args.device or ("gpu" if backend.CUDA_AVAILABLE else "cpu")
    if device == "gpu" and not backend.CUDA_AVAILABLE:
        print(f"overflow: --device gpu needs CuPy and a GPU: {backend.CUPY_IMPORT_ERROR}",
              file=sys.stderr)
        return 2
    try:
        peers, torch = load_peers(args.peers or DEFAULT_PEERS[device], device)
    except PeerMissing as error:
        print(f"overflow: {error}", file=sys.stderr)
        return 2
    sizes, lists, cold = PRESETS[(device, args.quick)]
    inputs = input_specs(args.sizes or sizes, args.lists or lists, args.cold or cold)
    dtypes = _choices("--dtypes", args.dtypes, DTYPES)
    case_names = _choices("--cases", args.cases, CASES)
    settings = sampling_settings(args)
    xp = backend.cupy if device == "gpu" else numpy
    environment.warn_if_busy()
    if device == "gpu":
        env = {"device": device, **environment.gpu_environment(xp, torch),
               "clocks_start": environment.gpu_clocks()}
    else:
        env = {"device": device, **environment.cpu_environment(torch)}
    rated = args.rated_gb_s or env.get("rated_bandwidth_gb_s")
    rated = rated * 1e9 if rated else None
    flush = args.flush_bytes or (2 * (env["l2_bytes"] or 64 << 20) if device == "gpu"
                                 else 64 << 20)
    clock = (timing.CudaClock(xp, flush, settings.hold_timeout) if device == "gpu"
             else timing.HostClock(flush))
    print(", ".join(f"{k}: {v}" for k, v in env.items()))
    result = {"benchmark": "minigrad.bench overflow", "command": " ".join(sys.argv),
              "environment": env, "peers": peers, "settings": dataclasses.asdict(settings),
              "flush_bytes": flush, "units": UNITS, "rows": [], "errors": [],
              "complete": False, "interrupted": False}
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        for spec in inputs:
            for dtype in dtypes:
                for case_name in case_names:
                    measure_input(xp, spec, dtype, case_name, peers, torch, clock, settings,
                                  result, rated)
                    _save(args, result, rated)
        result["complete"] = True
    except KeyboardInterrupt:
        result["interrupted"] = True
        print("overflow: interrupted; the rows so far are kept", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if device == "gpu":
            env["clocks_end"] = environment.gpu_clocks()
        result["goals"] = report.goals(result["rows"]) if device == "gpu" else []
        _save(args, result, rated, final=True)
    if result["goals"]:
        print()
        report.print_table(result["goals"], ["goal", "dtype", "worst", "at_least", "met", "rows"])
    for error in result["errors"]:
        print(f"overflow: WRONG RESULT: {error}", file=sys.stderr)
    return 130 if result["interrupted"] else (1 if result["errors"] else 0)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _choices(option, text, allowed):
    """The comma-separated values of ``text``, each one of ``allowed``.

    Raises:
        ValueError: another value, naming ``option``.
    """
    values = [v.strip() for v in text.split(",") if v.strip()]
    wrong = [v for v in values if v not in allowed]
    if wrong or not values:
        raise ValueError(f"{option} must be a comma-separated choice of {', '.join(allowed)}, "
                         f"got {text!r}")
    return values


def load_peers(text, device):
    """``(names, torch module or None)`` for ``--peers``.

    Raises:
        PeerMissing: a peer that cannot run here, with what to do.
    """
    names = [] if text.strip() == "none" else [p.strip() for p in text.split(",") if p.strip()]
    unknown = sorted(set(names) - {"torch", "cupy"})
    if unknown:
        raise PeerMissing(f"--peers must name torch, cupy or none, got {unknown}")
    torch = None
    if "cupy" in names and device == "cpu":
        raise PeerMissing("the peer cupy runs on a GPU only: --peers torch or none on the cpu")
    if "torch" in names:
        try:
            import torch
        except ImportError as error:
            raise PeerMissing(f"the peer torch was asked for (--peers) but does not import "
                              f"({error}); install it, or leave it out with --peers") from None
        if device == "gpu" and not torch.cuda.is_available():
            raise PeerMissing(f"the peer torch was asked for (--peers) but this torch "
                              f"{torch.__version__} has no CUDA device (built for CUDA "
                              f"{torch.version.cuda}); install a CUDA build, or leave it out "
                              f"with --peers")
    return names, torch


def input_specs(sizes, lists, cold):
    """``[(kind, label, bytes of the array or element counts of the list, runs cold)]`` for the
    ``--sizes``, ``--lists`` and ``--cold`` texts."""
    wanted = {c.strip().lower() for c in cold.split(",") if c.strip()}
    everything = "all" in wanted
    cold_sizes = {cases.parse_size(c) for c in wanted if c[0].isdigit() and "x" not in c}
    specs = []
    for text in filter(str.strip, sizes.split(",")):
        n = cases.parse_size(text)
        specs.append(("array", cases.format_bytes(n), n, everything or n in cold_sizes))
    if lists.strip().lower() != "none":
        for text in filter(str.strip, lists.split(",")):
            label, counts = cases.parse_list(text)
            specs.append(("list", label, counts, everything or text.strip().lower() in wanted))
    return specs


def sampling_settings(args):
    settings = timing.Settings(**(QUICK if args.quick else {}))
    for field in ("warmup", "min_samples", "max_samples", "target_spread", "max_time"):
        if getattr(args, field, None) is not None:
            setattr(settings, field, getattr(args, field))
    return settings


def measure_input(xp, spec, dtype, case_name, peers, torch, clock, settings, result, rated):
    """Time every method on one input, hot and (if asked) cold; add its rows to ``result``."""
    kind, label, size, runs_cold = spec
    dtype = numpy.dtype(dtype)
    sizes = [size // dtype.itemsize] if kind == "array" else size
    case = cases.Case(xp, kind, label, sizes, dtype, finite=case_name == "finite")
    found = methods.methods_for(case, settings.max_calls, peers, torch)
    for mode in ("hot", "cold") if runs_cold else ("hot",):
        measured = timing.measure(found, clock, mode == "cold", settings)
        rows = [_row(case, case_name, mode, method, measured[method.name]) for method in found]
        report.add_shares(rows, rated)
        result["rows"].extend(rows)
        result["errors"].extend(f"{label} {dtype} {case_name} {mode}: {m.error}"
                                for m in measured.values() if m.error)
        print()
        report.print_table(rows, COLUMNS)
        sys.stdout.flush()


def _row(case, case_name, mode, method, record):
    row = {"input": case.label, "kind": case.kind, "tensors": case.n_tensors,
           "bytes": case.nbytes, "dtype": str(case.dtype), "case": case_name, "mode": mode,
           "method": method.name, "role": method.role, "traffic_bytes": method.traffic(),
           "calls": record.calls, "samples": len(record.samples),
           "checked_calls": record.checked_calls, "converged": record.converged,
           "enqueue_bias_removed": record.held, "error": record.error,
           **timing.summary(record)}
    if row.get("us_median"):
        row["gb_s"] = row["traffic_bytes"] / row["us_median"] / 1e3
    row["samples_us"] = [s * 1e6 for s in record.samples]
    row["host_samples_us"] = [h * 1e6 for h in record.host]
    return row


def _save(args, result, rated, final=False):
    if args.json:
        report.write_json(args.json, result)
    if final and args.plot and result["rows"]:
        report.plot(result["rows"], args.plot, rated / 1e9 if rated else None)
