"""Session 3f review: the float status and the loss-scaled step (TrainOneStepWithLossScaleCell).

Each test names what documents the behaviour it checks (MindSpore's loss_scale.py as summarised
in shared/reference/mindspore-loss-scale.md, SPEC sections).
"""
import copy
import warnings

import numpy as np
import pytest

from minigrad import Parameter, Tensor, nn, ops
from minigrad.amp import DynamicLossScaler, float_status, plots
from minigrad import _native
from minigrad.amp import step as amp_step
from minigrad.tensor import make


class _Net(nn.Cell):
    def __init__(self, dt=np.float32):
        super().__init__()
        rng = np.random.default_rng(0)
        self.w1 = Parameter(Tensor((rng.standard_normal((8, 6)) * 0.3).astype(dt)), name="w1")
        self.b1 = Parameter(Tensor(np.zeros(6, dt)), name="b1")
        self.w2 = Parameter(Tensor((rng.standard_normal((6, 1)) * 0.3).astype(dt)), name="w2")

    def construct(self, x):
        return ops.matmul(ops.relu(ops.matmul(x, self.w1) + self.b1), self.w2)


def _cell(net, opt, scale_sense, fused=True, **kw):
    if not fused:  # the NumPy update path: the cell unscales before the optimizer
        opt._fused_rule = lambda: None
    return nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt, scale_sense, **kw)


def _inject(cell, faults):
    """Make ``cell``'s gradients hold the values of ``faults`` ({param index: (flat pos, value)})."""
    original = cell.loss_and_grads

    def patched(inputs, sens):
        loss, grads = original(inputs, sens)
        grads = list(grads)
        for i, (pos, value) in faults.items():
            a = grads[i].data.copy()
            a.reshape(-1)[pos] = value
            grads[i] = make(a, None, 0)
        return loss, tuple(grads)
    cell.loss_and_grads = patched


def _data(rng, dt=np.float32):
    return Tensor(rng.standard_normal((4, 8)).astype(dt)), Tensor(rng.standard_normal((4, 1)).astype(dt))


def _state(net, opt):
    return {"params": [p.data.copy() for p in net.get_parameters()], "states": copy.deepcopy(opt.slots.states),
            "masters": copy.deepcopy(opt.slots.masters), "global_step": opt.global_step, "lr": opt.get_lr()}


def _same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return a == b


# ---- the float status ------------------------------------------------------------------------

@pytest.mark.parametrize("native", [True, False])
def test_every_nan_payload_and_both_infs_set_the_flag_and_nothing_else_does(native, monkeypatch):
    # SPEC 4.1 / MindSpore FloatStatus: isinf or isnan, in fp16, fp32 and fp64; subnormals, -0 and
    # the largest finite value are not overflow. The host kernels and the NumPy path agree.
    if not native:
        monkeypatch.setattr(_native, "host_library", lambda: None)
    elif _native.host_library() is None:
        pytest.skip("no host compiler")
    rng = np.random.default_rng(3)
    for dt, ut, exp_bits, mant in ((np.float16, np.uint16, 5, 10), (np.float32, np.uint32, 8, 23),
                                   (np.float64, np.uint64, 11, 52)):
        payloads = (np.arange(0, 1 << mant, dtype=np.uint64) if mant == 10 else
                    np.concatenate([[0, 1, (1 << mant) - 1], rng.integers(1, 1 << mant, 40, dtype=np.uint64)]))
        nb = 1 + exp_bits + mant
        for sign in (0, 1):
            top = (sign << (nb - 1)) | (((1 << exp_bits) - 1) << mant)
            a = np.ones(len(payloads) * 3 + 5, dt)
            for k, pay in enumerate(payloads):
                a.view(ut)[3 * k + 2] = ut(top | int(pay))
                status = float_status.alloc_status()
                float_status.check_overflow(status, a[3 * k:3 * k + 5])
                assert float_status.get_status(status), (dt, hex(top | int(pay)))
        fi = np.finfo(dt)
        for v in (fi.max, -fi.max, fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal, -0.0):
            status = float_status.alloc_status()
            float_status.check_overflow(status, np.full(37, v, dt), np.full(37, v, dt)[1::3])
            assert not float_status.get_status(status), (dt, v)


