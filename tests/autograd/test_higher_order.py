"""create_graph in the engine and PyTorch's autograd.grad / autograd.backward: gradients that are
differentiable again, pruning to the targets, freeing, hooks, aliasing, seeds with a graph."""
import gc

import numpy
import pytest

import minigrad
from minigrad import Tensor, amp, autograd, ops
from minigrad.autograd import engine
from minigrad.autograd.function import Function


def _leaf(values, dtype=numpy.float64):
    return Tensor(numpy.asarray(values, dtype), requires_grad=True)


def test_backward_create_graph_leaves_a_differentiable_grad():
    x = _leaf([1.0, 2.0])
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.requires_grad and not x.grad.is_leaf
    numpy.testing.assert_allclose(x.grad.asnumpy(), [3.0, 12.0])
    (second,) = autograd.grad(x.grad.sum(), x)
    numpy.testing.assert_allclose(second.asnumpy(), [6.0, 12.0])


def test_third_derivative():
    x = _leaf([1.0, -2.0])
    (g,) = autograd.grad((x ** 4).sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x, create_graph=True)
    (t,) = autograd.grad(h.sum(), x)
    numpy.testing.assert_allclose(t.asnumpy(), [24.0, -48.0])


def test_grad_returns_a_tuple_and_touches_no_grad():
    x, y = _leaf([1.0, 2.0]), _leaf([3.0])
    gx, gy = autograd.grad((x * y).sum(), [x, y])
    numpy.testing.assert_array_equal(gx.asnumpy(), [3.0, 3.0])
    numpy.testing.assert_array_equal(gy.asnumpy(), [3.0])
    assert x.grad is None and y.grad is None
    assert not gx.requires_grad  # no create_graph: plain tensors


def test_grad_of_an_intermediate_stops_there():
    # below h sits a convolution, whose backward runs on arrays only: create_graph would refuse
    # it, so the pass must not go below the target h
    x = Tensor(numpy.random.RandomState(0).randn(1, 1, 4, 4), requires_grad=True)
    h = ops.conv2d(x, Tensor(numpy.ones((1, 1, 2, 2))))
    y = (ops.tanh(h) ** 2).sum()
    (gh,) = autograd.grad(y, h, create_graph=True)
    (ghh,) = autograd.grad(gh.sum(), h, retain_graph=True)
    t = numpy.tanh(h.asnumpy())
    numpy.testing.assert_allclose(ghh.asnumpy(), 2 * (1 - t * t) ** 2 - 4 * t * t * (1 - t * t),
                                  rtol=1e-10)
    (gx,) = autograd.grad(y, x)  # create_graph retained the graph; the conv part was untouched
    assert gx.shape == x.shape


def test_unused_inputs():
    x, unused = _leaf([1.0]), _leaf([2.0, 3.0])
    y = (x * x).sum()
    with pytest.raises(RuntimeError, match=r"inputs\[1\] appears not to have been used"):
        autograd.grad(y, [x, unused], retain_graph=True)
    gx, gu = autograd.grad(y, [x, unused], allow_unused=True, retain_graph=True)
    assert gu is None and gx.tolist() == [2.0]
    gx, gu = autograd.grad(y, [x, unused], materialize_grads=True)
    assert gu.tolist() == [0.0, 0.0] and gu.dtype == unused.dtype


