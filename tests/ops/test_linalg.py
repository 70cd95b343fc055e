"""matmul and dense (ops/linalg.py): NumPy's product on 1-D, batched and broadcast operands,
fp16 rounding the fp32 product once (forward) and the fp32 sum of a broadcast operand's
gradient once (backward), gradients against the float64 checker."""
import itertools

import numpy
import pytest

from minigrad import Tensor
from minigrad.ops.linalg import dense, matmul
from minigrad.testing import check_backward

F16, F32, F64 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)


# (a shape, b shape): 1-D operands, 2-D, batched, and batch axes that broadcast
SHAPES = [
    ((3,), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((3,), (5, 3, 4)),
    ((5, 2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((1, 2, 3), (5, 3, 4)),
    ((4, 1, 2, 3), (5, 3, 4)),
    ((4, 1, 2, 3), (1, 5, 3, 4)),
    ((3, 40, 70), (70,)),
    ((70,), (70, 40)),
]


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
def test_matmul_forward_is_numpys_product_and_fp16_rounds_the_fp32_product_once(
    dtype, transpose_b, strided
):
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
def test_fp16_matmul_gradient_of_a_broadcast_operand_is_summed_in_fp32_and_rounded_once(
    transpose_b,
):
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


@pytest.mark.parametrize("dtype", [F16, F32, F64])
@pytest.mark.parametrize("lead", [(), (3,), (2, 3)])
def test_dense_over_leading_axes_matches_numpy_and_gradcheck(dtype, lead):
    rng = numpy.random.default_rng(5)
    x = rng.standard_normal(lead + (70, 9)).astype(dtype)
    w = rng.standard_normal((64, 9)).astype(dtype)
    b = rng.standard_normal(64).astype(dtype)
    wide = F32 if dtype == F16 else dtype
    flat = x.reshape(-1, 9).astype(wide)
    expected = (flat @ w.astype(wide).T + b.astype(wide)).astype(dtype).reshape(lead + (70, 64))
    out = dense(Tensor(x), Tensor(w), Tensor(b)).asnumpy()
    assert out.dtype == dtype and out.tobytes() == expected.tobytes()
    check_backward(lambda a, m, c: dense(a, m, c), [x[..., :5, :], w[:4], b[:4]], dtype=dtype)
    check_backward(lambda a, m: dense(a, m), [x[..., :5, :], w[:4]], dtype=dtype)
