"""batch_norm and layer_norm (ops/normalization.py): forward, backward, running statistics."""
import math

import numpy
import pytest

import minigrad
from helpers.fp16 import F16, F32, F64, assert_close_to_rounded, grads, nchw, ulps
from minigrad import Tensor, ops
from minigrad.testing import assert_forward, check_backward, noncontiguous


def _normalize(x, axes, gamma, beta, eps, mean=None, var=None):
    x = x.astype(numpy.float64)
    mean = x.mean(axis=axes, keepdims=True) if mean is None else mean
    var = x.var(axis=axes, keepdims=True) if var is None else var
    return (x - mean) / numpy.sqrt(var + eps) * gamma + beta


def _data(shape, dtype, seed=0):
    rng = numpy.random.RandomState(seed)
    c = shape[1]
    return (
        (rng.standard_normal(shape) * 2 + 1).astype(dtype),
        rng.uniform(0.5, 1.5, c).astype(dtype),
        rng.standard_normal(c).astype(dtype),
    )


@pytest.mark.parametrize("shape", [(6, 3), (3, 2, 4, 3)], ids=str)
def test_batch_norm_training(shape, dtype, device):
    x, gamma, beta = _data(shape, dtype)
    axes = (0,) + tuple(range(2, len(shape)))
    bshape = (1, -1) + (1,) * (len(shape) - 2)
    t = lambda a: minigrad.Tensor(a, device=device)
    out = ops.batch_norm(t(x), t(gamma), t(beta), None, None, training=True)
    assert out.dtype == dtype and out.device == device
    expected = _normalize(x, axes, gamma.reshape(bshape), beta.reshape(bshape), 1e-5)
    assert_forward(out, expected, dtype)
    fn = lambda x, g, b: ops.batch_norm(x, g, b, None, None, training=True)
    check_backward(fn, [t(x), t(gamma), t(beta)])


@pytest.mark.parametrize("shape", [(6, 3), (3, 2, 4, 3)], ids=str)
def test_batch_norm_eval_uses_running_statistics(shape, dtype, device):
    x, gamma, beta = _data(shape, dtype)
    c = shape[1]
    mean, var = (
        numpy.linspace(-1, 1, c).astype(numpy.float32),
        numpy.linspace(0.5, 2, c).astype(numpy.float32),
    )
    bshape = (1, -1) + (1,) * (len(shape) - 2)
    t = lambda a: minigrad.Tensor(a, device=device)
    out = ops.batch_norm(t(x), t(gamma), t(beta), t(mean), t(var), training=False, eps=1e-3)
    expected = _normalize(
        x,
        None,
        gamma.reshape(bshape),
        beta.reshape(bshape),
        1e-3,
        mean.reshape(bshape),
        var.reshape(bshape),
    )
    assert_forward(out, expected, dtype)
    fn = lambda x, g, b: ops.batch_norm(x, g, b, t(mean), t(var), training=False, eps=1e-3)
    check_backward(fn, [t(x), t(gamma), t(beta)])


def test_running_statistics_update_in_place():
    x, gamma, beta = _data((4, 2, 3, 3), numpy.float16)
    running_mean = minigrad.Tensor(numpy.zeros(2, numpy.float32))
    running_var = numpy.ones(2, numpy.float32)  # a raw array works as well
    ops.batch_norm(
        minigrad.Tensor(x),
        minigrad.Tensor(gamma),
        minigrad.Tensor(beta),
        running_mean,
        running_var,
        training=True,
        momentum=0.25,
    )
    x64 = x.astype(numpy.float64)
    numpy.testing.assert_allclose(
        running_mean.asnumpy(), 0.25 * x64.mean(axis=(0, 2, 3)), rtol=1e-5
    )
    numpy.testing.assert_allclose(
        running_var, 0.75 + 0.25 * x64.var(axis=(0, 2, 3), ddof=1), rtol=1e-5
    )
    assert running_mean.dtype == numpy.float32 and running_var.dtype == numpy.float32
    # evaluation leaves them alone
    before = running_var.copy()
    ops.batch_norm(minigrad.Tensor(x), None, None, running_mean, running_var, training=False)
    numpy.testing.assert_array_equal(running_var, before)


