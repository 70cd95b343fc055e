"""dropout, embedding, creation ops, the seeded RNG, and the MindSpore primitive classes."""
import numpy
import pytest

import minigrad
from helpers.fp16 import F16, F32, assert_bits, grads, nchw
from minigrad import Tensor, nn, ops
from minigrad.random import get_rng
from minigrad.testing import assert_forward, check_backward, noncontiguous

# ---- random and dropout -------------------------------------------------------------------------

def test_set_seed_makes_draws_repeat():
    minigrad.set_seed(7)
    first = get_rng(numpy).random(5)
    minigrad.set_seed(7)
    numpy.testing.assert_array_equal(get_rng(numpy).random(5), first)
    assert minigrad.get_seed() == 7
    with pytest.raises(TypeError, match="seed must be a non-negative int"):
        minigrad.set_seed(1.5)
    with pytest.raises(ValueError, match="got -1"):
        minigrad.set_seed(-1)


def test_dropout_scales_kept_values_and_reuses_the_mask(dtype, device):
    x = minigrad.Tensor(numpy.full((50, 40), 2.0, dtype), requires_grad=True, device=device)
    minigrad.set_seed(0)
    out = ops.dropout(x, p=0.25)
    values = out.asnumpy()
    assert out.dtype == dtype
    numpy.testing.assert_array_equal(values[values != 0], dtype.type(2) * dtype.type(1 / 0.75))
    assert abs((values == 0).mean() - 0.25) < 0.05
    out.backward(numpy.ones((50, 40), dtype))
    numpy.testing.assert_array_equal(x.grad.asnumpy() == 0, values == 0)
    minigrad.set_seed(0)
    numpy.testing.assert_array_equal(ops.dropout(x, p=0.25).asnumpy(), values)


def test_dropout_gradient_matches_a_fixed_mask():
    x = numpy.random.RandomState(0).standard_normal((4, 5))

    def fn(t):
        minigrad.set_seed(3)   # the same mask in every evaluation of the checker
        return ops.dropout(t, p=0.5)
    check_backward(fn, [x])
    check_backward(fn, [noncontiguous(x).astype(numpy.float32)])


def test_dropout_identity_and_errors():
    x = minigrad.Tensor(numpy.ones(3, numpy.float32))
    assert ops.dropout(x, 0.5, training=False) is x and ops.dropout(x, 0.0) is x
    for p in (1.0, -0.1):
        with pytest.raises(ValueError, match=r"^dropout: p must be a finite float in \[0.0,"
            r" 1.0\), got"):
            ops.dropout(x, p)


# ---- embedding -----------------------------------------------------------------------------------

def test_embedding_gathers_and_scatter_adds(dtype, device):
    table = numpy.random.RandomState(0).standard_normal((5, 3)).astype(dtype)
    ids = numpy.array([[0, 2, 2], [4, 0, 2]])
    out = ops.embedding(minigrad.Tensor(ids, device=device), minigrad.Tensor(table, device=device))
    assert out.shape == (2, 3, 3) and out.dtype == dtype
    assert_forward(out, table[ids].astype(numpy.float64), dtype)
    check_backward(lambda i, t: ops.embedding(i, t), [ids, minigrad.Tensor(table, device=device)])
    t = minigrad.Tensor(table, requires_grad=True, device=device)
    ops.embedding(ids, t).sum().backward()
    numpy.testing.assert_array_equal(t.grad.asnumpy()[:, 0], [2, 0, 3, 0, 1])   # repeated ids add


def test_embedding_errors():
    table = minigrad.Tensor(numpy.zeros((4, 2), numpy.float32))
    with pytest.raises(TypeError, match=r"ids must be an integer .*, not of dtype float64, got"):
        ops.embedding(numpy.array([1.0]), table)
    with pytest.raises(IndexError, match=r"id 4 is out of range for a table of 4 rows"):
        ops.embedding(numpy.array([0, 4]), table)
    with pytest.raises(IndexError, match=r"id -1 is out of range"):
        ops.embedding(numpy.array([-1]), table)
    with pytest.raises(ValueError, match="table must be 2-D"):
        ops.embedding(numpy.array([0]), minigrad.Tensor(numpy.zeros(4, numpy.float32)))


# ---- creation ------------------------------------------------------------------------------------