@pytest.mark.parametrize("call, error, message", [
    (lambda x, y: autograd.grad(y, Tensor([1.0])), RuntimeError,
     r"inputs\[0\] must be a Tensor that requires grad"),
    (lambda x, y: autograd.grad(Tensor([1.0]).sum(), x), RuntimeError,
     r"outputs\[0\] must be a Tensor that requires grad"),
    (lambda x, y: autograd.grad(y, Tensor([1.0])), ValueError, "requires grad"),
    (lambda x, y: autograd.backward(Tensor([1.0]).sum()), ValueError,
     r"^autograd.backward: tensors\[0\] must be a Tensor that requires grad"),
    (lambda x, y: autograd.grad(y, []), ValueError,
     r"^autograd.grad: inputs must be a Tensor or a non-empty sequence of Tensors, got \[\]"),
    (lambda x, y: autograd.grad(y, numpy.ones(2)), TypeError,
     r"^autograd.grad: inputs must be a Tensor or a non-empty sequence of Tensors, got "
     r"array\(\[1., 1.\]\)"),
    (lambda x, y: autograd.backward(y, inputs={}), TypeError, r"inputs must be .*, got \{\}"),
    (lambda x, y: autograd.grad(y, x, grad_outputs="nan"), TypeError,
     r"^grad_outputs must be a Tensor, a number or an array of numbers, got 'nan'"),
    (lambda x, y: autograd.backward(y, grad_tensors=[None, "a"]), ValueError,
     "2 grad_tensors for 1 tensors"),
    (lambda x, y: autograd.backward([y, y], grad_tensors=[None, "a"]), TypeError,
     r"grad_tensors\[1\] must be a Tensor, a number or an array of numbers, got 'a'"),
    (lambda x, y: autograd.grad(y, x, grad_outputs=[None, None]), ValueError,
     "2 grad_outputs for 1 outputs"),
    (lambda x, y: autograd.grad(y * x, x), RuntimeError, r"shape \(2,\) needs a gradient"),
    (lambda x, y: autograd.grad(y, [x, 3]), TypeError,
     r"inputs\[1\] must be a Tensor, got 3 \(int\)"),
    (lambda x, y: autograd.grad(y, 3), TypeError,
     "inputs must be a Tensor or a non-empty sequence"),
    (lambda x, y: autograd.grad(y, x, create_graph=1), TypeError, "create_graph must be a bool"),
    (lambda x, y: autograd.grad(y, x, allow_unused=False, materialize_grads=True), ValueError,
     "allow_unused must be True"),
])
def test_grad_argument_errors(call, error, message):
    x = _leaf([1.0, 2.0])
    with pytest.raises(error, match=message):
        call(x, (x * x).sum())


def test_retain_graph_defaults_to_create_graph():
    x = _leaf([1.0, 2.0])
    y = (x * x).sum()
    autograd.grad(y, x, create_graph=True)
    autograd.grad(y, x)  # still there
    with pytest.raises(RuntimeError, match="already been freed"):
        autograd.grad(y, x)
    y = (x * x).sum()
    autograd.grad(y, x, create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError, match="already been freed"):
        autograd.grad(y, x)


def test_a_seed_with_a_graph_is_differentiated_too():
    # d/dv ⟨v, J(x)⟩ ... the double-vjp trick: g(u) = Jᵀu is linear in u, its vjp with v is J v
    x = _leaf([1.0, 2.0])
    a = numpy.array([[1.0, 2.0], [3.0, 5.0]])
    y = ops.matmul(Tensor(a), x * x)                  # J = a · diag(2x)
    u = Tensor(numpy.zeros(2), requires_grad=True)
    (gu,) = autograd.grad(y, x, grad_outputs=u, create_graph=True)
    v = numpy.array([1.0, -1.0])
    (jv,) = autograd.grad(gu, u, grad_outputs=Tensor(v))
    numpy.testing.assert_allclose(jv.asnumpy(), a @ (2 * x.asnumpy() * v))


def test_hooks_see_and_replace_tensors_under_create_graph():
    x = _leaf([1.0, 2.0])
    h = x * x
    seen = []

    def hook(g):
        seen.append(g.requires_grad)
        return g * h  # the replacement depends on x too
    h.register_hook(hook)
    (g,) = autograd.grad((h * 3).sum(), x, create_graph=True)  # 3h · 2x = 6x³
    assert seen == [False]  # 3: a constant
    numpy.testing.assert_allclose(g.asnumpy(), [6.0, 48.0])
    # the second pass goes through h too, and its hook multiplies what arrives there by h
    # again (the values PyTorch 2.13 gives for the same code)
    (gg,) = autograd.grad(g.sum(), x)
    assert seen == [False, False]
    numpy.testing.assert_allclose(gg.asnumpy(), [18.0, 216.0])


def test_gradients_under_create_graph_never_alias():
    a, b = _leaf([1.0, 2.0]), _leaf([3.0, 4.0])
    seed = Tensor(numpy.ones(2), requires_grad=True)
    (a + b).backward(seed, create_graph=True)  # both leaves receive the seed itself
    ga, gb = a.grad.asnumpy(), b.grad.asnumpy()
    assert not numpy.shares_memory(ga, gb) and not numpy.shares_memory(ga, seed.asnumpy())
    (d,) = autograd.grad((a.grad * b.grad).sum(), seed)  # still differentiable in the seed
    numpy.testing.assert_array_equal(d.asnumpy(), [2.0, 2.0])


