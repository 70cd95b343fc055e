"""batch_norm (ops/normalization.py) on every memory layout of an image batch.

The statistics and sums run over (N, H, W) in whichever order the layout gives, so a
channels-last or strided input's results agree with an NCHW input's within the dtype's
rounding; the output keeps a channels-last input's layout, and the gradients pass the float64
checker in fp16 and fp32 on every layout.
"""
import numpy
import pytest

from helpers.fp16 import F16, F32, ulps
from helpers.layouts import is_channels_last, layouts
from minigrad import Tensor, ops
from minigrad.testing import check_backward


def run(x, gamma, beta, g, training):
    tensors = [Tensor(a, requires_grad=True) for a in (x, gamma, beta)]
    mean, var = numpy.linspace(-1, 1, 5).astype(F32), numpy.linspace(0.5, 2, 5).astype(F32)
    out = ops.batch_norm(*tensors, mean, var, training=training)
    out.backward(Tensor(g))
    return out.data, [t.grad.data for t in tensors]


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", [F16, F32])
def test_every_layout_gives_the_same_values(dtype, training):
    rng = numpy.random.default_rng(0)
    x = (rng.standard_normal((4, 5, 7, 9)) * 3 + 2).astype(dtype)
    gamma, beta = rng.uniform(0.5, 1.5, 5).astype(F32), rng.standard_normal(5).astype(F32)
    g = rng.standard_normal(x.shape).astype(dtype)
    want_out, want = run(x, gamma, beta, g, training)
    for name, view in layouts(x).items():
        for g_view in layouts(g).values():
            out, grads = run(view, gamma, beta, g_view, training)
            assert is_channels_last(out) == (name == "channels_last")
            if dtype == F16:
                assert (ulps(out, want_out) <= 1).all() and (ulps(grads[0], want[0]) <= 1).all()
            else:
                numpy.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-5)
                numpy.testing.assert_allclose(grads[0], want[0], rtol=1e-4, atol=1e-5)
            for got, expected in zip(grads[1:], want[1:]):
                numpy.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", ["channels_last", "strided"])
@pytest.mark.parametrize("dtype", [F16, F32])
def test_gradients_match_float64_on_every_layout(dtype, layout):
    rng = numpy.random.default_rng(1)
    x = layouts(rng.standard_normal((3, 4, 3, 5)).astype(dtype))[layout]
    gamma, beta = rng.uniform(0.5, 1.5, 4).astype(dtype), rng.standard_normal(4).astype(dtype)
    check_backward(lambda x, g, b: ops.batch_norm(x, g, b, None, None, True), [x, gamma, beta])


def _node(x, gamma, beta, training, needs=(True, True, True)):
    """The Normalize node of a batch_norm of ``x`` (arrays), with the gradients ``needs`` asks."""
    tensors = [Tensor(a, requires_grad=need) for a, need in zip((x, gamma, beta), needs)]
    mean, var = numpy.linspace(-1, 1, x.shape[1]), numpy.linspace(0.5, 2, x.shape[1])
    out = ops.batch_norm(*tensors, mean.astype(F32), var.astype(F32), training=training)
    return out, out._ctx


@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False),
                                   (False, True, False), (False, False, True)], ids=str)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", [F16, F32])
@pytest.mark.parametrize("shape", [(4, 5, 7, 9), (3, 2, 1, 1), (6, 3)], ids=str)
def test_batch_rule_matches_the_general_rule(shape, dtype, training, needs):
    """Batch norm's rule on arrays (x - μ recomputed, in-place steps, sums without product
    arrays) gives the general rule's gradients within the dtype's rounding, on every layout."""
    rng = numpy.random.default_rng(2)
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    gamma, beta = rng.uniform(0.5, 1.5, shape[1]).astype(F32), rng.standard_normal(shape[1])
    g = rng.standard_normal(shape).astype(dtype)
    views = layouts(x) if len(shape) == 4 else {"c": x, "f_order": numpy.asfortranarray(x)}
    for name, view in views.items():
        out, node = _node(view, gamma, beta.astype(F32), training, needs)
        g_view = layouts(g)[name] if len(shape) == 4 else g
        g_before = g_view.copy()
        fast = node._batch_backward(g_view.astype(F32) if dtype == F16 else g_view)
        general = node._general_backward(g_view)
        numpy.testing.assert_array_equal(g_view, g_before)  # neither writes g
        for got, want, need in zip(fast, general, needs):
            assert (got is None) == (not need)
            if got is None:
                continue
            assert got.dtype == want.dtype and got.shape == want.shape
            if got.dtype == F16:
                assert (ulps(got, want) <= 1).all()
            else:
                numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [F16, F32])
def test_forward_keeps_no_centred_copy_and_does_not_write_x(dtype):
    """Batch norm's forward on arrays keeps x (which the graph holds) and the per-channel
    statistics only, and never writes x, in training and evaluation."""
    x = layouts(numpy.random.default_rng(3).standard_normal((4, 3, 5, 5)).astype(dtype))
    for name, view in x.items():
        before = view.copy()
        for training in (True, False):
            out, node = _node(view, numpy.ones(3, F32), numpy.zeros(3, F32), training)
            numpy.testing.assert_array_equal(view, before)
            assert node.centred is None and node.x is view
            assert all(numpy.size(a) == 3 for a in (node.mean, node.rstd)), name
