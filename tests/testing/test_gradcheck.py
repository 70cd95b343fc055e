"""The gradient checker itself: it passes correct ops and catches wrong backward rules."""
import numpy
import pytest

import minigrad
from minigrad import ops
from minigrad.autograd.function import Function
from minigrad.testing import (check_backward, check_double_backward, noncontiguous, numerical_grad,
                              tolerance)


class WrongSquare(Function):
    """x² with a backward that is off by a factor: the checker must notice."""
    factor = 2.2

    def forward(self, x):
        self.x = x
        return x * x

    def backward(self, g):
        return g * self.x * self.x.dtype.type(self.factor)


class DroppedTerm(Function):
    """a * b whose backward forgets the gradient of b."""
    def forward(self, a, b):
        self.a, self.b = a, b
        return a * b

    def backward(self, g):
        return g * self.b, g * 0


class WrongDtype(Function):
    """Correct values, but the gradient comes back in float64."""
    def forward(self, x):
        return x * 3

    def backward(self, g):
        return g.astype(numpy.float64) * 3


def _x(shape=(3, 4), seed=0):
    return numpy.random.RandomState(seed).uniform(-2, 2, shape)


def test_passes_correct_ops(dtype):
    check_backward(lambda x: ops.tanh(x) * x, [_x()], dtype=dtype)
    check_backward(ops.matmul, [_x((3, 4)), _x((4, 2), 1)], dtype=dtype)
    check_backward(lambda a, b: (a / (b * b + 1)).sum(axis=1), [_x(), _x((4,), 1)], dtype=dtype)


def test_fails_on_wrong_factor(dtype):
    with pytest.raises(AssertionError, match=r"check_backward\(square\): gradient of input 0"):
        def square(x):
            return WrongSquare.apply(x)
        check_backward(square, [_x()], dtype=dtype)


def test_fails_on_dropped_term_and_names_the_input(dtype):
    with pytest.raises(AssertionError, match="input 1"):
        check_backward(lambda a, b: DroppedTerm.apply(a, b), [_x(), _x(seed=1)], dtype=dtype)


def test_fails_on_sign_error(dtype):
    class Flipped(Function):
        def forward(self, x):
            return -x

        def backward(self, g):
            return g

    with pytest.raises(AssertionError, match="central difference"):
        check_backward(lambda x: Flipped.apply(x), [_x()], dtype=dtype)


def test_catches_gradient_dtype_the_engine_would_hide(dtype):
    with pytest.raises(AssertionError, match="has dtype float64"):
        check_backward(lambda x: WrongDtype.apply(x), [_x()], dtype=dtype)


def test_catches_gradient_shape():
    class Unsummed(Function):
        def forward(self, a, b):
            return a + b

        def backward(self, g):
            return g, g  # b was broadcast: its gradient must be summed back

    # the engine also refuses the shape, so either layer may report it
    with pytest.raises((AssertionError, RuntimeError), match="shape"):
        check_backward(lambda a, b: Unsummed.apply(a, b), [_x((3, 4)), _x((4,))])


def test_small_wrong_factor_fails_in_float32_and_float64():
    WrongSmall = type("WrongSmall", (WrongSquare,), {"factor": 2.01})
    for dt in (numpy.float32, numpy.float64):
        with pytest.raises(AssertionError):
            check_backward(lambda x: WrongSmall.apply(x), [_x()], dtype=dt)


def test_integer_inputs_pass_through():
    labels = numpy.array([0, 2, 1])
    seen = []

    def pick(x, idx):
        seen.append(idx.dtype)
        return x[numpy.arange(3), idx.data]
    check_backward(pick, [_x((3, 3)), labels])
    assert all(d == numpy.int64 for d in seen)


def test_no_grads_skips_a_float_input():
    # the dropped term of b is not checked when b is listed in no_grads
    check_backward(lambda a, b: DroppedTerm.apply(a, b), [_x(), _x(seed=1)], no_grads=[1])


def test_multiple_outputs_and_given_grad_outputs():
    def two(x):
        return x * 2, ops.exp(x)
    x = _x((5,))
    check_backward(two, [x], grad_outputs=(numpy.ones(5), None))
    check_backward(two, [x])


def test_accepts_tensors_and_keeps_their_dtype():
    x = minigrad.Tensor(_x(), dtype=minigrad.float16)
    check_backward(ops.exp, [x])
    check_backward(ops.exp, x)


def test_tolerance_table():
    rtols = [tolerance(t)[1] for t in (minigrad.float16, minigrad.float32, minigrad.float64)]
    assert rtols[0] > rtols[1] > rtols[2]
    with pytest.raises(TypeError, match="float dtype"):
        tolerance(minigrad.int32)


def test_numerical_grad_elementwise():
    x = numpy.array([[1.0, -2.0], [0.5, 3.0]])
    (g,) = numerical_grad(lambda t: t * t * t, [x], numpy.ones((2, 2)))
    numpy.testing.assert_allclose(g, 3 * x * x, rtol=1e-5)


def test_error_without_float_inputs():
    with pytest.raises(ValueError, match=r"^check_backward\(<lambda>\): inputs must be Tensors or "
                                         r"arrays with a float input to differentiate that "
                                         r"no_grads=None leaves, got \[array\(\[1, 2\]\)\]"):
        check_backward(lambda i: i, [numpy.array([1, 2])])
    with pytest.raises(ValueError, match=r"^check_double_backward\(square\): inputs must be .* "
                                         r"that no_grads=\[0\] leaves"):
        check_double_backward(square, [numpy.ones(2)], no_grads=[0])


def square(x):
    return x * x