def test_create_graph_accumulates_out_of_place():
    x = _leaf([2.0])
    (x ** 2).sum().backward(create_graph=True)
    first = x.grad
    (x ** 3).sum().backward(create_graph=True)
    assert first.tolist() == [4.0] and x.grad.tolist() == [16.0]
    (d,) = autograd.grad(x.grad.sum(), x)
    assert d.tolist() == [2.0 + 12.0]


def test_ten_thousand_op_chain_second_derivative_without_recursion():
    x = _leaf([0.5])
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    (g,) = autograd.grad((y * y).sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x)
    numpy.testing.assert_allclose(h.asnumpy(), [2 * 1.0001 ** 20_000], rtol=1e-9)


def _live_tensors():
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Tensor))


def test_the_graph_of_a_second_derivative_is_freed():
    before = _live_tensors()
    x = _leaf(numpy.ones((3, 3)))
    w = _leaf(numpy.ones((3, 3)) * 0.1)
    loss = ops.tanh(ops.matmul(x, w)).sum()
    (g,) = autograd.grad(loss, w, create_graph=True)
    penalty = (g * g).sum()
    penalty.backward()
    del loss, g, penalty
    assert _live_tensors() == before + 4  # x, w and their .grad
    del x, w
    assert _live_tensors() == before


def test_backward_inputs_accumulates_into_those_only():
    x, y = _leaf([1.0]), _leaf([2.0])
    h = x * y
    (h * h).sum().backward(inputs=[y, h])
    assert x.grad is None and y.grad.tolist() == [4.0] and h.grad.tolist() == [4.0]
    autograd.backward([(x * 3).sum(), (x * y).sum()], [None, Tensor(2.0)], inputs=x)
    assert x.grad.tolist() == [3.0 + 4.0]


def test_backward_ops_run_without_autocast_in_the_forward_dtypes():
    x = _leaf(numpy.ones((2, 3)) * 0.5, numpy.float32)
    w = _leaf(numpy.ones((3, 2)) * 0.25, numpy.float32)
    with amp.autocast():
        y = ops.tanh(ops.matmul(x, w))  # the product in float16
        (g,) = autograd.grad(y.sum(), w, create_graph=True)
        (gg,) = autograd.grad((g * g).sum(), x)
    assert y.dtype == numpy.float16 and g.dtype == gg.dtype == numpy.float32


def test_on_gradient_ready_reports_arrays_under_create_graph():
    w = _leaf([3.0])
    events = []
    with engine.on_gradient_ready([w], lambda i, g: events.append(type(g))):
        (w * w).sum().backward(create_graph=True)
    assert events == [numpy.ndarray] and w.grad.requires_grad


class TwoHalves(Function):
    """Two outputs, the halves of a vector; saves nothing (a linear op)."""
    saves = {}

    def forward(self, x):
        self.n = x.shape[0] // 2
        return x[:self.n], x[self.n:]

    def backward(self, ga, gb):
        return ops.concat([ga, gb]) if isinstance(ga, Tensor) else numpy.concatenate([ga, gb])


def test_a_multi_output_node_with_an_unused_output_under_create_graph():
    x = _leaf([1.0, 2.0, 3.0, 4.0])
    _, b = TwoHalves.apply(x)
    (g,) = autograd.grad((b ** 3).sum(), x, create_graph=True)
    (gg,) = autograd.grad(g.sum(), x)
    numpy.testing.assert_array_equal(gg.asnumpy(), [0.0, 0.0, 18.0, 24.0])


class Cube(Function):
    """x³ written as an op: ``saves`` names the attribute holding the input, so the same rule
    gives the second derivative."""
    saves = {"x": 0}

    def forward(self, x):
        self.x = x
        return x * x * x

    def backward(self, g):
        return g * 3 * self.x * self.x


class CubeOnArrays(Cube):
    saves = None


def test_an_array_level_function_is_twice_differentiable_through_saves():
    x = _leaf([2.0])
    (g,) = autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    (gg,) = autograd.grad(g.sum(), x)
    assert g.tolist() == [12.0] and gg.tolist() == [12.0]
    with pytest.raises(RuntimeError, match="second derivative not supported for CubeOnArrays"):
        autograd.grad(CubeOnArrays.apply(x).sum(), x, create_graph=True)


def test_the_nested_grad_depth_is_restored_after_an_error():
    def bad(x):
        raise ValueError("inside")
    with pytest.raises(ValueError, match="inside"):
        minigrad.grad(bad)(Tensor([1.0]))
    from minigrad._config import config
    assert config.grad_depth == 0
