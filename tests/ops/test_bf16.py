"""bfloat16 follows the fp16 compute rule: matmul, dense, conv2d, the reductions, softmax,
log_softmax, the norms and the losses accumulate in float32 and round once to bfloat16.

Each op against a float64 NumPy reference on the same bf16 inputs, with its output dtype asserted
(NumPy 2's promotion would silently give float32: ``bf16 @ bf16`` is float32 in NumPy), and its
gradient against the float64 checker at bf16's tolerance. FP8 tensors are refused by every op
that computes.
"""
import numpy
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import minigrad  # noqa: E402
from minigrad import Tensor, nn, ops  # noqa: E402
from minigrad import dtype as mstype  # noqa: E402
from minigrad.testing import check_backward  # noqa: E402

BF16, F32 = mstype.bfloat16, mstype.float32
HALF_ULP = 2.0 ** -8  # one rounding to bf16 (8 significant bits) errs by at most this, relatively


def rand(shape, seed, low=-2.0, high=2.0):
    return numpy.random.default_rng(seed).uniform(low, high, shape).astype(BF16)


def f64(x):
    return numpy.asarray(x.data if isinstance(x, Tensor) else x).astype(numpy.float64)


def assert_rounded_once(got, want, scale=None):
    """``got`` is a bf16 Tensor holding ``want`` (exact, float64) rounded once: within half a
    bf16 ulp of it, plus the float32 accumulation's error (``scale``: the magnitude the sums ran
    over, e.g. |a| @ |b| for a product)."""
    assert got.dtype == BF16, got.dtype
    want = numpy.asarray(want, numpy.float64)
    scale = numpy.abs(want) if scale is None else scale
    err = numpy.abs(f64(got) - want)
    bound = HALF_ULP * numpy.abs(want) + 2.0 ** -20 * scale + 1e-30
    assert (err <= bound).all(), float((err - bound).max())


# ---- forward: one rounding of the exact result ----------------------------------------------
def test_matmul_and_dense():
    a, b, bias = rand((5, 64), 1), rand((64, 7), 2), rand((7,), 3)
    got = ops.matmul(Tensor(a), Tensor(b))
    assert_rounded_once(got, f64(a) @ f64(b), numpy.abs(f64(a)) @ numpy.abs(f64(b)))
    got = ops.dense(Tensor(a), Tensor(b.T.copy()), Tensor(bias))
    want = f64(a) @ f64(b) + f64(bias)
    assert_rounded_once(got, want, numpy.abs(f64(a)) @ numpy.abs(f64(b)) + abs(f64(bias)))
    assert (Tensor(a) @ Tensor(b)).dtype == BF16  # the operator too (NumPy alone: float32)
    batched = ops.matmul(Tensor(rand((3, 4, 8), 4)), Tensor(rand((8, 2), 5)))
    assert batched.dtype == BF16 and batched.shape == (3, 4, 2)


def test_conv2d():
    x, w, b = rand((2, 3, 6, 6), 6), rand((4, 3, 3, 3), 7), rand((4,), 8)
    got = ops.conv2d(Tensor(x), Tensor(w), Tensor(b), padding=1)
    with minigrad.no_grad():
        want = ops.conv2d(Tensor(f64(x)), Tensor(f64(w)), Tensor(f64(b)), padding=1).data
        scale = ops.conv2d(Tensor(numpy.abs(f64(x))), Tensor(numpy.abs(f64(w))),
                           Tensor(numpy.abs(f64(b))), padding=1).data
    assert_rounded_once(got, want, scale)


def test_reductions_accumulate_in_float32():
    # the trap: a bf16 running sum of 10 000 values in [0, 1) stalls at 256 (256 + 1 rounds back
    # to 256); minigrad's sum runs in float32 and rounds once
    x = numpy.random.default_rng(9).uniform(0, 1, 10_000).astype(BF16)
    assert float(numpy.add.reduce(x, dtype=BF16)) < 300  # NumPy's own bf16 loop (no pairwise)
    for fn, want in ((ops.sum, f64(x).sum()), (ops.mean, f64(x).mean())):
        assert_rounded_once(fn(Tensor(x)), want, 2.0 ** -4 * abs(want))
    y = rand((6, 50), 10)
    assert_rounded_once(ops.sum(Tensor(y), axis=1), f64(y).sum(axis=1), numpy.abs(f64(y)).sum(1))
    assert_rounded_once(ops.mean(Tensor(y), axis=0, keepdims=True),
                        f64(y).mean(axis=0, keepdims=True), numpy.abs(f64(y)).mean(0, keepdims=1))
    assert ops.max(Tensor(y), axis=1).dtype == BF16


