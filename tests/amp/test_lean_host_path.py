"""The scaler's lean host path: one launch for float32 gradients, a cached work table, a status
reused from step to step. Each shortcut must give what the checked path gives."""
import numpy
import pytest

import minigrad
from helpers.doubles import StepCountingOptimizer
from minigrad import _native, amp
from minigrad.amp import _status_launch, float_status

needs_host = pytest.mark.skipif(_native.host_library() is None,
                                reason="no host build of the kernels")


def _grads(*sizes, seed=0):
    rng = numpy.random.default_rng(seed)
    return [rng.standard_normal(n).astype(numpy.float32) * 1024 for n in sizes]


def _rows(plan):
    _, _, (table, _, n_arrays, _, _) = plan
    return table.reshape(-1, 3)[:n_arrays] if n_arrays else table


@needs_host
def test_table_is_cached_and_rebuilt_when_an_address_or_size_changes():
    a, b = _grads(1000, 3000)
    first = float_status._host_plan([a, b])
    assert float_status._host_plan([a, b])[2] is first[2]  # same buffers: the cached entry
    rows = _rows(first)
    assert [int(r[1]) for r in rows] == [1000, 3000] and [int(r[2]) for r in rows] == [0, 1]
    c = numpy.empty_like(b)  # another address, same size
    moved = _rows(float_status._host_plan([a, c]))
    assert (
        int(moved[1][0]) != int(rows[1][0]) and int(moved[1][0]) == c.__array_interface__["data"][0]
    )
    shorter = _rows(float_status._host_plan([a, b[:2000]]))  # same address, another size
    assert int(shorter[1][0]) == int(rows[1][0]) and int(shorter[1][1]) == 2000


@needs_host
def test_lean_unscale_matches_reference_and_flags():
    grads = _grads(5, 700, 1)
    expected = [g * float_status.inverse(2.0**10) for g in grads]
    out, overflow = float_status.unscale_and_check(grads, 2.0**10)
    assert not overflow and all(o is g for o, g in zip(out, grads))
    for o, e in zip(out, expected):
        numpy.testing.assert_array_equal(o, e)
    grads[1][3] = numpy.nan
    assert float_status.unscale_and_check(grads, 4.0)[1]


@pytest.mark.parametrize(
    "make",
    [
        lambda g: g.reshape(10, 10).T,  # not C-contiguous
        lambda g: g.astype(numpy.float64),  # not float32
        lambda g: g.astype(numpy.float16),  # widened into new fp32 arrays
        lambda g: numpy.ones(_status_launch.HOST_PARALLEL_MIN, numpy.float32),  # a parallel launch
    ],
)
def test_arrays_the_plan_declines_take_the_checked_path(make):
    x = make(_grads(100)[0])
    assert float_status._host_plan([x]) is None
    before = x.astype(numpy.float64)
    (out,), overflow = float_status.unscale_and_check([x], 8.0)
    assert not overflow
    numpy.testing.assert_array_equal(out, (before / 8.0).astype(out.dtype))


def test_unaligned_and_read_only_arrays():
    raw = numpy.zeros(4 * 16 + 1, numpy.uint8)[1:].view(numpy.float32)  # not aligned to 4 bytes
    raw[...] = 2.0
    assert float_status._host_plan([raw]) is None
    (out,), overflow = float_status.unscale_and_check([raw], 2.0)
    assert not overflow and (out == 1.0).all()
    frozen = numpy.ones(4, numpy.float32)
    frozen.flags.writeable = False
    assert float_status._host_plan([frozen]) is None
    with pytest.raises(ValueError, match="read-only"):
        float_status.unscale_and_check([frozen], 2.0)
    assert not float_status.check([frozen])  # a check alone may read it


def test_plan_respects_a_missing_host_build():
    x = numpy.array([1.0, numpy.inf], numpy.float32)
    with _native.numpy_fallback():
        assert float_status._host_plan([x]) is None
        assert float_status.unscale_and_check([x], 2.0)[1]


