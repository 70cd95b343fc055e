"""The dtype policy table of minigrad/dtype.py, row by row."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, amp, ops
from minigrad import dtype as mstype

F16, F32, F64 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)


def _fp16(values):
    return minigrad.Tensor(numpy.asarray(values, numpy.float16))


# row: tensor (op) Python/NumPy scalar, 0-d array or other non-tensor array -> the tensor's dtype
WEAK_OPERANDS = [2.0, 2, numpy.float64(2.0), numpy.float32(2.0), numpy.int64(2), numpy.array(2.0),
                 numpy.full(3, 2.0), [2.0, 2.0, 2.0]]
BINARY = [ops.add, ops.sub, ops.mul, ops.div, ops.pow, ops.maximum, ops.minimum]


@pytest.mark.parametrize("other", WEAK_OPERANDS, ids=lambda v: f"{type(v).__name__}")
@pytest.mark.parametrize("fn", BINARY, ids=lambda f: f.__name__)
def test_non_tensor_operands_are_weak(fn, other):
    t = _fp16([1.0, 2.0, 3.0])
    assert fn(t, other).dtype == mstype.float16
    assert fn(other, t).dtype == mstype.float16


@pytest.mark.parametrize("other", WEAK_OPERANDS[:6], ids=lambda v: f"{type(v).__name__}")
def test_operators_with_numpy_scalars_on_the_left_stay_fp16(other):
    # NEP 50 makes NumPy scalars and 0-d arrays strong: Tensor must win the dispatch
    t = _fp16([1.0, 2.0, 3.0])
    for result in (other * t, other + t, other - t, other / t, t * other, t ** other):
        assert isinstance(result, minigrad.Tensor) and result.dtype == mstype.float16


def test_weak_scalar_gradient_keeps_fp16():
    t = minigrad.Tensor(numpy.array([1.0, 2.0], numpy.float16), requires_grad=True)
    (t * numpy.float64(3.0) + numpy.array(1.0)).sum().backward()
    assert t.grad.dtype == mstype.float16
    numpy.testing.assert_array_equal(t.grad.asnumpy(), [3.0, 3.0])


def test_where_and_comparisons_with_scalars_stay_fp16():
    t = _fp16([1.0, -2.0])
    assert ops.where(t > 0.0, t, 0.0).dtype == mstype.float16
    assert ops.where(t > numpy.float64(0), numpy.float64(1.5), t).dtype == mstype.float16
    assert (t > numpy.float64(0.5)).dtype == mstype.bool_


# row: fp16 tensor (op) fp32 tensor -> fp32, gradients cast back
@pytest.mark.parametrize("fn", BINARY, ids=lambda f: f.__name__)
def test_fp16_with_fp32_promotes_and_casts_gradients_back(fn):
    h = minigrad.Tensor(numpy.array([[1.0, 2.0], [3.0, 0.5]], numpy.float16), requires_grad=True)
    f = minigrad.Tensor(numpy.array([[0.5, 1.5], [2.0, 1.0]], numpy.float32), requires_grad=True)
    for out in (fn(h, f), fn(f, h)):
        assert out.dtype == mstype.float32
        h.grad = f.grad = None
        out.sum().backward()
        assert h.grad.dtype == mstype.float16 and f.grad.dtype == mstype.float32


# row: matmul / dense / conv2d on tensors of two float dtypes -> TypeError, unless autocast
@pytest.mark.parametrize("product", [
    lambda a, b: ops.matmul(a, b), lambda a, b: a @ b, lambda a, b: ops.dense(a, b),
    lambda a, b: ops.conv2d(a.reshape(1, 1, 2, 2), b.reshape(1, 1, 2, 2))],
    ids=["matmul", "operator", "dense", "conv2d"])
def test_a_product_of_two_float_dtypes_is_a_type_error_outside_autocast(product):
    h = minigrad.Tensor(numpy.array([[1.0, 2.0], [3.0, 0.5]], numpy.float16), requires_grad=True)
    f = minigrad.Tensor(numpy.array([[0.5, 1.5], [2.0, 1.0]], numpy.float32), requires_grad=True)
    with pytest.raises(TypeError, match="has dtype float16 but .* has dtype float32"):
        product(h, f)
    with pytest.raises(TypeError, match="has dtype float32 but .* has dtype float16"):
        product(f, h)
    with pytest.raises(TypeError, match="float64"):
        product(f, minigrad.Tensor(numpy.ones((2, 2))))
    with amp.autocast():  # autocast casts both to fp16 first; gradients come back in each dtype
        out = product(h, f)
    assert out.dtype == mstype.float16
    out.sum().backward()
    assert h.grad.dtype == mstype.float16 and f.grad.dtype == mstype.float32


def test_fp16_with_fp64_gives_fp64():
    assert (_fp16([1.0]) + minigrad.Tensor(numpy.array([1.0]))).dtype == mstype.float64


# row: int tensor (op) Python float -> float32; int tensor (op) float tensor -> the float's dtype
def test_integer_tensor_with_floats():
    i = minigrad.Tensor([1, 2, 3])
    assert i.dtype == mstype.int64
    assert (i * 0.5).dtype == mstype.float32
    assert (0.5 * i).dtype == mstype.float32
    assert (i * numpy.float64(0.5)).dtype == mstype.float32
    numpy.testing.assert_array_equal((i * 0.5).asnumpy(), [0.5, 1.0, 1.5])
    assert (i * 2).dtype == mstype.int64
    assert (minigrad.Tensor(numpy.array([1, 2], numpy.int32)) * 2).dtype == mstype.int32
    assert (i[:2] + _fp16([0.5, 0.5])).dtype == mstype.float16
    assert (i + minigrad.Tensor([0.5, 0.5, 0.5])).dtype == mstype.float32
    assert (i / 2).dtype == mstype.float32


def test_promote_types():
    assert mstype.promote_types(mstype.int64, mstype.float16) == mstype.float16
    assert mstype.promote_types(mstype.float16, mstype.float32) == mstype.float32
    assert mstype.promote_types(mstype.int32, mstype.int64) == mstype.int64
    assert mstype.promote_types(mstype.bool_, mstype.int32) == mstype.int32


# row: fp16 matmul computes in fp32 and stores fp16
def test_fp16_matmul_accumulates_in_fp32():
    rng = numpy.random.RandomState(0)
    a = rng.uniform(-1, 1, (8, 512)).astype(numpy.float16)
    b = rng.uniform(-1, 1, (512, 8)).astype(numpy.float16)
    out = ops.matmul(minigrad.Tensor(a), minigrad.Tensor(b))
    assert out.dtype == mstype.float16
    expected = (a.astype(numpy.float32) @ b.astype(numpy.float32)).astype(numpy.float16)
    numpy.testing.assert_array_equal(out.asnumpy(), expected)


class _MatmulSpy(numpy.ndarray):
    """An array that records the operand dtypes of every NumPy matmul it takes part in
    (``a @ b`` on arrays is the ``numpy.matmul`` ufunc, which defers to this hook)."""
    calls = []

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc is numpy.matmul:
            _MatmulSpy.calls.append(tuple(x.dtype for x in inputs))
        inputs = [x.view(numpy.ndarray) if isinstance(x, _MatmulSpy) else x for x in inputs]
        return getattr(ufunc, method)(*inputs, **kwargs)


@pytest.mark.parametrize("shapes", [((64, 32), (32, 16)), ((2, 8, 32), (32, 4)), ((32,), (32, 4))],
                         ids=str)
def test_fp16_matmul_never_runs_numpys_fp16_matmul(shapes):
    # NumPy has no fp16 BLAS: its fp16 matmul is a scalar loop ~100x slower than fp32 BLAS.
    # (Timing it here would be flaky; benchmarks/ time it, this checks which path runs.)
    rng = numpy.random.RandomState(0)
    a, b = (minigrad.Tensor(rng.uniform(-1, 1, s).astype(numpy.float16), requires_grad=True)
            for s in shapes)
    a.data, b.data = a.data.view(_MatmulSpy), b.data.view(_MatmulSpy)
    _MatmulSpy.calls.clear()
    out = ops.matmul(a, b)
    out.backward(numpy.ones(out.shape))
    assert len(_MatmulSpy.calls) == 3  # forward and the two input gradients
    assert all(d == numpy.float32 for call in _MatmulSpy.calls for d in call), _MatmulSpy.calls
    assert out.dtype == a.grad.dtype == b.grad.dtype == mstype.float16


def test_fp16_matmul_backward_is_fp16_and_fp32_accumulated():
    rng = numpy.random.RandomState(1)
    a = minigrad.Tensor(rng.uniform(-1, 1, (4, 512)).astype(numpy.float16), requires_grad=True)
    b = minigrad.Tensor(rng.uniform(-1, 1, (512, 4)).astype(numpy.float16), requires_grad=True)
    g = rng.uniform(-1, 1, (4, 4)).astype(numpy.float16)
    ops.matmul(a, b).backward(g)
    assert a.grad.dtype == b.grad.dtype == mstype.float16
    a32, b32, g32 = (x.astype(numpy.float32) for x in (a.asnumpy(), b.asnumpy(), g))
    numpy.testing.assert_array_equal(b.grad.asnumpy(), (a32.T @ g32).astype(numpy.float16))


# row: fp16 sum/mean (and log, softmax, log_softmax) accumulate in fp32, result fp16
def test_fp16_sum_and_mean_accumulate_in_fp32():
    x = minigrad.Tensor(numpy.full(4096, 0.1, numpy.float16))
    exact = 4096 * float(numpy.float16(0.1))
    s, m = x.sum(), x.mean()
    assert s.dtype == m.dtype == mstype.float16
    assert abs(float(s) - exact) <= 0.25  # the fp16 spacing at 409.6
    assert float(m) == float(numpy.float16(0.1))
    naive = numpy.float16(0)
    for _ in range(4096):  # what fp16 accumulation would give: stuck far below
        naive = numpy.float16(naive + numpy.float16(0.1))
    assert abs(float(naive) - exact) > 50


def test_fp16_sum_of_many_ones_beyond_fp16_integer_range():
    with numpy.errstate(over="ignore"):
        s = minigrad.Tensor(numpy.ones(70000, numpy.float16)).sum()
    assert s.dtype == mstype.float16
    assert numpy.isinf(float(s))  # 70000 > 65504: the fp16 result overflows honestly ...
    m = minigrad.Tensor(numpy.ones(70000, numpy.float16)).mean()
    assert float(m) == 1.0  # ... but the mean, accumulated in fp32, is exact


def test_fp16_log_near_one_is_rounded_once():
    x = numpy.float16(1.0) + numpy.arange(1, 20, dtype=numpy.float16) * numpy.float16(2 ** -10)
    out = ops.log(minigrad.Tensor(x))
    assert out.dtype == mstype.float16
    expected = numpy.log(x.astype(numpy.float32)).astype(numpy.float16)
    numpy.testing.assert_array_equal(out.asnumpy(), expected)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_fp16_softmax_family_is_fp16_and_accurate(name):
    fn = getattr(ops, name)
    x = numpy.random.RandomState(0).uniform(-8, 8, (4, 1000)).astype(numpy.float16)
    out = fn(minigrad.Tensor(x), axis=-1)
    assert out.dtype == mstype.float16
    x64 = x.astype(numpy.float64)
    shifted = x64 - x64.max(axis=-1, keepdims=True)
    log_sm = shifted - numpy.log(numpy.exp(shifted).sum(axis=-1, keepdims=True))
    expected = numpy.exp(log_sm) if name == "softmax" else log_sm
    numpy.testing.assert_allclose(
        out.asnumpy().astype(numpy.float64), expected, rtol=2e-3, atol=1e-4
    )


# row: gradient of a tensor -> always that tensor's dtype
@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32, numpy.float64])
def test_gradient_dtype_equals_tensor_dtype(dtype):
    x = minigrad.Tensor(numpy.array([[0.5, 1.5], [2.0, 0.25]], dtype), requires_grad=True)
    w = minigrad.Tensor(numpy.array([[1.0], [-1.0]], numpy.float32), requires_grad=True)
    h = ops.tanh(x * 2.0) + ops.log(x) * numpy.float64(0.5)
    y = ops.matmul(ops.relu(h), w.astype(dtype)).mean() + ops.sqrt(x).max() * x.sum()
    y.backward()
    assert x.grad.dtype == dtype and w.grad.dtype == numpy.float32
    g = minigrad.grad(lambda t: (t * 3.0).sum())(minigrad.Tensor(numpy.ones(2, dtype)))
    assert g.dtype == dtype


def test_fp16_mean_gradient_over_more_elements_than_fp16_can_count():
    x = minigrad.Tensor(numpy.ones(70000, numpy.float16), requires_grad=True)
    with numpy.errstate(over="raise"):
        x.mean().backward()
    assert x.grad.dtype == mstype.float16
    numpy.testing.assert_array_equal(x.grad.asnumpy(), numpy.float16(1 / 70000))


def test_as_dtype_refuses_none_instead_of_returning_float64():
    # numpy.dtype(None) is float64: ops.cast(x, None) silently doubled an fp16 tensor's width.
    with pytest.raises(TypeError, match="dtype must be one of"):
        mstype.as_dtype(None)
    with pytest.raises(TypeError, match="dtype"):
        minigrad.ops.cast(Tensor(numpy.ones(2, numpy.float16)), None)


def test_bool_tensor_with_python_int_is_integer_arithmetic():
    # MindSpore's implicit conversion rules: "when Tensor is bool data type and the scalar is int
    # or float, both ... are converted to the Tensor with the data type of int32 or float32".
    # Tensor([True, False]) + 2 is int32 [3, 2], not bool [True, True] (2 cast to bool, a
    # logical or).
    flags = Tensor(numpy.array([True, False]))
    for value in (2, numpy.int64(2)):
        out = flags + value
        assert out.dtype == mstype.int32
        assert out.asnumpy().tolist() == [3, 2]
    assert (flags * 3).asnumpy().tolist() == [3, 0]
    both = flags + True  # bool with bool stays bool (logical), as NumPy and MindSpore
    assert both.dtype == mstype.bool_ and both.asnumpy().tolist() == [True, True]
    assert (flags + 2.5).dtype == mstype.float32
    assert mstype.weak_dtype(True, mstype.int32) == mstype.int32


def test_a_list_of_floats_beside_an_int_tensor_gives_float32_as_an_array_does():
    """minigrad.dtype's table: int tensor (op) Python float -> float32, and a non-tensor array is
    weak like a scalar. A nested list of floats is such an array, not integers to truncate
    (int tensor [1, 2] + [0.5, 0.5] is float32 [1.5, 2.5], not int64 [1, 2])."""
    i = Tensor(numpy.array([1, 2], numpy.int64))
    for other in ([0.5, 0.5], (0.5, 0.5), [[0.5], [1.5]]):
        expected = i + numpy.asarray(other, F32)
        for result in (i + other, other + i, ops.add(i, other), ops.mul(other, i) * 1):
            assert result.dtype == F32, other
        numpy.testing.assert_array_equal((i + other).asnumpy(), expected.asnumpy())
    assert (i + [1, 2]).dtype == numpy.int64  # integers stay the tensor's dtype
    h = Tensor(numpy.array([1.0, 2.0], F16))
    assert (h + [0.5, 0.25]).dtype == F16 and (h * [[2.0], [3.0]]).dtype == F16  # weak beside fp16