def test_creation_defaults_and_devices():
    assert ops.zeros((2, 3)).dtype == numpy.float32 and ops.ones(4).shape == (4,)
    assert ops.full((2,), 3).dtype == numpy.int64 and ops.full((2,), 1.5).dtype == numpy.float32
    assert ops.full((2,), 1.5, minigrad.float16).asnumpy().tolist() == [1.5, 1.5]
    like = minigrad.Tensor(numpy.ones((2, 2), numpy.float16), requires_grad=True)
    z = ops.zeros_like(like)
    assert z.dtype == numpy.float16 and not z.requires_grad and z.asnumpy().sum() == 0
    assert ops.ones_like(like, minigrad.float32).dtype == numpy.float32
    assert ops.arange(4).asnumpy().tolist() == [0, 1, 2, 3] and ops.arange(4).dtype == numpy.int64
    assert ops.arange(0, 1, 0.25).dtype == numpy.float32
    with pytest.raises(ValueError, match="non-negative ints, got"):
        ops.zeros((2, -1))
    with pytest.raises(ValueError, match="step must be non-zero"):
        ops.arange(0, 3, 0)


def test_square(dtype, device):
    x = numpy.random.RandomState(0).standard_normal((3, 4)).astype(dtype)
    expected = x.astype(numpy.float64) ** 2
    assert_forward(ops.square(minigrad.Tensor(x, device=device)), expected, dtype)
    check_backward(ops.square, [minigrad.Tensor(x, device=device)])
    check_backward(ops.square, [x.T])


# ---- primitives ----------------------------------------------------------------------------------


def test_primitives_call_their_ops():
    rng = numpy.random.RandomState(0)
    a, b = (
        rng.standard_normal((2, 3)).astype(numpy.float32),
        rng.standard_normal((4, 3)).astype(numpy.float32),
    )
    ta, tb = minigrad.Tensor(a), minigrad.Tensor(b)
    close = numpy.testing.assert_allclose
    close(ops.MatMul(transpose_b=True)(ta, tb).asnumpy(), a @ b.T, rtol=1e-5)
    close(ops.MatMul(transpose_a=True)(ta, ta).asnumpy(), a.T @ a, rtol=1e-5)
    close(ops.BatchMatMul(False, True)(ta[None], tb[None]).asnumpy(), (a @ b.T)[None], rtol=1e-5)
    assert ops.Cast()(ta, minigrad.float16).dtype == numpy.float16
    close(ops.ReduceSum()(ta).asnumpy(), a.sum(), rtol=1e-5)
    assert ops.ReduceMean(keep_dims=True)(ta, 1).shape == (2, 1)
    close(ops.ReduceMax()(ta, (0, 1)).asnumpy(), a.max())
    close(ops.ReduceMin()(ta, 0).asnumpy(), a.min(0))
    assert ops.Reshape()(ta, (3, 2)).shape == (3, 2) and ops.Transpose()(ta, (1, 0)).shape == (3, 2)
    assert ops.ExpandDims()(ta, 0).shape == (1, 2, 3) and ops.Squeeze()(ta[None]).shape == (2, 3)
    assert ops.Squeeze(0)(ta[None]).shape == (2, 3)
    assert ops.Concat(1)((ta, ta)).shape == (2, 6) and ops.Stack()((ta, ta)).shape == (2, 2, 3)
    assert [p.shape for p in ops.Split(1, 3)(ta)] == [(2, 1)] * 3
    close(ops.Softmax()(ta).asnumpy().sum(-1), 1, rtol=1e-6)
    close(ops.LogSoftmax(0)(ta).asnumpy(), ops.log_softmax(ta, 0).asnumpy())
    for name, ref in [
        ("ReLU", lambda x: numpy.maximum(x, 0)),
        ("Tanh", numpy.tanh),
        ("Exp", numpy.exp),
        ("Abs", numpy.abs),
        ("Neg", numpy.negative),
        ("Square", numpy.square),
    ]:
        close(getattr(ops, name)()(ta).asnumpy(), ref(a), rtol=1e-6)
    close(ops.GeLU()(ta).asnumpy(), ops.gelu(ta).asnumpy())
    for name, ref in [
        ("Add", numpy.add),
        ("Sub", numpy.subtract),
        ("Mul", numpy.multiply),
        ("RealDiv", numpy.divide),
        ("Div", numpy.divide),
        ("Maximum", numpy.maximum),
        ("Minimum", numpy.minimum),
    ]:
        close(getattr(ops, name)()(ta, 2.0).asnumpy(), ref(a, 2.0), rtol=1e-6)
    close(ops.Select()(a > 0, ta, ta * 0).asnumpy(), numpy.where(a > 0, a, 0))
    assert ops.Fill()(minigrad.float16, (2, 2), 3.0).dtype == numpy.float16
    assert ops.Ones()((2,), minigrad.int32).dtype == numpy.int32 and ops.Zeros()((2,)).shape == (2,)
    assert ops.OnesLike()(ta).shape == (2, 3) and ops.ZerosLike()(ta).asnumpy().sum() == 0
    assert ops.Shape()(ta) == (2, 3) and ops.DType()(ta) == minigrad.float32
    close(ops.Gather()(tb, numpy.array([2, 0]), 0).asnumpy(), b[[2, 0]])
    close(ops.Gather()(tb, numpy.array([1]), 1).asnumpy(), b[:, [1]])
    assert "keep_dims=True" in repr(ops.ReduceSum(keep_dims=True))
    assert ops.Flatten()(ta[None]).shape == (1, 6)
    assert ops.Argmax()(ta).asnumpy().tolist() == a.argmax(-1).tolist()
    assert ops.Argmax(axis=0, output_type=minigrad.int64)(ta).dtype == numpy.int64
    for name, ref in [
        ("Equal", numpy.equal),
        ("NotEqual", numpy.not_equal),
        ("Less", numpy.less),
        ("LessEqual", numpy.less_equal),
        ("Greater", numpy.greater),
        ("GreaterEqual", numpy.greater_equal),
    ]:
        numpy.testing.assert_array_equal(getattr(ops, name)()(ta, 0.0).asnumpy(), ref(a, 0.0))
    hot = ops.OneHot()(
        minigrad.Tensor(numpy.array([2, 0])), 3, minigrad.Tensor(1.0), minigrad.Tensor(0.0)
    )
    numpy.testing.assert_array_equal(hot.asnumpy(), [[0, 0, 1], [1, 0, 0]])
    assert hot.dtype == numpy.float32
    assert ops.OneHot(axis=0)(numpy.array([2, 0]), 3).shape == (3, 2)