def test_softmax_log_softmax_and_transcendentals():
    x = rand((4, 10), 11, -30, 30)
    e = numpy.exp(f64(x) - f64(x).max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    assert_rounded_once(ops.softmax(Tensor(x), axis=1), p, p + 2.0 ** -12)
    assert_rounded_once(ops.log_softmax(Tensor(x), axis=1), numpy.log(p), numpy.abs(numpy.log(p)))
    z = rand((50,), 12, 0.1, 4)
    for fn, ref in ((ops.exp, numpy.exp), (ops.log, numpy.log), (ops.sqrt, numpy.sqrt),
                    (ops.tanh, numpy.tanh), (ops.sigmoid, lambda v: 1 / (1 + numpy.exp(-v)))):
        assert_rounded_once(fn(Tensor(z)), ref(f64(z)), numpy.abs(ref(f64(z))) + 2.0 ** -14)


def test_elementwise_stay_bf16_with_python_numpy_and_int_operands():
    t = Tensor(rand((8,), 13))
    for out in (t + 1.5, 1.5 * t, t - numpy.float32(2), t / numpy.float64(3), t ** 2,
                t * numpy.array(2.0), t + Tensor(numpy.arange(8)), ops.relu(t), -t, abs(t),
                ops.maximum(t, 0.5), ops.square(t), ops.gelu(t), ops.clip(t, -1, 1)):
        assert out.dtype == BF16, out.dtype
    assert (t + Tensor(rand((8,), 14).astype(F32))).dtype == F32  # the wider float wins
    assert (t + Tensor(numpy.ones(8, numpy.float16))).dtype == F32  # as NumPy and PyTorch
    assert_rounded_once(t * t, f64(t) ** 2)
    assert_rounded_once(t / 3.0, f64(t) / f64(numpy.asarray(3.0, BF16)))


def test_norms_compute_in_float32():
    x, g, b = rand((4, 16), 15), rand((16,), 16, 0.5, 1.5), rand((16,), 17)
    got = ops.layer_norm(Tensor(x), Tensor(g), Tensor(b))
    xs = f64(x)
    norm = (xs - xs.mean(1, keepdims=True)) / numpy.sqrt(xs.var(1, keepdims=True) + 1e-5)
    want = norm * f64(g) + f64(b)
    assert_rounded_once(got, want, numpy.abs(norm * f64(g)) + numpy.abs(f64(b)))
    bn = nn.BatchNorm2d(3)
    bn.to_float(BF16)
    y = bn(Tensor(rand((4, 3, 2, 2), 18)))
    assert y.dtype == BF16 and bn.moving_mean.dtype == F32


def test_losses_return_float32():
    logits, labels = rand((6, 5), 19), numpy.array([0, 1, 2, 3, 4, 0], numpy.int32)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    t = Tensor(logits, requires_grad=True)
    out = loss(t, Tensor(labels))
    assert out.dtype == F32
    z = f64(logits)
    lse = numpy.log(numpy.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    numpy.testing.assert_allclose(float(out.asnumpy()), (lse - z[range(6), labels]).mean(),
                                  rtol=1e-6)
    out.backward()
    assert t.grad.dtype == BF16
    assert nn.MSELoss()(Tensor(logits), Tensor(logits)).dtype == F32


# ---- gradients against the float64 checker, in bf16 ------------------------------------------
GRADIENT_CASES = [
    ("matmul", lambda a, b: ops.matmul(a, b), [(3, 8), (8, 4)]),
    ("dense", lambda x, w, b: ops.dense(x, w, b), [(3, 8), (4, 8), (4,)]),
    ("conv2d", lambda x, w: ops.conv2d(x, w, padding=1), [(1, 2, 4, 4), (3, 2, 3, 3)]),
    ("sum", lambda x: ops.sum(x, axis=1), [(4, 6)]),
    ("mean", lambda x: ops.mean(x), [(4, 6)]),
    ("softmax", lambda x: ops.softmax(x, axis=-1), [(3, 5)]),
    ("log_softmax", lambda x: ops.log_softmax(x, axis=-1), [(3, 5)]),
    ("layer_norm", lambda x, g, b: ops.layer_norm(x, g, b), [(3, 6), (6,), (6,)]),
    ("mul_broadcast", lambda a, b: a * b, [(4, 5), (5,)]),
    ("div", lambda a, b: a / (b * b + 1), [(4, 5), (4, 5)]),
    ("tanh_exp", lambda x: ops.tanh(x) + ops.exp(x * 0.5), [(6,)]),
]


@pytest.mark.parametrize("name,fn,shapes", GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES])
def test_gradients_in_bf16(name, fn, shapes):
    inputs = [rand(s, 20 + i, -1, 1) for i, s in enumerate(shapes)]
    check_backward(fn, inputs, dtype=BF16)  # also asserts each gradient is bf16


def test_loss_gradient_in_bf16():
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    labels = numpy.array([1, 0, 3], numpy.int32)
    check_backward(lambda z: loss(z, Tensor(labels)), [rand((3, 4), 30, -1, 1)], dtype=BF16)


# ---- FP8: storage only ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_tensors_refuse_computing_ops_and_allow_storage_ops(name):
    t = Tensor([[1.0, -2.0], [0.5, 448.0]]).astype(name)
    for op, run in (("Add", lambda: t + t), ("Mul", lambda: t * 2.0), ("exp", lambda: ops.exp(t)),
                    ("Sum", lambda: ops.sum(t)), ("MatMul", lambda: t @ t),
                    ("div", lambda: t / 2), ("softmax", lambda: ops.softmax(t)),
                    ("ReLU", lambda: ops.relu(t))):
        with pytest.raises(TypeError, match=f"{op} does not compute on {name} tensors"):
            run()
    for out in (t.reshape(4), t.T, t[0], ops.concat([t, t]), ops.stack([t, t]),
                ops.broadcast_to(t[0], (3, 2))):
        assert out.dtype == numpy.dtype(name)
    back = t.astype(F32)
    assert back.dtype == F32 and float(back.asnumpy()[1, 1]) == 448.0


def test_relu_on_bit_patterns_is_numpys_maximum():
    """bf16 ReLU runs on the int16 bit patterns: the bits of numpy.maximum(x, 0) (+0 for
    negatives and -0, NaNs of either sign kept), and the gradient passes where x > 0."""
    bits = numpy.arange(0, 1 << 16, dtype=numpy.uint32).astype(numpy.uint16)
    x = bits.view(BF16)
    t = Tensor(x, requires_grad=True)
    out = ops.relu(t)
    want = numpy.where(numpy.isnan(x) | (x > 0), x, numpy.zeros_like(x))
    assert out.dtype == BF16
    numpy.testing.assert_array_equal(out.data.view(numpy.uint16), want.view(numpy.uint16))
    g = numpy.ones(x.shape, BF16)
    out.backward(Tensor(g))
    assert t.grad.dtype == BF16
    numpy.testing.assert_array_equal(f64(t.grad), (x > 0).astype(numpy.float64))


def test_attention_in_bf16():
    q, k, v = (rand((2, 3, 4), 40 + i, -1, 1) for i in range(3))
    out = ops.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), is_causal=True)
    assert out.dtype == BF16
    s = f64(q) @ f64(k).swapaxes(-1, -2) / 2.0  # scaled by 1/sqrt(4)
    s = numpy.where(numpy.triu(numpy.ones((3, 3), bool), 1), -numpy.inf, s)
    w = numpy.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    assert_rounded_once(out, w @ f64(v), w @ numpy.abs(f64(v)))
    check_backward(lambda a, b, c: ops.scaled_dot_product_attention(a, b, c, is_causal=True),
                   [q, k, v], dtype=BF16)
    layer = nn.MultiheadAttention(4, 2)
    layer.to_float(BF16)
    assert layer(Tensor(q), Tensor(k), Tensor(v))[0].dtype == BF16


