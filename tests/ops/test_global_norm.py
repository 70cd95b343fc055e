"""ops.global_norm on arrays large enough for the fast fp16 converter: the norm and the in-place
scaling give the bits of NumPy's float32 arithmetic (fp16 widened, fp32 result rounded once), on
contiguous arrays and on strided views, with inf and NaN quiet."""
import warnings

import numpy as np
import pytest

from minigrad._fp16_host import MIN_SIZE
from minigrad.ops.global_norm import global_norm, scale_in_place

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


def _arrays(dtype):
    rng = np.random.default_rng(7)
    big = (rng.standard_normal(3 * MIN_SIZE) * 40).astype(dtype)
    matrix = (rng.standard_normal((128, 96)) * 3).astype(dtype)
    return [big, matrix[:, ::2], np.zeros(0, dtype)]  # contiguous, a strided view, empty


@pytest.mark.parametrize("dtype", [F16, F32])
def test_the_norm_is_numpys_float32_norm(dtype):
    arrays = _arrays(dtype)
    per_array = [np.abs(a.astype(F32).reshape(-1)) for a in arrays if a.size]
    expected_2 = np.sqrt(np.sum(np.array([float(np.sqrt(v @ v)) for v in per_array]) ** 2))
    assert global_norm(arrays) == float(expected_2)
    assert global_norm(arrays, np.inf) == max(float(v.max()) for v in per_array)


@pytest.mark.parametrize("dtype", [F16, F32])
def test_scaling_in_place_rounds_once_to_the_arrays_dtype(dtype):
    arrays = _arrays(dtype)
    expected = [(a.astype(F32) * F32.type(0.3)).astype(dtype) for a in arrays]
    scale_in_place(arrays, 0.3)
    for got, want in zip(arrays, expected):
        assert got.dtype == dtype
        assert got.tobytes() == want.tobytes()  # bit for bit, NaN payloads included


def test_an_fp16_inf_scales_to_nan_and_the_norm_is_inf_without_a_warning():
    big = np.full(2 * MIN_SIZE, 2.0, F16)
    big[5] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert global_norm([big]) == np.inf
        scale_in_place([big], np.nan)
    assert np.isnan(big).all()
    big[...] = 60000.0
    scale_in_place([big], 2.0)  # overflows fp16: inf, quietly
    assert np.isposinf(big).all()
