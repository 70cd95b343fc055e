"""The saturating FP8 cast kernel (kernels/fp8_cast.cu) and its saturation counter against the
NumPy reference: on the CPU through the host build, on the GPU through CuPy."""
import numpy
import pytest

from helpers import NO_GPU
from minigrad import _native, backend
from minigrad.fp8 import E4M3, E5M2, saturation
from minigrad.fp8.formats import decode_table

FORMATS = pytest.mark.parametrize("fmt", [E4M3, E5M2], ids=["E4M3", "E5M2"])


def adversarial(fmt):
    rng = numpy.random.default_rng(0)
    eps = numpy.finfo(numpy.float32).eps
    special = [fmt.max, fmt.max * (1 + eps), fmt.max * (1 - eps), fmt.max * 1.07, 1e38,
               fmt.smallest_subnormal, fmt.smallest_subnormal / 2, fmt.smallest_subnormal * 1.5,
               2.0 ** (fmt.min_normal_exp - 1) * 3, 0.0, numpy.inf, numpy.nan, 464.0, 61440.0]
    table = decode_table(fmt)  # every FP8 value, and the midpoints between neighbours
    values = numpy.unique(numpy.abs(table[numpy.isfinite(table)]))
    mids = (values[1:].astype(numpy.float64) + values[:-1]) / 2
    x = numpy.concatenate([special, values, mids, rng.standard_normal(5000) * fmt.max / 2,
                           rng.standard_normal(5000) * fmt.smallest_subnormal * 4])
    x = x.astype(numpy.float32)
    return numpy.concatenate([x, -x])


@FORMATS
def test_reference_counts_what_it_clips(fmt):
    x = numpy.array([fmt.max * 2, -numpy.inf, numpy.nan, -numpy.nan, 1.0], dtype=numpy.float32)
    bits, saturated = saturation.reference(x, fmt)
    assert saturated == 2 and bits[2] == bits[3] == 0x7F
    assert bits[0] == bits[1] - 0x80 == (0x7E if fmt is E4M3 else 0x7B)


@pytest.mark.requires_native
@FORMATS
@pytest.mark.parametrize("scale", [1.0, 3.5, 2.0 ** -20])
def test_host_kernel_matches_the_numpy_reference(fmt, scale):
    x = adversarial(fmt)
    bits, saturated = saturation.saturating_cast(x, fmt, scale)
    want, count = saturation.reference(x, fmt, scale)
    bad = bits != want
    assert not bad.any(), (x[bad][:8], bits[bad][:8], want[bad][:8])
    assert saturated == count and (scale != 1.0 or count > 0)


@pytest.mark.requires_native
def test_host_kernel_counts_across_threads():
    x = numpy.full(saturation.HOST_PARALLEL_MIN * 3 + 7, 500.0, dtype=numpy.float32)
    x[::2] = 1.0
    bits, saturated = saturation.saturating_cast(x, "E4M3")
    assert saturated == numpy.count_nonzero(x > 448) and (bits[1::2] == 0x7E).all()


def test_numpy_fallback_gives_the_reference():
    x = adversarial(E4M3)
    with _native.numpy_fallback():
        bits, saturated = saturation.saturating_cast(x, "E4M3", 2.0)
    want, count = saturation.reference(x, "E4M3", 2.0)
    numpy.testing.assert_array_equal(bits, want)
    assert saturated == count


@pytest.mark.gpu
@NO_GPU
@FORMATS
def test_cuda_kernel_matches_the_numpy_reference(fmt):
    cupy = backend.cupy
    x = adversarial(fmt)
    bits, saturated = saturation.saturating_cast(cupy.asarray(x), fmt, 3.5)
    want, count = saturation.reference(x, fmt, 3.5)
    numpy.testing.assert_array_equal(cupy.asnumpy(bits), want)
    assert saturated == count


@pytest.mark.requires_native
@pytest.mark.parametrize("offset, size", [(1, 10), (0, 7), (3, 1), (2, 1027)])
def test_host_kernel_on_unaligned_views_and_leftover_elements(offset, size):
    x = numpy.linspace(-900, 900, offset + size, dtype=numpy.float32)[offset:]
    bits, saturated = saturation.saturating_cast(x, "E4M3")
    want, count = saturation.reference(x, "E4M3")
    numpy.testing.assert_array_equal(bits, want)
    assert saturated == count
