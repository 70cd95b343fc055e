"""The loss-scale update rule of every face, step by step, against each peer's documented rule.

The ``_peer_*`` functions are transcriptions of the peers' own formulations (MindSpore's
``nn.DynamicLossScaleUpdateCell`` and ``amp.DynamicLossScaler``, TensorFlow's
``tf.compat.v1.mixed_precision.DynamicLossScale``, PyTorch's ``torch.amp.GradScaler``, as their
API documentation and sources give them), deliberately written the way each peer writes it
(iteration indices, modulo counters, ``good_steps``), not the way ``ScaleCore`` does; the faces
must reproduce them exactly.
"""

import numpy as np
import pytest

from helpers.doubles import StepCountingOptimizer
from minigrad import Parameter, Tensor, amp
from minigrad.amp import (
    DynamicLossScaleManager,
    DynamicLossScaler,
    FixedLossScaleManager,
    GradScaler,
    ScaleCore,
    StaticLossScaler,
    all_finite,
)
from minigrad.mixed_precision import DynamicLossScale, FixedLossScale

f32 = np.float32


def _peer_mindspore_cell(seq, s, f, w):
    # nn.DynamicLossScaleUpdateCell: cur_iter / last_overflow_iter, floor 1 (plus minigrad's inf
    # guard)
    s, f, cur, last, out = f32(s), f32(f), 1, 0, []
    for of in seq:
        on_of = max(s * (f32(1) / f), f32(1)) if of else s
        should_inc = w <= cur - last
        if of or should_inc:
            last = cur
        if should_inc and not of:
            grown = f32(on_of * f)
            s = grown if np.isfinite(grown) else on_of
        else:
            s = on_of
        cur += 1
        out.append(float(s))
    return out


def _peer_mindspore_manager(seq, s, f, w):
    # DynamicLossScaleManager.update_loss_scale: modulo on (cur_iter - last_overflow_iter)
    s, cur, last, out = f32(s), 1, 0, []
    for of in seq:
        if of:
            s = max(f32(s * f32(1 / f)), f32(1))
            last = cur
        elif (cur - last) % w == 0:
            grown = f32(s * f)
            s = grown if np.isfinite(grown) else s
        cur += 1
        out.append(float(s))
    return out


def _peer_mindspore_scaler(seq, s, f, w):
    # amp.DynamicLossScaler.adjust: counter = ((counter + 1) % window) * finite
    s, counter, out = f32(s), 0, []
    for of in seq:
        finite = not of
        if finite:
            if counter == w - 1:
                grown = f32(s * f)
                s = grown if np.isfinite(grown) else s
        else:
            s = max(f32(1), f32(s / f))
        counter = ((counter + 1) % w) * int(finite)
        out.append(float(s))
    return out


def _peer_tf(seq, s, multiplier, period):
    # tf DynamicLossScale: good_steps, ">=" and max(scale / multiplier, 1)
    s, good, out = f32(s), 0, []
    for of in seq:
        if not of:
            if good + 1 >= period:
                grown = f32(s * multiplier)
                if np.isfinite(grown):
                    s = grown
                good = 0
            else:
                good += 1
        else:
            s = max(f32(s / multiplier), f32(1))
            good = 0
        out.append(float(s))
    return out


def _peer_torch(seq, s, growth, backoff, interval):
    # torch._amp_update_scale_: tracker, "==", no floor, finite-guarded growth
    s, tracker, out = f32(s), 0, []
    for of in seq:
        if of:
            s = f32(s * f32(backoff))
            tracker = 0
        else:
            successful = tracker + 1
            if successful == interval:
                new = f32(s * f32(growth))
                if np.isfinite(new):
                    s = new
                tracker = 0
            else:
                tracker = successful
        out.append(float(s))
    return out


def _grads(of):
    return [Tensor(np.array([1.0, np.inf if of else 2.0], np.float32))]


def _run_manager(seq, s, f, w):
    m = DynamicLossScaleManager(s, f, w)
    out = []
    for of in seq:
        m.update_loss_scale(of)
        out.append(m.get_loss_scale())
    return out


def _run_scaler(seq, s, f, w):
    sc = DynamicLossScaler(s, f, w)
    out = []
    for of in seq:
        sc.adjust(all_finite(_grads(of)))
        out.append(float(sc.scale_value.data))
    return out


