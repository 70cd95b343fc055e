"""nn.MultiheadAttention and generate_square_subsequent_mask (nn/layers/attention.py): forward
equal to torch.nn.MultiheadAttention given the same weights (where PyTorch is installed) and to
a float64 NumPy formula always, gradients through the float64 checker in fp16 and fp32, the
mask rule in fp16, the AMP levels against fp32, and argument errors."""
import math

import numpy
import pytest

import minigrad
from helpers.transformer import attention_reference, torch_state, weights
from minigrad import Tensor, amp, nn
from minigrad.testing import check_backward

RNG = numpy.random.default_rng(0)
E, H, N, L, S = 8, 2, 3, 5, 6


def _layer(**kwargs):
    minigrad.set_seed(1)
    return nn.MultiheadAttention(E, H, **kwargs)


def _seq_first(x):
    return numpy.ascontiguousarray(x.transpose(1, 0, 2))


def _torch_twin(torch, layer, **kwargs):
    twin = torch.nn.MultiheadAttention(E, H, **kwargs)
    twin.load_state_dict(torch_state(layer, torch))
    return twin


# config name -> (layer kwargs, call kwargs maker, kdim/vdim sizes)
CONFIGS = {
    "self, no mask": ({}, lambda: {}),
    "bool attn_mask 2-D": ({}, lambda: {"attn_mask": RNG.random((L, S)) > 0.8}),
    "float attn_mask 3-D": ({}, lambda: {"attn_mask": _floats((N * H, L, S))}),
    "bool key_padding_mask": ({}, lambda: {"key_padding_mask": _padding()}),
    "float attn + bool padding": ({}, lambda: {"attn_mask": _floats((L, S)),
                                               "key_padding_mask": _padding()}),
    "kdim, vdim": ({"kdim": 5, "vdim": 3}, lambda: {}),
    "bias_kv, zero_attn": ({"add_bias_kv": True, "add_zero_attn": True},
                           lambda: {"key_padding_mask": _padding()}),
    "no bias": ({"has_bias": False}, lambda: {"attn_mask": RNG.random((L, S)) > 0.8}),
    "batch_first": ({"batch_first": True}, lambda: {"key_padding_mask": _padding()}),
}


def _floats(shape):
    return RNG.standard_normal(shape).astype(numpy.float32)


def _padding():
    mask = RNG.random((N, S)) > 0.7
    mask[:, 0] = False  # every query keeps a key (PyTorch's general path gives NaN otherwise)
    return mask


def _inputs(layer_kwargs, self_attention):
    q = RNG.standard_normal((L, N, E)).astype(numpy.float32)
    if self_attention:
        return q, q, q
    k = RNG.standard_normal((S, N, layer_kwargs.get("kdim", E))).astype(numpy.float32)
    v = RNG.standard_normal((S, N, layer_kwargs.get("vdim", E))).astype(numpy.float32)
    return q, k, v


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask:UserWarning")
@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_matches_torch_multihead_attention(config, average):
    torch = pytest.importorskip("torch")
    layer_kwargs, call = CONFIGS[config]
    call_kwargs = call()
    self_attention = "self" in config
    if not self_attention and "attn_mask" in call_kwargs and call_kwargs["attn_mask"].ndim == 2:
        call_kwargs["attn_mask"] = call_kwargs["attn_mask"][:, :S]
    layer = _layer(**layer_kwargs)
    twin = _torch_twin(torch, layer, bias=layer_kwargs.get("has_bias", True),
                       **{k: v for k, v in layer_kwargs.items() if k != "has_bias"})
    q, k, v = _inputs(layer_kwargs, self_attention)
    if layer_kwargs.get("batch_first"):
        q, k, v = (numpy.ascontiguousarray(a.transpose(1, 0, 2)) for a in (q, k, v))
    ours = [Tensor(a, requires_grad=True) for a in (q, k, v)]
    if self_attention:
        ours = [ours[0]] * 3
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    if self_attention:
        theirs = [theirs[0]] * 3
    masks = {name: value for name, value in call_kwargs.items()}
    out, w = layer(*ours, average_attn_weights=average,
                   **{name: Tensor(m) for name, m in masks.items()})
    expected, expected_w = twin(*theirs, average_attn_weights=average,
                                **{name: torch.tensor(m) for name, m in masks.items()})
    numpy.testing.assert_allclose(out.asnumpy(), expected.detach().numpy(), atol=1e-5)
    numpy.testing.assert_allclose(w.asnumpy(), expected_w.detach().numpy(), atol=1e-6)
    g = RNG.standard_normal(out.shape).astype(numpy.float32)
    (out * Tensor(g)).sum().backward()
    expected.backward(torch.tensor(g))
    grads = dict(twin.named_parameters())
    for name, p in layer.parameters_and_names():
        numpy.testing.assert_allclose(p.grad.asnumpy(), grads[name].grad.numpy(), atol=2e-5,
                                      err_msg=name)
    for mine, peer in zip(ours, theirs):
        numpy.testing.assert_allclose(mine.grad.asnumpy(), peer.grad.numpy(), atol=2e-5)


