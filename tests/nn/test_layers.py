"""nn layers against NumPy references, layer-level gradient checks, and argument errors."""
import math

import numpy
import pytest

import minigrad
from helpers.fp16 import F16, F32, F64, assert_bits, conv_by_hand, nchw, ulps
from minigrad import Tensor, nn
from minigrad.testing import check_backward

RNG = numpy.random.RandomState(0)


def _randn(*shape, dtype=numpy.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _with_params(layer, names):
    """``fn(x, *params)`` running ``layer.construct`` with the given tensors in place of its
    parameters (``construct``, not the call: the call would narrow the checker's float64 input
    to the dtype of the registered float32 parameters)."""
    def fn(x, *params):
        for name, value in zip(names, params):
            layer.__dict__[name] = value
        return layer.construct(x)
    return fn


# ---- Dense --------------------------------------------------------------------------------------

def test_dense_matches_numpy_and_has_mindspore_shapes():
    dense = nn.Dense(5, 3, weight_init="normal", bias_init="normal")
    assert dense.weight.shape == (3, 5) and dense.bias.shape == (3,)
    x = _randn(4, 5)
    w, b = dense.weight.asnumpy(), dense.bias.asnumpy()
    numpy.testing.assert_allclose(dense(Tensor(x)).asnumpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    x3 = _randn(2, 4, 5)  # leading axes are batch axes
    numpy.testing.assert_allclose(dense(Tensor(x3)).asnumpy(), x3 @ w.T + b, rtol=1e-5, atol=1e-6)


def test_dense_activation_and_no_bias():
    dense = nn.Dense(4, 3, has_bias=False, activation="relu")
    assert dense.bias is None and [p.name for p in dense.get_parameters()] == ["weight"]
    x = _randn(6, 4)
    numpy.testing.assert_allclose(
        dense(Tensor(x)).asnumpy(),
        numpy.maximum(x @ dense.weight.asnumpy().T, 0),
        rtol=1e-5,
        atol=1e-6,
    )
    assert isinstance(nn.Dense(2, 2, activation=nn.Tanh()).activation, nn.Tanh)
    with pytest.raises(ValueError, match=r"Dense\(in_channels=4\) got an input of shape \(6, 5\)"):
        dense(Tensor(_randn(6, 5)))
    with pytest.raises(ValueError, match=r"Dense\(in_channels=4\) got an input of shape \(\)"):
        dense(Tensor(numpy.float32(1.0)))  # no feature axis: refused, not an IndexError


def test_dense_is_one_fused_node():
    dense = nn.Dense(3, 2)
    x = Tensor(_randn(2, 3))
    y = dense(x)
    assert type(y._ctx).__name__ == "Dense"
    assert y._ctx.inputs == (x, dense.weight, dense.bias)


def test_dense_gradients():
    dense = nn.Dense(4, 3, bias_init="normal")
    check_backward(
        _with_params(dense, ["weight", "bias"]),
        [_randn(5, 4), dense.weight.asnumpy(), dense.bias.asnumpy()],
    )


def test_dense_fp16_parameters_and_input_give_fp16():
    dense = nn.Dense(4, 3).cast_parameters(minigrad.float16)
    assert dense(Tensor(_randn(2, 4, dtype=numpy.float16))).dtype == minigrad.float16


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(in_channels=0, out_channels=2), "in_channels must be a positive int, got 0"),
        (dict(in_channels=2.5, out_channels=2), "in_channels must be a positive int, got 2.5"),
        (dict(in_channels=2, out_channels=-1), "out_channels must be a positive int, got -1"),
        (dict(in_channels=2, out_channels=2, has_bias=1), "has_bias must be a bool, got 1"),
        (
            dict(in_channels=2, out_channels=2, activation="swishy"),
            "activation must be one of .*'swishy'",
        ),
        (
            dict(in_channels=2, out_channels=2, activation=3),
            "activation must be None, a str or a Cell, got 3 \\(int\\)",
        ),
        (dict(in_channels=2, out_channels=2, weight_init="bogus"), "init must be one of .*'bogus'"),
    ],
)
def test_dense_bad_arguments(kwargs, match):
    with pytest.raises((TypeError, ValueError, KeyError), match=match):
        nn.Dense(**kwargs)


# ---- Conv2d -------------------------------------------------------------------------------------


