"""MindSpore's and JAX's nesting of the functional API: grad(grad(f)), value_and_grad and
GradOperation inside the function another one differentiates (a gradient penalty in a loss)."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, nn, ops
from minigrad._config import config


def _t(values):
    return Tensor(numpy.asarray(values, numpy.float64))


def test_grad_of_grad_is_the_second_derivative():
    f = lambda x: (x ** 4).sum()  # noqa: E731
    x = _t([1.0, -2.0])
    numpy.testing.assert_allclose(minigrad.grad(minigrad.grad(f))(x).asnumpy(), [12.0, 48.0])
    third = minigrad.grad(minigrad.grad(minigrad.grad(f)))
    numpy.testing.assert_allclose(third(x).asnumpy(), [24.0, -48.0])


def test_grad_of_grad_of_a_function_of_two_inputs():
    f = lambda x, y: (ops.tanh(x * y)).sum()  # noqa: E731
    x, y = _t([0.3, -0.4]), _t([1.5, 0.5])
    d_dy_d_dx = minigrad.grad(lambda x, y: minigrad.grad(f)(x, y).sum(), grad_position=1)(x, y)
    t = numpy.tanh(x.asnumpy() * y.asnumpy())
    s = 1 - t * t  # d/dy [y · sech²(xy)] = sech² - 2xy · tanh · sech²
    expected = s - 2 * x.asnumpy() * y.asnumpy() * t * s
    numpy.testing.assert_allclose(d_dy_d_dx.asnumpy(), expected, rtol=1e-12)


def test_nested_value_and_grad_keeps_the_value_and_gradient_graphs():
    def inner(x):
        value, g = minigrad.value_and_grad(lambda z: (z ** 3).sum())(x)
        assert value.requires_grad and g.requires_grad
        return value + (g * g).sum()  # x³ + 9x⁴
    x = _t([2.0])
    value, g = minigrad.value_and_grad(inner)(x)
    assert not value.requires_grad and not g.requires_grad  # the outermost call detaches
    assert value.tolist() == 8.0 + 144.0 and g.tolist() == [12.0 + 288.0]
    assert config.grad_depth == 0


def test_an_outer_input_is_differentiated_where_it_is():
    # the inner call gets the outer's leaf (it requires grad): re-wrapping it would cut f'' to 0
    seen = []

    def first(x):
        seen.append(x.requires_grad)
        return minigrad.grad(lambda z: (z ** 3).sum())(x).sum()
    assert minigrad.grad(first)(_t([1.0, 2.0])).tolist() == [6.0, 12.0]
    assert seen == [True]


def test_top_level_results_carry_no_graph():
    x = Tensor(numpy.array([1.0, 2.0]), requires_grad=True)
    g = minigrad.grad(lambda z: (z * z).sum())(x)
    assert not g.requires_grad and x.grad is None


def _net():
    minigrad.set_seed(3)
    return nn.SequentialCell([nn.Dense(3, 4), nn.Tanh(), nn.Dense(4, 1)])


def _data():
    rng = numpy.random.RandomState(0)
    return (Tensor(rng.randn(5, 3).astype(numpy.float32)),
            Tensor(rng.randn(5, 1).astype(numpy.float32)))


def _torch_penalty_grads(net, x, y, penalty_weight):
    torch = pytest.importorskip("torch")
    layers = [torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)]
    model = torch.nn.Sequential(*layers)
    with torch.no_grad():
        for mine, theirs in zip(net.trainable_params(), model.parameters()):
            theirs.copy_(torch.from_numpy(mine.asnumpy().copy()))
    tx, ty = torch.from_numpy(x.asnumpy()), torch.from_numpy(y.asnumpy())
    loss = torch.nn.functional.mse_loss(model(tx), ty)
    inner = torch.autograd.grad(loss, list(model.parameters()), create_graph=True)
    total = loss + penalty_weight * sum((g * g).sum() for g in inner)
    return [g.numpy() for g in torch.autograd.grad(total, list(model.parameters()))]


def test_a_gradient_penalty_in_the_loss_matches_pytorch():
    net, (x, y) = _net(), _data()
    weights = net.trainable_params()
    mse = nn.MSELoss()

    def loss_fn(x, y):
        loss = mse(net(x), y)
        inner = minigrad.grad(lambda a, b: mse(net(a), b), None, weights)(x, y)
        return loss + 0.5 * sum((g * g).sum() for g in inner)
    _, grads = minigrad.value_and_grad(loss_fn, None, weights)(x, y)
    for got, expected in zip(grads, _torch_penalty_grads(net, x, y, 0.5)):
        numpy.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_grad_operation_nests_too():
    net, (x, y) = _net(), _data()
    weights = net.trainable_params()
    mse = nn.MSELoss()
    inner_op = ops.GradOperation(get_by_list=True)

    def loss_fn(x, y):
        loss = mse(net(x), y)
        inner = inner_op(lambda a, b: mse(net(a), b), weights)(x, y)
        return loss + 0.5 * sum((g * g).sum() for g in inner)
    grads = ops.GradOperation(get_by_list=True)(loss_fn, weights)(x, y)
    for got, expected in zip(grads, _torch_penalty_grads(net, x, y, 0.5)):
        numpy.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_an_input_gradient_penalty_on_the_weights():
    # WGAN-GP's shape: the inner call differentiates the data (a plain input), the outer the
    # weights; the penalty's gradient reaches the weights through the inner graph
    net, (x, _) = _net(), _data()
    weights = net.trainable_params()

    def critic_loss(x):
        gx = minigrad.grad(lambda a: net(a).sum())(x)
        return ((ops.sqrt((gx * gx).sum(axis=1)) - 1) ** 2).mean()
    grads = minigrad.grad(critic_loss, None, weights)(x)
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    with torch.no_grad():
        for mine, theirs in zip(weights, model.parameters()):
            theirs.copy_(torch.from_numpy(mine.asnumpy().copy()))
    tx = torch.from_numpy(x.asnumpy()).requires_grad_()
    (gx,) = torch.autograd.grad(model(tx).sum(), tx, create_graph=True)
    penalty = ((gx.pow(2).sum(dim=1).sqrt() - 1) ** 2).mean()
    expected = torch.autograd.grad(penalty, list(model.parameters()), materialize_grads=True)
    assert float(abs(grads[-1]).sum()) == 0  # the last bias does not move d net / dx
    for got, want in zip(grads, expected):
        numpy.testing.assert_allclose(got.asnumpy(), want.numpy(), rtol=1e-5, atol=1e-6)