def test_none_and_empty_entries():
    status = float_status.OverflowStatus()
    assert status.unscale_and_check([None, None], 2.0) == [None, None]
    assert not status.overflow()
    empty = numpy.zeros(0, numpy.float32)
    out = status.unscale_and_check([None, empty, numpy.full(3, 4.0, numpy.float32)], 2.0)
    assert out[0] is None and out[1] is empty and (out[2] == 2.0).all() and not status.overflow()


def test_reused_status_is_cleared_between_steps_and_stays_sticky_within_one():
    status = float_status.OverflowStatus()
    bad = numpy.array([1.0, numpy.inf], numpy.float32)
    good = numpy.ones(3, numpy.float32)
    status.unscale_and_check([bad], 2.0)
    assert status.overflow()
    status.check([good])  # a later clean check never resets it
    assert status.overflow() and status.buffer.asnumpy()[0] == 1.0
    status.clear()
    status.unscale_and_check([good], 2.0)
    assert not status.overflow()
    status.check([numpy.array([numpy.nan], numpy.float32)])
    assert status.overflow()
    status.clear()
    assert status.buffer is None and not status.overflow()


def test_clear_keeps_a_handed_out_buffer_intact():
    status = float_status.OverflowStatus()
    status.unscale_and_check([numpy.array([numpy.inf], numpy.float32)], 2.0)
    view = status.buffer
    status.clear()
    status.unscale_and_check([numpy.ones(2, numpy.float32)], 2.0)
    assert not status.overflow() and view.asnumpy()[0] == 1.0  # the old step's buffer kept its flag


def test_check_skips_what_unscale_saw_and_checks_the_rest():
    status = float_status.OverflowStatus()
    a = numpy.ones(4, numpy.float32)
    status.unscale_and_check([a], 2.0)
    a[0] = numpy.inf  # not read again: the unscale already checked it
    status.check([a])
    assert not status.overflow()
    status.check([a.copy()])
    assert status.overflow()


def test_a_status_set_from_outside_takes_the_checked_path():
    status = float_status.OverflowStatus()
    status.buffer = minigrad.amp.float_status.alloc_status()  # set from outside: the checked path
    status.unscale_and_check([numpy.array([numpy.inf], numpy.float32)], 2.0)
    assert status.overflow()


def test_grad_scaler_reports_an_overflow_after_clean_steps_and_recovers():
    p = minigrad.Parameter(minigrad.Tensor(numpy.zeros(4, numpy.float32)), name="w")
    q = minigrad.Parameter(minigrad.Tensor(numpy.zeros(2, numpy.float32)), name="b")
    opt, scaler = StepCountingOptimizer([p, q]), amp.GradScaler(init_scale=8.0)
    for values, applied in [
        ([1.0, 2.0], True),
        ([numpy.inf, 2.0], False),
        ([1.0, numpy.nan], False),
        ([1.0, 2.0], True),
    ]:
        p.grad = minigrad.Tensor(numpy.full(4, values[0], numpy.float32))
        q.grad = minigrad.Tensor(numpy.full(2, values[1], numpy.float32))
        scale = scaler.get_scale()
        assert scaler.step(opt) is applied
        scaler.update()
        report = scaler.last_report
        assert report.skipped is not applied and report.scale_before == scale
        assert report.inf_params == (() if applied or values[0] != numpy.inf else ("w",))
        assert report.nan_params == (("b",) if numpy.isnan(values[1]) else ())
        if applied:
            numpy.testing.assert_array_equal(p.grad.asnumpy(), numpy.float32(values[0]) / scale)
    assert opt.steps == 2 and scaler.get_scale() == 2.0


