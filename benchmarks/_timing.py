"""Shared helpers for the benchmark scripts: medians of repeated timings, tables, JSON.

    seconds = time_it(fn, repeat=20, number=5)             # median seconds per call
    medians = time_interleaved({"a": f, "b": g}, repeat=20)  # one of each per round
    samples = sample_interleaved({"a": f, "b": g})           # every round's seconds per call
    print_table(rows, ["name", "ms", "ratio"])
    write_json("benchmarks/results/x.json", {"rows": rows})

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
    """Median over ``repeat`` rounds of the seconds per call of ``fn`` (``number`` calls a round)."""
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


def machine():
    """A short description of where the benchmark ran (recorded in the JSON)."""
    import numpy
    return {"python": sys.version.split()[0], "numpy": numpy.__version__,
            "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count()}


def write_json(path, payload):
    """Write ``payload`` to ``path`` as indented JSON, with a ``machine`` entry unless it has one."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        json.dump({"machine": machine(), **payload}, f, indent=2, default=_plain)
        f.write("\n")


def _plain(value):
    # NumPy scalars become Python numbers; anything else JSON cannot hold becomes its text
    return value.item() if hasattr(value, "item") else str(value)