def test_fp16_statistics_are_fp32():
    # 64 values near 1000: an fp16 sum would reach 64000 (fp16 spacing 32 there, max 65504);
    # the statistics and x̂ are computed in fp32, so the output is well normalised
    x = (1000 + numpy.random.RandomState(0).standard_normal((64, 2)) * 4).astype(numpy.float16)
    out = ops.batch_norm(minigrad.Tensor(x), None, None, None, None, training=True).asnumpy()
    assert out.dtype == numpy.float16
    numpy.testing.assert_allclose(out.astype(numpy.float64).mean(0), 0, atol=2e-3)
    numpy.testing.assert_allclose(out.astype(numpy.float64).std(0), 1, atol=2e-3)


def test_fp32_parameters_with_fp16_input():
    x, gamma, beta = _data((4, 3), numpy.float16)
    g32, b32 = (minigrad.Tensor(a.astype(numpy.float32), requires_grad=True) for a in (gamma, beta))
    xt = minigrad.Tensor(x, requires_grad=True)
    out = ops.batch_norm(xt, g32, b32, None, None, training=True)
    assert out.dtype == numpy.float16
    out.sum().backward()
    assert (xt.grad.dtype, g32.grad.dtype, b32.grad.dtype) == (
        numpy.float16,
        numpy.float32,
        numpy.float32,
    )


@pytest.mark.parametrize("begin_norm,begin_params", [(-1, -1), (1, 1), (1, -1), (2, 2)])
def test_layer_norm(begin_norm, begin_params, dtype, device):
    x = (numpy.random.RandomState(0).standard_normal((2, 3, 4)) * 3).astype(dtype)
    pshape = x.shape[begin_params % 3 :]
    rng = numpy.random.RandomState(1)
    gamma, beta = (
        rng.uniform(0.5, 1.5, pshape).astype(dtype),
        rng.standard_normal(pshape).astype(dtype),
    )
    t = lambda a: minigrad.Tensor(a, device=device)
    fn = lambda x, g, b: ops.layer_norm(x, g, b, begin_norm, begin_params)
    out = fn(t(x), t(gamma), t(beta))
    assert out.dtype == dtype
    assert_forward(out, _normalize(x, tuple(range(begin_norm % 3, 3)), gamma, beta, 1e-5), dtype)
    check_backward(fn, [t(x), t(gamma), t(beta)])


def test_noncontiguous_and_float64():
    x, gamma, beta = _data((5, 3), numpy.float64)
    xv = noncontiguous(x)
    fn = lambda x, g, b: ops.batch_norm(x, g, b, None, None, training=True)
    assert_forward(
        fn(*map(minigrad.Tensor, (xv, gamma, beta))),
        _normalize(x, (0,), gamma, beta, 1e-5),
        numpy.float64,
    )
    check_backward(fn, [xv, gamma, beta])
    check_backward(
        lambda x, g, b: ops.layer_norm(x, g, b), [x.T, gamma[:1].repeat(5), beta[:1].repeat(5)]
    )


def test_bad_arguments():
    x = minigrad.Tensor(numpy.zeros((4, 3), numpy.float32))
    with pytest.raises(ValueError, match=r"gamma must have shape \(3,\).*got \(4,\)"):
        ops.batch_norm(x, minigrad.Tensor(numpy.ones(4, numpy.float32)), None, None, None, True)
    with pytest.raises(ValueError, match="needs running_mean and running_var"):
        ops.batch_norm(x, None, None, None, None, training=False)
    with pytest.raises(ValueError, match="more than one value per channel"):
        ops.batch_norm(
            minigrad.Tensor(numpy.zeros((1, 3), numpy.float32)), None, None, None, None, True
        )
    with pytest.raises(ValueError, match=r"running_mean must be None or a float array or Tensor "
                                         r"of shape \(3,\).*got array\(\[0., 0.\]"):
        ops.batch_norm(x, None, None, numpy.zeros(2, numpy.float32), None, True)
    with pytest.raises(ValueError, match=r"momentum must be a finite float in \[0, 1\], got 1.5"):
        ops.batch_norm(x, None, None, None, None, True, momentum=1.5)
    with pytest.raises(ValueError, match=r"layer_norm gamma must have shape \(3,\)"):
        ops.layer_norm(x, minigrad.Tensor(numpy.ones(4, numpy.float32)), None)
    with pytest.raises(ValueError, match=r"begin_norm_axis must be an int in \[-2, 1\].*got 2"):
        ops.layer_norm(x, None, None, begin_norm_axis=2)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("stat", [3, [0.0, 0.0, 0.0], "abc", numpy.zeros(3, numpy.int32)])
