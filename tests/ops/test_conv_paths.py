"""conv2d's layouts and shortcuts (ops/conv.py) against its general path.

The input's memory layout (NCHW, channels-last, a strided view) changes which copies conv2d
makes, never a bit of its results; the output gradient's layout changes the order of the
products' additions, so those results agree within the dtype's rounding. A 1x1, stride-1,
unpadded convolution of a channels-last input copies nothing: it is the matrix product itself.
"""
import numpy
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from helpers import GPU_KINDS, gpu_of
from helpers.fp16 import F16, F32, assert_bits, ulps
from helpers.layouts import is_channels_last, layouts
from minigrad import Tensor, backend, ops
from minigrad.ops import windows
from minigrad.ops.conv import Conv2d
from minigrad.testing import check_backward


def run(x, w, b, g, **kwargs):
    """Output and gradients (x, w, b) of conv2d for the output gradient ``g``."""
    tensors = [Tensor(a, requires_grad=True) for a in (x, w, b)]
    out = ops.conv2d(*tensors, **kwargs)
    out.backward(Tensor(g))
    return out.data, [t.grad.data for t in tensors]


def assert_close(got, want, dtype):
    """Within one fp16 step, or fp32's rounding of sums of a few hundred terms."""
    if dtype == F16:
        assert (ulps(got, want) <= 1).all(), (got, want)
    else:
        scale = max(float(numpy.abs(want).max()), 1.0)
        numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * scale)


geometry = st.fixed_dictionaries({
    "n": st.integers(1, 3), "cg": st.integers(1, 5), "og": st.integers(1, 4),
    "groups": st.integers(1, 2), "hw": st.tuples(st.integers(1, 9), st.integers(1, 9)),
    "kernel": st.tuples(st.integers(1, 3), st.integers(1, 3)),
    "stride": st.tuples(st.integers(1, 2), st.integers(1, 2)),
    "dilation": st.tuples(st.integers(1, 2), st.integers(1, 2)),
    "padding": st.tuples(*[st.integers(0, 2)] * 4),
    "dtype": st.sampled_from([F16, F32]), "seed": st.integers(0, 2**31)})


def case(spec):
    (h, w), (kh, kw), (dh, dw), (top, bottom, left, right) = (
        spec["hw"], spec["kernel"], spec["dilation"], spec["padding"])
    assume(h + top + bottom >= dh * (kh - 1) + 1 and w + left + right >= dw * (kw - 1) + 1)
    rng = numpy.random.default_rng(spec["seed"])
    groups, dtype = spec["groups"], spec["dtype"]
    x = rng.standard_normal((spec["n"], spec["cg"] * groups, h, w)).astype(dtype)
    wt = (rng.standard_normal((spec["og"] * groups, spec["cg"], kh, kw)) / 2).astype(dtype)
    b = rng.standard_normal(spec["og"] * groups).astype(dtype)
    kwargs = dict(stride=spec["stride"], padding=spec["padding"], dilation=spec["dilation"],
                  groups=groups)
    ho = (h + top + bottom - dh * (kh - 1) - 1) // spec["stride"][0] + 1
    wo = (w + left + right - dw * (kw - 1) - 1) // spec["stride"][1] + 1
    g = rng.standard_normal((x.shape[0], wt.shape[0], ho, wo)).astype(dtype)
    return x, wt, b, g, kwargs


@given(spec=geometry)
def test_every_input_layout_gives_the_same_bits(spec):
    x, w, b, g, kwargs = case(spec)
    results = {name: run(view, w, b, g, **kwargs) for name, view in layouts(x).items()}
    out, grads = results.pop("nchw")
    assert is_channels_last(out)
    for other_out, other_grads in results.values():
        assert_bits(other_out, out)
        for got, want in zip(other_grads, grads):
            assert_bits(got, want)


@given(spec=geometry)
def test_every_gradient_layout_gives_the_same_values(spec):
    x, w, b, g, kwargs = case(spec)
    _, want = run(x, w, b, g, **kwargs)
    for name, view in layouts(g).items():
        _, got = run(x, w, b, view, **kwargs)
        for a, e in zip(got, want):
            assert_close(a, e, x.dtype)


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_1x1_stride_1_convolution_is_the_matrix_product(layout):
    # the product conv2d runs, written out: the same BLAS calls, so the same bits
    rng = numpy.random.default_rng(0)
    x = rng.standard_normal((3, 5, 7, 6)).astype(F32)
    w = rng.standard_normal((4, 5, 1, 1)).astype(F32)
    b = rng.standard_normal(4).astype(F32)
    g = rng.standard_normal((3, 4, 7, 6)).astype(F32)
    out, (gx, gw, gb) = run(layouts(x)[layout], w, b, g)
    rows = x.transpose(0, 2, 3, 1).reshape(-1, 5)
    g_rows = numpy.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(4, -1).T
    w2 = w.reshape(4, 5)
    want = rows @ w2.T
    want += b
    assert_bits(out.transpose(0, 2, 3, 1).reshape(-1, 4), want)
    assert_bits(gx.transpose(0, 2, 3, 1).reshape(-1, 5), g_rows @ w2)
    assert_bits(gw.reshape(4, 5), (rows.T @ g_rows).T)  # 5 patch columns >= 4 channels
    numpy.testing.assert_allclose(gb, g.sum(axis=(0, 2, 3)), rtol=1e-5)


