"""The sampler of ``minigrad.bench.timing`` with a scripted clock: warm-up by time, calls per
sample, the stopping rule (spread target, sample cap, time cap), the fallback when the hold
kernel times out, a wrong answer stopping the method; and the host clock on real calls."""
import itertools

import numpy
import pytest

from minigrad.bench import timing
from minigrad.bench.methods import WrongResult


class Stub:
    """A method that counts calls and checks, and fails its check from call ``fail_at`` on."""

    def __init__(self, name, fail_at=None):
        self.name, self.fail_at, self.calls, self.checks = name, fail_at, 0, 0

    def reset(self):
        pass

    def call(self, i):
        self.calls += 1

    def check(self, calls):
        self.checks += 1
        if self.fail_at is not None and self.calls >= self.fail_at:
            raise WrongResult(f"{self.name}: wrong")


class ScriptedClock:
    """Device seconds per call from ``times`` (cycled), host seconds ``host``; the hold kernel
    "times out" on the samples listed in ``unheld``."""
    holds = True

    def __init__(self, times, host=1e-6, unheld=()):
        self.times, self.host, self.unheld = itertools.cycle(times), host, set(unheld)
        self.runs = []

    def run(self, method, calls, cold, hold=True):
        for i in range(calls):
            method.call(i)
        self.runs.append((method.name, calls, cold, hold))
        held = hold and len(self.runs) not in self.unheld
        return next(self.times), self.host, held


def ticking(step):
    """A ``now`` that advances ``step`` seconds per reading."""
    counter = itertools.count()
    return lambda: next(counter) * step


def test_steady_times_stop_at_min_samples_with_the_calls_the_warm_up_chose():
    settings = timing.Settings(warmup=0.0, min_samples=5, target_spread=0.05, sample_time=1e-3,
                               max_calls=64)
    clock = ScriptedClock([1e-4])
    method = Stub("m")
    found = timing.measure([method], clock, False, settings, now=ticking(1e-3))["m"]
    assert found.converged and len(found.samples) == 5 and found.calls == 10
    assert found.checked_calls == 50 and found.held and found.error is None
    assert method.checks == 1 + 5  # the warm-up call and every sample


def test_noisy_times_run_until_the_time_cap():
    settings = timing.Settings(warmup=0.0, min_samples=3, target_spread=0.01, max_time=0.5,
                               max_samples=1000)
    found = timing.measure([Stub("m")], ScriptedClock([1e-4, 3e-4]), False, settings,
                           now=ticking(0.01))["m"]
    assert not found.converged and found.seconds >= 0.5 and len(found.samples) < 1000


def test_the_sample_cap_ends_a_method_that_never_settles():
    settings = timing.Settings(warmup=0.0, min_samples=3, target_spread=0.0, max_time=1e9,
                               max_samples=7)
    found = timing.measure([Stub("m")], ScriptedClock([1e-4, 2e-4]), False, settings,
                           now=ticking(1e-6))["m"]
    assert len(found.samples) == 7 and not found.converged


def test_warm_up_runs_for_its_time_and_host_time_bounds_the_calls():
    settings = timing.Settings(warmup=0.05, min_samples=2, target_spread=1.0,
                               sample_time=1.0, max_calls=64, max_enqueue=0.1)
    clock = ScriptedClock([1e-6], host=0.02)  # a host-bound method: 20 ms to queue a call
    found = timing.measure([Stub("m")], clock, False, settings, now=ticking(0.01))["m"]
    warm = [run for run in clock.runs if run[1] == 1 and not run[3]]
    assert len(warm) >= 2  # by time, not by count
    assert found.calls == 5  # 0.1 s of queueing / 20 ms


def test_cold_samples_take_one_call_each():
    clock = ScriptedClock([1e-4])
    found = timing.measure([Stub("m")], clock, True, timing.Settings(warmup=0.0, min_samples=3),
                           now=ticking(1e-3))["m"]
    assert found.calls == 1 and all(run[2] for run in clock.runs)


def test_a_hold_timeout_retimes_the_sample_without_the_hold_from_then_on():
    settings = timing.Settings(warmup=0.0, min_samples=4, target_spread=1.0)
    clock = ScriptedClock([1e-4], unheld={2})  # the first timed sample's hold times out
    found = timing.measure([Stub("m")], clock, False, settings, now=ticking(1e-3))["m"]
    assert not found.held and len(found.samples) == 4
    timed = clock.runs[1:]
    assert timed[0][3] and not any(run[3] for run in timed[1:])


def test_methods_take_turns_and_a_wrong_answer_stops_only_that_method():
    settings = timing.Settings(warmup=0.0, min_samples=4, target_spread=1.0)
    good, bad = Stub("good"), Stub("bad", fail_at=3)
    clock = ScriptedClock([1e-4])
    found = timing.measure([good, bad], clock, False, settings, now=ticking(1e-3))
    assert found["bad"].error == "bad: wrong" and found["good"].error is None
    assert len(found["good"].samples) == 4
    timed = [run[0] for run in clock.runs[2:]]
    assert timed[:2] == ["good", "bad"]  # one sample each per round


def test_a_method_wrong_in_its_warm_up_is_never_sampled():
    found = timing.measure([Stub("bad", fail_at=1)], ScriptedClock([1e-4]), False,
                           timing.Settings(warmup=0.0), now=ticking(1e-3))["bad"]
    assert found.error and found.samples == []


def test_summary_and_spread():
    record = timing.Measurement(samples=[1e-6 * v for v in (10, 11, 12, 13, 100)],
                                host=[2e-6] * 5)
    stats = timing.summary(record)
    assert stats["us_min"] == pytest.approx(10) and stats["us_median"] == pytest.approx(12)
    assert stats["host_us_median"] == pytest.approx(2)
    assert stats["us_p90"] == pytest.approx(numpy.percentile([10, 11, 12, 13, 100], 90))
    assert timing.spread([5.0] * 4) == 0.0 and timing.summary(timing.Measurement()) == {}


def test_the_host_clock_times_real_calls_and_flushes_for_cold_samples():
    clock = timing.HostClock(1 << 16)
    method = Stub("m")
    device, host, held = clock.run(method, 3, cold=True)
    assert method.calls == 3 and device > 0 and host >= 0 and not held
    assert clock.flush[0] == 1  # the flush buffer was written
