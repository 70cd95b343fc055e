"""The memory layouts an image batch (N, C, H, W) comes in, for the layout tests of the image
ops: the same values stored NCHW (C order), channels-last, and as a strided view."""
import numpy

from minigrad.testing import noncontiguous


def channels_last(x):
    """``x``'s values in an (N, C, H, W) array stored channels-last."""
    return numpy.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def layouts(x):
    """``x``'s values stored NCHW, channels-last and as a strided view, by name."""
    return {"nchw": x, "channels_last": channels_last(x), "strided": noncontiguous(x)}


def is_channels_last(a):
    """Whether the (N, C, H, W) array ``a`` is stored channels-last."""
    return a.transpose(0, 2, 3, 1).flags.c_contiguous