def small_conv_net(device):
    """conv, ReLU, batch norm, max pooling, conv on ``device``: the activations and the input's
    gradient (as arrays of the device)."""
    rng = numpy.random.default_rng(1)
    x, w1, w2 = (Tensor(rng.standard_normal(shape).astype(F32), requires_grad=True,
                        device=device) for shape in ((2, 3, 8, 8), (4, 3, 3, 3), (6, 4, 3, 3)))
    h1 = ops.relu(ops.conv2d(x, w1, padding=1))
    h2 = ops.max_pool2d(ops.batch_norm(h1, None, None, None, None, True), 2)
    out = ops.conv2d(h2, w2, padding=1)
    out.sum().backward()
    return [t.data for t in (h1, h2, out)], x.grad.data


def test_channels_last_flows_through_a_conv_net():
    # conv, ReLU, batch norm and pooling keep channels-last: no layer reorders the batch
    activations, gx = small_conv_net("CPU")
    assert all(is_channels_last(a) for a in activations)
    assert gx.shape == (2, 3, 8, 8) and numpy.isfinite(gx).all()


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_the_image_ops_run_on_the_gpu_without_reading_the_device(kind):
    # CuPy's code paths (the strict device runs them on any machine): the CPU's results, and
    # no value read back to the host on the way
    activations, gx = small_conv_net("CPU")
    with gpu_of(kind) as reads:
        got, got_gx = small_conv_net("GPU")
        assert reads is None or reads.count == 0, reads.sites
        got, got_gx = [backend.as_numpy(a) for a in got], backend.as_numpy(got_gx)
    for a, b in zip(got + [got_gx], activations + [gx]):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_fp16_channels_last_input_is_widened_and_rounded_as_nchw():
    # the fp16 rule (widen once, products in fp32, round once) does not depend on the layout
    rng = numpy.random.default_rng(2)
    x = (rng.standard_normal((4, 16, 9, 9)) * 100).astype(F16)  # >= 4096 values: native paths
    w = (rng.standard_normal((8, 16, 3, 3)) / 10).astype(F16)
    b = rng.standard_normal(8).astype(F16)
    g = rng.standard_normal((4, 8, 5, 5)).astype(F16)
    out, grads = run(layouts(x)["channels_last"], w, b, g, stride=2, padding=1)
    want_out, want_grads = run(x.astype(F32), w.astype(F32), b.astype(F32), g.astype(F32),
                               stride=2, padding=1)
    assert_bits(out, want_out.astype(F16))
    for got, want in zip(grads, want_grads):
        assert_bits(got, want.astype(F16))


@given(spec=geometry)
def test_stride_1_input_gradient_by_correlation_agrees_with_col2im(spec):
    # dx as a convolution of g with the flipped kernel: the same sums as col2im's, added in
    # another order (so within the dtype's rounding, and the same rounding rule for fp16)
    spec = dict(spec, stride=(1, 1), og=min(spec["og"], spec["cg"]))
    x, w, b, g, kwargs = case(spec)
    taken = []
    correlates = Conv2d._correlates

    def recorded(self, gy):
        taken.append(correlates(self, gy))
        return taken[-1]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Conv2d, "_correlates", recorded)
        fast = {name: run(x, w, b, view, **kwargs)[1][0] for name, view in layouts(g).items()}
    (top, bottom, left, right), (kh, kw) = spec["padding"], spec["kernel"]
    (dh, dw) = spec["dilation"]
    assert all(taken) == ((kh, kw) != (1, 1) and max(top, bottom) <= dh * (kh - 1)
                          and max(left, right) <= dw * (kw - 1))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Conv2d, "_correlates", lambda self, gy: False)
        _, (want, _, _) = run(x, w, b, g, **kwargs)
    for got in fast.values():
        assert got.dtype == want.dtype and (is_channels_last(got) or not all(taken))
        assert_close(got, want, x.dtype)


@pytest.mark.parametrize("dtype", [F16, F32])
@pytest.mark.parametrize("kwargs", [dict(padding=(2, 0, 1, 2), dilation=(1, 2), groups=2),
                                    dict(padding=1), dict(padding=0)])
def test_input_gradient_by_correlation_passes_the_float64_check(dtype, kwargs):
    rng = numpy.random.default_rng(4)
    x = rng.standard_normal((2, 4, 6, 7)).astype(dtype)
    w = (rng.standard_normal((4, 4 // kwargs.get("groups", 1), 3, 3)) / 3).astype(dtype)
    check_backward(lambda t, u: ops.conv2d(t, u, **kwargs), [Tensor(x), Tensor(w)])


@given(spec=geometry)
def test_col2im_gives_the_padded_sums_bits_as_a_dense_array(spec):
    # col2im adds each tap's block inside the input only: every element gets the same adds in
    # the same order as in a zero-padded buffer whose inside is then cut out
    x, w, b, g, kwargs = case(spec)
    out = ops.conv2d(Tensor(x, requires_grad=True), Tensor(w), **kwargs)
    ctx = out._ctx
    (kh, kw), (ho, wo) = spec["kernel"], out.shape[2:]
    (top, bottom, left, right), groups = spec["padding"], spec["groups"]
    n, c, h, width = x.shape
    rng = numpy.random.default_rng(spec["seed"] + 1)
    dcols = [rng.standard_normal((kh * kw, n * ho * wo, c // groups)).astype(F32)
             for _ in range(groups)]
    padded = numpy.zeros((n, h + top + bottom, width + left + right, c), F32)
    for k, d in enumerate(dcols):
        d = d.reshape(kh, kw, n, ho, wo, -1)
        for i, j, rows, cols in windows.window_slices(spec["kernel"], spec["stride"],
                                                      spec["dilation"], (ho, wo)):
            padded[:, rows, cols, k * (c // groups):(k + 1) * (c // groups)] += d[i, j]
    want = padded[:, top:top + h, left:left + width].transpose(0, 3, 1, 2)
    got = ctx._col2im(dcols)  # fp16: the fp32 sums rounded once
    assert is_channels_last(got)
    assert_bits(got, want.astype(x.dtype))
