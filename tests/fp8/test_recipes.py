"""quantize's statistics and the recipes' state: formats per role, delayed scaling's lag and
history, the blocked recipes' scales, argument checks."""
import numpy
import pytest

from minigrad import fp8
from minigrad.fp8 import E4M3, E5M2


def test_quantize_stats_count_clipped_and_flushed_values():
    x = numpy.array([1000.0, -500.0, 1.0, 1e-4, 0.0, 2.0, 3.0, 4.0], dtype=numpy.float32)
    q, stats = fp8.quantize(x, "E4M3", 1.0)
    assert stats.amax == 1000.0 and stats.scale == 1.0
    assert stats.clipped == 2 / 8 and stats.flushed == 1 / 8  # 1e-4 < 2^-10: to zero
    back = fp8.dequantize(q)
    assert back.dtype == numpy.float32 and back[:2].tolist() == [448.0, -448.0]
    err = x.astype(numpy.float64) - back
    assert stats.sqnr_db == pytest.approx(10 * numpy.log10((x.astype(float) ** 2).sum()
                                                           / (err ** 2).sum()))
    assert fp8.quantize(numpy.array([1.0, 2.0]), "E5M2", 4.0)[1].sqnr_db == numpy.inf


def test_quantize_without_saturation_gives_nan_and_the_stats_show_it():
    q, stats = fp8.quantize(numpy.array([1000.0, 1.0]), "E4M3", 1.0, saturate=False)
    assert numpy.isnan(fp8.dequantize(q)[0]) and stats.clipped == 0.5
    assert numpy.isnan(stats.sqnr_db)


def test_quantize_values_are_ml_dtypes_values():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = numpy.linspace(-3, 3, 11, dtype=numpy.float32)
    q, _ = fp8.quantize(x, "E4M3", 16.0)
    assert q.values().dtype == ml_dtypes.float8_e4m3fn
    numpy.testing.assert_array_equal(q.values().astype(numpy.float32) / 16, fp8.dequantize(q))


def test_quantize_refuses_bad_arguments():
    with pytest.raises(ValueError, match="scale"):
        fp8.quantize(numpy.ones(3), "E4M3", -1.0)
    with pytest.raises(TypeError, match="saturate"):
        fp8.quantize(numpy.ones(3), "E4M3", 1.0, saturate=1)
    with pytest.raises(ValueError, match="fmt"):
        fp8.quantize(numpy.ones(3), "E2M5", 1.0)


def test_hybrid_is_e4m3_forward_e5m2_backward():
    for recipe in (fp8.DelayedScaling(), fp8.CurrentScaling(), fp8.TensorwiseScaling()):
        assert recipe.fmt("forward") is E4M3 and recipe.fmt("backward") is E5M2
    assert fp8.CurrentScaling(fp8_format="E4M3").fmt("backward") is E4M3
    assert fp8.MXFP8BlockScaling().fmt("backward") is E4M3


def test_delayed_scaling_casts_with_the_scale_of_earlier_steps():
    recipe = fp8.DelayedScaling(amax_history_len=2)
    state = recipe.new_state()
    x = numpy.array([1.0, 4.0], dtype=numpy.float32)
    _, stats = recipe.quantize(x, state)
    assert stats.scale == 1.0  # the first step: no history yet
    recipe.update(state)
    assert state.scale == 112.0 and state.history.tolist() == [0.0, 4.0]
    _, stats = recipe.quantize(x * 8, state)  # an amax jump: the lagging scale clips
    assert stats.scale == 112.0 and stats.clipped == 1.0  # 8 · 112 and 32 · 112 > 448
    recipe.update(state)
    assert state.scale == 14.0
    recipe.update(state)  # no cast since the last update: nothing rolls
    assert state.history.tolist() == [0.0, 32.0] and state.scale == 14.0


def test_delayed_scaling_most_recent_and_margin():
    recipe = fp8.DelayedScaling(margin=1, amax_history_len=4, amax_compute_algo="most_recent")
    state = recipe.new_state()
    for amax in (8.0, 2.0):
        recipe.quantize(numpy.array([amax]), state)
        recipe.update(state)
    assert state.scale == 448.0 / 2 / 2


def test_current_scaling_power_of_two_and_backward_format():
    recipe = fp8.CurrentScaling(power_2_scale=True)
    state = recipe.new_state()
    q, stats = recipe.quantize(numpy.array([3.0, -1.0]), state, "backward")
    assert q.fmt is E5M2 and stats.scale == 16384.0  # 57344 / 3 rounded down


def test_rowwise_and_mx_scales_are_powers_of_two_per_row_and_block():
    x = numpy.ones((2, 64), dtype=numpy.float32)
    x[1] *= 96.0
    x[0, 40] = 3.0
    q, stats = fp8.RowwiseScaling().quantize(x, fp8.ScalingState())
    assert q.scale.ravel().tolist() == [128.0, 4.0] and stats.scale == (4.0, 128.0)
    q, _ = fp8.MXFP8BlockScaling().quantize(x, fp8.ScalingState())
    assert q.scale.shape == (2, 2, 1)
    assert q.scale.ravel().tolist() == [256.0, 128.0, 4.0, 4.0]
    numpy.testing.assert_array_equal(fp8.dequantize(q), x)
    with pytest.raises(ValueError, match="multiple of 32"):
        fp8.MXFP8BlockScaling().quantize(numpy.ones((2, 30)), fp8.ScalingState())


def test_recipe_arguments_are_checked():
    with pytest.raises(ValueError, match="E5M2"):
        fp8.DelayedScaling(fp8_format="E5M2")
    with pytest.raises(ValueError, match="amax_compute_algo"):
        fp8.DelayedScaling(amax_compute_algo="mean")
    with pytest.raises(ValueError, match="amax_history_len"):
        fp8.DelayedScaling(amax_history_len=0)
    with pytest.raises(ValueError, match="margin"):
        fp8.DelayedScaling(margin=-1)
    with pytest.raises(ValueError, match="role"):
        fp8.CurrentScaling().quantize(numpy.ones(2), fp8.ScalingState(), "sideways")