def test_is_causal_and_the_helper_match_torch_with_the_causal_mask():
    torch = pytest.importorskip("torch")
    layer = _layer()
    twin = _torch_twin(torch, layer)
    x = RNG.standard_normal((L, N, E)).astype(numpy.float32)
    causal = nn.generate_square_subsequent_mask(L)
    assert (causal.asnumpy() == torch.nn.Transformer.generate_square_subsequent_mask(L).numpy()
            ).all()
    expected = twin(*[torch.tensor(x)] * 3, attn_mask=torch.tensor(causal.asnumpy()))[0]
    by_flag = layer(*[Tensor(x)] * 3, is_causal=True)[0]
    by_mask = layer(*[Tensor(x)] * 3, attn_mask=causal)[0]
    numpy.testing.assert_allclose(by_flag.asnumpy(), expected.detach().numpy(), atol=1e-5)
    assert (by_flag.asnumpy() == by_mask.asnumpy()).all()


def test_unbatched_input():
    layer = _layer()
    x = RNG.standard_normal((L, E)).astype(numpy.float32)
    padding = numpy.zeros(L, bool)
    padding[-2:] = True
    out, w = layer(Tensor(x), Tensor(x), Tensor(x), key_padding_mask=Tensor(padding))
    batched, batched_w = layer(*[Tensor(x[:, None])] * 3,
                               key_padding_mask=Tensor(padding[None]))
    assert out.shape == (L, E) and w.shape == (L, L)
    numpy.testing.assert_array_equal(out.asnumpy(), batched.asnumpy()[:, 0])
    numpy.testing.assert_array_equal(w.asnumpy(), batched_w.asnumpy()[0])


# ---- float64 formula and the gradient checker -----------------------------------------------

@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32])
def test_forward_matches_the_float64_formula(dtype):
    layer = _layer(batch_first=True, dtype=dtype)
    x = RNG.standard_normal((N, L, E)).astype(dtype)
    mask = numpy.where(RNG.random((L, L)) > 0.7, -1e9, RNG.standard_normal((L, L)))
    mask[:, 0] = 0
    out, w = layer(*[Tensor(x)] * 3, attn_mask=Tensor(mask.astype(numpy.float32)),
                   average_attn_weights=False)
    expected, expected_w = attention_reference(weights(layer), x.astype(numpy.float64),
                                               x.astype(numpy.float64),
                                               x.astype(numpy.float64), H, mask)
    assert out.dtype == dtype and w.dtype == dtype
    tolerance = 1e-5 if dtype == numpy.float32 else 1e-2
    numpy.testing.assert_allclose(out.asnumpy(), expected, atol=tolerance, rtol=tolerance)
    numpy.testing.assert_allclose(w.asnumpy(), expected_w, atol=tolerance / 4)


@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32])
def test_gradients_through_the_float64_checker(dtype):
    layer = _layer(batch_first=True, add_bias_kv=True)
    layer.cast_parameters(numpy.float64)  # the cell boundary keeps the checker's float64 inputs
    names = [name for name, _ in layer.parameters_and_names()]
    params = [p.asnumpy().astype(numpy.float64) for p in layer.get_parameters()]
    x = RNG.standard_normal((2, 3, E))
    key = RNG.standard_normal((2, 4, E))
    padding = Tensor(numpy.array([[False, False, True, False], [False, True, True, False]]))

    def attention(x, key, *values):
        for name, value in zip(names, values):
            owner = layer.out_proj if name.startswith("out_proj.") else layer
            owner.__dict__[name.rpartition(".")[2]] = value
        out, w = layer(x, key, key, key_padding_mask=padding)
        return out, w
    check_backward(attention, [x, key] + params, dtype=dtype)


# ---- fp16 and the AMP levels ----------------------------------------------------------------

@pytest.mark.parametrize("removed", [-1e9, -numpy.inf])
def test_fully_masked_query_gives_zero_weights_not_nan_in_fp16(removed):
    layer = _layer(batch_first=True, dtype=numpy.float16)
    x = Tensor(RNG.standard_normal((N, L, E)).astype(numpy.float16), requires_grad=True)
    mask = numpy.zeros((L, L))
    mask[0, :] = removed  # query 0 sees nothing
    with numpy.errstate(over="ignore"):
        attn_mask = Tensor(mask.astype(numpy.float16))
    out, w = layer(x, x, x, attn_mask=attn_mask)
    assert numpy.isfinite(out.asnumpy()).all()
    assert (w.asnumpy()[:, 0] == 0).all()
    # no key: the attention output is zero, and the layer's output is out_proj's bias
    numpy.testing.assert_array_equal(out.asnumpy()[:, 0],
                                     numpy.broadcast_to(layer.out_proj.bias.asnumpy(), (N, E)))
    out.sum().backward()
    assert numpy.isfinite(x.grad.asnumpy()).all()


