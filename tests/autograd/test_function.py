"""The engine and Tensor.backward: deep graphs, freeing, retain_graph, accumulation, aliasing,
no_grad/detach, hooks, multi-output Functions."""
import gc
import weakref

import numpy
import pytest

import minigrad
from minigrad import ops
from minigrad.autograd.function import Function


def _leaf(values, dtype=numpy.float32):
    return minigrad.Tensor(numpy.asarray(values, dtype), requires_grad=True)


def test_ten_thousand_op_chain_backprops_without_recursion():
    x = _leaf([1.0, 2.0], numpy.float64)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    numpy.testing.assert_allclose(x.grad.asnumpy(), [1.0001 ** 10_000] * 2, rtol=1e-9)


def test_deep_retained_graph_is_deleted_without_recursion():
    x = _leaf([1.0])
    y = x
    for _ in range(10_000):
        y = y + 1.0
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.item() == 2.0
    del y  # tearing down a 10,000-node chain must not hit the recursion limit


def _chain(x, n, refs):
    """n ops on x, recording a weak reference to every intermediate tensor and node."""
    y = x
    for i in range(n):
        y = ops.tanh(y) * 0.5 if i % 2 else ops.matmul(y, y.T)[:, :2]
        refs.append(weakref.ref(y))
        refs.append(weakref.ref(y._ctx))
    return y.sum()


def test_graph_is_freed_by_backward():
    x = _leaf(numpy.ones((2, 2)) * 0.1)
    refs = []
    loss = _chain(x, 6, refs)
    gc.disable()  # freeing must come from reference counting, not the cycle collector
    try:
        loss.backward()
        alive = [r() for r in refs[:-2] if r() is not None]
        assert alive == [], f"intermediates still alive after backward: {alive}"
        del loss
        assert all(r() is None for r in refs), "the last node outlived its output"
    finally:
        gc.enable()
    assert x.grad is not None


def test_retained_graph_is_freed_when_dropped():
    x = _leaf(numpy.ones((2, 2)) * 0.1)
    refs = []
    loss = _chain(x, 6, refs)
    gc.disable()
    try:
        loss.backward(retain_graph=True)
        # the retained graph keeps every node; an intermediate tensor no rule reads (the sum's
        # input) is held by no node, only as an edge, as in PyTorch
        assert all(r() is not None for r in refs[1::2])
        del loss
        assert all(r() is None for r in refs)
    finally:
        gc.enable()


def test_a_node_keeps_only_the_inputs_its_rule_reads():
    """ReLU and add read no input (a mask, nothing): a non-leaf input is held as an Edge and
    its array is freed once the caller drops it; leaves and the inputs ``saves`` names are
    held as themselves; the gradients are unchanged, first and second order."""
    from minigrad.autograd.function import Edge

    x, w = _leaf(numpy.linspace(-1, 1, 6).reshape(2, 3)), _leaf(numpy.full((2, 3), 0.5))
    z = x * w  # Mul saves both operands: the leaves stay themselves
    z_array = weakref.ref(z.data)
    y = ops.relu(z) + z
    assert y._ctx.inputs[0]._ctx is not None and isinstance(y._ctx.inputs[1], Edge)
    relu = y._ctx.inputs[0]._ctx
    assert isinstance(relu.inputs[0], Edge) and relu.inputs[0]._ctx is z._ctx
    assert z._ctx.inputs == (x, w)
    z_ref = weakref.ref(z)
    del z
    assert z_ref() is None and z_array() is None
    (gx,) = minigrad.autograd.grad(y.sum(), x, create_graph=True)
    expected = numpy.where(x.data * 0.5 > 0, 1.0, 0.0) * 0.5 + 0.5
    numpy.testing.assert_allclose(gx.data, expected, rtol=1e-6)
    (gw,) = minigrad.autograd.grad((gx * w).sum(), w)  # d/dw of Σ (relu'(x·w) + 1)·w·w
    numpy.testing.assert_allclose(gw.data, 2 * expected, rtol=1e-6)


def test_a_function_without_saves_keeps_every_input():
    class Twice(Function):  # saves None: its backward might read any input
        def forward(self, x):
            return x * 2

        def backward(self, g):
            return g * 2

    x = _leaf([1.0, 2.0])
    h = x * 1.0
    y = Twice.apply(h)
    assert y._ctx.inputs[0] is h


def _live_tensors():
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, minigrad.Tensor))