@pytest.mark.parametrize(
    "pad_mode,pad,expected_hw",
    [("valid", 0, (3, 2)), ("same", 0, (5, 4)), ("pad", (1, 1, 0, 0), (5, 2))],
)
def test_conv2d_primitive_pad_modes(pad_mode, pad, expected_hw):
    x = numpy.random.RandomState(0).standard_normal((1, 2, 5, 4)).astype(numpy.float32)
    w = numpy.random.RandomState(1).standard_normal((3, 2, 3, 3)).astype(numpy.float32)
    conv = ops.Conv2D(out_channel=3, kernel_size=3, pad_mode=pad_mode, pad=pad)
    out = conv(minigrad.Tensor(x), minigrad.Tensor(w))
    assert out.shape == (1, 3) + expected_hw
    padding = {"valid": 0, "same": ops.same_padding((5, 4), 3), "pad": pad}[pad_mode]
    numpy.testing.assert_allclose(out.asnumpy(), ops.conv2d(x, w, padding=padding).asnumpy())
    with pytest.raises(ValueError, match=r"out_channel=4.*weight of shape \(3, 2, 3, 3\)"):
        ops.Conv2D(4, 3)(minigrad.Tensor(x), minigrad.Tensor(w))
    with pytest.raises(ValueError, match="pad_mode must be"):
        ops.Conv2D(3, 3, pad_mode="full")(minigrad.Tensor(x), minigrad.Tensor(w))


def test_pool_primitives():
    x = minigrad.Tensor(numpy.arange(25, dtype=numpy.float32).reshape(1, 1, 5, 5))
    assert ops.MaxPool(2, 2)(x).shape == (1, 1, 2, 2)
    same = ops.MaxPool(kernel_size=2, strides=2, pad_mode="same")(x)
    assert same.shape == (1, 1, 3, 3) and same.asnumpy()[0, 0, 2, 2] == 24
    avg = ops.AvgPool(kernel_size=2, strides=2, pad_mode="same")(x).asnumpy()
    assert avg[0, 0, 2, 2] == 24  # the padding is not counted


def test_one_hot_stays_on_the_ids_device(device):
    # on/off given as Python numbers are made on the default device (CPU here)
    ids = minigrad.Tensor(numpy.array([2, 0]), device=device)
    hot = ops.OneHot()(ids, 3, 1.0, 0.0)
    assert hot.device == device and hot.dtype == numpy.float32
    numpy.testing.assert_array_equal(hot.asnumpy(), [[0, 0, 1], [1, 0, 0]])


def _x(shape=(2, 3)):
    return minigrad.Tensor(numpy.arange(numpy.prod(shape), dtype=numpy.float32).reshape(shape))


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: ops.dropout(_x(), p="0.5"), "p"),
        (lambda: ops.dropout(_x(), p=None), "p"),
        (lambda: ops.leaky_relu(_x(), alpha="a"), "alpha"),
        (lambda: ops.split(_x(), 1.5, axis=1), "sections_or_indices"),
        (lambda: ops.split(_x(), [1.5], axis=1), "sections_or_indices"),
    ],
)
def test_argument_of_the_wrong_type_is_a_type_error_naming_it(call, name):
    # not "'<=' not supported between 'int' and 'str'", "could not convert string to float",
    # "'float' object is not iterable" or a silent int(1.5) cut
    with pytest.raises(TypeError, match=rf"\b{name}\b.*got"):
        call()