def _conv_reference(x, w, b, stride, pads, dilation, groups):
    """Direct loops over output positions (float64)."""
    top, bottom, left, right = pads
    x = numpy.pad(x.astype(numpy.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    ho = (h - dh * (kh - 1) - 1) // sh + 1
    wo = (wd - dw * (kw - 1) - 1) // sw + 1
    out = numpy.zeros((n, o, ho, wo))
    og = o // groups
    for oc in range(o):
        g = oc // og
        xs = x[:, g * cg : (g + 1) * cg]
        for i in range(ho):
            for j in range(wo):
                patch = xs[
                    :,
                    :,
                    i * sh : i * sh + dh * (kh - 1) + 1 : dh,
                    j * sw : j * sw + dw * (kw - 1) + 1 : dw,
                ]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    if b is not None:
        out += b[None, :, None, None]
    return out


@pytest.mark.parametrize(
    "pad_mode, padding, stride, dilation, group, expected_hw",
    [
        ("same", 0, 1, 1, 1, (7, 6)),
        ("same", 0, 2, 1, 1, (4, 3)),
        ("same", 0, 2, 2, 2, (4, 3)),
        ("valid", 0, 1, 1, 1, (5, 4)),
        ("valid", 0, (2, 1), (1, 2), 1, (3, 2)),
        ("pad", 1, 1, 1, 2, (7, 6)),
        ("pad", (2, 0, 1, 3), 2, 1, 1, (4, 4)),
    ],
)
def test_conv2d_matches_direct_computation(pad_mode, padding, stride, dilation, group, expected_hw):
    conv = nn.Conv2d(
        4,
        6,
        3,
        stride=stride,
        pad_mode=pad_mode,
        padding=padding,
        dilation=dilation,
        group=group,
        has_bias=True,
        bias_init="normal",
    )
    x = _randn(2, 4, 7, 6)
    out = conv(Tensor(x))
    assert out.shape == (2, 6) + expected_hw
    s, d = conv.stride, conv.dilation
    if (
        pad_mode == "same"
    ):  # output ceil(size / stride); the odd extra row/column at the bottom/right
        pads = []
        for size, k, st, di in zip((7, 6), (3, 3), s, d):
            total = max((math.ceil(size / st) - 1) * st + (k - 1) * di + 1 - size, 0)
            pads += [total // 2, total - total // 2]
    else:
        pads = conv.padding
    expected = _conv_reference(x, conv.weight.asnumpy(), conv.bias.asnumpy(), s, pads, d, group)
    numpy.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-5)


def test_conv2d_gradients():
    conv = nn.Conv2d(2, 3, (2, 3), stride=2, pad_mode="same", has_bias=True, bias_init="normal")
    check_backward(
        _with_params(conv, ["weight", "bias"]),
        [_randn(2, 2, 5, 5), conv.weight.asnumpy(), conv.bias.asnumpy()],
    )


def test_conv2d_shapes_and_defaults():
    conv = nn.Conv2d(3, 8, 5)
    assert conv.weight.shape == (8, 3, 5, 5) and conv.bias is None and conv.pad_mode == "same"
    assert nn.Conv2d(4, 8, 3, group=2).weight.shape == (8, 2, 3, 3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(pad_mode="circular"), "pad_mode must be one of .*'circular'"),
        (dict(pad_mode="same", padding=1), "padding must be 0 when pad_mode is 'same', got 1"),
        (
            dict(pad_mode="valid", padding=(1, 1, 1, 1)),
            "padding must be 0 when pad_mode is 'valid'",
        ),
        (
            dict(pad_mode="pad", padding=(1, 1)),
            r"padding must be a non-negative int or a 4-tuple .*got \(1, 1\)",
        ),
        (
            dict(pad_mode="pad", padding=-1),
            "padding must be a non-negative int or a 4-tuple or list of non-negative ints, got -1",
        ),
        (
            dict(kernel_size=0),
            "kernel_size must be a positive int or a 2-tuple or list of positive ints, got 0",
        ),
        (
            dict(stride=(1, 2, 3)),
            r"stride must be a positive int or a 2-tuple or list of positive ints, got \(1, 2, 3\)",
        ),
        (dict(group=3), r"divisible by group \(3\)"),
    ],
)
def test_conv2d_bad_arguments(kwargs, match):
    args = dict(in_channels=4, out_channels=4, kernel_size=3)
    args.update(kwargs)
    with pytest.raises((TypeError, ValueError), match=match):
        nn.Conv2d(**args)