def test_grad_scaler_two_optimizers_share_one_status_correctly():
    p = minigrad.Parameter(minigrad.Tensor(numpy.zeros(2, numpy.float32)), name="p")
    q = minigrad.Parameter(minigrad.Tensor(numpy.zeros(2, numpy.float32)), name="q")
    p.grad = minigrad.Tensor(numpy.array([numpy.inf, 1.0], numpy.float32))
    q.grad = minigrad.Tensor(numpy.ones(2, numpy.float32))
    first, second, scaler = (
        StepCountingOptimizer([p]),
        StepCountingOptimizer([q]),
        amp.GradScaler(init_scale=4.0),
    )
    assert scaler.step(first) is False and scaler.step(second) is True  # q is judged on its own
    scaler.update()
    assert scaler.last_report.skipped and scaler.last_report.inf_params == ("p",)
    assert first.steps == 0 and second.steps == 1 and scaler.get_scale() == 2.0


def test_a_scale_changed_in_place_is_read_again():
    scale = numpy.array(4.0)  # mutable: each unscale must read its current value
    status = float_status.OverflowStatus()
    assert status.unscale_and_check([numpy.full(2, 8.0, numpy.float32)], scale)[0][0] == 2.0
    scale[...] = 2.0
    assert status.unscale_and_check([numpy.full(2, 8.0, numpy.float32)], scale)[0][0] == 4.0
    same = numpy.float32(8.0)
    for expected in (1.0, 1.0):
        assert status.unscale_and_check([numpy.full(2, 8.0, numpy.float32)], same)[0][0] == expected


@needs_host
def test_a_check_alone_takes_float16_arrays_too():
    halves = [numpy.ones(n, numpy.float16) for n in (3, 300)]
    assert float_status._host_plan(halves, halves=True)[1] == numpy.float16
    assert float_status._host_plan(halves) is None  # an unscale widens them instead
    assert float_status._host_plan([halves[0], numpy.ones(2, numpy.float32)], halves=True) is None
    status = float_status.OverflowStatus()
    status.check(halves)
    assert not status.overflow()
    halves[1][-1] = numpy.inf
    status.check([halves[1].copy()])
    assert status.overflow()
    mixed = [numpy.ones(2, numpy.float32), numpy.array([numpy.nan], numpy.float16)]
    assert float_status.check(mixed) and not float_status.check([mixed[0]])


@needs_host
@pytest.mark.parametrize("bad", [None, "half", "single"])
def test_a_check_of_float16_and_float32_arrays_is_one_launch_per_dtype(bad, monkeypatch):
    # an O2 step's gradients: fp16 layers beside fp32 BatchNorm parameters
    halves = [numpy.ones(n, numpy.float16) for n in (3, 300)]
    singles = [numpy.ones(n, numpy.float32) for n in (5, 70)]
    arrays = [halves[0], singles[0], None, halves[1], singles[1]]
    plans = float_status._host_check_plans(arrays)
    assert [plan[1] for plan in plans] == [numpy.float16, numpy.float32]
    assert [plan[2][2] for plan in plans] == [2, 2]  # two arrays in each launch
    if bad == "half":
        halves[1][7] = numpy.inf
    elif bad == "single":
        singles[0][2] = numpy.nan
    launches = []
    real = float_status._launch_plan
    monkeypatch.setattr(float_status, "_launch_plan",
                        lambda *args: (launches.append(args[0][1]), real(*args)))
    monkeypatch.setattr(float_status, "check_overflow", None)  # the checked path is not taken
    status = float_status.OverflowStatus()
    status.check(arrays)
    assert launches == [numpy.float16, numpy.float32]
    assert status.overflow() is (bad is not None)


@needs_host
def test_a_mixed_check_takes_the_checked_path_when_one_dtype_cannot_launch():
    view = numpy.ones((4, 4), numpy.float32).T  # not C-contiguous
    arrays = [numpy.ones(3, numpy.float16), view]
    assert float_status._host_check_plans(arrays) is None
    view[1, 2] = numpy.inf
    assert float_status.check(arrays)
