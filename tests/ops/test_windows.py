"""The layout helpers of ops/windows.py: padding into either layout, cropping back, and the
channels-last test."""
import numpy
import pytest

from helpers.layouts import channels_last, is_channels_last, layouts
from minigrad.ops import windows


@pytest.mark.parametrize("name", ["nchw", "channels_last", "strided"])
@pytest.mark.parametrize("to_channels_last", [True, False])
def test_pad_fills_the_border_keeps_the_inside_and_picks_the_layout(name, to_channels_last):
    x = numpy.arange(2 * 3 * 4 * 5, dtype=numpy.float32).reshape(2, 3, 4, 5)
    padding = (1, 2, 0, 3)
    out = windows.pad(layouts(x)[name], padding, -numpy.inf, to_channels_last)
    want = numpy.pad(x, ((0, 0), (0, 0), (1, 2), (0, 3)), constant_values=-numpy.inf)
    numpy.testing.assert_array_equal(out, want)
    assert is_channels_last(out) == to_channels_last
    assert out.flags.c_contiguous != to_channels_last
    numpy.testing.assert_array_equal(windows.crop(out, padding, (4, 5)), x)


def test_pad_returns_the_input_itself_when_nothing_changes():
    x = numpy.ones((2, 3, 4, 5), numpy.float32)
    assert windows.pad(x, (0, 0, 0, 0), 0, channels_last=False) is x
    cl = channels_last(x)
    assert windows.pad(cl, (0, 0, 0, 0), 0, channels_last=True) is cl
    # another layout, or a dtype to convert to: a new array
    moved = windows.pad(x, (0, 0, 0, 0), 0, channels_last=True)
    assert moved is not x and is_channels_last(moved)
    wide = windows.pad(x.astype(numpy.float16), (0, 0, 0, 0), 0, False, dtype=numpy.float32)
    assert wide.dtype == numpy.float32 and wide.flags.c_contiguous


def test_empty_image_and_channels_last_of_size_one_axes():
    a = windows.empty_image(numpy, (2, 3, 4, 5), numpy.float32, channels_last=True)
    assert a.shape == (2, 3, 4, 5) and is_channels_last(a) and windows.is_channels_last(a)
    b = windows.empty_image(numpy, (2, 3, 4, 5), numpy.float32, channels_last=False)
    assert b.flags.c_contiguous and not windows.is_channels_last(b)
    # one channel: NCHW and channels-last are the same memory order
    assert windows.is_channels_last(numpy.zeros((2, 1, 4, 5)))