@pytest.mark.requires_native
def test_cast_between_float32_and_bfloat16_runs_the_native_twin(monkeypatch):
    """``Tensor.astype``/``ops.cast`` to bfloat16 and back, and the cast's gradient, take the
    native conversion for a large dense array and give ml_dtypes' ``astype`` bits."""
    from minigrad import _native
    from minigrad._fp16_host import MIN_SIZE

    fns = {pair: fn for pair, fn in (_native.loaded().conversions or {}).items() if BF16 in pair}
    if not fns:
        pytest.skip("the host library has no bfloat16 conversion")
    calls = []
    monkeypatch.setattr(_native.loaded(), "conversions",
                        {pair: (lambda pair, fn: lambda *a: calls.append(pair) or fn(*a))(pair, fn)
                         for pair, fn in fns.items()})
    rng = numpy.random.default_rng(11)
    x = (rng.standard_normal((MIN_SIZE // 64, 64)) * 1e3).astype(F32)
    x.flat[:4] = [numpy.inf, -0.0, 1e-40, numpy.nan]
    t = Tensor(x, requires_grad=True)
    low = t.astype(BF16)
    assert low.dtype == BF16 and low.data.tobytes() == x.astype(BF16).tobytes()
    back = ops.cast(low, F32)
    assert back.data.tobytes() == x.astype(BF16).astype(F32).tobytes()
    g = rng.standard_normal(x.shape).astype(BF16)
    ops.sum(ops.cast(t, BF16) * Tensor(g)).backward()  # the gradient is cast back to float32
    assert t.grad.dtype == F32 and t.grad.data.tobytes() == g.astype(F32).tobytes()
    assert (F32, BF16) in calls and (BF16, F32) in calls
