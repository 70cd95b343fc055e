"""The per-channel helpers of ops/_util.py: ``sum_axes`` and ``dot_axes`` against float64 on
every layout of an image batch and on Tensors; ``per_channel`` against NumPy's broadcasting,
bit for bit."""
import numpy
import pytest

from helpers.fp16 import F32, F64
from helpers.layouts import layouts
from minigrad import Tensor
from minigrad.ops._util import dot_axes, per_channel, sum_axes


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape,axes", [((8, 5, 6, 7), (0, 2, 3)), ((9, 4, 1, 1), (0, 2, 3)),
                                        ((0, 3, 2, 2), (0, 2, 3))], ids=str)
def test_dot_axes_matches_float64_on_every_layout(shape, axes, dtype):
    rng = numpy.random.default_rng(0)
    a, b = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    want = (a.astype(F64) * b.astype(F64)).sum(axis=axes, keepdims=True)
    for name_a, va in layouts(a).items():
        for name_b, vb in layouts(b).items():
            got = dot_axes(va, vb, axes)
            assert got.dtype == dtype and got.shape == want.shape, (name_a, name_b)
            numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    numpy.testing.assert_allclose(dot_axes(a, a, axes), sum_axes(a * a, axes), rtol=1e-6)


def test_dot_axes_of_an_nc_batch_and_of_tensors():
    rng = numpy.random.default_rng(1)
    a, b = rng.standard_normal((50, 3)).astype(F32), rng.standard_normal((50, 3)).astype(F32)
    want = (a.astype(F64) * b).sum(axis=0, keepdims=True)
    numpy.testing.assert_allclose(dot_axes(a, b, (0,)), want, rtol=1e-5)
    got = dot_axes(Tensor(a), Tensor(b), (0,))
    assert isinstance(got, Tensor)
    numpy.testing.assert_allclose(got.data, want, rtol=1e-5)


def test_dot_axes_keeps_the_accuracy_of_many_rows():
    # 2**18 rows of one channel, channels-last: the partial sums over N are added in float64,
    # so the result is within a few ulps of the exact sum (a row-after-row fp32 sum is not)
    a = numpy.full((64, 1, 64, 64), 0.1, F32)
    got = dot_axes(a, numpy.ones_like(a), (0, 2, 3))
    numpy.testing.assert_allclose(got.ravel(), [a.size * float(numpy.float32(0.1))], rtol=1e-6)


@pytest.mark.parametrize("op", [numpy.add, numpy.subtract, numpy.multiply],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape", [(3, 5, 4, 7), (2, 16, 1, 1), (4, 3, 6), (5, 3), (0, 3, 2, 2)],
                         ids=str)
def test_per_channel_gives_broadcastings_bits_on_every_layout(shape, dtype, op):
    rng = numpy.random.default_rng(2)
    a = rng.standard_normal(shape).astype(dtype)
    v = rng.standard_normal((1, shape[1]) + (1,) * (len(shape) - 2)).astype(dtype)
    want = op(a, v)
    views = layouts(a) if len(shape) == 4 else {"c": a, "channels_last": numpy.ascontiguousarray(
        numpy.moveaxis(a, 1, -1)).transpose(0, -1, *range(1, len(shape) - 1))}
    for name, view in views.items():
        out = numpy.empty_like(view)  # the view's memory order (channels-last stays so)
        assert per_channel(op, view, v, out) is out
        numpy.testing.assert_array_equal(out, want, err_msg=name)
        own = numpy.array(view, order="K")  # in place, as batch norm's passes run
        assert per_channel(op, own, v, own) is own
        numpy.testing.assert_array_equal(own, want, err_msg=name)
