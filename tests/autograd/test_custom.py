"""Custom functions PyTorch's way (``minigrad.autograd.Function`` with static forward/backward and
``ctx``), with the examples of PyTorch's "Extending PyTorch" notes and double-backward tutorial
ported, and compared with PyTorch where it is installed."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, autograd, ops
from minigrad.testing import check_backward, check_double_backward


class LinearFunction(autograd.Function):
    """The notes' LinearFunction: y = x Wᵀ + b, with ctx.needs_input_grad."""

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input @ weight.T
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output @ weight
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.T @ input
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class MulConstant(autograd.Function):
    """The notes' MulConstant: a non-Tensor argument gets None."""

    @staticmethod
    def forward(ctx, tensor, constant):
        ctx.constant = constant
        return tensor * constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


class Square(autograd.Function):
    """The double-backward tutorial's Square: saves its input."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return grad_out * 2 * x


class Exp(autograd.Function):
    """The tutorial's Exp: saves its output."""

    @staticmethod
    def forward(ctx, x):
        result = x.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_out):
        (result,) = ctx.saved_tensors
        return grad_out * result


class Sinh(autograd.Function):
    """The tutorial's Sinh: intermediates returned as outputs, so that the double backward sees
    them in the graph; backward adds the gradients those outputs receive there."""

    @staticmethod
    def forward(ctx, x):
        expx, expnegx = x.exp(), (-x).exp()
        ctx.save_for_backward(expx, expnegx)
        return (expx - expnegx) / 2, expx, expnegx

    @staticmethod
    def backward(ctx, grad_out, grad_expx, grad_expnegx):
        expx, expnegx = ctx.saved_tensors
        grad_input = grad_out * (expx + expnegx) / 2
        grad_input += grad_expx * expx
        grad_input -= grad_expnegx * expnegx
        return grad_input


def _sinh(x):
    return Sinh.apply(x)[0]


RNG = numpy.random.RandomState(0)


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_the_notes_examples_pass_the_gradient_checkers(dtype):
    x, w, b = RNG.randn(4, 3), RNG.randn(2, 3), RNG.randn(2)
    check_backward(LinearFunction.apply, [x, w, b], dtype=dtype)
    check_backward(lambda t: MulConstant.apply(t, 2.5), [x], dtype=dtype)
    check_double_backward(LinearFunction.apply, [x, w, b], dtype=dtype)
    for fn in (Square.apply, Exp.apply, _sinh):
        check_backward(fn, [x], dtype=dtype)
        check_double_backward(fn, [x], dtype=dtype)


def test_linear_function_matches_pytorch():
    torch = pytest.importorskip("torch")
    x, w, b = RNG.randn(4, 3), RNG.randn(2, 3), RNG.randn(2)
    ours = [Tensor(a, requires_grad=True) for a in (x, w, b)]
    LinearFunction.apply(*ours).sum().backward()
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    torch.nn.functional.linear(*theirs).sum().backward()
    for o, t in zip(ours, theirs):
        numpy.testing.assert_allclose(o.grad.asnumpy(), t.grad.numpy(), rtol=1e-12)


def test_needs_input_grad_and_skipped_gradients():
    seen = []

    class Probe(autograd.Function):
        @staticmethod
        def forward(ctx, a, b, scale):
            seen.append(ctx.needs_input_grad)
            return a * b * scale

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    a, b = Tensor([1.0], requires_grad=True), Tensor([2.0])
    Probe.apply(a, b, 3.0).sum().backward()
    with minigrad.no_grad():
        out = Probe.apply(a, b, 3.0)
    assert seen == [(True, False, False), (False, False, False)]
    assert a.grad.tolist() == [1.0] and b.grad is None and not out.requires_grad