def test_running_statistics_are_float_arrays_updated_in_place(stat, training):
    x = minigrad.Tensor(numpy.zeros((4, 3), numpy.float32))
    var = numpy.ones(3, numpy.float32)
    with pytest.raises(TypeError, match=r"batch_norm: running_mean must be None or a float array "
                                        r"or Tensor of shape \(3,\) \(updated in place\), got"):
        ops.batch_norm(x, None, None, stat, var, training)
    assert (var == 1).all()  # nothing half-applied


def test_eps_is_positive_and_finite():
    x = minigrad.Tensor(numpy.zeros((4, 3), numpy.float32))
    with pytest.raises(ValueError, match=r"batch_norm eps must be a finite float in \(0, inf\), "
                                         r"got inf"):
        ops.batch_norm(x, None, None, None, None, True, eps=math.inf)
    with pytest.raises(TypeError, match=r"layer_norm: eps must be a finite float in \(0, inf\), "
                                        r"got None"):
        ops.layer_norm(x, None, None, eps=None)
    with pytest.raises(ValueError, match=r"layer_norm: eps must be .*got -0.5"):
        ops.layer_norm(x, None, None, eps=-0.5)
    with pytest.raises(TypeError, match=r"layer_norm: eps must be .*got True"):
        ops.layer_norm(x, None, None, eps=True)


def test_layer_norm_gamma_shape_names_begin_params_axis():
    x = minigrad.Tensor(numpy.zeros((4, 3), numpy.float32))
    gamma = minigrad.Tensor(numpy.ones(3, numpy.float32))
    with pytest.raises(ValueError, match=r"gamma must have shape \(4, 3\) \(x.shape\[begin_params_"
                                         r"axis:\] with begin_params_axis=0\).*got \(3,\)"):
        ops.layer_norm(x, gamma, None, begin_params_axis=0)


def _x(shape=(2, 3)):
    return minigrad.Tensor(numpy.arange(numpy.prod(shape), dtype=numpy.float32).reshape(shape))


def test_layer_norm_non_int_axis_names_the_argument():
    with pytest.raises(TypeError, match="begin_norm_axis"):
        ops.layer_norm(_x(), None, None, begin_norm_axis=1.5)


def norm_by_hand(x, gamma, beta, axes, eps, mean=None, var=None, dtype=F64):
    """The documented rule; ``dtype=F32``: statistics and x̂ in fp32, as the docstring says for
    fp16."""
    x = x.astype(dtype)
    if mean is None:
        mean = x.mean(axis=axes, keepdims=True, dtype=F64).astype(dtype)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True, dtype=F64).astype(dtype)
    return ((x - mean) * (1 / numpy.sqrt(var + eps)) * gamma + beta).astype(dtype)


@pytest.mark.parametrize("offset", [0.0, 30000.0])
def test_batch_norm_fp16_train_and_eval_with_fp32_params_and_stats(offset):
    rng = numpy.random.default_rng(0)
    x = (rng.standard_normal((4, 3, 5, 2)) * 50 + offset).astype(F16)
    gamma, beta = rng.standard_normal(3).astype(F32), rng.standard_normal(3).astype(F32)
    rm, rv = numpy.zeros(3, F32), numpy.ones(3, F32)
    gm, bt = gamma.reshape(1, 3, 1, 1).astype(F64), beta.reshape(1, 3, 1, 1).astype(F64)
    y = ops.batch_norm(Tensor(x), Tensor(gamma), Tensor(beta), rm, rv, True, momentum=0.1)
    assert y.dtype == F16 and rm.dtype == F32 and rv.dtype == F32
    # statistics and x̂ in fp32 (at offset 30000 the fp32 x - μ alone is off by ~1e-3)
    ref = norm_by_hand(x, gm.astype(F32), bt.astype(F32), (0, 2, 3), 1e-5, dtype=F32)
    assert (ulps(y.asnumpy(), ref.astype(F16)) <= 1).all()
    x64 = x.astype(F64)
    numpy.testing.assert_allclose(rm, 0.1 * x64.mean((0, 2, 3)), rtol=1e-6)
    numpy.testing.assert_allclose(rv, 0.9 + 0.1 * x64.var((0, 2, 3), ddof=1), rtol=1e-5)
    y = ops.batch_norm(Tensor(x), Tensor(gamma), Tensor(beta), rm, rv, False)
    ref = norm_by_hand(
        x,
        gm,
        bt,
        None,
        1e-5,
        rm.astype(F64).reshape(1, 3, 1, 1),
        rv.astype(F64).reshape(1, 3, 1, 1),
    )
    with numpy.errstate(over="ignore"):
        assert_close_to_rounded(y.asnumpy(), ref, 1)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_gradients_match_float64(training):
    rng = numpy.random.default_rng(1)
    x = nchw(rng, (4, 3, 2, 2))
    gamma, beta = rng.standard_normal(3).astype(F32), rng.standard_normal(3).astype(F32)
    rm, rv = rng.standard_normal(3).astype(F32), rng.random(3).astype(F32) + 0.5

    def fn(x, gamma, beta):
        return ops.batch_norm(x, gamma, beta, rm.copy(), rv.copy(), training)

    check_backward(fn, [x, gamma, beta])
    gx, gg, gb = grads(fn, [x, gamma, beta], nchw(rng, x.shape))
    assert (gx.dtype, gg.dtype, gb.dtype) == (F16, F32, F32)


