"""``linalg.half_gemm``: the fp32 product of fp16 values, the same on the host, on the strict
device and (fp16 operands on the tensor cores, fp32 accumulation) on a GPU."""
import numpy
import pytest

from helpers import DEVICES
from minigrad import backend
from minigrad.ops.linalg import half_gemm
from minigrad.testing.strict_device import strict_device


def _operands(m=33, k=70, n=17, seed=0):
    rng = numpy.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(numpy.float16)
    b = rng.standard_normal((k, n)).astype(numpy.float16)
    return a, b


def _reference(a, b):
    return a.astype(numpy.float64) @ b.astype(numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("widened", [False, True], ids=["fp16", "fp32 holding fp16"])
def test_fp32_product_of_fp16_values(device, widened):
    a, b = _operands()
    if widened:
        a, b = a.astype(numpy.float32), b.astype(numpy.float32)
    xp = backend.cupy if device == "GPU" else numpy
    out = half_gemm(xp.asarray(a), xp.asarray(b.T.copy()).T)  # b as a transposed view
    assert out.dtype == numpy.float32 and out.shape == (33, 17)
    assert backend.device_of(out) == device
    numpy.testing.assert_allclose(backend.as_numpy(out), _reference(a, b), rtol=1e-5, atol=1e-4)


def test_the_strict_device_takes_the_widened_product():
    a, b = _operands(4, 5, 3)
    with strict_device() as reads:
        xp = backend.cupy
        out = half_gemm(xp.asarray(a), xp.asarray(b))
        assert backend.device_of(out) == "GPU" and out.dtype == numpy.float32
        assert reads.count == 0
        numpy.testing.assert_array_equal(out.get(), a.astype(numpy.float32) @ b.astype(
            numpy.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_empty_products(device):
    xp = backend.cupy if device == "GPU" else numpy
    out = half_gemm(xp.zeros((3, 0), numpy.float16), xp.zeros((0, 2), numpy.float16))
    assert out.shape == (3, 2) and not backend.as_numpy(out).any()


def test_shapes_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match=r"half_gemm: a and b must be 2-D .* got \(2, 3\) and "
                                         r"\(2, 3\)"):
        half_gemm(numpy.ones((2, 3), numpy.float16), numpy.ones((2, 3), numpy.float16))
