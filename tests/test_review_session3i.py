"""Review of matmul/dense (ops/linalg.py), the fp16 conversion (_fastcast.py), the operand dtype
policy (ops/_util.py) and autocast's op lists (amp/autocast.py) (session 3i)."""
import itertools
import warnings

import numpy
import pytest

import minigrad
from minigrad import Tensor, Parameter, ops
from minigrad import _native
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


# ---- _fastcast.convert: astype's bits and memory order --------------------------------------------
def _layouts(x):
    return [x, numpy.asfortranarray(x), x[:, ::2], x.T, x[::3], x[None], x[:0]]


def _same(result, expected):
    return (result.dtype == expected.dtype and result.shape == expected.shape
            and result.strides == expected.strides
            and result.tobytes(order="A") == expected.tobytes(order="A"))


@pytest.mark.parametrize("native", [True, False])
def test_convert_gives_astypes_bits_and_memory_order(native, monkeypatch):
    if not native:
        monkeypatch.setattr(_native.loaded(), "conversions", None)
    rng = numpy.random.default_rng(0)
    x = (rng.standard_normal((120, 80)) * 1e4).astype(F32)   # finite in fp16: the native path runs
    x.flat[:6] = [numpy.inf, -numpy.inf, numpy.nan, -0.0, 1e-8, 6e-5]
    x.view(numpy.uint32).flat[6] = 0x7FC00123  # a NaN payload
    for a in _layouts(x):
        assert _same(_fastcast.convert(a, F16), a.astype(F16))
    h = x.astype(F16)
    for a in _layouts(h):
        assert _same(_fastcast.convert(a, F32), a.astype(F32))
    for a in (x, numpy.asfortranarray(x)):
        out = numpy.empty_like(a, dtype=F16)
        assert _fastcast.convert(a, F16, out=out) is out and out.tobytes("A") == a.astype(F16).tobytes("A")
    out = numpy.empty(x.shape, F16, order="F")     # another order than x: still right
    _fastcast.convert(x, F16, out=out)
    numpy.testing.assert_array_equal(out.view(numpy.uint16), x.astype(F16).view(numpy.uint16))


def test_convert_warns_and_raises_as_astype_under_errstate():
    x = numpy.ones((100, 80), F32)
    x[7, 7] = 1e6         # fp16 overflow
    x[8, 8] = 1e-7        # an inexact fp16 subnormal: underflow
    for setting in ("warn", "raise", "ignore"):
        for key in ("over", "under"):
            with numpy.errstate(**{key: setting}):
                outcomes = []
                for fn in (lambda: _fastcast.convert(x, F16), lambda: x.astype(F16)):
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        try:
                            fn()
                            outcomes.append(sorted(str(w.message) for w in caught))
                        except FloatingPointError as e:
                            outcomes.append(str(e))
                assert outcomes[0] == outcomes[1], (key, setting)


# ---- autocast: the lists, nesting, and differentiable casts -----------------------------------------
def test_autocast_lists_and_gradients_in_the_inputs_dtypes():
    rng = numpy.random.default_rng(2)
    x = Tensor(rng.standard_normal((4, 3)).astype(F32), requires_grad=True)
    w = Parameter(rng.standard_normal((2, 3)).astype(F32), name="w")
    b = Parameter(numpy.zeros(2, F32), name="b")
    h = Tensor(rng.standard_normal((4, 2)).astype(F16), requires_grad=True)
    d = Tensor(rng.standard_normal((3, 2)), requires_grad=True)            # float64: not eligible
    with autocast():
        y = dense(x, w, b)                         # MindSpore white list / PyTorch linear: fp16
        m = matmul(x, Tensor(numpy.ones((3, 2), F32)))
        r = ops.relu(y)                            # unlisted: follows its input
        s = ops.softmax(h)                         # fp32 list
        e, lg = ops.exp(h), ops.log(ops.abs(h) + 1)
        total = ops.sum(r * s + h)                 # fp16 * fp32 promotes; sum in fp32
        q = matmul(x, d)                           # float64 stays float64
    assert (y.dtype, m.dtype, r.dtype) == (F16, F16, F16)
    assert (s.dtype, e.dtype, lg.dtype, total.dtype) == (F32, F32, F32, F32)
    assert q.dtype == F64
    (total + ops.sum(q)).backward()
    assert (x.grad.dtype, w.grad.dtype, b.grad.dtype, h.grad.dtype, d.grad.dtype) == (F32, F32, F32, F16, F64)
    # the casts are differentiated: the same graph without autocast, with the casts written out
    x2, w2, b2 = (Tensor(t.asnumpy(), requires_grad=True) for t in (x, w, b))
    y2 = dense(ops.cast(x2, F16), ops.cast(w2, F16), ops.cast(b2, F16))
    ops.sum(ops.relu(y2)).backward()
    x.grad = w.grad = None
    with autocast():
        ops.sum(ops.relu(dense(x, w, b))).backward()
    numpy.testing.assert_array_equal(w.grad.asnumpy(), w2.grad.asnumpy())
    numpy.testing.assert_array_equal(x.grad.asnumpy(), x2.grad.asnumpy())


def test_autocast_nesting_reentry_and_arguments():
    cfg = minigrad._config.config
    outer = autocast()
    with outer:
        with autocast(enabled=False):
            assert cfg.autocast_dtype is None
            with autocast(dtype="float16"):
                assert cfg.autocast_dtype == F16
            assert cfg.autocast_dtype is None
        with outer:                                # the same object entered twice
            assert cfg.autocast_dtype == F16
        assert cfg.autocast_dtype == F16
    assert cfg.autocast_dtype is None
    with pytest.raises(ValueError):
        with autocast():
            raise ValueError("inside")
    assert cfg.autocast_dtype is None              # restored on an exception
    for bad in (numpy.float32, numpy.float64, "int32"):
        with pytest.raises(TypeError, match="'dtype' must be float16"):
            autocast(dtype=bad)
    for bad in (1, None, "yes"):
        with pytest.raises(TypeError, match="'enabled' must be a bool"):
            autocast(enabled=bad)