def test_no_tensor_survives_backward_and_del():
    before = _live_tensors()
    x = _leaf(numpy.ones((3, 3)))
    w = _leaf(numpy.ones((3, 3)))
    loss = ops.relu(ops.matmul(x, w) * 2 - 1).mean()
    loss.backward()
    del loss
    assert _live_tensors() == before + 4  # x, w and their two .grad tensors
    del x, w
    assert _live_tensors() == before


def test_second_backward_raises_clear_error():
    x = _leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="already been freed.*retain_graph=True"):
        y.backward()


def test_backward_through_a_partly_freed_graph_raises():
    x = _leaf([1.0, 2.0])
    h = x * 3
    a, b = h.sum(), (h * h).sum()
    a.backward()
    with pytest.raises(RuntimeError, match="already been freed"):
        b.backward()


def test_retain_graph_allows_a_second_backward_that_accumulates():
    x = _leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 4.0])
    y.backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [4.0, 8.0])


def test_leaf_grad_accumulates_across_graphs_until_reset():
    x = _leaf([1.0, -1.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [5.0, 1.0])
    x.grad = None
    x.sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [1.0, 1.0])


def test_shared_subexpression_gradients_add():
    x = _leaf([2.0])
    h = x * x
    (h + h * h).backward()  # d/dx (x² + x⁴) = 2x + 4x³
    assert x.grad.item() == 2 * 2 + 4 * 8


def _sums(monkeypatch):
    """Record, for every second gradient of a tensor, whether it was added in place."""
    from minigrad.autograd import engine

    in_place, add = [], engine._sum

    def spy(holder, grad, i=1):
        before = id(holder[i])
        total = add(holder, grad, i)
        in_place.append(id(total) == before)
        return total
    monkeypatch.setattr(engine, "_sum", spy)
    return in_place


def test_a_private_gradient_sum_is_added_in_place(monkeypatch):
    in_place = _sums(monkeypatch)
    x = _leaf(numpy.linspace(-1, 1, 12).reshape(3, 4))
    h = x * 2.0
    (ops.relu(h) + h * 3.0).sum().backward()  # h: ReLU's and the product's gradients
    assert in_place == [True]
    numpy.testing.assert_allclose(x.grad.data, numpy.where(x.data > 0, 8.0, 6.0))


def test_fp16_gradient_sums_give_numpys_fp16_bits():
    """Two fp16 gradients of one tensor (large enough for the fast conversions) add in fp32 and
    round once: NumPy's fp16 sum, bit for bit, ties and subnormals included."""
    rng = numpy.random.default_rng(5)
    x = minigrad.Tensor(rng.standard_normal((64, 96)).astype(numpy.float16), requires_grad=True)
    seed = (rng.standard_normal(x.shape) * rng.choice([1e-6, 1.0, 300.0], x.shape))
    seed = seed.astype(numpy.float16)
    h = x * 1.0
    (ops.relu(h) + h * 3.0).backward(minigrad.Tensor(seed))
    relu_grad = numpy.where(x.data > 0, seed, numpy.float16(0))  # +0 where x <= 0
    want = relu_grad + seed * numpy.float16(3.0)  # NumPy's fp16 product and sum
    assert x.grad.dtype == numpy.float16
    numpy.testing.assert_array_equal(x.grad.data.view(numpy.int16), want.view(numpy.int16))


def test_a_gradient_someone_else_sees_is_never_written(monkeypatch):
    in_place = _sums(monkeypatch)
    x = _leaf(numpy.ones((2, 3)))
    seed = numpy.full((2, 3), 0.5, numpy.float32)
    h = x * 1.0
    (h + h).backward(minigrad.Tensor(seed))  # add hands the seed to h twice
    assert in_place == [False]
    numpy.testing.assert_array_equal(seed, 0.5)
    numpy.testing.assert_array_equal(x.grad.data, 1.0)
    for first in (True, False):  # either contribution may reach h first
        seen = []
        h = x * 1.0
        a = h + 1.0  # passes its gradient on to h as it is
        a.register_hook(lambda g: seen.append(g))  # and a hook keeps that array
        terms = (a * 2.0, h * 3.0) if first else (h * 3.0, a * 2.0)
        (terms[0] + terms[1]).sum().backward()
        numpy.testing.assert_array_equal(seen[0].data, 2.0)


