"""Small helpers for op tests: non-contiguous inputs and forward comparison against NumPy."""
import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_operand, check_relation

# (atol, rtol) for a forward result stored in each dtype against a float64 NumPy reference:
# a few roundings of the inputs and the output, nothing accumulated in low precision
_FORWARD_TOLERANCES = {
    numpy.dtype(numpy.float16): (2e-3, 4e-3),
    numpy.dtype(numpy.float32): (1e-6, 1e-5),
    numpy.dtype(numpy.float64): (1e-12, 1e-10),
}


def noncontiguous(array):
    """The same values in a strided view (every other element of a buffer twice as long).

    Ops must not assume C-contiguous inputs (CUDA kernels especially); Chainer's op tests use
    views like this by default.

    A 0-d array is returned as it is (it has no stride to change).

    Raises:
        TypeError: for an ``array`` that is not a NumPy or CuPy array (a NumPy scalar, a Tensor,
            a list).
    """
    check_relation("array", array, isinstance(array, numpy.ndarray)
                   or hasattr(array, "__cuda_array_interface__"), "a NumPy or CuPy array",
                   error=TypeError, owner="noncontiguous")
    xp = backend.get_array_module(array)
    if array.ndim == 0:
        return array
    buffer = xp.zeros(array.shape[:-1] + (2 * array.shape[-1],), array.dtype)
    view = buffer[..., ::2]
    view[...] = array
    return view


def assert_forward(actual, expected, dtype=None):
    """Check a Tensor (or array) against a float64 NumPy reference with the dtype's tolerance.

    Also checks the shape, and the dtype when ``dtype`` is given.

    Raises:
        AssertionError: for values, a shape or a dtype that differ.
        TypeError / ValueError: for an ``actual`` or ``expected`` that is not a Tensor, an array
            or numbers, or a ``dtype`` that is not one.
    """
    from minigrad.tensor import Tensor
    for name, value in (("actual", actual), ("expected", expected)):
        if not isinstance(value, Tensor):
            check_operand(name, value, owner="assert_forward")
    if dtype is not None:
        dtypes.as_dtype(dtype, owner="assert_forward")
    array = backend.as_numpy(actual.data if isinstance(actual, Tensor) else actual)
    expected = numpy.asarray(expected)
    if dtype is not None:
        assert array.dtype == numpy.dtype(dtype), (f"result dtype {array.dtype}, expected "
                                                   f"{numpy.dtype(dtype)}")
    assert array.shape == expected.shape, f"result shape {array.shape}, expected {expected.shape}"
    atol, rtol = _FORWARD_TOLERANCES.get(array.dtype, (0, 0))
    numpy.testing.assert_allclose(array.astype(numpy.float64), expected, atol=atol, rtol=rtol)
