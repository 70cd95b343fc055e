"""Native host passes of the image ops (``kernels/image_host.cpp``, built into the host library
of ``minigrad._native``): a convolution's patch matrix written in one pass.

NumPy writes a patch matrix by copying a strided window view of a zero-padded, channels-last
copy of the input: two passes, the second over a six-axis view whose innermost run is one
pixel's channels. ``patch_matrix`` reads the input where it lies (any axis order, the padding
read as zeros without a padded copy) and writes every row once, on the calling thread
(``kernels/image_host.cpp`` says why one). It only copies, so its bits are NumPy's
(``tests/ops/test_image_host.py``). It applies to float32 NumPy arrays when the host library
is loaded; for everything else (and with ``MINIGRAD_NATIVE=0``) it returns None and the caller
takes its NumPy path.
"""
import numpy

from minigrad import _native
from minigrad.backend import data_address

_F32 = numpy.dtype(numpy.float32)


def patch_matrix(x, geometry, out_hw, out, channels=None):
    """Write the patch matrix of the float32 NumPy array ``x`` (N, C, H, W) into ``out``, an
    (N·Ho·Wo, kh·kw·Cg) C-ordered float32 array: row (n, y, x), columns (i, j, c), the taps
    of channels ``channels`` (a slice of C; default all) read at
    ``x[n, c, y·sh - top + i·dh, x·sw - left + j·dw]``, zero outside ``x``.

    ``geometry`` is (stride, padding (top, bottom, left, right), dilation, kernel), each a
    pair but padding. Returns ``out``, or None (nothing written) where the pass does not apply.
    """
    host = _native.host_build or _native.loaded()
    if (host.lib is None or type(x) is not numpy.ndarray or x.dtype != _F32 or not x.size
            or not x.flags.aligned or type(out) is not numpy.ndarray or out.dtype != _F32
            or not (out.flags.c_contiguous and out.flags.writeable)):
        return None
    stride, padding, dilation, kernel = geometry
    if channels is not None:
        x = x[:, channels]
    n, c, h, w = x.shape
    if out.shape != (n * out_hw[0] * out_hw[1], kernel[0] * kernel[1] * c):
        return None
    params = numpy.array([n, c, h, w, *(s // x.itemsize for s in x.strides), *kernel, *out_hw,
                          *stride, padding[0], padding[2], *dilation], numpy.int64)
    host.lib.mg_im2col_float(data_address(x), data_address(out), data_address(params))
    return out
