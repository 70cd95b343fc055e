"""Review of the public docstrings against the code (session 3k).

Each test checks one documented claim (an argument's accepted types, a Raises entry and its
message) that the code broke before the fix in the same commit."""
import numpy
import pytest

import minigrad
from minigrad import ops


def _x(shape=(2, 3)):
    return minigrad.Tensor(numpy.arange(numpy.prod(shape), dtype=numpy.float32).reshape(shape))


# ---- ops/_util.normalize_axis: reductions document "axis: None, int or tuple" ---------------

@pytest.mark.parametrize("op", [ops.sum, ops.mean, ops.max, ops.min])
@pytest.mark.parametrize("axis", [0.5, (0.5,), (0, 1.0), "0"])
def test_reduction_non_int_axis_is_a_type_error_naming_axis(op, axis):
    # (0.5,) summed axis 0 silently (int(0.5)); 0.5 gave "'float' object is not iterable"
    with pytest.raises(TypeError, match=r"axis.*int.*got"):
        op(_x(), axis)


def test_layer_norm_non_int_axis_names_the_argument():
    with pytest.raises(TypeError, match="begin_norm_axis"):
        ops.layer_norm(_x(), None, None, begin_norm_axis=1.5)


def test_reduction_int_and_tuple_axes_still_work():
    x = _x()
    numpy.testing.assert_array_equal(ops.sum(x, numpy.int64(1)).asnumpy(), [3, 12])
    numpy.testing.assert_array_equal(ops.sum(x, (0, -1)).asnumpy(), 15)
    numpy.testing.assert_array_equal(ops.max(x, [1]).asnumpy(), [2, 5])


# ---- ops/conv.pair, padding4: a size that is not an int is a TypeError naming the argument ---

@pytest.mark.parametrize("call, name", [
    (lambda: ops.max_pool2d(_x((1, 1, 4, 4)), 2.5), "kernel_size"),
    (lambda: ops.avg_pool2d(_x((1, 1, 4, 4)), 2, stride=1.5), "stride"),
    (lambda: ops.max_pool2d(_x((1, 1, 4, 4)), 3, padding=1.0), "padding"),
    (lambda: ops.conv2d(_x((1, 1, 4, 4)), _x((1, 1, 2, 2)), stride=1.0), "stride"),
    (lambda: ops.conv2d(_x((1, 1, 4, 4)), _x((1, 1, 2, 2)), dilation=None), "dilation"),
    (lambda: ops.conv2d(_x((1, 1, 4, 4)), _x((1, 1, 2, 2)), padding=0.5), "padding"),
])
def test_window_sizes_that_are_not_ints_are_type_errors_naming_them(call, name):
    # minigrad._checks' rule: a float (or None) where an int belongs is a TypeError
    with pytest.raises(TypeError, match=name):
        call()


# ---- dropout p, leaky_relu alpha, split sections: a wrong type is a TypeError naming it ------

@pytest.mark.parametrize("call, name", [
    (lambda: ops.dropout(_x(), p="0.5"), "p"),
    (lambda: ops.dropout(_x(), p=None), "p"),
    (lambda: ops.leaky_relu(_x(), alpha="a"), "alpha"),
    (lambda: ops.split(_x(), 1.5, axis=1), "sections_or_indices"),
    (lambda: ops.split(_x(), [1.5], axis=1), "sections_or_indices"),
])
def test_argument_of_the_wrong_type_is_a_type_error_naming_it(call, name):
    # were "'<=' not supported between 'int' and 'str'", "could not convert string to float",
    # "'float' object is not iterable" and a silent int(1.5) cut
    with pytest.raises(TypeError, match=rf"\b{name}\b.*got"):
        call()