def _run_tf(seq, s, f, w):
    ls = DynamicLossScale(s, w, f)
    out = []
    for of in seq:
        _, apply = ls.update(_grads(of))
        assert apply is (not of)
        out.append(float(ls().data))
    return out


def _run_torch(seq, s, f, w):
    p = Parameter(Tensor(np.zeros(2, np.float32)), name="w")
    opt = StepCountingOptimizer([p])
    scaler = GradScaler(s, f, 1.0 / f, w)
    out = []
    for of in seq:
        p.grad = Tensor(np.array([1.0, np.inf if of else 2.0], np.float32))
        ran = scaler.step(opt)
        assert ran is (not of)
        scaler.update()
        out.append(scaler.get_scale())
    return out


def _run_cell(seq, s, f, w):
    from minigrad.nn.loss_scale import DynamicLossScaleUpdateCell

    cell = DynamicLossScaleUpdateCell(s, f, w)
    scale = Parameter(Tensor(np.float32(s)), name="scale_sense", requires_grad=False)
    out = []
    for of in seq:
        assert cell(scale, of) is of
        out.append(float(scale.data))
    return out


SEQS = [np.random.default_rng(seed).random(60) < p for seed, p in ((0, 0.1), (1, 0.3), (2, 0.6))]


@pytest.mark.parametrize("window", [1, 2, 3, 5])
@pytest.mark.parametrize("seq", SEQS)
def test_mindspore_faces_match_mindspore_rules(seq, window):
    seq = [bool(x) for x in seq]
    expected = _peer_mindspore_cell(seq, 2.0**4, 2, window)
    assert _peer_mindspore_manager(seq, 2.0**4, 2, window) == expected  # the peers agree
    assert _peer_mindspore_scaler(seq, 2.0**4, 2, window) == expected
    assert _run_manager(seq, 2.0**4, 2, window) == expected
    assert _run_scaler(seq, 2.0**4, 2, window) == expected
    assert _run_cell(seq, 2.0**4, 2, window) == expected


@pytest.mark.parametrize("window", [1, 2, 3, 5])
@pytest.mark.parametrize("seq", SEQS)
def test_tf_and_torch_faces_match_their_rules(seq, window):
    seq = [bool(x) for x in seq]
    assert _run_tf(seq, 2.0**4, 2.0, window) == _peer_tf(seq, 2.0**4, 2.0, window)
    assert _run_torch(seq, 2.0**4, 2.0, window) == _peer_torch(seq, 2.0**4, 2.0, 0.5, window)


def test_growth_happens_on_the_window_th_clean_step():
    for run in (_run_manager, _run_scaler, _run_tf, _run_torch, _run_cell):
        assert run([False] * 7, 8.0, 2, 3) == [8, 8, 16, 16, 16, 32, 32], run.__name__
        # an overflow restarts the count: growth 3 clean steps after it
        assert run([False, False, True, False, False, False], 8.0, 2, 3) == [8, 8, 4, 4, 4, 8], (
            run.__name__
        )


def test_floor_at_one_where_the_peer_floors_and_none_in_torch():
    seq = [True] * 5
    for run in (_run_manager, _run_scaler, _run_tf, _run_cell):
        assert run(seq, 4.0, 2, 10) == [2, 1, 1, 1, 1], run.__name__
    assert _run_torch(seq, 4.0, 2, 10) == [2, 1, 0.5, 0.25, 0.125]


def test_scale_never_grows_to_inf():
    top = float(np.finfo(np.float32).max) / 1.5
    for run in (_run_manager, _run_scaler, _run_tf, _run_torch, _run_cell):
        assert run([False] * 3, top, 2, 1) == [f32(top)] * 3, run.__name__


def test_non_power_of_two_factor_matches_the_mindspore_reciprocal_rule():
    seq = [False, False, True, True, False, False, False, True]
    assert _run_cell(seq, 3.0**5, 3, 2) == _peer_mindspore_cell(seq, 3.0**5, 3, 2)


def test_fixed_scales_never_change_but_skip_in_the_core():
    fixed = FixedLossScale(128)
    assert fixed.update(_grads(True)) == (None, True)  # TF: a fixed scale cannot react
    assert float(fixed().data) == 128.0 and fixed().dtype == np.float32
    assert StaticLossScaler(2**10).adjust(False) is False
    m = FixedLossScaleManager(256.0)
    m.update_loss_scale(True)
    assert m.get_loss_scale() == 256.0 and m.get_drop_overflow_update() is True


