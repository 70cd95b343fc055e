"""The amp package's argument checks beyond what the API walk pins: the float-status functions
name the entry of ``arrays`` at fault (None entries counted), refuse a negative or bool
``inv_scale``, and the other entry points name the argument they were given."""
import numpy
import pytest

import minigrad
from minigrad import amp, nn
from minigrad.amp import float_status as fs


def test_float_status_errors_count_none_entries_in_the_index():
    status = fs.alloc_status()
    with pytest.raises(TypeError, match=r"arrays\[2\] must be a float16, float32 or float64 "
                                        r"Tensor or array, not of dtype int32"):
        fs.check_overflow(status, None, numpy.ones(2), numpy.ones(2, numpy.int32))
    frozen = numpy.ones(2, numpy.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"arrays\[1\] must be writable"):
        fs.check_and_unscale(status, [None, frozen], 0.5)
    with pytest.raises(TypeError, match=r"arrays\[1\] must be a float16 Tensor or array"):
        fs.check_and_unscale_to_fp32(status, [None, numpy.ones(2, numpy.float32)], 0.5)
    assert not fs.get_status(status)  # a refused call sets nothing


@pytest.mark.parametrize("inv_scale, error", [
    (-0.5, ValueError), (True, TypeError), (numpy.bool_(False), TypeError),
    (numpy.array([-1.0]), ValueError), (numpy.array([True]), TypeError),
    (minigrad.Tensor(numpy.float32(numpy.nan)), ValueError), (None, TypeError)])
def test_inv_scale_must_be_a_finite_number_at_least_zero(inv_scale, error):
    x = numpy.ones(2, numpy.float32)
    with pytest.raises(error, match=r"inv_scale must be a .*, got "):
        fs.check_and_unscale(fs.alloc_status(), [x], inv_scale)
    assert numpy.array_equal(x, numpy.ones(2, numpy.float32))  # refused before any write


def test_inv_scale_in_a_one_element_array_or_tensor_unscales_as_the_number():
    for holder in (numpy.array([0.25]), numpy.float32(0.25), minigrad.Tensor(numpy.float32(0.25))):
        x = numpy.full(3, 8.0, numpy.float32)
        fs.check_and_unscale(fs.alloc_status(), [x], holder)
        assert x.tolist() == [2.0, 2.0, 2.0]


def test_status_errors_show_the_buffer():
    with pytest.raises(ValueError, match=r"status must be .* not of shape \(4,\), got "
                                         r"array\(\[0\., 0\., 0\., 0\.\], dtype=float32\)"):
        fs.get_status(numpy.zeros(4, numpy.float32))
    with pytest.raises(ValueError, match=r"like must be a Tensor, an array, a device name .*, "
                                         r"got 'TPU'"):
        fs.alloc_status("TPU")
    assert fs.alloc_status("cpu").shape == (8,)  # any case, as set_context takes it


def test_underflow_stats_checks_names_and_gradients():
    g = numpy.ones(2, numpy.float16)
    with pytest.raises(ValueError, match=r"scaled_grads must be one gradient per name "
                                         r"\(names=\['a', 'b'\]\)"):
        amp.underflow_stats(["a", "b"], [g])
    with pytest.raises(ValueError, match="names must be a tuple or list of non-empty strs, each "
                                         "once"):
        amp.underflow_stats(["a", "a"], [g, g])
    with pytest.raises(TypeError, match=r"scaled_grads\[1\] must be a float array or Tensor"):
        amp.underflow_stats(["a", "b"], [g, "g"])
    stats = amp.underflow_stats(("a", "b"), [minigrad.Tensor(g), None])
    assert stats == {"a": {"zero": 0.0, "subnormal": 0.0, "max_abs": 1.0}}


def test_custom_fwd_and_bwd_wrap_only_callables():
    with pytest.raises(TypeError, match="custom_fwd: fwd must be callable, got 'abc'"):
        amp.custom_fwd("abc")
    with pytest.raises(TypeError, match="custom_bwd: bwd must be callable, got 3"):
        amp.custom_bwd(3)
    assert callable(amp.custom_fwd(cast_inputs="float32")(lambda ctx, x: x))


def test_boost_level_other_than_o0_says_it_is_not_implemented():
    net = nn.Dense(3, 2)
    opt = nn.SGD(net.trainable_params(), 0.1)
    with pytest.raises(ValueError, match=r"boost_level must be 'O0' \(MindSpore's boost levels "
                                         r"'O1' and 'O2' are not implemented\), got 'O1'"):
        amp.build_train_network(net, opt, nn.MSELoss(), boost_level="O1")
    with pytest.raises(TypeError, match="boost_level must be one of"):
        amp.build_train_network(net, opt, nn.MSELoss(), boost_level=numpy.ones(2))
