"""Dense and Conv2d under fp8_autocast: the forward is the GEMM of the dequantized operands, the
gradients are those of that GEMM read with the quantized output gradient (float64 checker),
delayed scaling updates its scales at the step's end, and recipes are checked."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, fp8, nn, ops
from minigrad.testing.gradcheck import numerical_grad

RNG = numpy.random.default_rng(0)
# an output gradient whose E5M2 cast under current scaling is exact (amax 1: scale 57344)
SEED = RNG.choice([1.0, -0.5, 0.25, -1.0, 0.5], size=(4, 5)).astype(numpy.float32)


def deq(x, fmt):
    """Current scaling's quantize-dequantize of array x, computed here from the rule."""
    scale = fp8.scales.current_scale(numpy.abs(x).max(), fmt.max)
    return fp8.dequantize(fp8.quantize(x, fmt, scale)[0])


def dense_case():
    minigrad.set_seed(0)
    layer = nn.Dense(6, 5)
    x = Tensor(RNG.standard_normal((4, 6)).astype(numpy.float32), requires_grad=True)
    return layer, x


def test_dense_forward_and_gradients_are_the_dequantized_gemm():
    layer, x = dense_case()
    g = RNG.standard_normal((4, 5)).astype(numpy.float32)
    with fp8.fp8_autocast(fp8_recipe=fp8.CurrentScaling()):
        y = layer(x)
    (y * Tensor(g)).sum().backward()
    xq, wq = deq(x.numpy(), fp8.E4M3), deq(layer.weight.numpy(), fp8.E4M3)
    gq = deq(g, fp8.E5M2)
    numpy.testing.assert_allclose(y.numpy(), xq @ wq.T + layer.bias.numpy(), rtol=1e-6)
    numpy.testing.assert_allclose(x.grad.numpy(), gq @ wq, rtol=1e-6)
    numpy.testing.assert_allclose(layer.weight.grad.numpy(), gq.T @ xq, rtol=1e-6)
    numpy.testing.assert_allclose(layer.bias.grad.numpy(), g.sum(0), rtol=1e-6)  # unquantized
    assert y.dtype == x.grad.dtype == numpy.float32


def test_dense_gradients_match_the_float64_checker_on_the_dequantized_math():
    layer, x = dense_case()
    with fp8.fp8_autocast(fp8_recipe=fp8.CurrentScaling()):
        y = layer(x)
    (y * Tensor(SEED)).sum().backward()
    arrays = [deq(x.numpy(), fp8.E4M3), deq(layer.weight.numpy(), fp8.E4M3), layer.bias.numpy()]
    gx, gw, gb = numerical_grad(lambda a, w, b: ops.dense(a, w, b), arrays, SEED)
    for got, want in ((x.grad, gx), (layer.weight.grad, gw), (layer.bias.grad, gb)):
        numpy.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


def test_conv2d_forward_and_gradients_match_the_checker_on_the_dequantized_math():
    minigrad.set_seed(0)
    conv = nn.Conv2d(2, 3, 3, pad_mode="pad", padding=1, has_bias=True)
    x = Tensor(RNG.standard_normal((2, 2, 4, 4)).astype(numpy.float32), requires_grad=True)
    seed = RNG.choice([1.0, -0.5, 0.25, -1.0], size=(2, 3, 4, 4)).astype(numpy.float32)
    with fp8.fp8_autocast(fp8_recipe=fp8.CurrentScaling()):
        y = conv(x)
    (y * Tensor(seed)).sum().backward()
    arrays = [deq(x.numpy(), fp8.E4M3), deq(conv.weight.numpy(), fp8.E4M3), conv.bias.numpy()]

    def fn(a, w, b):
        return ops.conv2d(a, w, b, padding=1)
    numpy.testing.assert_allclose(y.numpy(), fn(*(Tensor(a) for a in arrays)).numpy(),
                                  rtol=1e-5, atol=1e-6)
    gx, gw, gb = numerical_grad(fn, arrays, seed)
    for got, want in ((x.grad, gx), (conv.weight.grad, gw), (conv.bias.grad, gb)):
        numpy.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)


