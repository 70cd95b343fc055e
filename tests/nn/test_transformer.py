"""nn.TransformerEncoderLayer and nn.TransformerEncoder (nn/layers/transformer.py): forward and
gradients equal to PyTorch's modules given the same weights (where PyTorch is installed), forward
against a float64 NumPy formula always, gradients through the float64 checker in fp16 and fp32,
the AMP levels against fp32, the stack's copies, and argument errors."""
import numpy
import pytest

import minigrad
from helpers.transformer import encoder_layer_reference, torch_state, weights
from minigrad import Tensor, amp, nn
from minigrad.testing import check_backward

RNG = numpy.random.default_rng(0)
E, H, F, N, S = 8, 2, 16, 3, 5


def _layer(**kwargs):
    minigrad.set_seed(2)
    return nn.TransformerEncoderLayer(E, H, dim_feedforward=F, dropout=0.0, **kwargs)


def _torch_layer(torch, layer, **kwargs):
    twin = torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=F, dropout=0.0, **kwargs)
    twin.load_state_dict(torch_state(layer, torch))
    return twin


def _padding():
    mask = RNG.random((N, S)) > 0.7
    mask[:, 0] = False
    return mask


CASES = {
    "post-LN relu": ({}, {}),
    "pre-LN gelu": ({"norm_first": True, "activation": "gelu"}, {}),
    "batch_first, causal mask": ({"batch_first": True},
                                 {"src_mask": nn.generate_square_subsequent_mask(S).asnumpy()}),
    "padding mask": ({}, {"src_key_padding_mask": _padding()}),
}


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_encoder_layer_matches_torch(case, training):
    """Training mode runs PyTorch's general path, evaluation its fused fast path where it
    applies; minigrad has one path and matches both."""
    torch = pytest.importorskip("torch")
    kwargs, masks = CASES[case]
    layer = _layer(**kwargs)
    twin = _torch_layer(torch, layer, **kwargs)
    layer.set_train(training)
    twin.train(training)
    x = RNG.standard_normal((N, S, E) if kwargs.get("batch_first") else (S, N, E))
    x = x.astype(numpy.float32)
    ours = Tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=training)  # no autograd: PyTorch's fast path
    out = layer(ours, **{k: Tensor(v) for k, v in masks.items()})
    with torch.set_grad_enabled(training):
        expected = twin(theirs, **{k: torch.tensor(v) for k, v in masks.items()})
    numpy.testing.assert_allclose(out.asnumpy(), expected.detach().numpy(), atol=2e-5)
    if not training:
        return
    g = RNG.standard_normal(out.shape).astype(numpy.float32)
    (out * Tensor(g)).sum().backward()
    expected.backward(torch.tensor(g))
    numpy.testing.assert_allclose(ours.grad.asnumpy(), theirs.grad.numpy(), atol=5e-5)
    grads = {name: p.grad.numpy() for name, p in twin.named_parameters()}
    for name, p in torch_state(layer, torch).items():
        mine = dict(layer.parameters_and_names())[_minigrad_name(name)]
        numpy.testing.assert_allclose(mine.grad.asnumpy(), grads[name], atol=5e-5, err_msg=name)


def _minigrad_name(torch_name):
    head, _, last = torch_name.rpartition(".")
    if head.startswith("norm"):
        last = {"weight": "gamma", "bias": "beta"}[last]
    return f"{head}.{last}"


def test_encoder_matches_torch_encoder_with_a_final_norm():
    torch = pytest.importorskip("torch")
    minigrad.set_seed(3)
    encoder = nn.TransformerEncoder(_layer(norm_first=True), 2, norm=nn.LayerNorm((E,),
                                                                                  epsilon=1e-5))
    twin = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(E, H, F, dropout=0.0, norm_first=True), 2,
        norm=torch.nn.LayerNorm(E), enable_nested_tensor=False)
    twin.load_state_dict(torch_state(encoder, torch))
    x = RNG.standard_normal((S, N, E)).astype(numpy.float32)
    causal = nn.generate_square_subsequent_mask(S)
    out = encoder(Tensor(x), causal)
    expected = twin(torch.tensor(x), mask=torch.tensor(causal.asnumpy()))
    numpy.testing.assert_allclose(out.asnumpy(), expected.detach().numpy(), atol=2e-5)
    by_flag = encoder(Tensor(x), is_causal=True)
    by_torch_name = encoder(Tensor(x), mask=causal)
    assert (by_flag.asnumpy() == out.asnumpy()).all()
    assert (by_torch_name.asnumpy() == out.asnumpy()).all()


# ---- float64 formula and the gradient checker -----------------------------------------------

@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32])
def test_forward_matches_the_float64_formula(dtype, norm_first):
    layer = _layer(batch_first=True, norm_first=norm_first, activation="gelu", dtype=dtype)
    x = RNG.standard_normal((N, S, E)).astype(dtype)
    out = layer(Tensor(x), is_causal=True)
    causal = numpy.triu(numpy.full((S, S), -numpy.inf), 1)
    expected = encoder_layer_reference(weights(layer), x.astype(numpy.float64), H, causal,
                                       norm_first=norm_first, activation="gelu")
    assert out.dtype == dtype
    tolerance = 2e-5 if dtype == numpy.float32 else 3e-2
    numpy.testing.assert_allclose(out.asnumpy(), expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32])
