"""ops.depend, fill, dtype, partial, MultitypeFuncGraph, HyperMap, reciprocal and minigrad.jit:
MindSpore's helpers for hand-written training steps, in PyNative form."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, ops
from minigrad import dtype as mstype


def test_depend_returns_its_value_and_jit_is_the_function_itself():
    calls = []
    value = Tensor(np.float32(1.5))
    assert ops.depend(value, calls.append(1)) is value and calls == [1]

    def step(x):
        return x * 2

    assert minigrad.jit(step) is step
    assert minigrad.jit(mode="PSJit", input_signature=None)(step) is step

    @minigrad.jit
    def branchy(x):  # Python control flow takes its branch on every call, as in PyNative mode
        return x + 1 if float(x.asnumpy()) > 0 else x - 1

    assert float(branchy(Tensor(1.0)).asnumpy()) == 2.0
    assert float(branchy(Tensor(-1.0)).asnumpy()) == -2.0
    with pytest.raises(TypeError, match="function"):
        minigrad.jit(3)


def test_fill_and_dtype():
    t = ops.fill(mstype.float16, (2, 3), 1.5)
    assert t.shape == (2, 3) and t.dtype == mstype.float16
    np.testing.assert_array_equal(t.asnumpy(), np.full((2, 3), 1.5, np.float16))
    assert ops.dtype(t) == mstype.float16 and ops.dtype(Tensor([1, 2])) == mstype.int64
    with pytest.raises(ValueError, match="type"):
        ops.fill("complex", (2,), 1.0)


def test_reciprocal_keeps_the_dtype_and_differentiates():
    x = Tensor(np.array([2.0, 4.0], np.float16), requires_grad=True)
    y = ops.reciprocal(x)
    assert y.dtype == mstype.float16
    np.testing.assert_array_equal(y.asnumpy(), [0.5, 0.25])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), np.float16([-0.25, -0.0625]))
    assert float(ops.Reciprocal()(Tensor(np.float32(8.0))).asnumpy()) == 0.125


def _grad_scale():
    """MindSpore's own unscale rule of nn/wrap/loss_scale.py, written as there."""
    grad_scale = ops.MultitypeFuncGraph("grad_scale")

    @grad_scale.register("Tensor", "Tensor")
    def tensor_grad_scale(scale, grad):
        return grad * ops.cast(ops.reciprocal(scale), ops.dtype(grad))

    @grad_scale.register("Tensor", "RowTensor")
    def tensor_grad_scale_row_tensor(scale, grad):  # never called: no sparse tensors
        raise AssertionError("a Tensor matched RowTensor")

    return grad_scale


def test_hyper_map_of_a_partial_multitype_graph_unscales_each_gradient():
    grads = (Tensor(np.array([4.0, 8.0], np.float16)), Tensor(np.array([[2.0]], np.float32)))
    out = ops.HyperMap()(ops.partial(_grad_scale(), Tensor(np.float32(4.0))), grads)
    assert isinstance(out, tuple) and [o.dtype for o in out] == [mstype.float16, mstype.float32]
    np.testing.assert_array_equal(out[0].asnumpy(), [1.0, 2.0])
    np.testing.assert_array_equal(out[1].asnumpy(), [[0.5]])
    as_list = ops.HyperMap(ops.partial(_grad_scale(), Tensor(np.float32(2.0))))(list(grads))
    assert isinstance(as_list, list) and float(as_list[1].asnumpy()[0, 0]) == 1.0


def test_hyper_map_maps_over_several_and_nested_sequences():
    add = ops.HyperMap()
    out = add(lambda a, b: a + b, (1, (2, 3)), (10, (20, 30)))
    assert out == (11, (22, 33))
    assert add(lambda a: a * 2, 4) == 8  # not a sequence: applied as it is
    with pytest.raises(ValueError, match="one length"):
        add(lambda a, b: a, (1, 2), (1,))
    with pytest.raises(TypeError, match="must all be tuples"):
        add(lambda a, b: a, (1, 2), [1, 2])
    with pytest.raises(TypeError, match="must all be tuples"):
        add(lambda a, b: a, (1, 2), 3)
    with pytest.raises(TypeError, match="fn"):
        add(3, (1,))
    with pytest.raises(TypeError, match="ops"):
        ops.HyperMap(3)


def test_multitype_func_graph_picks_the_narrowest_registration():
    kind = ops.MultitypeFuncGraph("kind")
    kind.register("Number")(lambda x: "number")
    kind.register("Bool")(lambda x: "bool")
    kind.register("Tensor")(lambda x: "tensor")
    kind.register("Tuple")(lambda x: "tuple")
    kind.register("Number", "Number")(lambda x, y: "two numbers")
    assert kind(True) == "bool" and kind(2) == "number" and kind(np.float32(1)) == "number"
    assert kind(Tensor(1.0)) == "tensor" and kind((1,)) == "tuple"
    assert kind(1, 2.5) == "two numbers"
    with pytest.raises(TypeError, match=r"'kind' has no implementation for arguments of types "
                                        r"\(str\)"):
        kind("x")
    with pytest.raises(ValueError,
                       match=r"type_names must be type names, each one of .*, got 'Tensr'"):
        kind.register("Tensr")
    with pytest.raises(TypeError, match="name"):
        ops.MultitypeFuncGraph(3)


def test_value_and_grad_and_grad_under_their_ops_names():
    w = minigrad.Parameter(Tensor(np.float32([2.0])), name="w")
    value, grads = ops.value_and_grad(lambda x: (x * w).sum(), None, [w])(Tensor(3.0))
    assert float(value.asnumpy()) == 6.0 and float(grads[0].asnumpy()[0]) == 3.0
    assert ops.value_and_grad is minigrad.value_and_grad and ops.grad is minigrad.grad