# ---- normalization ------------------------------------------------------------------------------


def test_batchnorm2d_train_eval_and_mindspore_momentum():
    bn = nn.BatchNorm2d(3, momentum=0.9, gamma_init="normal", beta_init="normal")
    gamma, beta = bn.gamma.asnumpy().astype(numpy.float64), bn.beta.asnumpy().astype(numpy.float64)
    x = _randn(4, 3, 5, 5) * 2 + 1
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    n = 4 * 5 * 5

    bn.set_train()
    out = bn(Tensor(x))
    expected = (x - mean[None, :, None, None]) / numpy.sqrt(
        var[None, :, None, None] + 1e-5
    ) * gamma[None, :, None, None] + beta[None, :, None, None]
    numpy.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    # moving = momentum * moving + (1 - momentum) * batch (unbiased variance), from 0 and 1
    numpy.testing.assert_allclose(bn.moving_mean.asnumpy(), 0.1 * mean, rtol=1e-5, atol=1e-6)
    numpy.testing.assert_allclose(
        bn.moving_variance.asnumpy(), 0.9 + 0.1 * var * n / (n - 1), rtol=1e-5
    )
    assert bn.moving_mean.dtype == minigrad.float32 and not bn.moving_mean.requires_grad

    bn.set_train(False)
    moving_mean, moving_var = bn.moving_mean.asnumpy().copy(), bn.moving_variance.asnumpy().copy()
    out = bn(Tensor(x))
    expected = (x - moving_mean[None, :, None, None]) / numpy.sqrt(
        moving_var[None, :, None, None] + 1e-5
    ) * gamma[None, :, None, None] + beta[None, :, None, None]
    numpy.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    assert numpy.array_equal(bn.moving_mean.asnumpy(), moving_mean)  # no update in evaluation


def test_batchnorm_use_batch_statistics_overrides_training():
    x = _randn(8, 3)
    bn = nn.BatchNorm1d(3, use_batch_statistics=True)  # evaluation mode, still batch statistics
    out = bn(Tensor(x)).asnumpy()
    numpy.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-5)
    assert bn.moving_mean.asnumpy().any()
    frozen = nn.BatchNorm1d(3, use_batch_statistics=False).set_train()
    numpy.testing.assert_allclose(frozen(Tensor(x)).asnumpy(), x / numpy.sqrt(1 + 1e-5), rtol=1e-5)
    assert not frozen.moving_mean.asnumpy().any()


def test_batchnorm_fp16_input_keeps_fp32_statistics():
    bn = nn.BatchNorm2d(2).set_train()
    x = _randn(3, 2, 4, 4).astype(numpy.float16)
    out = bn(Tensor(x))
    assert out.dtype == minigrad.float16 and bn.moving_mean.dtype == minigrad.float32
    numpy.testing.assert_allclose(
        bn.moving_mean.asnumpy(),
        0.1 * x.astype(numpy.float64).mean(axis=(0, 2, 3)),
        rtol=1e-3,
        atol=1e-4,
    )


def test_batchnorm_gradients():
    bn = nn.BatchNorm1d(3, gamma_init="normal").set_train()
    check_backward(
        _with_params(bn, ["gamma", "beta"]), [_randn(6, 3), bn.gamma.asnumpy(), bn.beta.asnumpy()]
    )


@pytest.mark.parametrize(
    "cls, kwargs, shape, match",
    [
        (nn.BatchNorm2d, dict(num_features=0), None, "num_features must be a positive int, got 0"),
        (
            nn.BatchNorm2d,
            dict(num_features=2, momentum=1.5),
            None,
            r"momentum must be a finite float in \[0.0, 1.0\], got 1.5",
        ),
        (
            nn.BatchNorm2d,
            dict(num_features=2, eps=0),
            None,
            r"eps must be a finite float in \(0.0, inf\), got 0",
        ),
        (
            nn.BatchNorm2d,
            dict(num_features=2, use_batch_statistics=1),
            None,
            "use_batch_statistics must be a bool",
        ),
        (nn.BatchNorm2d, dict(num_features=2), (2, 2), r"4 dimensions, got shape \(2, 2\)"),
        (nn.BatchNorm1d, dict(num_features=2), (2, 3), r"3 channels \(shape \(2, 3\)\)"),
    ],
)
def test_batchnorm_bad_arguments(cls, kwargs, shape, match):
    with pytest.raises((TypeError, ValueError), match=match):
        cls(**kwargs)(Tensor(numpy.zeros(shape, numpy.float32)))