def test_mindspore_dynamic_loss_scaler_doc_example():
    scaler = DynamicLossScaler(scale_value=2**10, scale_factor=2, scale_window=1)
    grads = (
        Tensor(np.array([np.log(-1 + 0j).real, 1.0], np.float32) * np.nan),
        Tensor(np.array([1.0], np.float32)),
    )
    assert scaler.adjust(all_finite(scaler.unscale(grads))) is True
    assert float(scaler.scale_value.data) == 512.0
    out = StaticLossScaler(2**10).unscale((Tensor(np.array([1.5, 1.0], np.float16)),))
    np.testing.assert_allclose(out[0].asnumpy(), [1.4648e-03, 9.7656e-04], rtol=1e-3)
    assert out[0].dtype == np.float16


def test_core_extras_hysteresis_cap_floor():
    core = ScaleCore(16.0, 2.0, 0.5, 2, hysteresis=2)
    for of in (
        True,
        False,
        True,
        True,
    ):  # refilled by the clean step; backs off on the 2nd in a row
        core.update(of)
    assert core.scale == 8.0
    core = ScaleCore(16.0, 2.0, 0.5, 1, cap=40.0)
    assert [float(core.update(False)) for _ in range(3)] == [32.0, 40.0, 40.0]
    core = ScaleCore(1.0, 2.0, 0.5, 1, floor=0.25)
    assert [float(core.update(True)) for _ in range(3)] == [0.5, 0.25, 0.25]


def test_skip_guard_raises_with_the_cause():
    scaler = DynamicLossScaleManager(4.0, 2, 10)
    for _ in range(1000):  # MindSpore raises on the 1001st overflow in a row
        scaler.update_loss_scale(True)
    with pytest.raises(RuntimeError, match="1001 steps in a row"):
        scaler.update_loss_scale(True)
    p = Parameter(Tensor(np.zeros(2, np.float32)), name="w")
    gs = GradScaler(max_consecutive_skips=2)
    for i in range(2):
        p.grad = Tensor(np.array([np.nan, 1.0], np.float32))
        gs.scale(Tensor(np.float32(np.nan)))
        gs.step(StepCountingOptimizer([p]))
        if i == 1:
            with pytest.raises(RuntimeError, match="forward loss itself is not finite"):
                gs.update()
        else:
            gs.update()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: GradScaler(growth_factor=0.5), "growth_factor"),
        (lambda: GradScaler(backoff_factor=1.5), "backoff_factor"),
        (lambda: GradScaler(growth_interval=0), "growth_interval"),
        (lambda: GradScaler(init_scale="big"), "scale"),
        (lambda: DynamicLossScaleManager(0.5),
         r"DynamicLossScaleManager: init_loss_scale must be >= 1, got 0\.5$"),
        (lambda: DynamicLossScaleManager(scale_window=1.5), "scale_window"),
        (lambda: FixedLossScaleManager(0.5),
         r"FixedLossScaleManager: loss_scale must be >= 1, got 0\.5$"),
        (lambda: FixedLossScaleManager(2.0, "no"),
         r"FixedLossScaleManager: drop_overflow_update must be a bool, got 'no' \(str\)"),
        (lambda: DynamicLossScaler(2**10, 2.5, 10), "scale_factor"),
        (lambda: DynamicLossScaler(2**10, 1, 10),
         r"DynamicLossScaler: scale_factor must be an int > 1, got 1$"),
        (lambda: StaticLossScaler(0.5), r"StaticLossScaler: scale_value must be >= 1, got 0\.5$"),
        (lambda: FixedLossScale(0.5),
         r"FixedLossScale: loss_scale_value must be at least 1 and finite, got 0\.5$"),
        (lambda: DynamicLossScale(multiplier=1.0), "multiplier"),
    ],
)
def test_bad_arguments_name_argument_and_value(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make()


# the message of a scale that float32 cannot hold (it would be inf or 0 there)
F32_RANGE = r"must be a float32 value in \[.*\], got "


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: GradScaler(init_scale="big"), r"init_scale must be a finite float .*, got 'big'"),
        (lambda: GradScaler(init_scale=1e39), "init_scale " + F32_RANGE + r"1e\+39"),
        (
            lambda: DynamicLossScale(initial_loss_scale="x"),
            r"initial_loss_scale must be a finite float .*, got 'x'",
        ),
        (
            lambda: DynamicLossScale(initial_loss_scale=1e-60),
            r"initial_loss_scale " + F32_RANGE + r"1e-60",
        ),
        (
            lambda: DynamicLossScale(increment_period=0),
            "increment_period must be a positive int, got 0",
        ),
        (
            lambda: DynamicLossScale(increment_period=2.5),
            r"DynamicLossScale: increment_period must be a whole number, got 2\.5",
        ),
        (lambda: FixedLossScale(1e39), r"loss_scale_value " + F32_RANGE + r"1e\+39"),
        (lambda: amp.DynamicLossScaleManager(1e39), r"init_loss_scale " + F32_RANGE + r"1e\+39"),
        (lambda: amp.FixedLossScaleManager(1e39), r"loss_scale " + F32_RANGE + r"1e\+39"),
        (lambda: amp.StaticLossScaler(1e39), r"scale_value " + F32_RANGE + r"1e\+39"),
        (lambda: DynamicLossScaler(1e39, 2, 10), r"scale_value " + F32_RANGE + r"1e\+39"),
    ],
)
def test_errors_name_the_faces_own_argument(make, name):
    """Errors name the argument the user wrote, in each face's own words: PyTorch's
    ``GradScaler(init_scale=...)``, TensorFlow's ``DynamicLossScale(initial_loss_scale=...,
    increment_period=...)``, MindSpore's ``loss_scale`` / ``init_loss_scale`` /
    ``scale_value``, never the shared core's 'scale' or 'growth_interval'."""
    with pytest.raises((TypeError, ValueError), match=name):
        make()


