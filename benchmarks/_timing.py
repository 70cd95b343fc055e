"""Shared helpers for the benchmark scripts: medians of repeated timings, tables, JSON.

    seconds = time_it(fn, repeat=20, number=5)             # median seconds per call
    medians = time_interleaved({"a": f, "b": g}, repeat=20)  # one of each per round
    samples = sample_interleaved({"a": f, "b": g})           # every round's seconds per call
    print_table(rows, ["name", "ms", "ratio"])
    warn_if_busy()                                          # at the start of every benchmark
    write_json("benchmarks/results/x.json", {"rows": rows})  # records machine(): load, BLAS

A timer is ``timer(fn, number) -> seconds for number calls``: ``wall_timer`` (default) uses
``time.perf_counter``; ``cuda_event_timer(cupy)`` brackets the calls with CUDA events, so it
measures GPU time and waits for the work to finish. The tables, the JSON writer and the record
of the machine and its load are the package's own (``minigrad.bench.report``,
``minigrad.bench.environment``), which the benchmark tool shipped with minigrad uses too; its
GPU clock (``minigrad.bench.timing``) also keeps host enqueue gaps out of the GPU time, which
these events do not.
"""
import statistics
import time

from minigrad.bench.environment import (  # noqa: F401  (the benchmarks call them as _timing.*)
    blas_info, machine, warn_if_busy)
from minigrad.bench.report import print_table, write_json  # noqa: F401


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
