"""``minigrad.bench.timing.CudaClock``'s protocol, against a recording stand-in for CuPy (the
real one needs a GPU): per sample, the method's slots are cleared and (cold) the flush buffer
written on the clock's stream, then the hold kernel is queued with the pinned flags cleared, the
start event recorded, every call queued, the end event recorded, and only then the hold released
and the end awaited."""
import ctypes
import types


from minigrad import _native
from minigrad.bench import timing


class Pinned(ctypes.c_int32 * 2):
    """Pinned host memory: a buffer with an address."""

    @property
    def ptr(self):
        return ctypes.addressof(self)


def stand_in_cupy(log, elapsed_ms=2.0, times_out=False):
    pinned = Pinned()

    class Stream:
        ptr = 1234

        def __init__(self, non_blocking=False):
            assert non_blocking

        def __enter__(self):
            log.append("stream on")

        def __exit__(self, *exc):
            log.append("stream off")

    class Event:
        def record(self, stream=None):
            log.append(("record", stream is not None))

        def synchronize(self):
            log.append(("synchronize", pinned[0]))  # the release flag at that moment
            if times_out:
                pinned[1] = 1

    class Buffer:
        def fill(self, value):
            log.append("flush")

    cuda = types.SimpleNamespace(Stream=Stream, Event=Event,
                                 alloc_pinned_memory=lambda n: pinned,
                                 get_elapsed_time=lambda start, end: elapsed_ms)
    return types.SimpleNamespace(cuda=cuda, empty=lambda n, dtype: Buffer()), pinned


class Method:
    name = "m"

    def __init__(self, log):
        self.log = log

    def stream_context(self, stream):
        log = self.log

        class Context:
            def __enter__(self):
                log.append("library stream on")

            def __exit__(self, *exc):
                log.append("library stream off")
        return Context()

    def reset(self):
        self.log.append("reset")

    def call(self, i):
        self.log.append(("call", i))


def hold_kernel(log, launches):
    def launch(grid, block, args):
        launches.append((grid, block, args))
        log.append("hold")
    return lambda name, source: launch if name == "mg_hold_stream" else None


def test_a_held_cold_sample_runs_in_order(monkeypatch):
    log, launches = [], []
    cupy, pinned = stand_in_cupy(log)
    monkeypatch.setattr(_native, "cuda_function", hold_kernel(log, launches))
    clock = timing.CudaClock(cupy, 1 << 20, hold_timeout=2.0)
    assert log == ["stream on", "stream off"]  # the flush buffer lives on the clock's stream
    log.clear()
    device, host, held = clock.run(Method(log), 3, cold=True, hold=True)
    assert log == [
        "stream on", "library stream on", "reset", "flush", "hold", ("record", True),
        ("call", 0), ("call", 1), ("call", 2), ("record", True), ("synchronize", 1),
        "library stream off", "stream off"]
    (grid, block, (release, timed_out, timeout)), = launches
    assert grid == block == (1,)
    assert (int(release), int(timed_out), int(timeout)) == (pinned.ptr, pinned.ptr + 4, 2e9)
    assert device == 2e-3 / 3 and host >= 0 and held


def test_a_hold_that_timed_out_is_reported_and_an_unheld_sample_queues_no_hold(monkeypatch):
    log, launches = [], []
    cupy, pinned = stand_in_cupy(log, times_out=True)
    monkeypatch.setattr(_native, "cuda_function", hold_kernel(log, launches))
    clock = timing.CudaClock(cupy, 1 << 20, hold_timeout=2.0)
    assert clock.run(Method(log), 1, cold=False, hold=True)[2] is False
    log.clear()
    assert clock.run(Method(log), 1, cold=False, hold=False)[2] is False
    assert "hold" not in log and "flush" not in log and len(launches) == 1