def test_layernorm_matches_numpy():
    ln = nn.LayerNorm(
        (4, 5), begin_norm_axis=1, begin_params_axis=1, gamma_init="normal", beta_init="normal"
    )
    x = _randn(3, 4, 5)
    mean = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    expected = (x - mean) / numpy.sqrt(var + 1e-7) * ln.gamma.asnumpy() + ln.beta.asnumpy()
    numpy.testing.assert_allclose(ln(Tensor(x)).asnumpy(), expected, rtol=1e-4, atol=1e-5)
    last = nn.LayerNorm(5)
    out = last(Tensor(x)).asnumpy()
    numpy.testing.assert_allclose(out.mean(axis=-1), 0, atol=1e-5)
    with pytest.raises(ValueError, match=r"epsilon must be a finite float in \(0.0, inf\)"):
        nn.LayerNorm(5, epsilon=-1.0)


# ---- pooling ------------------------------------------------------------------------------------


def _pool_reference(x, k, s, pads, reduce):
    top, bottom, left, right = pads
    xp = numpy.pad(
        x.astype(numpy.float64),
        ((0, 0), (0, 0), (top, bottom), (left, right)),
        constant_values=numpy.nan,
    )
    ho = (xp.shape[2] - k) // s + 1
    wo = (xp.shape[3] - k) // s + 1
    out = numpy.empty(x.shape[:2] + (ho, wo))
    for i in range(ho):
        for j in range(wo):
            out[:, :, i, j] = reduce(xp[:, :, i * s : i * s + k, j * s : j * s + k], axis=(2, 3))
    return out


@pytest.mark.parametrize(
    "cls, reduce", [(nn.MaxPool2d, numpy.nanmax), (nn.AvgPool2d, numpy.nanmean)]
)
@pytest.mark.parametrize("pad_mode, expected_hw", [("valid", (3, 2)), ("same", (4, 3))])
def test_pooling_matches_numpy(cls, reduce, pad_mode, expected_hw):
    x = _randn(2, 3, 7, 6)
    out = cls(kernel_size=3, stride=2, pad_mode=pad_mode)(Tensor(x))
    assert out.shape == (2, 3) + expected_hw
    pads = (0, 0, 0, 0) if pad_mode == "valid" else (1, 1, 0, 1)  # totals 2 and 1; extra at the end
    numpy.testing.assert_allclose(
        out.asnumpy(), _pool_reference(x, 3, 2, pads, reduce), rtol=1e-5, atol=1e-6
    )


def test_pooling_defaults_and_bad_arguments():
    x = Tensor(_randn(1, 1, 3, 3))
    numpy.testing.assert_array_equal(nn.MaxPool2d()(x).asnumpy(), x.asnumpy())  # kernel 1, stride 1
    with pytest.raises(ValueError, match="pad_mode must be one of .*'pad'"):
        nn.MaxPool2d(2, 2, pad_mode="pad")
    with pytest.raises(
        ValueError, match="stride must be a positive int or a 2-tuple or list of positive"
            " ints, got 0"
    ):
        nn.AvgPool2d(2, 0)


# ---- Embedding, Dropout, Flatten, activations ----------------------------------------------------


def test_embedding_lookup_and_one_hot_agree():
    emb = nn.Embedding(10, 4, embedding_table="normal", padding_idx=0)
    table = emb.embedding_table.asnumpy()
    assert table.shape == (10, 4) and not table[0].any()
    ids = numpy.array([[1, 2, 0], [9, 9, 3]], numpy.int32)
    numpy.testing.assert_array_equal(emb(Tensor(ids)).asnumpy(), table[ids])
    one_hot = nn.Embedding(10, 4, use_one_hot=True)
    one_hot.embedding_table = emb.embedding_table.detach()
    numpy.testing.assert_allclose(one_hot(Tensor(ids)).asnumpy(), table[ids], rtol=1e-6)
    with pytest.raises(TypeError, match="integer ids, got dtype float32"):
        emb(Tensor(ids.astype(numpy.float32)))
    with pytest.raises(ValueError, match="padding_idx must be None or an int in .*got 10"):
        nn.Embedding(10, 4, padding_idx=10)