def test_gradients_through_the_float64_checker(dtype):
    minigrad.set_seed(4)
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0, batch_first=True,
                                       norm_first=True)
    layer.cast_parameters(numpy.float64)  # the cell boundary keeps the checker's float64 inputs
    named = list(layer.parameters_and_names())

    def block(x, *values):
        for (name, _), value in zip(named, values):
            path, _, attribute = name.rpartition(".")
            owner = layer
            for part in path.split("."):
                owner = getattr(owner, part)
            owner.__dict__[attribute] = value
        return layer(x, is_causal=True)
    params = [p.asnumpy().astype(numpy.float64) for _, p in named]
    check_backward(block, [RNG.standard_normal((2, 3, 4))] + params, dtype=dtype)


def test_amp_levels_match_fp32_within_fp16_tolerance():
    layer = _layer(batch_first=True)
    x = Tensor(RNG.standard_normal((N, S, E)).astype(numpy.float32))
    fp32 = layer(x, is_causal=True).asnumpy()
    with amp.autocast():  # O1
        o1 = layer(x, is_causal=True)
    half = amp.cast_network(_layer(batch_first=True), minigrad.float16, keep_batchnorm_fp32=True)
    assert half.norm1.gamma.dtype == minigrad.float32  # O2 keeps LayerNorm in fp32
    o2 = half(x, is_causal=True)
    for out in (o1, o2):
        numpy.testing.assert_allclose(out.asnumpy().astype(numpy.float32), fp32, atol=2e-2,
                                      rtol=2e-2)


# ---- the stack, dropout, errors -------------------------------------------------------------

def test_encoder_copies_the_layer_with_parameters_of_their_own():
    layer = _layer()
    encoder = nn.TransformerEncoder(layer, 3)
    names = [name for name, _ in encoder.parameters_and_names()]
    assert names[0] == "layers.0.self_attn.in_proj_weight" and len(names) == 3 * len(
        list(layer.get_parameters()))
    assert len({p.name for p in encoder.get_parameters()}) == len(names)
    first, second = encoder.layers[0].linear1.weight, encoder.layers[1].linear1.weight
    assert first is not second and (first.asnumpy() == second.asnumpy()).all()
    assert first is not layer.linear1.weight
    x = Tensor(RNG.standard_normal((S, N, E)).astype(numpy.float32))
    expected = x
    for block in encoder.layers:
        expected = block(expected)
    assert (encoder(x).asnumpy() == expected.asnumpy()).all()


def test_dropout_only_in_training():
    minigrad.set_seed(6)
    layer = nn.TransformerEncoderLayer(E, H, F, dropout=0.5)
    x = Tensor(RNG.standard_normal((S, N, E)).astype(numpy.float32))
    assert (layer(x).asnumpy() == layer(x).asnumpy()).all()
    layer.set_train()
    assert not (layer(x).asnumpy() == layer(x).asnumpy()).all()


def test_activation_may_be_a_cell_or_a_callable():
    x = Tensor(RNG.standard_normal((S, N, E)).astype(numpy.float32))
    by_name = _layer(activation="relu")(x).asnumpy()
    by_cell = _layer(activation=nn.ReLU())(x).asnumpy()
    by_function = _layer(activation=minigrad.ops.relu)(x).asnumpy()
    assert (by_name == by_cell).all() and (by_name == by_function).all()


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="activation must be one of \\['relu', 'gelu'\\]"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    with pytest.raises(TypeError, match="activation must be callable"):
        nn.TransformerEncoderLayer(8, 2, activation=3)
    with pytest.raises(ValueError, match=r"TransformerEncoderLayer: d_model must be a multiple of "
                                         r"nhead \(3\), got 8"):
        nn.TransformerEncoderLayer(8, 3)
    with pytest.raises(TypeError, match=r"TransformerEncoderLayer: nhead must be a positive int, "
                                        r"got None \(NoneType\)"):
        nn.TransformerEncoderLayer(8, None)
    with pytest.raises(ValueError, match="layer_norm_eps must be a finite float in \\(0.0, inf\\)"):
        nn.TransformerEncoderLayer(8, 2, layer_norm_eps=0)
    with pytest.raises(TypeError, match="norm_first must be a bool"):
        nn.TransformerEncoderLayer(8, 2, norm_first="yes")
    with pytest.raises(ValueError, match="num_layers must be a positive int, got 0"):
        nn.TransformerEncoder(_layer(), 0)
    with pytest.raises(TypeError, match="encoder_layer must be a Cell"):
        nn.TransformerEncoder("layer", 2)
    encoder = nn.TransformerEncoder(_layer(), 1)
    x = Tensor(numpy.zeros((S, N, E), numpy.float32))
    causal = nn.generate_square_subsequent_mask(S)
    with pytest.raises(TypeError, match="both src_mask and mask"):
        encoder(x, causal, mask=causal)
    with pytest.raises(TypeError, match="src must be a Tensor"):
        _layer()(numpy.zeros((S, N, E)).tolist())
