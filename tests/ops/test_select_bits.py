"""ops._util.select_bits against NumPy's where, bit for bit."""
import numpy
import pytest

from helpers.fp16 import F16, F32, assert_bits
from minigrad.ops._util import select_bits


@pytest.mark.parametrize("dtype", [F16, F32, numpy.float64])
def test_select_bits_gives_a_selects_bits(dtype):
    # g's bit patterns times the mask: g itself or +0, for -0, infinities, NaN and subnormals
    g = numpy.array([1.5, -2.0, -0.0, numpy.inf, -numpy.inf, numpy.nan, -numpy.nan,
                     float(numpy.finfo(dtype).smallest_subnormal), -3.25], dtype)
    mask = numpy.array([True, False, True, False, True, False, True, False, False])
    want = numpy.where(mask, g, g.dtype.type(0))
    assert_bits(select_bits(g, mask), want)
    assert_bits(select_bits(g[::-1], mask[::-1]), want[::-1])  # a strided view
    out = numpy.full(g.shape, 7, dtype)
    select_bits(g, mask, out=out)
    assert_bits(out, want)
