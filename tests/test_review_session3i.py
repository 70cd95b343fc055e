"""Review of matmul/dense (ops/linalg.py), the fp16 conversion (_fastcast.py), the operand dtype
policy (ops/_util.py) and autocast's op lists (amp/autocast.py) (session 3i)."""
import itertools
import warnings

import numpy
import pytest

import minigrad
from minigrad import Tensor, Parameter, ops
from minigrad import _fastcast
from minigrad.amp import autocast
from minigrad.ops.linalg import matmul, dense
from minigrad.testing import check_backward

F16, F32, F64 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)

# (a shape, b shape): 1-D operands, 2-D, batched, and batch axes that broadcast
SHAPES = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((3,), (5, 3, 4)), ((5, 2, 3), (3,)),
          ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((1, 2, 3), (5, 3, 4)),
          ((4, 1, 2, 3), (5, 3, 4)), ((4, 1, 2, 3), (1, 5, 3, 4)), ((3, 40, 70), (70,)), ((70,), (70, 40))]


def _operands(sa, sb, dtype, transpose_b, strided, seed=0):
    rng = numpy.random.default_rng(seed)
    a = rng.standard_normal(sa).astype(dtype)
    b = rng.standard_normal(sb).astype(dtype)
    b_arg = numpy.ascontiguousarray(numpy.swapaxes(b, -1, -2)) if transpose_b else b
    if strided:  # a non-contiguous a, an F-ordered b
        a = numpy.repeat(a, 2, axis=-1)[..., ::2]
        b_arg = numpy.asfortranarray(b_arg)
    return a, b_arg


@pytest.mark.parametrize("dtype", [F16, F32, F64])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("strided", [False, True])
def test_matmul_forward_is_numpys_product_and_fp16_rounds_the_fp32_product_once(dtype, transpose_b, strided):
    for sa, sb in SHAPES:
        if transpose_b and len(sb) < 2:
            continue
        a, b_arg = _operands(sa, sb, dtype, transpose_b, strided)
        b_view = numpy.swapaxes(b_arg, -1, -2) if transpose_b else b_arg
        if dtype == F16:
            expected = numpy.matmul(a.astype(F32), b_view.astype(F32)).astype(F16)
        else:
            expected = numpy.matmul(a, b_view)
        out = matmul(Tensor(a), Tensor(b_arg), transpose_b=transpose_b).asnumpy()
        assert out.dtype == dtype and out.shape == expected.shape, (sa, sb)
        assert out.tobytes() == numpy.ascontiguousarray(expected).tobytes(), (sa, sb)


@pytest.mark.parametrize("dtype", [F16, F32, F64])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_backward_matches_gradcheck_on_broadcast_and_strided_operands(dtype, transpose_b):
    for (sa, sb), strided in itertools.product(SHAPES[:11], (False, True)):
        if transpose_b and len(sb) < 2:
            continue
        a, b_arg = _operands(sa, sb, dtype, transpose_b, strided, seed=1)
        check_backward(lambda x, y: matmul(x, y, transpose_b=transpose_b), [a, b_arg], dtype=dtype)


@pytest.mark.parametrize("transpose_b", [False, True])
def test_fp16_matmul_gradient_of_a_broadcast_operand_is_summed_in_fp32_and_rounded_once(transpose_b):
    """The gradient of a batch-broadcast fp16 operand is a sum over the batch: summing the fp32
    partial products and rounding once is the fp16 matmul policy. Rounding each partial to fp16
    first overflowed partials of +-80000 (sum 0) to inf - inf = NaN, and rounded twice."""
    a = Tensor(numpy.full((2, 1, 1), 2.0, F16), requires_grad=True)
    b = Tensor(numpy.ones((1, 1), F16), requires_grad=True)
    g = numpy.array([[[40000.0]], [[-40000.0]]], F16)
    matmul(a, b, transpose_b=transpose_b).backward(Tensor(g))
    assert b.grad.dtype == F16 and b.grad.asnumpy().tolist() == [[0.0]]
    # a 1-D a beside a batched b: its gradient sums over the batch too
    v = Tensor(numpy.full((1,), 2.0, F16), requires_grad=True)
    m = Tensor(numpy.ones((2, 1, 1), F16), requires_grad=True)
    matmul(v, m).backward(Tensor(numpy.array([[40000.0], [-40000.0]], F16)))
    assert v.grad.asnumpy().tolist() == [0.0]
    # and in general: bit for bit fp16(Σ of the fp32 products)
    rng = numpy.random.default_rng(3)
    A = rng.standard_normal((64, 3, 5)).astype(F16)
    B = rng.standard_normal((4, 5) if transpose_b else (5, 4)).astype(F16)
    G = rng.standard_normal((64, 3, 4)).astype(F16)
    tb = Tensor(B, requires_grad=True)
    matmul(Tensor(A), tb, transpose_b=transpose_b).backward(Tensor(G))
    gb = (numpy.swapaxes(A.astype(F32), -1, -2) @ G.astype(F32)).sum(axis=0)
    expected = (gb.T if transpose_b else gb).astype(F16)
    numpy.testing.assert_array_equal(tb.grad.asnumpy(), expected)


# ---- the operand dtype policy (ops/_util.py) ----------------------------------------------------
def test_a_list_of_floats_beside_an_int_tensor_gives_float32_as_an_array_does():
    """minigrad.dtype's table: int tensor (op) Python float -> float32, and a non-tensor array is
    weak like a scalar. A nested list of floats is such an array: it was read as integers and
    truncated (int tensor [1, 2] + [0.5, 0.5] gave int64 [1, 2])."""
    i = Tensor(numpy.array([1, 2], numpy.int64))
    for other in ([0.5, 0.5], (0.5, 0.5), [[0.5], [1.5]]):
        expected = (i + numpy.asarray(other, F32))
        for result in (i + other, other + i, ops.add(i, other), ops.mul(other, i) * 1):
            assert result.dtype == F32, other
        numpy.testing.assert_array_equal((i + other).asnumpy(), expected.asnumpy())
    assert (i + [1, 2]).dtype == numpy.int64           # integers stay the tensor's dtype
    h = Tensor(numpy.array([1.0, 2.0], F16))
    assert (h + [0.5, 0.25]).dtype == F16 and (h * [[2.0], [3.0]]).dtype == F16   # weak beside fp16

