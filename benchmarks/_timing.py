"""Shared helpers for the benchmark scripts: medians of repeated timings, tables, JSON.

    seconds = time_it(fn, repeat=20, number=5)             # median seconds per call
    medians = time_interleaved({"a": f, "b": g}, repeat=20)  # one of each per round
    samples = sample_interleaved({"a": f, "b": g})           # every round's seconds per call
    print_table(rows, ["name", "ms", "ratio"])
    warn_if_busy()                                          # at the start of every benchmark
    write_json("benchmarks/results/x.json", {"rows": rows})  # records machine(): load, BLAS

A timer is ``timer(fn, number) -> seconds for number calls``: ``wall_timer`` (default) uses
``time.perf_counter``; ``cuda_event_timer(cupy)`` brackets the calls with CUDA events, so it
measures GPU time and waits for the work to finish.
"""
import json
import math
import os
import platform
import statistics
import sys
import time


def wall_timer(fn, number):
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return time.perf_counter() - start


def cuda_event_timer(cupy):
    """A timer that measures ``number`` calls between two CUDA events on the current stream."""
    def timer(fn, number):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / 1e3
    return timer


def time_it(fn, repeat=20, number=1, warmup=1, timer=wall_timer):
    """Median over ``repeat`` rounds of the seconds per call of ``fn`` (``number`` calls a
    round)."""
    return time_interleaved({"fn": fn}, repeat, number, warmup, timer)["fn"]


def time_interleaved(fns, repeat=20, number=1, warmup=1, timer=wall_timer):
    """Median seconds per call for each of ``fns`` (a dict name -> callable).

    Each round times every function once, in turn, so that machine noise hits them alike.
    """
    samples = sample_interleaved(fns, repeat, number, warmup, timer)
    return {name: statistics.median(values) for name, values in samples.items()}


def sample_interleaved(fns, repeat=20, number=1, warmup=1, timer=wall_timer):
    """Like ``time_interleaved`` but returns every round's seconds per call: name -> list."""
    for fn in fns.values():
        timer(fn, warmup)
    samples = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            samples[name].append(timer(fn, number) / number)
    return samples


def optional_torch():
    """The ``torch`` module, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def print_table(rows, columns):
    """Print ``rows`` (dicts) as an aligned text table of ``columns``; floats with 4 digits."""
    def cell(value):
        if isinstance(value, float):
            return "-" if math.isnan(value) else f"{value:.4g}"
        return "-" if value is None else str(value)
    table = [columns] + [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    for k, line in enumerate(table):
        print("  ".join(text.rjust(w) if k else text.ljust(w) for text, w in zip(line, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))


BUSY_LOAD_PER_CORE = 0.5  # 1-minute load average per core above which timings are suspect
_load_at_start = None


def load_average():
    """``os.getloadavg()`` (1, 5 and 15 minutes) as a list, or None where the OS has none."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def blas_info():
    """The BLAS libraries loaded in this process and their thread counts, from threadpoolctl
    (``pip install threadpoolctl``); without it, what NumPy was built against and the thread
    variables of the environment."""
    threads_env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                              "MKL_NUM_THREADS") if k in os.environ}
    try:
        import threadpoolctl
    except ImportError:
        import numpy
        config = getattr(numpy, "show_config", None)
        libraries = None
        try:
            libraries = config(mode="dicts").get("Build Dependencies", {}).get("blas")
        except (TypeError, AttributeError):
            pass
        return {"source": "numpy build (threadpoolctl not installed)", "blas": libraries,
                "env": threads_env}
    pools = [{key: pool.get(key) for key in ("internal_api", "version", "num_threads",
                                             "threading_layer", "filepath")}
             for pool in threadpoolctl.threadpool_info() if pool.get("user_api") == "blas"]
    return {"source": f"threadpoolctl {threadpoolctl.__version__}", "blas": pools,
            "env": threads_env}


def warn_if_busy(threshold=BUSY_LOAD_PER_CORE, stream=None):
    """Record the load average at the start of a benchmark and warn (on stderr) when the machine
    is busy: a 1-minute load above ``threshold`` per core makes timings, and even ratios of two
    timings taken while another process competes for the cores, unreliable.

    Returns:
        Whether the machine was busy.
    """
    global _load_at_start
    _load_at_start = load_average()
    cores = os.cpu_count() or 1
    busy = _load_at_start is not None and _load_at_start[0] > threshold * cores
    if busy:
        print(f"warning: load average {_load_at_start[0]} on {cores} cores (above "
              f"{threshold} per core): other processes compete for the CPU, so these timings "
              f"are not comparable with a quiet machine's; rerun when it is idle",
              file=stream or sys.stderr, flush=True)
    return busy


def machine():
    """Where and under what load the benchmark ran (recorded in the JSON): versions, CPU count,
    the load average at the start (``warn_if_busy``) and at the end, and the BLAS library and
    its thread count."""
    import numpy
    cores = os.cpu_count() or 1
    start = _load_at_start
    end = load_average()
    busiest = max((v[0] for v in (start, end) if v is not None), default=None)
    return {"python": sys.version.split()[0], "numpy": numpy.__version__,
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpu_count": cores,
            "load_average_start": start, "load_average_end": end,
            "busy": busiest is not None and busiest > BUSY_LOAD_PER_CORE * cores,
            "blas": blas_info()}


def write_json(path, payload):
    """Write ``payload`` to ``path`` as indented JSON, with a ``machine`` entry (``machine()``:
    the load average and the BLAS threads) unless it has one."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        json.dump({"machine": machine(), **payload}, f, indent=2, default=_plain)
        f.write("\n")


def _plain(value):
    # NumPy scalars become Python numbers; anything else JSON cannot hold becomes its text
    return value.item() if hasattr(value, "item") else str(value)
