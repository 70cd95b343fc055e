"""The scale rules, one test per edge case: amax 0, inf, NaN, tiny amax, history roll, margin,
power-of-two rounding, E8M0 rounding up."""
import numpy
import pytest

from minigrad.fp8 import scales

F32 = numpy.float32
FLT_MAX = float(numpy.finfo(numpy.float32).max)


def test_delayed_scale_is_max_over_amax_over_two_to_the_margin_in_float32():
    history = numpy.array([3.0, 7.0, 1.0], dtype=F32)
    _, scale, amax = scales.delayed_scale(history, 1.0, 448.0)
    assert amax == 7.0 and scale == float(F32(448) / F32(7))
    _, scale, _ = scales.delayed_scale(history, 1.0, 448.0, margin=2)
    assert scale == float(F32(112) / F32(7))
    _, scale, amax = scales.delayed_scale(history, 1.0, 448.0, amax_compute_algo="most_recent")
    assert amax == 3.0 and scale == float(F32(448) / F32(3))


@pytest.mark.parametrize("amax", [0.0, numpy.inf, numpy.nan])
def test_delayed_scale_keeps_the_previous_scale_for_amax_zero_inf_nan(amax):
    history = numpy.array([amax, 0.0], dtype=F32)
    for algo in ("max", "most_recent"):
        _, scale, _ = scales.delayed_scale(history, 12.5, 448.0, amax_compute_algo=algo)
        assert scale == 12.5


def test_delayed_max_skips_a_nan_in_the_window_as_fmaxf():
    history = numpy.array([numpy.nan, 2.0], dtype=F32)
    assert scales.delayed_scale(history, 1.0, 448.0)[1] == 224.0


def test_delayed_scale_of_a_tiny_amax_is_flt_max():
    history = numpy.array([1e-40], dtype=F32)  # 448 / 1e-40 overflows float32
    assert scales.delayed_scale(history, 1.0, 448.0)[1] == FLT_MAX


def test_delayed_history_rolls_and_zeroes_slot_zero():
    history = numpy.array([5.0, 1.0, 2.0, 3.0], dtype=F32)
    rolled, _, _ = scales.delayed_scale(history, 1.0, 448.0)
    assert rolled.tolist() == [0.0, 2.0, 3.0, 5.0]  # the oldest (1.0) leaves the window


@pytest.mark.parametrize("amax", [0.0, numpy.inf, -numpy.inf, numpy.nan])
def test_current_scale_is_one_for_amax_zero_inf_nan(amax):
    assert scales.current_scale(amax, 448.0) == 1.0


def test_current_scale_tiny_amax_and_power_of_two():
    assert scales.current_scale(1e-40, 448.0) == FLT_MAX
    assert scales.current_scale(1e-40, 448.0, power_2_scale=True) == 2.0 ** 127
    assert scales.current_scale(3.0, 448.0) == float(F32(448) / F32(3))
    assert scales.current_scale(3.0, 448.0, power_2_scale=True) == 128.0  # 149.3 rounds down
    assert scales.current_scale(1e-9, 448.0, amax_epsilon=1e-3) == float(F32(448) / F32(1e-3))


def test_tensorwise_scale_floors_amax_at_1e_12_in_float64():
    assert scales.tensorwise_scale(0.0, 448.0) == F32(448 / 1e-12)
    assert scales.tensorwise_scale(1e-20, 448.0) == F32(448 / 1e-12)
    assert scales.tensorwise_scale(3.0, 448.0) == F32(448 / 3.0)  # one rounding, from float64
    assert scales.tensorwise_scale(numpy.inf, 448.0) == 0.0
    assert numpy.isnan(scales.tensorwise_scale(numpy.nan, 448.0))


def test_tensorwise_power_of_two_rounds_down():
    got = scales.tensorwise_scale(numpy.array([3.0, 448.0, 500.0]), 448.0, True)
    assert got.tolist() == [128.0, 1.0, 0.5]


def test_e8m0_rounds_the_exponent_up():
    values = numpy.array([1.0, 1.5, 2.0, 2.0 ** -127, 0.75 * 2.0 ** -126, 2.0 ** 127 * 1.5, 0.0,
                          numpy.inf, numpy.nan], dtype=F32)
    assert scales.float_to_e8m0(values).tolist() == [127, 128, 128, 0, 1, 254, 0, 255, 255]


def test_mx_scale_keeps_block_amax_within_max():
    amax = numpy.array([448.0, 449.0, 1.0, 0.0, numpy.nan], dtype=F32)
    got = scales.mx_scale(amax, 448.0)
    assert got[:4].tolist() == [1.0, 0.5, 256.0, 2.0 ** 127] and numpy.isnan(got[4])
    assert (amax[:3] * got[:3] <= 448.0).all()