def test_non_power_of_two_backoff_divides_as_tf_and_mindspore_scaler():
    """TensorFlow backs off to ``maximum(current_loss_scale / multiplier, 1)`` (tensorflow
    python/training/experimental/loss_scale.py, ``update_if_not_finite_grads``); MindSpore's
    ``amp.DynamicLossScaler.adjust`` to ``maximum(one, scale_value / scale_factor)``. Both divide
    in float32; multiplying by float32(1/m) differs by one ulp for about a third of the scales
    when m is 10."""
    scale, m = f32(9.9318454e29), 10
    expected = max(f32(scale / f32(m)), f32(1))
    assert expected != f32(scale * f32(1 / m))  # the two roundings really differ here
    ls = DynamicLossScale(float(scale), 10, float(m))
    ls.update([Tensor(np.array([np.inf], np.float32))])
    assert ls().data.item() == expected
    scaler = DynamicLossScaler(float(scale), m, 10)
    scaler.adjust(False)
    assert scaler.scale_value.data.item() == expected
    # PyTorch multiplies by backoff_factor (torch.amp.GradScaler.update: "scale *= backoff_factor")
    p = Parameter(Tensor(np.zeros(1, np.float32)), name="w")
    gs = GradScaler(float(scale), growth_factor=10.0, backoff_factor=1 / m)
    p.grad = Tensor(np.array([np.inf], np.float32))
    gs.step(StepCountingOptimizer([p]))
    gs.update()
    assert gs.get_scale() == float(f32(scale * f32(1 / m)))


def test_tf_and_mindspore_scaler_trajectories_with_factor_three():
    """The same division rule over a sequence with growth and backoff (TensorFlow's
    DynamicLossScale and MindSpore's amp.DynamicLossScaler)."""
    seq = [False, True, True, False, False, True, False, False, False, True, True]
    s_tf = s_ms = f32(3.0**9 + 1)
    ls, sc = DynamicLossScale(float(s_tf), 2, 3.0), DynamicLossScaler(float(s_ms), 3, 2)
    good = 0
    for of in seq:
        if of:
            s_tf, good = max(f32(s_tf / f32(3)), f32(1)), 0
        elif good + 1 >= 2:
            s_tf, good = f32(s_tf * f32(3)), 0
        else:
            good += 1
        ls.update([Tensor(np.array([np.inf if of else 1.0], np.float32))])
        sc.adjust(not of)
        assert ls().data.item() == s_tf == sc.scale_value.data.item()