@pytest.mark.parametrize("native", [True, False])
def test_check_and_unscale_is_numpy_exact_on_strided_misaligned_and_mixed_arrays(native, monkeypatch):
    if not native:
        monkeypatch.setattr(_native, "host_library", lambda: None)
    rng = np.random.default_rng(4)
    inv = 1 / 3
    arrays, want = [], []
    for dt in (np.float16, np.float32, np.float64):
        base = (rng.standard_normal(2003) * 300).astype(dt)
        raw = np.zeros(1000 * np.dtype(dt).itemsize + 1, np.uint8)[1:].view(dt)  # misaligned
        raw[...] = base[:1000]
        for x in (base[:1001].copy(), base[::2], raw, base[:0]):
            arrays.append(x)
            with np.errstate(all="ignore"):
                want.append(x * np.float64(inv) if dt == np.float64 else
                            (x.astype(np.float32) * np.float32(inv)).astype(dt))
    status = float_status.alloc_status()
    float_status.check_and_unscale(status, arrays, inv)
    assert not float_status.get_status(status)
    for got, expected in zip(arrays, want):
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


# ---- the loss-scaled step ----------------------------------------------------------------------

@pytest.mark.parametrize("fused", [True, False])
def test_scale_below_one_a_gradient_that_overflows_when_unscaled_is_skipped(fused):
    # MindSpore's construct checks the gradients AFTER the unscale (mindspore-loss-scale.md 1.2,
    # steps 7-9), and SPEC 7: "a non-finite ... gradient never reaches the parameters". With a
    # scale below 1 (a Tensor scale_sense of 0.25), 1/scale = 4 turns a finite 3e38 into inf.
    net = _Net()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    cell = _cell(net, opt, Tensor(np.float32(0.25)), fused=fused)
    _inject(cell, {0: (5, 3e38)})
    before = _state(net, opt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the unfixed code warns from the optimizer
        _, overflow, scale = cell(*_data(np.random.default_rng(0)))
    assert bool(overflow.asnumpy())
    assert float(scale.asnumpy()) == 0.25
    assert _same(before, _state(net, opt))
    report = cell.last_report
    assert report.skipped and report.reason == "gradient_overflow" and report.inf_params == ("w1",)


def test_unscale_and_check_flags_values_that_overflow_once_unscaled():
    # the shared step of every face (step.unscale_and_check): fp32 in place, fp16 widened to fp32
    g32 = np.array([1.0, 3e38, -2e38], np.float32)
    g16 = np.array([65504, 1], np.float16)
    out, overflow = amp_step.unscale_and_check([g32], 0.5)
    assert overflow and np.isinf(out[0][1:]).all()
    out, overflow = amp_step.unscale_and_check([None, g16], 1e-36)
    assert overflow and out[0] is None and out[1].dtype == np.float32 and np.isinf(out[1][0])
    out, overflow = amp_step.unscale_and_check([np.array([3e38], np.float32)], 1.0)  # no change at >= 1
    assert not overflow


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("opt_name", ["Momentum", "Adam"])
@pytest.mark.parametrize("fused", [True, False])
def test_fault_injection_skips_leave_parameters_and_optimizer_state_bit_identical(dt, opt_name, fused):
    # SPEC 7: after a skipped step the parameters and optimizer state are bit-identical; the
    # report names the parameters holding inf and NaN (SPEC 4.5); the flag is set exactly when
    # a fault was injected.
    rng = np.random.default_rng(hash((dt.__name__, opt_name, fused)) % 2**32)
    net = _Net(dt)
    lr = nn.exponential_decay_lr(0.01, 0.9, 40, 1, 2)
    opt = (nn.Momentum(net.trainable_params(), learning_rate=lr, momentum=0.9) if opt_name == "Momentum"
           else nn.Adam(net.trainable_params(), learning_rate=lr))
    cell = _cell(net, opt, nn.DynamicLossScaleUpdateCell(2.0 ** 10, 2, 4), fused=fused)
    faults = {}
    _inject(cell, faults)
    names = [p.name for p in net.trainable_params()]
    for _ in range(25):
        faults.clear()
        if rng.random() < 0.4:
            for i in rng.choice(3, int(rng.integers(1, 3)), replace=False):
                value = (np.inf, -np.inf, np.nan)[int(rng.integers(0, 3))]
                faults[int(i)] = (int(rng.integers(0, net.trainable_params()[i].size)), value)
        before = _state(net, opt)
        scale = float(cell.scale_sense.data)
        _, overflow, used = cell(*_data(rng, dt))
        after = _state(net, opt)
        report = cell.last_report
        assert bool(overflow.asnumpy()) == bool(faults) == report.skipped
        assert float(used.asnumpy()) == scale == report.scale_before
        if faults:
            assert _same(before, after)
            assert report.reason == "gradient_overflow"
            assert set(report.inf_params) == {names[i] for i, (_, v) in faults.items() if np.isinf(v)}
            assert set(report.nan_params) == {names[i] for i, (_, v) in faults.items() if np.isnan(v)}
        else:
            assert after["global_step"] == before["global_step"] + 1


def test_last_report_describes_the_step_that_raised_max_consecutive_skips():
    # SPEC 4.5: the step report says what the last step did; the guard raises after K skips in a
    # row and the report left behind must be that K-th step's, not the one before.
    net = _Net()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    cell = _cell(net, opt, nn.DynamicLossScaleUpdateCell(2.0 ** 10, 2, 100), max_consecutive_skips=2)
    x, y = _data(np.random.default_rng(1))
    bad = Tensor(np.full((4, 8), np.nan, np.float32))
    cell(bad, y)
    cell(x, y)  # a clean step resets the count
    cell(bad, y)
    with pytest.raises(RuntimeError, match="skipped 2 steps in a row.*nonfinite_loss"):
        cell(bad, y)
    assert cell.last_report.step == 4 and cell.last_report.skipped
    assert cell.last_report.reason == "nonfinite_loss"


def test_track_underflow_of_fp32_gradients_beyond_fp16_range_counts_without_warnings():
    # a scaled fp32 gradient above 65504 is ordinary (it is why the stats report max_abs); the
    # statistics must not print NumPy's 'overflow encountered in cast' on every step
    net = _Net()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    cell = _cell(net, opt, Tensor(np.float32(1.0)), track_underflow=True)
    _inject(cell, {0: (0, 7e4), 1: (0, 1e-9), 2: (0, 1e-6)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cell(*_data(np.random.default_rng(2)))
    stats = cell.last_report.underflow
    assert stats["w1"]["max_abs"] == np.inf
    assert stats["b1"]["zero"] >= 1 / 6 and stats["w2"]["subnormal"] >= 1 / 6


def test_dynamic_update_cell_matches_mindspores_select_formula():
    # mindspore-loss-scale.md 2.1, run step by step (factor 3: the reciprocal rounds in float32)
    cell = nn.DynamicLossScaleUpdateCell(2.0 ** 5, 3, 2)
    scale = Parameter(Tensor(np.float32(2.0 ** 5)), name="s", requires_grad=False)
    s, cur, last = np.float32(2.0 ** 5), 1, 0
    for overflow in (False, False, True, True, False, True, False, False, False, True, True, True, True):
        on_overflow = np.float32(s * np.reciprocal(np.float32(3))) if overflow else s
        on_overflow = max(on_overflow, np.float32(1.0))
        should_inc = 2 <= cur - last
        if overflow or should_inc:
            last = cur
        s = np.float32(on_overflow * np.float32(3)) if (should_inc and not overflow) else on_overflow
        cur += 1
        assert cell(scale, overflow) is overflow
        assert scale.data.tobytes() == np.float32(s).tobytes()
        assert int(cell.cur_iter.data) == cur and int(cell.last_overflow_iter.data) == last


# ---- reported, not fixed (files owned by others) ---------------------------------------------

def test_integer_arguments_refuse_numpy_floats():
    with pytest.raises(TypeError):
        DynamicLossScaler(2 ** 10, np.float64(2.5), 1)


# ---- plots -------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", ["2", b"2"])
def test_gradient_exponents_scale_must_be_a_number(scale):
    # its docstring: TypeError when 'scale' is not a number (a string parsed by float() is not)
    with pytest.raises(TypeError, match="scale"):
        plots.gradient_exponents(np.ones(3), scale)


def test_grad_scaler_last_report_describes_the_step_that_raised():
    from minigrad.amp import GradScaler
    p = Parameter(Tensor(np.ones(3, np.float32)), name="p")
    opt = nn.SGD([p], 0.1)
    scaler = GradScaler(init_scale=4.0, max_consecutive_skips=2)
    p.grad = Tensor(np.array([np.inf, 1, 1], np.float32))
    scaler.step(opt)
    scaler.update()
    p.grad = Tensor(np.array([np.inf, 1, 1], np.float32))
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="max_consecutive_skips=2"):
        scaler.update()
    assert scaler.last_report.step == 2


def test_tf_loss_scale_last_report_describes_the_step_that_raised():
    """The TF face shares the skip guard: the step that trips it leaves its own report."""
    from minigrad.mixed_precision import DynamicLossScale
    loss_scale = DynamicLossScale(initial_loss_scale=8.0, max_consecutive_skips=2)
    grads = [Tensor(np.array([np.inf, 1.0], np.float32))]
    loss_scale.update(grads)
    assert loss_scale.last_report.step == 1
    with pytest.raises(RuntimeError):
        loss_scale.update(grads)
    assert loss_scale.last_report.step == 2 and loss_scale.last_report.skipped