def test_amp_levels_match_fp32_within_fp16_tolerance():
    layer = _layer(batch_first=True)
    x = Tensor(RNG.standard_normal((N, L, E)).astype(numpy.float32))
    causal = nn.generate_square_subsequent_mask(L)
    fp32 = layer(x, x, x, attn_mask=causal)[0].asnumpy()
    with amp.autocast():  # O1
        o1 = layer(x, x, x, attn_mask=causal)[0]
    half = amp.cast_network(_layer(batch_first=True), minigrad.float16, keep_batchnorm_fp32=True)
    o2 = half(x, x, x, attn_mask=causal)[0]  # O2: fp16 weights, inputs cast on entry
    for out in (o1, o2):
        assert out.dtype == minigrad.float16
        numpy.testing.assert_allclose(out.asnumpy().astype(numpy.float32), fp32, atol=1e-2,
                                      rtol=1e-2)


# ---- construction, dropout, errors ----------------------------------------------------------

def test_parameters_have_pytorch_names_shapes_and_initialisation():
    layer = nn.MultiheadAttention(64, 4)
    shapes = {name: p.shape for name, p in layer.parameters_and_names()}
    assert shapes == {"in_proj_weight": (192, 64), "in_proj_bias": (192,),
                      "out_proj.weight": (64, 64), "out_proj.bias": (64,)}
    w = layer.in_proj_weight.asnumpy()
    assert abs(w).max() <= math.sqrt(6 / (192 + 64)) and w.std() > 0.5 * math.sqrt(2 / 256)
    assert abs(layer.out_proj.weight.asnumpy()).max() <= 1 / 8
    assert not layer.in_proj_bias.asnumpy().any() and not layer.out_proj.bias.asnumpy().any()
    separate = nn.MultiheadAttention(8, 2, kdim=4, vdim=6, add_bias_kv=True, has_bias=False)
    assert {name: p.shape for name, p in separate.parameters_and_names()} == {
        "q_proj_weight": (8, 8), "k_proj_weight": (8, 4), "v_proj_weight": (8, 6),
        "out_proj.weight": (8, 8), "bias_k": (1, 1, 8), "bias_v": (1, 1, 8)}
    assert nn.MultiheadAttention(8, 2, dtype=minigrad.float16).in_proj_weight.dtype == \
        minigrad.float16


def test_dropout_acts_on_the_weights_in_training_only():
    layer = _layer(dropout=0.5, batch_first=True)
    x = Tensor(RNG.standard_normal((N, L, E)).astype(numpy.float32))
    _, w_eval = layer(x, x, x, average_attn_weights=False)
    layer.set_train()
    minigrad.set_seed(5)
    _, w_train = layer(x, x, x, average_attn_weights=False)
    dropped = w_train.asnumpy() == 0
    assert 0.3 < dropped.mean() < 0.7
    numpy.testing.assert_allclose(w_train.asnumpy()[~dropped], 2 * w_eval.asnumpy()[~dropped],
                                  rtol=1e-6)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="num_heads must be a divisor of embed_dim \\(8\\), got 3"):
        nn.MultiheadAttention(8, 3)
    with pytest.raises(TypeError, match="embed_dim must be a positive int, got 8.0"):
        nn.MultiheadAttention(8.0, 2)
    with pytest.raises(ValueError, match="dropout must be a finite float in \\[0.0, 1.0\\)"):
        nn.MultiheadAttention(8, 2, dropout=1.5)
    with pytest.raises(TypeError, match="batch_first must be a bool"):
        nn.MultiheadAttention(8, 2, batch_first=1)
    with pytest.raises(TypeError, match="dtype must be float16 or float32"):
        nn.MultiheadAttention(8, 2, dtype=minigrad.int32)
    with pytest.raises(ValueError, match="kdim must be a positive int"):
        nn.MultiheadAttention(8, 2, kdim=0)
    layer = _layer()
    x = Tensor(numpy.zeros((L, N, E), numpy.float32))
    with pytest.raises(ValueError, match=r"needs query \(L, N, E\).*\(5, 3, 7\)"):
        layer(Tensor(numpy.zeros((L, N, 7), numpy.float32)), x, x)
    with pytest.raises(ValueError, match=r"attn_mask.shape must be \(5, 5\) or \(6, 5, 5\)"):
        layer(x, x, x, attn_mask=Tensor(numpy.zeros((4, 5), bool)))
    with pytest.raises(ValueError, match=r"key_padding_mask.shape must be \(3, 5\)"):
        layer(x, x, x, key_padding_mask=Tensor(numpy.zeros((5, 3), bool)))
    with pytest.raises(TypeError, match="attn_mask.dtype must be bool or a float dtype"):
        layer(x, x, x, attn_mask=Tensor(numpy.zeros((5, 5), numpy.int32)))
    with pytest.raises(TypeError, match="key must be a Tensor"):
        layer(x, [1.0], x)
    with pytest.raises(TypeError, match="need_weights must be a bool"):
        layer(x, x, x, need_weights=None)
    with pytest.raises(ValueError, match="size must be a positive int"):
        nn.generate_square_subsequent_mask(0)
