"""Native host passes of max pooling (``kernels/pool_host.cpp``, built into the host library of
``minigrad._native``) over channels-last batches.

The NumPy path of ``ops/pooling.py`` takes a compare, a maximum and an argmax update per
kernel tap, each a pass over the output, and a select per tap for the gradient. These passes
read each window once and write each output and each gradient element once, on the host
library's threads (``minigrad._host_threads``), with the NumPy path's bits: the same maximum
(NumPy's tie and NaN rules), the same first-maximum argmax, the same gradient
(``tests/ops/test_pool_host.py``). They apply to channels-last NumPy arrays when the host
library is loaded; elsewhere (and with ``MINIGRAD_NATIVE=0``) they return None and the caller
takes its NumPy path.
"""
import numpy

from minigrad import _native
from minigrad.backend import data_address
from minigrad.ops.windows import is_channels_last

_F16, _F32 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)
MAX_POOL_TAPS = 255  # the argmax is the tap index, a uint8


def _geometry(x_shape, x_strides, kernel, out_hw, stride, padding):
    """The kernels' int64[15]: N, C, H, W, the input's N, H, W strides in elements, kh, kw,
    Ho, Wo, the stride and the (top, left) padding."""
    return numpy.array([*x_shape, *x_strides, *kernel, *out_hw, *stride, padding[0], padding[2]],
                       numpy.int64)


def max_pool(x, kernel, stride, padding, out_hw):
    """Max pooling of the float32 NumPy array ``x`` (N, C, H, W), stored with its channels
    adjacent (any strides for N, H and W), over windows of ``kernel`` taps at ``stride`` with
    ``padding`` (top, bottom, left, right) read as -inf: ``(out, argmax)``, both channels-last
    (N, C, Ho, Wo) views, ``argmax`` the uint8 row-major tap index of the first maximum. None
    (nothing computed) where the pass does not apply: another dtype or layout, more than
    ``MAX_POOL_TAPS`` taps, no host library."""
    host = _native.host_build or _native.loaded()
    if (host.lib is None or type(x) is not numpy.ndarray or x.dtype != _F32 or not x.size
            or not x.flags.aligned or (x.strides[1] != x.itemsize and x.shape[1] > 1)
            or kernel[0] * kernel[1] > MAX_POOL_TAPS):
        return None
    n, c = x.shape[:2]
    out = numpy.empty((n, *out_hw, c), _F32)
    argmax = numpy.empty((n, *out_hw, c), numpy.uint8)
    s_n, _, s_h, s_w = (s // x.itemsize for s in x.strides)
    params = _geometry(x.shape, (s_n, s_h, s_w), kernel, out_hw, stride, padding)
    host.lib.mg_maxpool_float(data_address(x), data_address(out), data_address(argmax),
                              data_address(params))
    return out.transpose(0, 3, 1, 2), argmax.transpose(0, 3, 1, 2)


def max_pool_grad(g, argmax, x_shape, kernel, stride, padding, disjoint):
    """dx (N, C, H, W), channels-last, of a max pooling whose output gradient is ``g`` and tap
    indices ``argmax`` (both channels-last (N, C, Ho, Wo) NumPy arrays, as ``max_pool`` gives):
    each element gets g where the window reading it has its argmax there, else +0. Disjoint
    windows copy g's bits (fp16 or float32, dx of g's dtype); overlapping ones add the shares
    in float32 in tap order (g float32). None where the pass does not apply."""
    host = _native.host_build or _native.loaded()
    if (host.lib is None or type(g) is not numpy.ndarray
            or g.dtype not in ((_F16, _F32) if disjoint else (_F32,))
            or not (is_channels_last(g) and is_channels_last(argmax) and g.flags.aligned)
            or argmax.dtype != numpy.uint8 or g.shape != argmax.shape
            or not g.size or 0 in x_shape):
        return None
    n, c, h, w = x_shape
    dx = numpy.empty((n, h, w, c), g.dtype)  # every element written
    params = _geometry(x_shape, (0, 0, 0), kernel, g.shape[2:], stride, padding)
    host.lib.mg_maxpool_grad(data_address(g), data_address(argmax), data_address(dx),
                             data_address(params), g.itemsize if disjoint else 0)
    return dx.transpose(0, 3, 1, 2)