def test_float16_input_gives_float16_output_and_gradient():
    layer, x = dense_case()
    x16 = Tensor(x.numpy().astype(numpy.float16), requires_grad=True)
    with fp8.fp8_autocast(fp8_recipe=fp8.CurrentScaling()):
        y = layer(x16)
    y.sum().backward()
    assert y.dtype == x16.grad.dtype == numpy.float16


def test_delayed_scaling_updates_forward_scales_on_exit_and_backward_ones_next_step():
    layer, x = dense_case()
    recipe = fp8.DelayedScaling(amax_history_len=4)
    with fp8.fp8_autocast(fp8_recipe=recipe):
        y = layer(x)
    states = {name.rsplit(".", 1)[1]: state for name, state in fp8.fp8_states(layer)}
    amax = float(numpy.abs(x.numpy()).max())
    assert states["input"].scale == pytest.approx(448 / amax, rel=1e-6)
    y.sum().backward()  # after the context: the gradient's amax waits for the next step
    assert states["grad_output"].scale == 1.0 and states["grad_output"].pending
    with fp8.fp8_autocast(fp8_recipe=recipe):
        assert states["grad_output"].scale == pytest.approx(57344.0)  # amax of ones is 1
    # the input was not cast in the second step: its history did not roll
    assert states["input"].history.tolist() == [0.0, 0.0, 0.0, pytest.approx(amax)]


def test_outside_or_disabled_the_layers_compute_in_their_own_precision():
    layer, x = dense_case()
    want = ops.dense(x, layer.weight, layer.bias).numpy()
    numpy.testing.assert_array_equal(layer(x).numpy(), want)
    with fp8.fp8_autocast(enabled=False):
        assert fp8.get_fp8_recipe() is None
        numpy.testing.assert_array_equal(layer(x).numpy(), want)
    with fp8.fp8_autocast():
        assert isinstance(fp8.get_fp8_recipe(), fp8.DelayedScaling)
        assert not numpy.array_equal(layer(x).numpy(), want)
    assert fp8.get_fp8_recipe() is None


def test_blocked_recipes_run_dense_and_conv2d_refuses_them():
    minigrad.set_seed(0)
    layer = nn.Dense(32, 32)
    x = Tensor(RNG.standard_normal((3, 32)).astype(numpy.float32))
    for recipe in (fp8.RowwiseScaling(), fp8.MXFP8BlockScaling()):
        with fp8.fp8_autocast(fp8_recipe=recipe):
            y = layer(x)
        numpy.testing.assert_allclose(y.numpy(), layer(x).numpy(), rtol=0.2, atol=0.1)
    with pytest.raises(ValueError, match="per-tensor"):
        with fp8.fp8_autocast(fp8_recipe=fp8.RowwiseScaling()):
            nn.Conv2d(1, 1, 3)(Tensor(numpy.ones((1, 1, 4, 4), dtype=numpy.float32)))


def test_fp8_autocast_checks_its_arguments():
    with pytest.raises(TypeError, match="enabled"):
        fp8.fp8_autocast(enabled=1)
    with pytest.raises(TypeError, match="fp8_recipe"):
        fp8.fp8_autocast(fp8_recipe="delayed")


@pytest.mark.parametrize("kdim", [None, 6])
def test_multihead_attention_projections_run_in_fp8(kdim):
    minigrad.set_seed(0)
    attn = nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim, batch_first=True)
    q = Tensor(RNG.standard_normal((2, 3, 8)).astype(numpy.float32), requires_grad=True)
    kv = Tensor(RNG.standard_normal((2, 4, kdim or 8)).astype(numpy.float32))
    want = attn(q, kv, kv)[0].numpy()
    with fp8.fp8_autocast(fp8_recipe=fp8.CurrentScaling()):
        out = attn(q, kv, kv)[0]
    out.sum().backward()
    assert numpy.linalg.norm(out.numpy() - want) < 0.1 * numpy.linalg.norm(want)  # FP8's error
    names = {name.rsplit(".", 1)[0] for name, _ in fp8.fp8_states(attn)}
    projections = {"q_proj", "k_proj", "v_proj"} if kdim else {
        "in_proj_q", "in_proj_k", "in_proj_v"}
    assert {n.rsplit(".", 1)[-1] for n in names} == projections | {"out_proj"}
    assert q.grad is not None and q.grad.shape == q.shape
