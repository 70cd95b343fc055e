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


@pytest.mark.parametrize("kernel,stride,dilation", [
    ((1, 3), (1, 2), (1, 1)), ((3, 2), (3, 1), (2, 3)), ((2, 3), (2, 2), (1, 2)),
    ((3, 3), (1, 1), (1, 1))])
@pytest.mark.parametrize("padding", [(0, 0, 0, 0), (1, 0, 0, 2), (2, 1, 3, 0), (3, 3, 1, 2)])
@pytest.mark.parametrize("in_hw", [(1, 1), (2, 5), (7, 4)])
def test_inside_window_slices_pair_each_tap_with_what_it_reads_inside(kernel, stride, dilation,
                                                                     padding, in_hw):
    # by definition: tap (i, j) of output (oy, ox) reads the padded input at
    # (s·oy + d·i, s·ox + d·j), i.e. input (y, x) less the padding before, when that is inside
    (kh, kw), (s0, s1), (d0, d1), (top, bottom, left, right), (h, w) = (
        kernel, stride, dilation, padding, in_hw)
    if h + top + bottom < d0 * (kh - 1) + 1 or w + left + right < d1 * (kw - 1) + 1:
        return
    ho, wo = windows.output_hw(in_hw, kernel, stride, padding, dilation)
    want = {(i, j, y, x, oy, ox) for i in range(kh) for j in range(kw)
            for oy in range(ho) for ox in range(wo)
            for y, x in [(s0 * oy + d0 * i - top, s1 * ox + d1 * j - left)]
            if 0 <= y < h and 0 <= x < w}
    got = set()
    for i, j, rows, cols, out_rows, out_cols in windows.inside_window_slices(
            kernel, stride, dilation, padding, in_hw, (ho, wo)):
        ys, xs = range(h)[rows], range(w)[cols]
        oys, oxs = range(ho)[out_rows], range(wo)[out_cols]
        assert len(ys) == len(oys) > 0 and len(xs) == len(oxs) > 0
        got |= {(i, j, y, x, oy, ox) for y, oy in zip(ys, oys) for x, ox in zip(xs, oxs)}
    assert got == want