def test_layer_norm_fp16_forward_and_gradients():
    rng = numpy.random.default_rng(2)
    x = (rng.standard_normal((3, 4, 5)) * 100 + 20000).astype(F16)
    gamma, beta = rng.standard_normal((4, 5)).astype(F16), rng.standard_normal((4, 5)).astype(F16)
    y = ops.layer_norm(
        Tensor(x), Tensor(gamma), Tensor(beta), begin_norm_axis=1, begin_params_axis=1
    )
    assert y.dtype == F16
    ref = norm_by_hand(x, gamma.astype(F32), beta.astype(F32), (1, 2), 1e-5, dtype=F32)
    assert (ulps(y.asnumpy(), ref.astype(F16)) <= 1).all()
    x = nchw(rng, (3, 4, 5))
    check_backward(lambda x, g, b: ops.layer_norm(x, g, b, 1, 1), [x, gamma, beta])
    check_backward(lambda x, g, b: ops.layer_norm(x, g, b, -1, -1), [x, gamma[0], beta[0]])


def test_norms_propagate_nan_per_group_only():
    x = numpy.ones((2, 3), F16)
    x[0, 1] = numpy.nan
    x[1] = [1, 2, 3]
    with numpy.errstate(invalid="ignore"):  # NaN and inf - inf in the statistics, as NumPy warns
        y = ops.layer_norm(Tensor(x), None, None).asnumpy()
    assert numpy.isnan(y[0]).all() and numpy.isfinite(y[1]).all()
    x = numpy.arange(12, dtype=F16).reshape(4, 3)
    x[2, 0] = numpy.inf
    with numpy.errstate(invalid="ignore"):
        y = ops.batch_norm(Tensor(x), None, None, None, None, True).asnumpy()
    assert numpy.isnan(y[:, 0]).all() and numpy.isfinite(y[:, 1:]).all()


@pytest.mark.parametrize("training", [True, False])
def test_fp16_input_with_fp32_parameters_equals_casting_around_fp32(training):
    """batch_norm of fp16 x with fp32 γ, β gives the bits of casting x to fp32, normalising and
    casting back, and the same gradients and running statistics: fp16 computes in fp32 and
    rounds once."""
    rng = numpy.random.default_rng(4)
    x16 = (rng.standard_normal((6, 3, 5, 4)) * 2 + 1).astype(F16).transpose(0, 2, 3, 1).copy()
    x16 = x16.transpose(0, 3, 1, 2)  # channels-last, as a conv output
    g16 = rng.standard_normal(x16.shape).astype(F16)
    gamma, beta = rng.uniform(0.5, 1.5, 3).astype(F32), rng.standard_normal(3).astype(F32)
    results = []
    for around in (False, True):
        xt, gt, bt = (Tensor(a, requires_grad=True) for a in (x16, gamma, beta))
        stats = [numpy.linspace(-1, 1, 3).astype(F32), numpy.linspace(0.5, 2, 3).astype(F32)]
        x = ops.cast(xt, F32) if around else xt
        out = ops.batch_norm(x, gt, bt, *stats, training=training)
        out = ops.cast(out, F16) if around else out
        assert out.dtype == F16
        out.backward(Tensor(g16))
        results.append([out.data, xt.grad.data, gt.grad.data, bt.grad.data, *stats])
    for got, want in zip(*results):
        assert got.dtype == want.dtype
        numpy.testing.assert_array_equal(got, want)