def dropout_pair(x, p, seed=7):
    """The op's output on x and, under the same seed, the mask it drew (from an input of ones)."""
    with numpy.errstate(over="ignore"):  # kept values beyond 65504 / scale are inf, as NumPy's fp16
        minigrad.set_seed(seed)
        out = ops.dropout(Tensor(x), p=p).asnumpy()
        minigrad.set_seed(seed)
        keep = ops.dropout(Tensor(numpy.ones_like(x)), p=p).asnumpy() != 0
    return out, keep


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.75, 0.99999])
def test_dropout_fp16_is_x_times_the_fp32_scale_rounded_once(p):
    rng = numpy.random.default_rng(0)
    x = nchw(rng, (50, 400))
    x[0, :8] = [0, -0.0, 2**-24, 65504, -65504, 0.01, 1e-3, 0]
    out, keep = dropout_pair(x, p)
    scale = F32.type(1 / (1 - p))
    with numpy.errstate(over="ignore"):
        rule = (x.astype(F32) * numpy.where(keep, scale, F32.type(0))).astype(F16)  # -x dropped: -0
    assert_bits(out, rule)
    assert abs(keep.mean() - (1 - p)) < 0.02 + 4 * numpy.sqrt(p * (1 - p) / keep.size)
    # the backward uses the same mask and the same rule
    minigrad.set_seed(7)
    t = Tensor(x, requires_grad=True)
    with numpy.errstate(over="ignore"):
        ops.dropout(t, p=p).backward(Tensor(x))
    assert_bits(t.grad.asnumpy(), rule)


def test_dropout_near_one_keeps_finite_values():
    # p = 0.99999: kept values are x·1e5 (0.01 -> 1000); the scale 1e5 in fp16 is inf
    # (and 0·inf NaN)
    x = numpy.full(200000, 0.01, F16)
    x[::2] = 0
    out, keep = dropout_pair(x, 0.99999, seed=3)
    assert keep.any()
    assert numpy.isfinite(out).all()
    assert_bits(out[keep], (x[keep].astype(F32) * F32.type(1e5)).astype(F16))


def test_dropout_layer_keep_prob_and_empty():
    x = nchw(numpy.random.default_rng(1), (64, 64))
    layer = nn.Dropout(keep_prob=0.9).set_train()
    minigrad.set_seed(5)
    got = layer(Tensor(x)).asnumpy()
    minigrad.set_seed(5)
    assert_bits(got, ops.dropout(Tensor(x), p=1 - 0.9).asnumpy())
    keep = got != 0
    assert_bits(got[keep], (x[keep].astype(F32) * F32.type(1 / 0.9)).astype(F16))
    assert ops.dropout(Tensor(numpy.zeros((0, 3), F16)), 0.5).shape == (0, 3)


def test_embedding_gradient_of_many_repeated_ids_accumulates_in_fp32():
    # 70000 ids 0 with g = 2^-10: Σ = 68.359375 exactly (an fp16 running sum stalls at 64)
    tab = numpy.zeros((3, 2), F16)
    (gt,) = grads(
        lambda t: ops.embedding(numpy.zeros(70000, numpy.int64), t),
        [tab],
        numpy.full((70000, 2), 2**-10, F16),
    )
    assert_bits(gt, numpy.array([[70000 / 1024] * 2, [0, 0], [0, 0]], F16))
    # 60000 + 60000 - 60000 and subnormals 3·2^-24 (no overflow, no flush)
    ids = numpy.array([[0, 2], [0, 2], [0, 2]])
    g = numpy.zeros((3, 2, 2), F16)
    g[:, 0, 0] = [60000, 60000, -60000]
    g[:, 1, 1] = 2**-24
    (gt,) = grads(lambda t: ops.embedding(ids, t), [tab], g)
    assert_bits(gt, numpy.array([[60000, 0], [0, 0], [0, 3 * 2**-24]], F16))
    # nn.Embedding: gather and one-hot paths agree (the one-hot path through the matmul rule)
    rng = numpy.random.default_rng(0)
    ids = Tensor(rng.integers(0, 5, (4, 3)))
    for one_hot in (False, True):
        layer = nn.Embedding(5, 4, use_one_hot=one_hot)
        layer.embedding_table.set_data(Tensor(nchw(rng, (5, 4))))
        out = layer(ids).asnumpy()
        assert_bits(out, layer.embedding_table.asnumpy()[ids.asnumpy()])
