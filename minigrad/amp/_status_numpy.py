"""Float-status check (and check+unscale) with array operations only: the path for float64,
for CPUs without a C++ compiler, and the semantics the kernels must match.

A value is inf or NaN exactly when its magnitude bits, read as an unsigned integer, exceed those
of the largest finite value. That integer test is much faster in NumPy than ``isfinite`` on
float16 (whose ufuncs convert through float32), and it runs in blocks so that the temporary
stays in cache.
"""
import numpy

from minigrad import backend

# dtype -> (same-size unsigned type, mask clearing the sign bit, bits of the largest finite)
_BITS = {
    numpy.dtype(numpy.float16): (numpy.uint16, 0x7FFF, 0x7BFF),
    numpy.dtype(numpy.float32): (numpy.uint32, 0x7FFFFFFF, 0x7F7FFFFF),
    numpy.dtype(numpy.float64): (numpy.uint64, 0x7FFFFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF),
}
_BLOCK = 1 << 18  # elements per NumPy pass


def has_nonfinite(x):
    """Whether ``x`` (not empty) holds inf or NaN: a bool, or a 0-d device bool for CuPy."""
    utype, magnitude, largest = _BITS[x.dtype]
    bits = x.reshape(-1).view(utype)
    if backend.get_array_module(x) is not numpy:
        return (bits & utype(magnitude)).max() > largest
    scratch = numpy.empty(min(_BLOCK, bits.size), utype)
    for start in range(0, bits.size, _BLOCK):
        block = scratch[:min(_BLOCK, bits.size - start)]
        numpy.bitwise_and(bits[start:start + _BLOCK], magnitude, out=block)
        if block.max() > largest:
            return True
    return False


def check(status, arrays, inv_scale=None):
    """Set ``status[0]`` to 1 if any array holds inf/NaN; with ``inv_scale``, multiply in place.

    The flag is taken from the values before the multiplication. float16 and float32 arrays are
    multiplied in float32 and rounded back (as the kernels do); float64 in float64.
    """
    xp = backend.get_array_module(status)
    for x in arrays:
        if x.size == 0:
            continue
        xp.maximum(status[:1], has_nonfinite(x), out=status[:1])
        if inv_scale is not None:
            factor = (numpy.float64(inv_scale) if x.dtype == numpy.float64
                      else numpy.float32(inv_scale))
            with numpy.errstate(over="ignore", invalid="ignore"):  # inf/NaN are what we report
                xp.multiply(x, factor, out=x)
