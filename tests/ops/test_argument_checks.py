"""The ops check their arguments by minigrad._checks' rule: a float where an int belongs is a
TypeError (never truncated), an int out of range a ValueError, each naming the argument."""
import numpy
import pytest

from minigrad import Tensor, ops

X = Tensor(numpy.ones((1, 2, 6, 6), numpy.float32))
W = Tensor(numpy.ones((4, 2, 3, 3), numpy.float32))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(stride=1.5), "stride"),
        (dict(stride=(1, 1.5)), "stride"),
        (dict(stride=True), "stride"),
        (dict(dilation=2.0), "dilation"),
        (dict(padding=1.0), "padding"),
        (dict(padding=None), "padding"),
        (dict(groups=1.0), "groups"),
        (dict(groups="1"), "groups"),
    ],
)
def test_conv2d_refuses_non_ints_with_type_error(kwargs, name):
    with pytest.raises(TypeError, match=f"^{name} must be .*int.*, got "):
        ops.conv2d(X, W, **kwargs)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(stride=0), "stride"),
        (dict(stride=(1, 2, 3)), "stride"),
        (dict(padding=-1), "padding"),
        (dict(padding=(1, 2, 3)), "padding"),
        (dict(groups=0), "groups"),
        (dict(stride=2**70), "stride"),
    ],
)
def test_conv2d_refuses_ints_out_of_range_with_value_error(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} must be "):
        ops.conv2d(X, W, **kwargs)


@pytest.mark.parametrize("op", [ops.max_pool2d, ops.avg_pool2d])
def test_pooling_refuses_float_sizes(op):
    with pytest.raises(
        TypeError, match=r"^kernel_size must be a positive int .*got 2\.0 \(float\)"
    ):
        op(X, 2.0)
    with pytest.raises(TypeError, match=r"^stride must be a positive int .*got 1\.5 \(float\)"):
        op(X, 2, stride=1.5)
    with pytest.raises(ValueError, match=r"^stride must be a positive int.*int64"):
        op(X, 2, stride=2**70)


def test_conv2d_still_takes_numpy_ints_and_pairs():
    out = ops.conv2d(X, W, stride=numpy.int64(1), padding=(numpy.int32(1), 1), groups=numpy.int8(1))
    assert out.shape == (1, 4, 6, 6)
