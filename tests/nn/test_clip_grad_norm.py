"""Gradient clipping: PyTorch's ``nn.utils.clip_grad_norm_`` and MindSpore's
``ops.clip_by_global_norm``, against NumPy in float64, fp16-safe, quiet on an inf step."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from minigrad import Parameter, Tensor, nn, ops
from minigrad.amp import GradScaler


def _params(values, dtype):
    params = []
    for v in values:
        p = Parameter(Tensor(np.zeros_like(v, dtype)))
        p.grad = Tensor(np.array(v, dtype))
        params.append(p)
    return params


def _reference_norm(values, p):
    flat = np.concatenate([np.asarray(v, np.float64).reshape(-1) for v in values])
    return np.abs(flat).max() if p == math.inf else (np.abs(flat) ** p).sum() ** (1 / p)


@pytest.mark.parametrize("dtype, rtol", [(np.float16, 2e-3), (np.float32, 1e-5)])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@given(st.lists(st.floats(-50, 50, width=16), min_size=1, max_size=20),
       st.floats(0.01, 100))
def test_clip_grad_norm_matches_pytorchs_formula(dtype, rtol, norm_type, values, max_norm):
    grads = [np.array(values[: len(values) // 2 + 1]), np.array(values[len(values) // 2:])]
    grads = [g.astype(dtype) for g in grads]
    params = _params(grads, dtype)
    total = nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    expected = _reference_norm(grads, norm_type)
    assert float(total.asnumpy()) == pytest.approx(expected, rel=rtol, abs=1e-6)
    coef = min(1.0, max_norm / (expected + 1e-6))
    for p, g in zip(params, grads):
        assert p.grad.dtype == dtype
        np.testing.assert_allclose(p.grad.asnumpy().astype(np.float64), g.astype(np.float64) * coef,
                                   rtol=rtol, atol=1e-6 if dtype == np.float32 else 1e-3)


def test_the_fp16_norm_is_accumulated_in_fp32():
    params = _params([np.full(100, 300.0)], np.float16)  # 300**2 is inf in fp16
    total = nn.utils.clip_grad_norm_(params, 1.0)
    assert total.dtype == np.float32 and float(total.asnumpy()) == pytest.approx(3000.0)
    assert np.isfinite(params[0].grad.asnumpy()).all()


def test_an_inf_step_gives_a_nonfinite_norm_without_a_warning():
    params = _params([np.array([1.0, np.inf])], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total = nn.utils.clip_grad_norm_(params, 1.0)
    assert math.isinf(float(total.asnumpy()))
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(_params([np.array([np.nan])], np.float32), 1.0,
                                 error_if_nonfinite=True)


@pytest.mark.parametrize("call, error, match", [
    (lambda ps: nn.utils.clip_grad_norm_(ps, -1.0), ValueError,
     r"clip_grad_norm_: max_norm must be a float in \[0\.0, inf\], got -1\.0"),
    (lambda ps: nn.utils.clip_grad_norm_(ps, "1"), TypeError,
     r"max_norm must be .*, got '1' \(str\)"),
    (lambda ps: nn.utils.clip_grad_norm_(ps, 1.0, norm_type=0), ValueError,
     r"norm_type must be a float in \(0\.0, inf\], got 0"),
    (lambda ps: nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=1), TypeError,
     r"error_if_nonfinite must be a bool, got 1 \(int\)"),
    (lambda ps: nn.utils.clip_grad_norm_(ps, 1.0, foreach="yes"), TypeError,
     r"foreach must be a bool, got 'yes' \(str\)"),
    (lambda ps: nn.utils.clip_grad_norm_([1.0], 1.0), TypeError,
     r"parameters must be a Tensor or an iterable of Tensors/Parameters, got \[1\.0\] \(list\)"),
])
def test_clip_grad_norm_refuses_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(_params([np.ones(2)], np.float32))


def test_the_pytorch_recipe_unscale_clip_step_runs_as_written():
    minigrad.set_seed(0)
    net = nn.Dense(4, 2)
    opt = nn.SGD(net.trainable_params(), 0.1)
    scaler = GradScaler(init_scale=1024.0)
    x = Tensor(np.full((3, 4), 10.0, np.float32))
    opt.zero_grad()
    scaler.scale((net(x) ** 2).mean()).backward()
    scaler.unscale_(opt)
    total = nn.utils.clip_grad_norm_(net.trainable_params(), max_norm=0.5)
    clipped = [p.grad.asnumpy().copy() for p in net.trainable_params()]
    assert float(total.asnumpy()) > 0.5
    assert _reference_norm(clipped, 2.0) == pytest.approx(0.5, rel=1e-4)
    before = [p.asnumpy().copy() for p in net.trainable_params()]
    assert scaler.step(opt) is True
    scaler.update()
    for p, b, g in zip(net.trainable_params(), before, clipped):
        np.testing.assert_allclose(p.asnumpy(), b - 0.1 * g, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_clip_by_global_norm_as_mindspore(dtype):
    x = (Tensor(np.array([3.0, 0.0], dtype)), Tensor(np.array([[4.0]], dtype)))
    clipped = ops.clip_by_global_norm(x, clip_norm=1.0)
    assert [c.dtype for c in clipped] == [dtype, dtype]
    np.testing.assert_allclose(clipped[0].asnumpy(), [0.6, 0.0], rtol=1e-3)
    np.testing.assert_allclose(clipped[1].asnumpy(), [[0.8]], rtol=1e-3)
    kept = ops.clip_by_global_norm(x, clip_norm=10.0)  # below clip_norm: unchanged
    np.testing.assert_array_equal(kept[0].asnumpy(), x[0].asnumpy())
    assert x[0].asnumpy()[0] == 3.0  # inputs untouched


def test_clip_by_global_norm_refusals_and_inf():
    x = (Tensor(np.array([1.0, np.inf], np.float32)),)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ops.clip_by_global_norm(x, 1.0)[0].asnumpy()
    assert out[0] == 0.0 and np.isnan(out[1])
    with pytest.raises(ValueError, match=r"clip_by_global_norm: clip_norm must be a finite float "
                                         r"in \(0\.0, inf\), got 0\.0"):
        ops.clip_by_global_norm(x, 0.0)
    with pytest.raises(ValueError, match=r"use_norm must be None .*, got Tensor"):
        ops.clip_by_global_norm(x, 1.0, use_norm=Tensor(np.float32(1.0)))
    with pytest.raises(TypeError, match=r"x must be a tuple or list of Tensors, got array\(.*\) "
                                        r"\(ndarray\)"):
        ops.clip_by_global_norm(np.ones(2), 1.0)
