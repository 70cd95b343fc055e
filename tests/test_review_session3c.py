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


# ---- grad / value_and_grad: grad_position ---------------------------------------------------

def _product(x, y):
    return (x * y).sum()


def test_a_repeated_grad_position_gets_the_gradient_each_time():
    # the input was re-wrapped once per entry: the first leaf went unused and its gradient was 0
    a = Tensor(numpy.array([1.0, 2.0], numpy.float32))
    b = Tensor(numpy.array([3.0, 4.0], numpy.float32))
    ga, ga_again, gb = minigrad.grad(_product, (0, 0, 1))(a, b)
    numpy.testing.assert_array_equal(ga.asnumpy(), [3.0, 4.0])
    numpy.testing.assert_array_equal(ga_again.asnumpy(), [3.0, 4.0])
    numpy.testing.assert_array_equal(gb.asnumpy(), [1.0, 2.0])
    assert ga.data is not ga_again.data                     # each one fresh and writable
    _, (g0, g1) = minigrad.value_and_grad(_product, (1, -1))(a, b)
    numpy.testing.assert_array_equal(g0.asnumpy(), [1.0, 2.0])
    numpy.testing.assert_array_equal(g1.asnumpy(), [1.0, 2.0])


@pytest.mark.parametrize("position", ["0", 1.0, (0, "1"), [0.0]])
def test_a_grad_position_of_the_wrong_type_is_a_type_error_naming_it(position):
    # MindSpore: TypeError, 'grad_position' must be an int or a tuple of ints; it was
    # "grad_position='0' is out of range" or "'float' object is not iterable"
    a = Tensor(numpy.ones(2, numpy.float32))
    with pytest.raises(TypeError, match=r"grad_position.*int or a tuple of ints.*got"):
        minigrad.grad(_product, position)(a, a)


# ---- empty tensors ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", [ops.softmax, ops.log_softmax])
def test_softmax_along_an_empty_axis_is_empty(op):
    # PyTorch: softmax of a (2, 0) tensor along dim 1 is a (2, 0) tensor; it raised NumPy's
    # 'zero-size array to reduction operation maximum which has no identity'
    x = Tensor(numpy.zeros((2, 0), numpy.float32), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a 'divide by zero in log' warning
        out = op(x, 1)
        assert out.shape == (2, 0) and out.dtype == numpy.float32
        out.backward(numpy.zeros((2, 0), numpy.float32))
    assert x.grad.shape == (2, 0)


@pytest.mark.parametrize("groups", [1, 3])
def test_conv2d_of_an_empty_batch_is_an_empty_batch(groups):
    # PyTorch: a batch of 0 images convolves to a batch of 0 outputs; a reshape(..., -1) of the
    # empty patch matrix raised 'cannot reshape array of size 0 into shape (1,0,newaxis)'
    x = Tensor(numpy.zeros((0, 3, 5, 5), numpy.float32), requires_grad=True)
    w = Tensor(numpy.ones((6, 3 // groups, 3, 3), numpy.float32), requires_grad=True)
    b = Tensor(numpy.ones(6, numpy.float32), requires_grad=True)
    out = ops.conv2d(x, w, b, padding=1, groups=groups)
    assert out.shape == (0, 6, 5, 5)
    out.backward(numpy.zeros(out.shape, numpy.float32))
    assert x.grad.shape == x.shape
    numpy.testing.assert_array_equal(w.grad.asnumpy(), numpy.zeros(w.shape))
    numpy.testing.assert_array_equal(b.grad.asnumpy(), numpy.zeros(6))
    assert ops.im2col(x, 3, padding=1).shape == (0, 5, 5, 27)


# ---- broadcast_to: a target the shape does not broadcast to ----------------------------------

@pytest.mark.parametrize("shape,target", [((3,), (1,)), ((3,), (2, 1)), ((2, 3), (3,))])
def test_broadcast_to_a_shape_it_cannot_reach_names_both_shapes(shape, target):
    # broadcast_to's own message covered only shapes with no common broadcast; (3,) -> (2, 1)
    # (common shape (2, 3), not the target) fell through to NumPy's 'remapped shapes' message
    with pytest.raises(ValueError, match=r"cannot broadcast a tensor of shape %s to %s" % (
            str(shape).replace("(", r"\(").replace(")", r"\)"),
            str(target).replace("(", r"\(").replace(")", r"\)"))):
        ops.broadcast_to(Tensor(numpy.zeros(shape)), target)


@settings(max_examples=60, deadline=None)
@given(ndim=st.integers(1, 4), data=st.data())
def test_transpose_accepts_exactly_what_numpy_accepts(ndim, data):
    axes = tuple(data.draw(st.lists(st.integers(-ndim - 2, ndim + 1), min_size=ndim, max_size=ndim)))
    x = numpy.arange(float(numpy.prod(range(2, ndim + 2)))).reshape(range(2, ndim + 2))
    try:
        expected = x.transpose(axes)
    except ValueError:  # AxisError and 'repeated axis' are ValueErrors
        with pytest.raises(ValueError, match="not a permutation"):
            ops.transpose(Tensor(x), axes)
        return
    t = Tensor(x, requires_grad=True)
    out = ops.transpose(t, axes)
    numpy.testing.assert_array_equal(out.asnumpy(), expected)
    out.backward(numpy.ones(out.shape))
    assert t.grad.shape == x.shape