def test_backward_requires_a_gradient_for_non_scalars():
    x = _leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"shape \(2,\) needs a gradient"):
        (x * 2).backward()
    (x * 2).backward(numpy.array([1.0, 10.0]))
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 20.0])


def test_backward_seed_is_broadcast_and_cast():
    x = _leaf([[1.0, 2.0], [3.0, 4.0]], numpy.float16)
    (x * 2).backward(numpy.float64(0.5))
    assert x.grad.dtype == numpy.float16
    numpy.testing.assert_array_equal(x.grad.asnumpy(), numpy.ones((2, 2)))
    with pytest.raises(ValueError, match=r"gradient of shape \(3,\) does not broadcast"):
        (x * 2).backward(numpy.ones(3))


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        minigrad.Tensor([1.0]).sum().backward()


def test_gradients_never_alias():
    seed = numpy.ones(3, numpy.float32)
    a, b = _leaf([1.0, 2.0, 3.0]), _leaf([4.0, 5.0, 6.0])
    (a + b).backward(seed)  # both leaves receive the same upstream array
    ga, gb = a.grad.asnumpy(), b.grad.asnumpy()
    assert not numpy.shares_memory(ga, gb)
    assert not numpy.shares_memory(ga, seed) and not numpy.shares_memory(gb, seed)
    assert ga.flags.writeable and gb.flags.writeable
    ga *= 7
    numpy.testing.assert_array_equal(gb, [1.0, 1.0, 1.0])
    numpy.testing.assert_array_equal(seed, [1.0, 1.0, 1.0])


def test_broadcast_gradients_are_writable_arrays():
    x = _leaf([[1.0, 2.0]])
    c = _leaf(2.0)
    (x * c).sum().backward()  # gradients from broadcast_to views
    for g in (x.grad.asnumpy(), c.grad.asnumpy()):
        assert g.flags.writeable
        g += 1


def test_views_of_one_gradient_are_separated():
    x = _leaf([1.0, 2.0, 3.0, 4.0])
    y = _leaf([[1.0, 2.0], [3.0, 4.0]])
    (x.reshape(2, 2) + y).backward(numpy.ones((2, 2)))  # x's gradient is a view of y's
    assert not numpy.shares_memory(x.grad.asnumpy(), y.grad.asnumpy())


def test_no_grad_records_nothing_and_enable_grad_restores():
    x = _leaf([1.0, 2.0])
    with minigrad.no_grad():
        assert not minigrad.is_grad_enabled()
        y = x * 2
        with minigrad.enable_grad():
            z = x * 2
    assert minigrad.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf
    assert z.requires_grad and not z.is_leaf
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


def test_detach_cuts_the_graph_but_shares_data():
    x = _leaf([1.0, 2.0])
    h = x * 3
    d = h.detach()
    assert d.is_leaf and not d.requires_grad
    assert numpy.shares_memory(d.asnumpy(), h.asnumpy())
    (h * d).sum().backward()  # d is a constant: d(x * 3 * d)/dx = 3 d
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [9.0, 18.0])


def test_requires_grad_toggles():
    x = minigrad.Tensor([1.0, 2.0])
    assert not (x * 2).requires_grad
    x.requires_grad_()
    assert (x * 2).requires_grad
    with pytest.raises(RuntimeError, match="use detach"):
        (x * 2).requires_grad_(False)


def test_hook_on_leaf_sees_and_replaces_gradient():
    x = _leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.asnumpy().copy()))
    x.register_hook(lambda g: g * 10)
    (x * x).sum().backward()
    numpy.testing.assert_array_equal(seen[0], [2.0, 4.0])
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [20.0, 40.0])


def test_hook_on_non_leaf_sees_arriving_gradient_and_replacement_flows_on():
    x = _leaf([1.0, 2.0])
    h = x * 3
    seen = []

    def hook(g):
        seen.append(g.asnumpy().copy())
        return g * 0.5
    h.register_hook(hook)
    (h * h).sum().backward()
    numpy.testing.assert_array_equal(seen[0], [6.0, 12.0])  # d(h²)/dh = 2h
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [9.0, 18.0])  # 0.5 * 2h * 3


def test_hook_on_one_output_of_a_multi_output_node():
    x = _leaf([1.0, 2.0, 3.0, 4.0])
    a, b = SplitHalves.apply(x)
    b.register_hook(lambda g: g * 0)
    (a * 2 + b * 5).sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 2.0, 0.0, 0.0])