def test_embedding_gradient_accumulates_repeated_ids():
    emb = nn.Embedding(5, 2, use_one_hot=False)
    out = emb(Tensor(numpy.array([1, 1, 3])))
    out.sum().backward()
    expected = numpy.zeros((5, 2))
    expected[1], expected[3] = 2, 1
    numpy.testing.assert_array_equal(emb.embedding_table.grad.asnumpy(), expected)


def test_dropout_train_and_eval():
    minigrad.set_seed(1)
    x = Tensor(numpy.ones((200, 50), numpy.float32))
    drop = nn.Dropout(keep_prob=0.8)
    assert drop(x) is x  # evaluation mode (the default): identity
    drop.set_train()
    out = drop(x).asnumpy()
    kept = out != 0
    assert abs(kept.mean() - 0.8) < 0.02
    numpy.testing.assert_allclose(out[kept], 1 / 0.8, rtol=1e-6)
    assert nn.Dropout(keep_prob=1.0).set_train()(x) is x
    assert nn.Dropout(p=0.25).keep_prob == 0.75
    with pytest.raises(
        ValueError, match=r"keep_prob must be a finite float in \(0.0, 1.0\], got 0"
    ):
        nn.Dropout(keep_prob=0)
    with pytest.raises(ValueError, match=r"p must be a finite float in \[0.0, 1.0\), got 1"):
        nn.Dropout(p=1)


