"""How the overflow benchmark times a method: clocks for the GPU and the CPU, and the sampler
that warms up by time and repeats until the spread is small or the time is up.

A sample is ``calls`` back-to-back calls (hot mode: the data may sit in caches) or one call
after a cache flush (cold mode: a buffer of at least twice the L2 written first, as nvbench and
``triton.testing.do_bench`` flush). On a GPU the calls run on one stream between two CUDA
events, queued behind ``mg_hold_stream`` (kernels/bench.cu) until all are queued, so the GPU
time holds no host enqueue gaps; the host's own time per call is reported beside it. A method
that makes the host wait for the device within a call times out the hold kernel once and is
then timed without it (``Measurement.held`` False says so).
"""
import dataclasses
import statistics
import time

import numpy

from minigrad import _native
from minigrad.bench.methods import WrongResult


@dataclasses.dataclass
class Settings:
    """Stopping rule and sample sizes (seconds unless named otherwise)."""
    warmup: float = 0.1            # per method and input, by wall time
    min_samples: int = 10
    max_samples: int = 200
    target_spread: float = 0.02    # (p90 - p10) / median
    max_time: float = 2.0          # per method and input
    sample_time: float = 1e-3      # device time a hot sample aims at
    max_calls: int = 64            # calls per hot sample at most
    max_enqueue: float = 0.1       # host time to queue one sample, at most
    hold_timeout: float = 2.0


@dataclasses.dataclass
class Measurement:
    """Raw samples of one method: seconds per call (device), seconds per call (host), calls per
    sample; ``held`` (timed behind the hold kernel: enqueue bias removed; False on the CPU),
    ``converged`` (spread target met), ``error`` (a wrong answer: the method stopped there)."""
    samples: list = dataclasses.field(default_factory=list)
    host: list = dataclasses.field(default_factory=list)
    calls: int = 1
    held: bool = True
    converged: bool = False
    checked_calls: int = 0
    error: str = None
    seconds: float = 0.0


def spread(samples):
    """(p90 - p10) / median of ``samples``."""
    p10, median, p90 = numpy.percentile(samples, [10, 50, 90])
    return float((p90 - p10) / median) if median > 0 else 0.0


class HostClock:
    """Times calls on the CPU: wall seconds per call, and the process's CPU seconds per call (all
    threads) as the host time. Cold samples first write ``flush_bytes``."""
    holds = False

    def __init__(self, flush_bytes):
        self.flush = numpy.empty(max(flush_bytes, 1), numpy.uint8)

    def run(self, method, calls, cold, hold=False):
        method.reset()
        if cold:
            self.flush.fill(1)
        cpu, start = time.process_time(), time.perf_counter()
        for i in range(calls):
            method.call(i)
        wall = time.perf_counter() - start
        return wall / calls, (time.process_time() - cpu) / calls, False


class CudaClock:
    """Times calls on one CUDA stream with events, behind the hold kernel (see the module)."""
    holds = True

    def __init__(self, cupy, flush_bytes, hold_timeout):
        self.cupy = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.start, self.end = cupy.cuda.Event(), cupy.cuda.Event()
        self.pinned = cupy.cuda.alloc_pinned_memory(8)
        self.flags = numpy.frombuffer(self.pinned, numpy.int32, 2)  # release, timed out
        self.hold_kernel = _native.cuda_function("mg_hold_stream", _native.BENCH_SOURCE)
        self.timeout_ns = numpy.uint64(hold_timeout * 1e9)
        with self.stream:
            self.flush = cupy.empty(max(flush_bytes, 1), numpy.uint8)

    def run(self, method, calls, cold, hold=True):
        with self.stream, method.stream_context(self.stream):
            method.reset()
            if cold:
                self.flush.fill(0)
            if hold:
                self.flags[:] = 0
                address = self.pinned.ptr
                self.hold_kernel((1,), (1,), (numpy.uint64(address), numpy.uint64(address + 4),
                                              self.timeout_ns))
            self.start.record(self.stream)
            begin = time.perf_counter()
            for i in range(calls):
                method.call(i)
            host = time.perf_counter() - begin
            self.end.record(self.stream)
            self.flags[0] = 1
            self.end.synchronize()
        device = self.cupy.cuda.get_elapsed_time(self.start, self.end) / 1e3
        return device / calls, host / calls, bool(hold and self.flags[1] == 0)


def measure(methods, clock, cold, settings, now=time.perf_counter):
    """``{method name: Measurement}`` for ``methods`` on one input, sampled in turn (a round takes
    one sample of each method still running) so that drifts of the machine hit them alike."""
    found = {m.name: Measurement(held=clock.holds) for m in methods}
    for method in methods:
        _warm_up(method, clock, cold, settings, found[method.name], now)
    active = [m for m in methods if found[m.name].error is None]
    while active:
        for method in list(active):
            record = found[method.name]
            started = now()
            try:
                _sample(method, clock, cold, record)
            except WrongResult as error:
                record.error = str(error)
            record.seconds += now() - started
            n = len(record.samples)
            record.converged = n >= settings.min_samples and spread(
                record.samples) <= settings.target_spread
            if record.error or record.converged or n >= settings.max_samples or (
                    record.seconds >= settings.max_time and n >= 2):
                active.remove(method)
    return found


def _sample(method, clock, cold, record):
    device, host, held = clock.run(method, record.calls, cold, record.held and clock.holds)
    if clock.holds and record.held and not held:  # the host waited for the device in a call
        record.held = False
        device, host, _ = clock.run(method, record.calls, cold, hold=False)
    method.check(record.calls)
    record.checked_calls += record.calls
    record.samples.append(device)
    record.host.append(host)


def _warm_up(method, clock, cold, settings, record, now):
    """Run ``method`` one call at a time for ``settings.warmup`` seconds (each call checked), then
    choose the calls per sample from the last call's device and host times."""
    deadline = now() + settings.warmup
    device = host = None
    try:
        while device is None or now() < deadline:
            device, host, _ = clock.run(method, 1, cold, hold=False)
            method.check(1)
    except WrongResult as error:
        record.error = str(error)
        return
    if cold:
        record.calls = 1
        return
    calls = settings.sample_time / max(device, 1e-9)
    calls = min(calls, settings.max_calls, settings.max_enqueue / max(host, 1e-9))
    record.calls = max(1, int(calls))


def summary(record):
    """min, median, p90 and spread of a ``Measurement`` in microseconds, and the host's median."""
    if not record.samples:
        return {}
    us = [s * 1e6 for s in record.samples]
    return {"us_min": min(us), "us_median": statistics.median(us),
            "us_p90": float(numpy.percentile(us, 90)), "spread": spread(us),
            "host_us_median": statistics.median(h * 1e6 for h in record.host)}