def test_outputs_that_get_no_gradient_are_zeros_or_none():
    got = []

    class Halves(autograd.Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x[:2] * 1.0, x[2:] * 1.0

        @staticmethod
        def backward(ctx, ga, gb):
            got.append(gb if gb is None else gb.tolist())
            return ops.concat([ga, gb if gb is not None else ga * 0]), None

    x = Tensor(numpy.arange(4.0), requires_grad=True)
    for materialize in (True, False):
        a, _ = Halves.apply(x, materialize)
        a.sum().backward()
    assert got == [[0.0, 0.0], None]


def test_non_differentiable_outputs():
    class WithMask(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            mask = (x > 0).astype(x.dtype)
            ctx.mark_non_differentiable(mask)
            return x * mask, mask

        @staticmethod
        def backward(ctx, g, g_mask):
            assert g_mask.tolist() == [0.0, 0.0]  # materialized: it received nothing
            return g * (g_mask + 1)

    x = Tensor([-1.0, 2.0], requires_grad=True)
    y, mask = WithMask.apply(x)
    assert y.requires_grad and not mask.requires_grad
    (y * mask).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0]  # g = mask


def test_setup_context_spelling_and_non_tensor_outputs():
    class Scale(autograd.Function):
        @staticmethod
        def forward(x, factor):
            return x * factor, "a label"

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.factor = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None

    x = Tensor([1.0, 2.0], requires_grad=True)
    y, label = Scale.apply(x, 3.0)
    y.sum().backward()
    assert label == "a label" and x.grad.tolist() == [3.0, 3.0]


def test_gradients_return_in_the_inputs_dtypes():
    class Widening(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.astype(numpy.float64) * 2

    x = Tensor(numpy.ones(2, numpy.float16), requires_grad=True)
    Widening.apply(x).sum().backward()
    assert x.grad.dtype == numpy.float16 and x.grad.tolist() == [2.0, 2.0]


def _backward_returning(value):
    class Bad(autograd.Function):
        @staticmethod
        def forward(ctx, x, constant):
            return x * constant

        @staticmethod
        def backward(ctx, g):
            return value(g)
    return Bad


@pytest.mark.parametrize("value, error, message", [
    (lambda g: g, RuntimeError, "returned 1 gradients, expected 2"),
    (lambda g: (g, g), RuntimeError, "gradient for argument 1, which is not a Tensor"),
    (lambda g: (g.sum(), None), RuntimeError, r"shape \(\) for argument 0 of shape \(2,\)"),
    (lambda g: (g.asnumpy(), None), TypeError, "returned a ndarray as the gradient of argument 0"),
])
def test_backward_results_are_checked(value, error, message):
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(error, match=message):
        _backward_returning(value).apply(x, 2.0).sum().backward()


def test_save_for_backward_takes_tensors_and_refuses_a_freed_graph():
    class Keeps(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, None)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            x, nothing = ctx.saved_tensors
            assert nothing is None
            return g * 2

    x = Tensor([1.0], requires_grad=True)
    y = Keeps.apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="already been freed"):
        y.backward()

    class SavesANumber(Keeps):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x

    with pytest.raises(TypeError, match="save_for_backward takes Tensors or None, got int"):
        SavesANumber.apply(x)


def test_an_intermediate_saved_is_a_constant_under_create_graph():
    # as in PyTorch: x² computed in forward (without a graph) and saved is neither an input nor
    # an output, so the double backward sees it as a constant: d/dx (3 · x² · g) misses 6x·g
    class CubeSavingSquare(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            square = x * x
            ctx.save_for_backward(square)
            return square * x

        @staticmethod
        def backward(ctx, g):
            (square,) = ctx.saved_tensors
            return g * 3 * square

    x = Tensor([2.0], requires_grad=True)
    (g,) = autograd.grad(CubeSavingSquare.apply(x).sum(), x, create_graph=True)
    assert g.tolist() == [12.0] and not g.requires_grad


def test_array_level_subclasses_still_work_beside_ctx_ones():
    class Twice(autograd.Function):
        saves = {}

        def forward(self, x):
            return x * 2

        def backward(self, g):
            return g * 2

    x = Tensor([1.0], requires_grad=True)
    (Twice.apply(x) * Square.apply(x)).sum().backward()
    assert x.grad.tolist() == [6.0]
