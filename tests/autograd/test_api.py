"""Functional differentiation: grad, value_and_grad, GradOperation (MindSpore style)."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, ops


def _t(values, dtype=numpy.float32):
    return minigrad.Tensor(numpy.asarray(values, dtype))


def _f(x, y):
    return (x * x * y).sum()  # d/dx = 2xy, d/dy = x²


X, Y = [1.0, 2.0], [3.0, 4.0]


def test_grad_default_position_zero():
    g = minigrad.grad(_f)(_t(X), _t(Y))
    assert isinstance(g, minigrad.Tensor)
    numpy.testing.assert_array_equal(g.asnumpy(), [6.0, 16.0])


def test_grad_position_tuple_and_negative():
    gx, gy = minigrad.grad(_f, grad_position=(0, 1))(_t(X), _t(Y))
    numpy.testing.assert_array_equal(gx.asnumpy(), [6.0, 16.0])
    numpy.testing.assert_array_equal(gy.asnumpy(), [1.0, 4.0])
    numpy.testing.assert_array_equal(
        minigrad.grad(_f, grad_position=-1)(_t(X), _t(Y)).asnumpy(), [1.0, 4.0]
    )
    (only,) = minigrad.grad(_f, grad_position=(1,))(_t(X), _t(Y))
    numpy.testing.assert_array_equal(only.asnumpy(), [1.0, 4.0])


def test_grad_does_not_touch_inputs_or_their_grad():
    x = minigrad.Tensor(numpy.array(X, numpy.float32), requires_grad=True)
    minigrad.grad(_f)(x, _t(Y))
    assert x.grad is None


def test_value_and_grad_returns_value_and_gradient():
    value, g = minigrad.value_and_grad(_f)(_t(X), _t(Y))
    assert value.item() == 1 * 3 + 4 * 4
    numpy.testing.assert_array_equal(g.asnumpy(), [6.0, 16.0])


def test_weights_only_and_inputs_with_weights():
    w = minigrad.Parameter(_t([1.0, -1.0]), name="w")
    b = minigrad.Parameter(_t(0.5), name="b")

    def fn(x):
        return ((x * w).sum() + b) * 2

    value, (gw, gb) = minigrad.value_and_grad(fn, grad_position=None, weights=[w, b])(_t(X))
    assert value.item() == ((1 - 2) + 0.5) * 2
    numpy.testing.assert_array_equal(gw.asnumpy(), [2.0, 4.0])
    assert gb.item() == 2.0 and gb.shape == ()
    gx, (gw2, gb2) = minigrad.grad(fn, grad_position=0, weights=(w, b))(_t(X))
    numpy.testing.assert_array_equal(gx.asnumpy(), [2.0, -2.0])
    numpy.testing.assert_array_equal(gw2.asnumpy(), gw.asnumpy())
    assert w.grad is None and b.grad is None  # functional: .grad is left alone


def test_single_parameter_as_weights():
    w = minigrad.Parameter(_t([1.0, 2.0]), name="w")
    (gw,) = minigrad.grad(lambda x: (x * w).sum(), grad_position=None, weights=w)(_t(X))
    numpy.testing.assert_array_equal(gw.asnumpy(), X)


def test_unused_weight_gets_zeros_in_its_dtype():
    w = minigrad.Parameter(_t([1.0, 2.0], numpy.float16), name="unused")
    (gw,) = minigrad.grad(lambda x: x.sum(), grad_position=None, weights=[w])(_t(X))
    assert gw.dtype == numpy.float16
    numpy.testing.assert_array_equal(gw.asnumpy(), [0.0, 0.0])


def test_has_aux_differentiates_only_the_first_output():
    def fn(x):
        return (x * x).sum(), x * 100, "label"

    (value, aux, label), g = minigrad.value_and_grad(fn, has_aux=True)(_t(X))
    assert value.item() == 5.0 and label == "label"
    numpy.testing.assert_array_equal(aux.asnumpy(), [100.0, 200.0])
    numpy.testing.assert_array_equal(g.asnumpy(), [2.0, 4.0])
    g2, aux2 = minigrad.grad(fn, has_aux=True)(_t(X))
    numpy.testing.assert_array_equal(g2.asnumpy(), [2.0, 4.0])
    assert isinstance(aux2, tuple) and aux2[1] == "label"


def test_has_aux_needs_a_tuple():
    with pytest.raises(TypeError, match="has_aux=True needs fn to return a tuple"):
        minigrad.grad(lambda x: x.sum(), has_aux=True)(_t(X))


def test_multiple_outputs_are_summed():
    g = minigrad.grad(lambda x: ((x * 2).sum(), (x * x).sum()))(_t(X))
    numpy.testing.assert_array_equal(g.asnumpy(), [4.0, 6.0])


def test_non_scalar_output_is_seeded_with_ones():
    g = minigrad.grad(lambda x: x * 3)(_t(X))
    numpy.testing.assert_array_equal(g.asnumpy(), [3.0, 3.0])


def test_output_independent_of_input_gives_zeros():
    g = minigrad.grad(lambda x, y: (y * 2).sum())(_t(X), _t(Y))
    numpy.testing.assert_array_equal(g.asnumpy(), [0.0, 0.0])


def test_gradient_dtype_equals_input_dtype():
    g = minigrad.grad(lambda x: (x.astype(minigrad.float32) * 3).sum())(_t(X, numpy.float16))
    assert g.dtype == numpy.float16


@pytest.mark.parametrize(
    "kwargs,exc,message",
    [
        (dict(grad_position=None), ValueError, "cannot both be None"),
        (dict(grad_position=2), ValueError, r"grad_position=2 is out of range for 2 inputs"),
        (dict(grad_position=(0, 5)), ValueError, r"out of range"),
    ],
)
def test_grad_argument_errors(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        minigrad.grad(_f, **kwargs)(_t(X), _t(Y))


def test_differentiating_a_non_tensor_input_raises():
    with pytest.raises(TypeError, match="input 1 to differentiate must be a Tensor, got float"):
        minigrad.grad(lambda x, s: x.sum() * s, grad_position=1)(_t(X), 2.0)


def test_inner_hooks_run_under_functional_grad():
    seen = []

    def fn(x):
        h = x * 3
        h.register_hook(lambda g: seen.append(g.asnumpy().copy()) or g * 2)
        return (h * h).sum()

    g = minigrad.grad(fn)(_t(X))
    numpy.testing.assert_array_equal(seen[0], [6.0, 12.0])
    numpy.testing.assert_array_equal(g.asnumpy(), [36.0, 72.0])


def test_weight_hooks_run_under_functional_grad():
    w = minigrad.Parameter(_t([1.0, 2.0]), name="w")
    w.register_hook(lambda g: g * 10)
    (gw,) = minigrad.grad(lambda x: (x * w).sum(), grad_position=None, weights=[w])(_t(X))
    numpy.testing.assert_array_equal(gw.asnumpy(), [10.0, 20.0])


# ---- GradOperation ------------------------------------------------------------------------


class Net:
    """A tiny callable "cell": out = x @ w + b."""

    def __init__(self):
        self.w = minigrad.Parameter(_t([[1.0], [2.0]]), name="w")
        self.b = minigrad.Parameter(_t([0.5]), name="b")

    def __call__(self, x, scale=1.0):
        return (ops.matmul(x, self.w) + self.b) * scale


def test_grad_operation_default_first_input():
    net, x = Net(), _t([[1.0, 1.0], [2.0, 3.0]])
    g = minigrad.GradOperation()(net)(x)
    numpy.testing.assert_array_equal(g.asnumpy(), [[1.0, 2.0], [1.0, 2.0]])


def test_grad_operation_get_all_skips_non_tensors():
    net, x = Net(), _t([[1.0, 1.0]])
    grads = minigrad.GradOperation(get_all=True)(lambda x, y, s: (net(x) * y) * s)(
        x, _t([[3.0]]), 2.0
    )
    assert isinstance(grads, tuple) and len(grads) == 2
    numpy.testing.assert_array_equal(grads[0].asnumpy(), [[6.0, 12.0]])
    numpy.testing.assert_array_equal(grads[1].asnumpy(), [[7.0]])  # 2 * (1 + 2 + 0.5)


def test_grad_operation_get_by_list():
    net, x = Net(), _t([[1.0, 1.0], [2.0, 3.0]])
    gw, gb = minigrad.GradOperation(get_by_list=True)(net, [net.w, net.b])(x)
    numpy.testing.assert_array_equal(gw.asnumpy(), [[3.0], [4.0]])
    numpy.testing.assert_array_equal(gb.asnumpy(), [2.0])


def test_grad_operation_get_all_and_get_by_list():
    net, x = Net(), _t([[1.0, 1.0]])
    (gx,), (gw, gb) = minigrad.GradOperation(get_all=True, get_by_list=True)(net, [net.w, net.b])(x)
    numpy.testing.assert_array_equal(gx.asnumpy(), [[1.0, 2.0]])
    numpy.testing.assert_array_equal(gw.asnumpy(), [[1.0], [1.0]])


@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32])
def test_sens_scales_the_gradients(dtype):
    net, x = Net(), _t([[1.0, 1.0], [2.0, 3.0]])
    plain = minigrad.GradOperation(get_by_list=True)(net, [net.w, net.b])(x)
    grad_fn = minigrad.GradOperation(get_by_list=True, sens_param=True)(net, [net.w, net.b])
    scaled = grad_fn(x, minigrad.Tensor(numpy.array(1024.0, dtype)))  # a loss scale
    for p, s in zip(plain, scaled):
        assert s.dtype == numpy.float32
        numpy.testing.assert_array_equal(s.asnumpy(), p.asnumpy() * 1024)
    per_row = grad_fn(x, _t([[1.0], [0.0]]))  # a full-shaped sens seeds each output element
    numpy.testing.assert_array_equal(per_row[0].asnumpy(), [[1.0], [1.0]])


def test_sens_param_with_extra_non_tensor_args():
    net, x = Net(), _t([[1.0, 1.0]])
    g = minigrad.GradOperation(sens_param=True)(net)(x, 3.0, _t([[2.0]]))
    numpy.testing.assert_array_equal(g.asnumpy(), [[6.0, 12.0]])  # sens 2 * scale 3 * w


def test_grad_operation_errors():
    with pytest.raises(TypeError, match="get_all must be a bool, got 1"):
        minigrad.GradOperation(get_all=1)
    with pytest.raises(ValueError, match="needs weights"):
        minigrad.GradOperation(get_by_list=True)(Net())
    with pytest.raises(TypeError, match="last input must be the sens"):
        minigrad.GradOperation(sens_param=True)(Net())()


def test_values_come_back_without_a_graph():
    """MindSpore returns plain Tensors: the value (and aux) of value_and_grad, and the loss of a
    train cell, carry no freed graph, so accumulating them in a loop builds nothing."""
    import numpy

    from minigrad import nn, ops

    x = minigrad.Tensor(numpy.array([1.0, 2.0], numpy.float32))
    value, g = minigrad.value_and_grad(lambda t: (ops.sum(t * t), t * 2), has_aux=True)(x)
    assert all(v._ctx is None and not v.requires_grad for v in value)
    total = minigrad.Tensor(numpy.float32(0))
    for _ in range(3):
        loss, _ = minigrad.value_and_grad(lambda t: ops.sum(t * t))(x)
        total = total + loss
    assert total._ctx is None and float(total.asnumpy()) == 15.0
    net = nn.Dense(2, 1)
    step = nn.TrainOneStepCell(
        nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.1)
    )
    loss = step(
        minigrad.Tensor(numpy.ones((4, 2), numpy.float32)),
        minigrad.Tensor(numpy.zeros((4, 1), numpy.float32)),
    )
    assert loss._ctx is None and not loss.requires_grad


def test_register_hook_refuses_what_no_gradient_reaches():
    import numpy

    plain = minigrad.Tensor(numpy.ones(2, numpy.float32))
    with pytest.raises(RuntimeError, match="does not require grad"):
        plain.register_hook(lambda g: None)
    with pytest.raises(TypeError, match="hook must be callable"):
        minigrad.Tensor(numpy.ones(2, numpy.float32), requires_grad=True).register_hook(3)


def _product(x, y):
    return (x * y).sum()


def test_a_repeated_grad_position_gets_the_gradient_each_time():
    # one leaf per input, whatever the number of entries naming it: re-wrapping the input once
    # per entry would leave the first leaf unused, with a gradient of 0
    a = Tensor(numpy.array([1.0, 2.0], numpy.float32))
    b = Tensor(numpy.array([3.0, 4.0], numpy.float32))
    ga, ga_again, gb = minigrad.grad(_product, (0, 0, 1))(a, b)
    numpy.testing.assert_array_equal(ga.asnumpy(), [3.0, 4.0])
    numpy.testing.assert_array_equal(ga_again.asnumpy(), [3.0, 4.0])
    numpy.testing.assert_array_equal(gb.asnumpy(), [1.0, 2.0])
    assert ga.data is not ga_again.data  # each one fresh and writable
    _, (g0, g1) = minigrad.value_and_grad(_product, (1, -1))(a, b)
    numpy.testing.assert_array_equal(g0.asnumpy(), [1.0, 2.0])
    numpy.testing.assert_array_equal(g1.asnumpy(), [1.0, 2.0])


@pytest.mark.parametrize("position", ["0", 1.0, (0, "1"), [0.0]])
def test_a_grad_position_of_the_wrong_type_is_a_type_error_naming_it(position):
    # MindSpore: TypeError, 'grad_position' must be an int or a tuple of ints (not
    # "grad_position='0' is out of range" or "'float' object is not iterable")
    a = Tensor(numpy.ones(2, numpy.float32))
    with pytest.raises(TypeError, match=r"grad_position.*int or a tuple or list of ints.*got"):
        minigrad.grad(_product, position)(a, a)