class SplitHalves(Function):
    """Two outputs: the first and second half of a vector."""
    def forward(self, x):
        self.n = x.shape[0] // 2
        return x[:self.n], x[self.n:]

    def backward(self, ga, gb):
        assert ga is not None and gb is not None  # the engine fills an unused output with zeros
        return numpy.concatenate([ga, gb])


def test_multi_output_function_with_an_unused_output():
    x = _leaf([1.0, 2.0, 3.0, 4.0])
    a, b = SplitHalves.apply(x)
    assert a.requires_grad and b.requires_grad and a._index == 0 and b._index == 1
    (b * b).sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 0.0, 6.0, 8.0])


def test_multi_output_function_with_both_outputs_used():
    x = _leaf([1.0, 2.0, 3.0, 4.0])
    a, b = SplitHalves.apply(x)
    (a * 2 + b * b).sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 2.0, 6.0, 8.0])


def test_multi_output_function_under_no_grad():
    x = _leaf([1.0, 2.0])
    with minigrad.no_grad():
        a, b = SplitHalves.apply(x)
    assert not a.requires_grad and a.is_leaf


def test_function_receives_kwargs_and_skips_unneeded_inputs():
    calls = []

    class Scale(Function):
        def forward(self, x, y, factor):
            self.factor = factor
            return x * y * factor

        def backward(self, g):
            calls.append(self.needs_grad)
            return g * self.factor, None

    x, y = _leaf([1.0, 2.0]), minigrad.Tensor([3.0, 4.0])
    Scale.apply(x, y, factor=2.0).sum().backward()
    assert calls == [(True, False)]
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 2.0])
    assert y.grad is None


def test_gradient_dtype_follows_each_leaf_through_mixed_precision():
    h = _leaf([1.0, 2.0], numpy.float16)
    f = _leaf([3.0, 4.0], numpy.float32)
    out = h * f
    assert out.dtype == numpy.float32
    out.sum().backward()
    assert h.grad.dtype == numpy.float16 and f.grad.dtype == numpy.float32
    numpy.testing.assert_array_equal(h.grad.asnumpy(), [3.0, 4.0])


def test_backward_overflow_is_silent_and_reported_by_the_values():
    """A scaled fp16 backward that overflows gives inf/NaN gradients, not NumPy RuntimeWarnings."""
    import warnings
    x = minigrad.Tensor(numpy.array([1.0, 2.0], numpy.float16), requires_grad=True)
    loss = (x * 30000.0).mean()                      # 45000: finite in fp16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss.backward(minigrad.Tensor(numpy.float16(8.0)))   # 8 / 2 * 30000 overflows fp16
    assert numpy.isinf(x.grad.asnumpy()).all()


def test_on_gradient_ready_reports_each_leaf_once_as_soon_as_it_is_final():
    from minigrad.autograd import engine
    x = minigrad.Tensor(numpy.array([1.0, 2.0], numpy.float32))
    w1, w2, unused = _leaf([3.0, 4.0]), _leaf([5.0, 6.0]), _leaf([7.0])
    w1.register_hook(lambda g: g * 2.0)  # applied once, before the report
    events = []
    with engine.on_gradient_ready([w1, w2, unused],
                                  lambda i, g: events.append((i, g.tolist()))):
        h = x * w1
        h.register_hook(lambda g: events.append("h"))  # runs when backward reaches x * w1
        loss = (h * w2 + h * w2).sum()  # w2 gets two gradients: reported once, summed
        loss.backward()
    assert events == [(1, [6.0, 16.0]), "h", (0, [20.0, 48.0])]
    assert w1.grad.tolist() == [20.0, 48.0] and w2.grad.tolist() == [6.0, 16.0]
    assert unused.grad is None


def test_on_gradient_ready_reports_only_the_targets_and_nothing_outside_its_block():
    from minigrad.autograd import engine
    w1, w2 = _leaf([3.0]), _leaf([5.0])
    events = []
    with engine.on_gradient_ready([w1, w2], lambda i, g: events.append(i)):
        loss = (w1 * w2).sum()
        grads = engine.run_backward([loss], [numpy.ones((), numpy.float32)], targets=[w2])
        assert events == [1] and grads[0].tolist() == [3.0]
        assert engine.run_backward([(w1 * w2).sum()], [numpy.ones((), numpy.float32)],
                                   targets=[]) == []
        assert events == [1]
    (w1 * w2).sum().backward()
    assert events == [1] and engine._listeners == []
