"""Bit-exact comparisons of float arrays, and the unscale every float-status engine computes."""
import numpy

from minigrad import backend

UINT = {2: numpy.uint16, 4: numpy.uint32, 8: numpy.uint64}


def from_bits(bits, dtype):
    """The values of ``dtype`` (numpy.dtype) whose bit patterns are ``bits``."""
    return numpy.array(bits, dtype=UINT[dtype.itemsize]).view(dtype)


@numpy.errstate(over="ignore", invalid="ignore")
def ref_unscale(a, inv_scale):
    """``a * inv_scale`` as the kernels compute it: fp16/fp32 through fp32, float64 as is."""
    if a.dtype == numpy.float64:
        return a * inv_scale
    return (a.astype(numpy.float32) * numpy.float32(inv_scale)).astype(a.dtype)


def assert_same_values(actual, expected):
    """Equal bit for bit (so -0.0 and subnormals count), except that any NaN matches any NaN."""
    actual, expected = backend.as_numpy(actual), numpy.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    nan = numpy.isnan(expected)
    numpy.testing.assert_array_equal(numpy.isnan(actual), nan)
    utype = UINT[expected.dtype.itemsize]
    numpy.testing.assert_array_equal(actual[~nan].view(utype), expected[~nan].view(utype))
