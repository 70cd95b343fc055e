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