@pytest.mark.parametrize("call, error, match", [
    (lambda: check_backward(square, [numpy.ones(2)], grad_outputs="nan"), TypeError,
     r"^check_backward\(square\): grad_outputs must be a Tensor, a number or an array "
     r"of numbers, got 'nan'"),
    (lambda: check_backward(square, [numpy.ones(2)], grad_outputs=numpy.ones(3)), ValueError,
     r"^check_backward\(square\): grad_outputs must be a seed that broadcasts to the shape "
     r"\(2,\), got array"),
    (lambda: check_backward(square, [numpy.ones(2)], grad_outputs=[1.0, 2.0]), ValueError,
     r"grad_outputs must be one seed or a tuple/list of 1 \(one per output\), got \[1.0, 2.0\]"),
    (lambda: check_backward(square, [numpy.ones(2)], no_grads=1), ValueError,
     r"^check_backward: no_grads must be an int in \[0, 0\] or a tuple or list of ints in "
     r"\[0, 0\], got 1"),
    (lambda: check_double_backward(square, [numpy.ones(2)], grad_grad_inputs=[None, 1.0]),
     ValueError, r"grad_grad_inputs must be one seed or a tuple/list of 1"),
    (lambda: check_double_backward(square, [numpy.ones(2)], grad_grad_inputs="a"), TypeError,
     r"^check_double_backward\(square\): grad_grad_inputs must be a Tensor, a number"),
    (lambda: check_double_backward(square, [numpy.ones(2)], grad_outputs=[None]), ValueError,
     r"^check_double_backward\(square\): grad_outputs must be seeds with one for a float output "
     r"at least"),
    (lambda: check_backward(square, [numpy.ones(2)], grad_outputs=[None]), ValueError,
     r"^check_backward\(square\): grad_outputs must be seeds with one for a float output at "
     r"least \(else no gradient is checked\), got \[None\]"),
    (lambda: check_double_backward(square, [numpy.ones(2)], grad_grad_inputs=(None,)), ValueError,
     r"^check_double_backward\(square\): grad_grad_inputs must be seeds with one for a "
     r"differentiated input at least"),
    (lambda: numerical_grad(square, [numpy.ones(2)], numpy.ones(2), eps=None), TypeError,
     r"^numerical_grad: eps must be a finite float in \(0.0, inf\), got None"),
    (lambda: numerical_grad(square, [numpy.ones(2)], "abc"), TypeError,
     r"^numerical_grad: grad_outputs must be a Tensor, a number or an array of numbers"),
    (lambda: noncontiguous(numpy.float32(3.0)), TypeError,
     r"^noncontiguous: array must be a NumPy or CuPy array, got np.float32\(3.0\)"),
])
def test_argument_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_seeds_broadcast_to_the_outputs():
    check_backward(square, [numpy.ones((2, 3))], grad_outputs=2.0)
    check_double_backward(square, [numpy.ones(2)], grad_outputs=1.0, grad_grad_inputs=0.5)


def test_non_finite_values_fail():
    # log of a negative number: NaN on both sides must not pass silently
    with pytest.raises(AssertionError, match="nan"), numpy.errstate(invalid="ignore"):
        check_backward(ops.log, [numpy.array([-1.0, 2.0])])


def test_numerical_grad_takes_host_seeds_for_device_inputs(device):
    x = minigrad.Tensor(numpy.array([[0.5, -1.0], [2.0, 0.25]]), device=device)
    (g,) = numerical_grad(lambda t: t * t, [x], numpy.array([[1.0, 2.0], [3.0, 4.0]]))
    numpy.testing.assert_allclose(g, [[1.0, -4.0], [12.0, 2.0]], rtol=1e-6)


class ConstantOperand(Function):
    """x³ with a right first derivative, 3x²·g, whose ``saves`` forgets that it reads x: under
    create_graph x is a constant there, and the second derivative loses its 6x·g term."""
    saves = {}

    def forward(self, x):
        self.x = x
        return x * x * x

    def backward(self, g):
        return g * 3 * self.x * self.x


class ArraysOnly(Function):
    """sin x whose backward goes through NumPy: it detaches a Tensor gradient."""
    saves = {"x": 0}

    def forward(self, x):
        self.x = x
        return numpy.sin(x)

    def backward(self, g):
        return numpy.asarray(g) * numpy.cos(numpy.asarray(self.x))


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_double_backward_passes_correct_ops(dtype):
    x = numpy.random.RandomState(0).uniform(0.5, 2.0, (3, 4))
    check_double_backward(lambda t: ops.tanh(t) * ops.log(t), [x], dtype=dtype)
    check_double_backward(lambda a, b: (a @ b) ** 2, [x, x.T], dtype=dtype)


def test_double_backward_fails_on_a_constant_that_is_not():
    x = numpy.random.RandomState(0).uniform(0.5, 2.0, (3,))
    check_backward(ConstantOperand.apply, [x])  # the first derivative is right
    with pytest.raises(AssertionError, match="first derivative of .* is wrong"):
        check_double_backward(ConstantOperand.apply, [x])


def test_double_backward_refuses_a_rule_that_returns_arrays():
    x = numpy.random.RandomState(0).uniform(0.5, 2.0, (3,))
    check_backward(ArraysOnly.apply, [x])
    with pytest.raises(RuntimeError, match="second derivative not supported for ArraysOnly.*"
                                           "returned a ndarray"):
        check_double_backward(ArraysOnly.apply, [x])


def test_double_backward_refuses_an_op_without_saves():
    x = numpy.random.RandomState(0).uniform(0.5, 2.0, (3,))
    with pytest.raises(RuntimeError, match="second derivative not supported for WrongSquare"):
        check_double_backward(WrongSquare.apply, [x])
