"""nn.TrainOneStepWithLossScaleCell and the update cells (nn/loss_scale.py): the loss-scaled
step's skip rule and report, its hand-over to the optimizer, and the scale update formulas."""
import warnings
import zlib

import numpy
import numpy as np
import pytest

import minigrad
from helpers import native_unavailable_reason
from helpers.faults import GradientInjector, snapshot
from helpers.optim import numpy_path
from minigrad import Parameter, Tensor, nn, ops

F32 = numpy.dtype(numpy.float32)


def _loss_scaled_step(optimizer_class):
    minigrad.set_seed(0)
    net = nn.Dense(3, 2)
    opt = optimizer_class(net.trainable_params(), 0.1, 0.9)
    cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt,
                                            minigrad.Tensor(numpy.float32(1024.0)))
    cell(minigrad.Tensor(numpy.ones((2, 3), F32)), minigrad.Tensor(numpy.zeros((2, 2), F32)))
    return opt, net


@pytest.mark.requires_native
def test_loss_scale_cell_with_an_optimizer_whose_apply_gradients_takes_no_scale():
    class AllReduced(nn.Momentum):  # e.g. a data-parallel all-reduce right before the update
        def apply_gradients(self, grads):
            self.reduced = True
            return super().apply_gradients(grads)

    opt, _ = _loss_scaled_step(AllReduced)
    assert opt.reduced and opt.global_step == 1


@pytest.mark.requires_native
def test_loss_scale_cell_calls_an_optimizer_that_overrides_call():
    class Clipping(nn.Momentum):
        def __call__(self, grads):
            self.clipped = [numpy.abs(g.data).max() for g in grads]
            return super().__call__(tuple(numpy.clip(g.data, -1e-3, 1e-3) for g in grads))

    opt, net = _loss_scaled_step(Clipping)
    assert opt.global_step == 1 and max(opt.clipped) < 1e3  # it saw unscaled gradients


def test_set_sense_scale_with_a_wrong_shape_names_sens():
    net = nn.Dense(4, 2)
    cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()),
                                            nn.Momentum(net.trainable_params(), 0.1, 0.9),
                                            Tensor(np.ones((1,), np.float32)))
    with pytest.raises(ValueError, match=r"sens.*\(3,\).*\(1,\)"):
        cell.set_sense_scale(Tensor(np.ones((3,), np.float32)))


@pytest.mark.parametrize("make", [lambda: nn.DynamicLossScaleUpdateCell(1e39, 2, 10),
                                  lambda: nn.FixedLossScaleUpdateCell(1e39)])
def test_update_cells_refuse_a_scale_that_is_inf_in_float32_naming_loss_scale_value(make):
    """Errors name the argument, and every face keeps its scale in float32: MindSpore's update
    cells take ``loss_scale_value`` (``nn.DynamicLossScaleUpdateCell``,
    ``nn.FixedLossScaleUpdateCell``), and a 1e39 scale is inf in float32, where the cells
    multiply: refused, naming ``loss_scale_value``."""
    match = r"loss_scale_value must be a float32 value in \[.*\], got 1e\+39"
    with pytest.raises(ValueError, match=match):
        make()


class _Net(nn.Cell):
    def __init__(self, dt=np.float32):
        super().__init__()
        rng = np.random.default_rng(0)
        self.w1 = Parameter(Tensor((rng.standard_normal((8, 6)) * 0.3).astype(dt)), name="w1")
        self.b1 = Parameter(Tensor(np.zeros(6, dt)), name="b1")
        self.w2 = Parameter(Tensor((rng.standard_normal((6, 1)) * 0.3).astype(dt)), name="w2")

    def construct(self, x):
        return ops.matmul(ops.relu(ops.matmul(x, self.w1) + self.b1), self.w2)


def _cell(net, opt, scale_sense, **kw):
    return nn.TrainOneStepWithLossScaleCell(
        nn.WithLossCell(net, nn.MSELoss()), opt, scale_sense, **kw
    )


def _data(rng, dt=np.float32):
    return Tensor(rng.standard_normal((4, 8)).astype(dt)), Tensor(
        rng.standard_normal((4, 1)).astype(dt)
    )


@pytest.mark.parametrize("fused", [True, False])
def test_scale_below_one_a_gradient_that_overflows_when_unscaled_is_skipped(fused):
    # MindSpore's TrainOneStepWithLossScaleCell.construct checks the gradients after the unscale,
    # and a non-finite gradient never reaches the parameters. With a scale below 1 (a Tensor
    # scale_sense of 0.25), 1/scale = 4 turns a finite 3e38 into inf.
    net = _Net()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    cell = _cell(net, opt, Tensor(np.float32(0.25)))
    GradientInjector(net.trainable_params()).faults = {0: (5, 3e38)}
    before = snapshot(net, opt)
    # fused=False: the NumPy update path, where the cell unscales before the optimizer
    with numpy_path(not fused), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the unfixed code warns from the optimizer
        _, overflow, scale = cell(*_data(np.random.default_rng(0)))
    assert bool(overflow.asnumpy())
    assert float(scale.asnumpy()) == 0.25
    assert snapshot(net, opt) == before
    report = cell.last_report
    assert report.skipped and report.reason == "gradient_overflow" and report.inf_params == ("w1",)


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("opt_name", ["Momentum", "Adam"])
@pytest.mark.parametrize("fused", [True, False])
def test_fault_injection_skips_leave_parameters_and_optimizer_state_bit_identical(
    dt, opt_name, fused
):
    # After a skipped step the parameters and optimizer state are bit-identical; the report
    # names the parameters holding inf and NaN; the flag is set exactly when a fault was injected.
    rng = np.random.default_rng(zlib.crc32(f"{dt.__name__}-{opt_name}-{fused}".encode()))
    net = _Net(dt)
    lr = nn.exponential_decay_lr(0.01, 0.9, 40, 1, 2)
    opt = (
        nn.Momentum(net.trainable_params(), learning_rate=lr, momentum=0.9)
        if opt_name == "Momentum"
        else nn.Adam(net.trainable_params(), learning_rate=lr)
    )
    cell = _cell(net, opt, nn.DynamicLossScaleUpdateCell(2.0**10, 2, 4))
    injector = GradientInjector(net.trainable_params())
    faults = injector.faults
    names = [p.name for p in net.trainable_params()]
    with numpy_path(not fused):
        _run_with_faults(cell, net, opt, rng, dt, faults, names, fused)