def test_flatten_and_activations():
    x = _randn(2, 3, 4)
    assert nn.Flatten()(Tensor(x)).shape == (2, 12)
    t = Tensor(x)
    numpy.testing.assert_allclose(nn.ReLU()(t).asnumpy(), numpy.maximum(x, 0))
    numpy.testing.assert_allclose(nn.Sigmoid()(t).asnumpy(), 1 / (1 + numpy.exp(-x)), rtol=1e-6)
    numpy.testing.assert_allclose(nn.Tanh()(t).asnumpy(), numpy.tanh(x), rtol=1e-6)
    e = numpy.exp(x - x.max(axis=1, keepdims=True))
    numpy.testing.assert_allclose(
        nn.Softmax(axis=1)(t).asnumpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5
    )
    numpy.testing.assert_allclose(
        nn.LogSoftmax(axis=1)(t).asnumpy(),
        numpy.log(e / e.sum(axis=1, keepdims=True)),
        rtol=1e-5,
        atol=1e-6,
    )
    gelu = 0.5 * x * (1 + numpy.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    numpy.testing.assert_allclose(nn.GELU()(t).asnumpy(), gelu, rtol=1e-5, atol=1e-6)
    assert isinstance(nn.get_activation("ReLU"), nn.ReLU)


def _x(*shape, dtype=numpy.float32):
    return Tensor(numpy.random.default_rng(0).standard_normal(shape).astype(dtype))


@pytest.mark.parametrize(
    "make",
    [
        lambda fmt: nn.Conv2d(3, 4, 3, data_format=fmt),
        lambda fmt: nn.BatchNorm2d(3, data_format=fmt),
        lambda fmt: nn.MaxPool2d(2, 2, data_format=fmt),
        lambda fmt: nn.AvgPool2d(2, 2, data_format=fmt),
    ],
    ids=["Conv2d", "BatchNorm2d", "MaxPool2d", "AvgPool2d"],
)
def test_2d_layers_take_data_format_nchw(make):
    """MindSpore's signatures: nn.Conv2d(..., data_format='NCHW'), nn.BatchNorm2d(...,
    data_format='NCHW'), nn.MaxPool2d(kernel_size=1, stride=1, pad_mode='valid',
    data_format='NCHW'), nn.AvgPool2d(same) (mindspore.cn docs r1.7-r2.x). Code that spells the
    default out got 'unexpected keyword argument'. 'NHWC' is a GPU-only layout in MindSpore and
    minigrad computes NCHW only: a ValueError naming data_format and the value."""
    cell = make("NCHW")
    assert cell(_x(2, 3, 4, 4)).shape[:2] in ((2, 4), (2, 3))
    with pytest.raises(ValueError, match="data_format.*'NCHW'.*'NHWC'"):
        make("NHWC")
    with pytest.raises(ValueError, match="data_format.*'nchw_'"):
        make("nchw_")


def test_embedding_padding_idx_must_be_in_0_vocab():
    """mindspore.nn.Embedding, Raises: 'ValueError - If padding_idx is an int not in
    [0, vocab_size)'. A negative padding_idx (which would zero a row counted from the end) and
    True (not the int 1) are refused; a NumPy integer is an int."""
    with pytest.raises(ValueError, match=r"padding_idx must be None or an int in \[0, 5\), got -1"):
        nn.Embedding(5, 3, padding_idx=-1)
    with pytest.raises(TypeError, match="padding_idx.*True"):
        nn.Embedding(5, 3, padding_idx=True)
    emb = nn.Embedding(5, 3, padding_idx=numpy.int64(4))
    assert not emb.embedding_table.asnumpy()[4].any() and emb.embedding_table.asnumpy()[:4].all()


def test_flatten_keeps_an_empty_batch():
    """mindspore.nn.Flatten: output shape (N, X), X the product of the remaining dimensions. An
    input with N = 0 raised 'cannot reshape ... to (0, -1)' instead of giving (0, 12)."""
    out = nn.Flatten()(Tensor(numpy.ones((0, 3, 4), numpy.float32)))
    assert out.shape == (0, 12)
    assert nn.Flatten()(_x(2, 3, 4)).shape == (2, 12)


def test_dense_given_a_list_says_what_it_expected():
    with pytest.raises(TypeError, match="Tensor"):
        nn.Dense(4, 3)([[1.0, 2.0, 3.0, 4.0]])


@pytest.mark.parametrize("pad_mode,stride", [("same", 1), ("same", 2), ("valid", 2), ("pad", 1)])
def test_nn_conv2d_fp16_pad_modes(pad_mode, stride):
    rng = numpy.random.default_rng(5)
    layer = nn.Conv2d(
        4,
        6,
        (3, 2),
        stride=stride,
        pad_mode=pad_mode,
        padding=1 if pad_mode == "pad" else 0,
        group=2,
        has_bias=True,
    )
    for name in ("weight", "bias"):
        old = getattr(layer, name)
        setattr(layer, name, minigrad.Parameter(nchw(rng, old.shape), name=old.name))
    x = nchw(rng, (2, 4, 7, 5))
    out = layer(Tensor(x)).asnumpy()
    if pad_mode == "same":
        assert out.shape[2:] == (-(-7 // stride), -(-5 // stride))
        total = [max((-(-n // stride) - 1) * stride + k - n, 0) for n, k in ((7, 3), (5, 2))]
        pad = (total[0] // 2, total[0] - total[0] // 2, total[1] // 2, total[1] - total[1] // 2)
    else:
        pad = (1,) * 4 if pad_mode == "pad" else (0,) * 4
    exact = conv_by_hand(
        x, layer.weight.asnumpy(), layer.bias.asnumpy(), (stride, stride), pad, (1, 1), 2
    )
    assert out.dtype == F16 and (ulps(out, exact.astype(F16)) <= 1).all()


def test_nn_batchnorm_and_pools_fp16():
    rng = numpy.random.default_rng(6)
    bn = nn.BatchNorm2d(3, momentum=0.9).set_train()
    x = nchw(rng, (4, 3, 3, 3), 100)
    y = bn(Tensor(x))
    assert y.dtype == F16 and bn.moving_mean.dtype == F32
    numpy.testing.assert_allclose(
        bn.moving_mean.asnumpy(), 0.1 * x.astype(F64).mean((0, 2, 3)), rtol=1e-5
    )
    y.sum().backward()
    assert bn.gamma.grad.dtype == F32
    pool = nn.AvgPool2d(3, 2, pad_mode="same")
    out = pool(Tensor(x)).asnumpy()
    # same (3 -> 2, one padding row/col each side): windows {0, 1} and {1, 2}, padding not counted
    ref = numpy.stack(
        [
            numpy.stack(
                [
                    x[:, :, r, :][..., c].astype(F64).mean((-1, -2))
                    for c in (slice(0, 2), slice(1, 3))
                ],
                -1,
            )
            for r in (slice(0, 2), slice(1, 3))
        ],
        -2,
    )
    assert (ulps(out, ref.astype(F16)) <= 1).all()
    mp = nn.MaxPool2d(2, 2, pad_mode="same")(Tensor(x)).asnumpy()
    assert_bits(mp[:, :, 1, 1], x[:, :, 2, 2])
