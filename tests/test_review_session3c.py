"""Review of the core (session 3c): ops, the autograd engine and API, and the Tensor class.
Each test pins one discrepancy found against NumPy, PyTorch or MindSpore behaviour, or the
project's own dtype policy and error-message rules."""
import warnings

import numpy
import pytest
from hypothesis import given, settings, strategies as st

import minigrad
from minigrad import Tensor, ops
from minigrad.testing import check_backward


# ---- transpose: an axis out of range is an error, not wrapped round ---------------------------

@pytest.mark.parametrize("axes", [(0, 2), (0, 3), (-3, 1), (1, 5)])
def test_transpose_refuses_an_axis_out_of_range_naming_the_axes_given(axes):
    # NumPy: x.transpose((0, 2)) of a 2-D array is an AxisError; (0, 2) must not become (0, 0)
    # or, worse, (0, 3) become the valid (0, 1) and silently return x unchanged
    x = Tensor(numpy.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"axes=\(%d, %d\).*2 axes.*\(2, 3\)" % axes):
        ops.transpose(x, axes)
    with pytest.raises(ValueError, match=r"axes=\(%d, %d\)" % axes):
        x.transpose(*axes)


def test_transpose_still_takes_negative_axes_in_range():
    x = numpy.arange(24.0).reshape(2, 3, 4)
    numpy.testing.assert_array_equal(ops.transpose(Tensor(x), (-1, 0, -2)).asnumpy(),
                                     x.transpose(-1, 0, -2))


# ---- pow: d/dx x**0 is 0 everywhere, 0 included ---------------------------------------------

@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32, numpy.float64])
def test_pow_gradient_of_a_zero_exponent_is_zero_at_zero(dtype):
    # PyTorch's pow_backward masks exponent == 0 to a zero gradient; 0 * 0**-1 gave nan
    x = Tensor(numpy.array([0.0, 2.0, -1.0], dtype), requires_grad=True)
    (x ** 0).sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 0.0, 0.0])
    b = Tensor(numpy.array([0.0, 1.0, 2.0], dtype), requires_grad=True)
    a = Tensor(numpy.zeros(3, dtype), requires_grad=True)
    (a ** b).sum().backward()
    numpy.testing.assert_array_equal(a.grad.asnumpy(), [0.0, 1.0, 0.0])


# ---- clip of an integer tensor with float bounds --------------------------------------------

def test_clip_of_an_int_tensor_by_float_bounds_follows_the_dtype_policy():
    # dtype policy: int tensor (op) Python float -> float32 (NumPy and PyTorch promote too);
    # the bounds were truncated to ints, so clip([0, 3], 0.5, 2.5) returned [0, 2]
    x = Tensor(numpy.array([0, 1, 3], numpy.int32))
    out = ops.clip(x, 0.5, 2.5)
    assert out.dtype == minigrad.float32
    numpy.testing.assert_array_equal(out.asnumpy(), [0.5, 1.0, 2.5])
    assert x.clip(min=0.5).asnumpy().tolist() == [0.5, 1.0, 3.0]
    ints = ops.clip(x, 1, 2)                      # int bounds keep the int dtype
    assert ints.dtype == numpy.int32 and ints.asnumpy().tolist() == [1, 1, 2]