def _run_with_faults(cell, net, opt, rng, dt, faults, names, fused):
    for _ in range(25):
        faults.clear()
        if rng.random() < 0.4:
            for i in rng.choice(3, int(rng.integers(1, 3)), replace=False):
                value = (np.inf, -np.inf, np.nan)[int(rng.integers(0, 3))]
                faults[int(i)] = (int(rng.integers(0, net.trainable_params()[i].size)), value)
        before = snapshot(net, opt)
        scale = float(cell.scale_sense.data)
        _, overflow, used = cell(*_data(rng, dt))
        after = snapshot(net, opt)
        report = cell.last_report
        assert bool(overflow.asnumpy()) == bool(faults) == report.skipped
        assert float(used.asnumpy()) == scale == report.scale_before
        if faults:
            assert after == before
            assert report.reason == "gradient_overflow"
            assert set(report.inf_params) == {
                names[i] for i, (_, v) in faults.items() if np.isinf(v)
            }
            assert set(report.nan_params) == {
                names[i] for i, (_, v) in faults.items() if np.isnan(v)
            }
        else:
            assert after[1]["global_step"] == before[1]["global_step"] + 1
            # the deferred unscale hands the scaled gradients to the fused native step
            assert opt.last_step_fused is (fused and native_unavailable_reason() is None)


def test_last_report_describes_the_step_that_raised_max_consecutive_skips():
    # The step report says what the last step did; the guard raises after K skips in a row and
    # the report left behind is that K-th step's, not the one before.
    net = _Net()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    cell = _cell(net, opt, nn.DynamicLossScaleUpdateCell(2.0**10, 2, 100), max_consecutive_skips=2)
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
    GradientInjector(net.trainable_params()).faults = {0: (0, 7e4), 1: (0, 1e-9), 2: (0, 1e-6)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cell(*_data(np.random.default_rng(2)))
    stats = cell.last_report.underflow
    assert stats["w1"]["max_abs"] == np.inf
    assert stats["b1"]["zero"] >= 1 / 6 and stats["w2"]["subnormal"] >= 1 / 6


def test_dynamic_update_cell_matches_mindspores_select_formula():
    # MindSpore's DynamicLossScaleUpdateCell.construct, run step by step: on overflow
    # scale * reciprocal(factor) (at least 1), after scale_window clean steps scale * factor
    # (factor 3: the reciprocal rounds in float32)
    cell = nn.DynamicLossScaleUpdateCell(2.0**5, 3, 2)
    scale = Parameter(Tensor(np.float32(2.0**5)), name="s", requires_grad=False)
    s, cur, last = np.float32(2.0**5), 1, 0
    for overflow in (
        False,
        False,
        True,
        True,
        False,
        True,
        False,
        False,
        False,
        True,
        True,
        True,
        True,
    ):
        on_overflow = np.float32(s * np.reciprocal(np.float32(3))) if overflow else s
        on_overflow = max(on_overflow, np.float32(1.0))
        should_inc = 2 <= cur - last
        if overflow or should_inc:
            last = cur
        s = (
            np.float32(on_overflow * np.float32(3))
            if (should_inc and not overflow)
            else on_overflow
        )
        cur += 1
        assert cell(scale, overflow) is overflow
        assert scale.data.tobytes() == np.float32(s).tobytes()
        assert int(cell.cur_iter.data) == cur and int(cell.last_overflow_iter.data) == last


def test_get_overflow_status_takes_mindspore_2s_int32_status_tensor():
    """MindSpore 2.x's cell (and code written after it) passes ``Tensor([0] * 8, mstype.int32)``
    as the status: a fresh status; a non-zero entry counts as an overflow seen already."""
    net = nn.Dense(3, 1)
    cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()),
                                            nn.SGD(net.trainable_params(), 0.1),
                                            Tensor(numpy.float32(1.0)))
    finite = (Tensor(numpy.ones(3, numpy.float32)),)
    status = Tensor([0] * 8, minigrad.int32)
    assert cell.get_overflow_status(status, finite) is False
    assert cell.get_overflow_status(status, (Tensor(numpy.float32([numpy.inf])),)) is True
    assert status.asnumpy().tolist() == [0] * 8  # the int32 stand-in is not written
    assert cell.get_overflow_status(Tensor([0, 0, 0, 0, 0, 0, 0, 1], minigrad.int32), finite)
    with pytest.raises((TypeError, ValueError)):
        cell.get_overflow_status(Tensor([0] * 4, minigrad.int32), finite)
