"""Native host passes of the image ops (``kernels/image_host.cpp`` and ``kernels/conv_host.cpp``,
built into the host library of ``minigrad._native``): a convolution's patch matrix written in
one pass, its input gradient gathered back from the patch gradients in one pass, and the
direct convolution kernels that need no patch matrix.

NumPy writes a patch matrix by copying a strided window view of a zero-padded, channels-last
copy of the input: two passes, the second over a six-axis view whose innermost run is one
pixel's channels. ``patch_matrix`` reads the input where it lies (any axis order, the padding
read as zeros without a padded copy) and writes every row once, the rows shared among the
host library's threads (``minigrad._host_threads``). It only copies, so its bits are NumPy's
(``tests/ops/test_image_host.py``). ``col2im`` replaces a zeroed array and one strided add
per kernel tap with one pass that writes each input-gradient element once, adding its
windows' patch gradients in the same tap order (the same bits). They apply to float32 NumPy
arrays when the host library is loaded; for everything else (and with
``MINIGRAD_NATIVE=0``) they return None and the caller takes its NumPy path.
"""
import numpy

from minigrad import _native
from minigrad.backend import data_address
from minigrad.ops.windows import output_hw

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


def col2im(dcols, x_shape, geometry, out_hw):
    """A convolution's input gradient, a new C-ordered (N, H, W, C) float32 array, from each
    group's tap-major patch gradients ``dcols[k]`` (kh·kw, N·Ho·Wo, Cg), C-ordered float32:
    every element the sum, from +0 in row-major tap order, of the patch gradients of the
    windows that read it (what a tap read in the padding is dropped). ``x_shape`` is the input's
    (N, C, H, W), ``geometry`` (stride, padding (top, bottom, left, right), dilation, kernel).
    None (nothing computed) where the pass does not apply."""
    host = _native.host_build or _native.loaded()
    n, c, h, w = x_shape
    stride, padding, dilation, kernel = geometry
    cg = c // len(dcols)
    rows = (kernel[0] * kernel[1], n * out_hw[0] * out_hw[1], cg)
    if (host.lib is None or 0 in x_shape
            or not all(_dense_f32(d) and d.shape == rows for d in dcols)):
        return None
    dx = numpy.empty((n, h, w, c), _F32)
    params = numpy.array([n, h, w, c, cg, *kernel, *out_hw, *stride, padding[0], padding[2],
                          *dilation], numpy.int64)
    for k, d in enumerate(dcols):  # group k's channels of dx
        host.lib.mg_col2im_float(data_address(d), data_address(dx) + k * cg * dx.itemsize,
                                 data_address(params))
    return dx


# Direct convolution (kernels/conv_host.cpp) against the patch matrix plus the BLAS products,
# both on the host library's threads (3x3, batch 64, 2 cores; ``benchmarks/conv_kernels.py``,
# ``results/conv_kernels.json``): the forward and weight-gradient passes together take 0.33x
# the time at 16->16 (32x32 images), 0.72x at 32->64 (16x16), 0.78x at 64->64 (8x8) and 0.96x
# at 64->128 (8x8: level with the BLAS within this machine's run-to-run noise, 1.02x in an
# earlier run), and 0.30x at 3->32 (32x32); the direct kernels also need no patch matrix
# (kh·kw times the input). They take convolutions with output channels a multiple of 16 and at
# most ``DIRECT_MAX_CHANNELS`` input and output channels.
DIRECT_MAX_CHANNELS = 64


def direct_applies(x, w, groups, dilation):
    """Whether ``direct_conv`` and ``direct_weight_grad`` serve a convolution of the float32
    NumPy array ``x`` (N, C, H, W) with ``w`` (O, C, kh, kw): one group, no dilation, a kernel
    larger than 1x1 (a 1x1 conv is the BLAS product alone), O a multiple of 16 (the kernels'
    vectors), C and O at most ``DIRECT_MAX_CHANNELS``, and the host library loaded."""
    c, o = x.shape[1], w.shape[0]
    return (groups == 1 and dilation == (1, 1) and w.shape[2:] != (1, 1)
            and type(x) is numpy.ndarray and x.dtype == _F32 and x.size > 0
            and o % 16 == 0 and 0 < c <= DIRECT_MAX_CHANNELS and 0 < o <= DIRECT_MAX_CHANNELS
            and (_native.host_build or _native.loaded()).lib is not None)


def _geometry(x, kernel, channels_out, stride):
    n, hp, wp, c = x.shape
    return numpy.array([n, hp, wp, c, channels_out, *kernel, *stride], numpy.int64)


def _dense_f32(*arrays):
    return all(type(a) is numpy.ndarray and a.dtype == _F32 and a.flags.c_contiguous
               and a.flags.aligned for a in arrays)


def direct_conv(x, w, stride):
    """``out[n, y, x, o] = Σ_{i, j, c} x[n, sh·y + i, sw·x + j, c] · w[i, j, c, o]`` for a
    padded channels-last float32 ``x`` (N, Hp, Wp, C) and ``w`` (kh, kw, C, O), both
    C-ordered, O a multiple of 16: a new (N, Ho, Wo, O) array, summed in float32 in the order
    (i, j, c) with fused multiply-adds."""
    _check_direct(x, w, x.ndim == w.ndim == 4 and w.shape[2] == x.shape[3])
    kh, kw, _, o = w.shape
    out = numpy.empty((x.shape[0], *_out_hw(x, (kh, kw), stride), o), _F32)
    params = _geometry(x, (kh, kw), o, stride)
    _native.host_build.lib.mg_conv_direct_float(data_address(x), data_address(w),
                                                 data_address(out), data_address(params))
    return out


def direct_weight_grad(x, g, kernel, stride):
    """``dw[i, j, c, o] = Σ_{n, y, x} x[n, sh·y + i, sw·x + j, c] · g[n, y, x, o]`` for a
    padded channels-last float32 ``x`` (N, Hp, Wp, C) and ``g`` (N, Ho, Wo, O), both
    C-ordered, O a multiple of 16: a new (kh, kw, C, O) array, summed in float32 with fused
    multiply-adds in the order (n, y, x) within fixed chunks of images, the chunks then added in
    order (the same bits on any number of threads)."""
    _check_direct(x, g, x.ndim == g.ndim == 4
                  and g.shape[:3] == (x.shape[0], *_out_hw(x, kernel, stride)))
    o = g.shape[3]
    dw = numpy.empty((*kernel, x.shape[3], o), _F32)
    params = _geometry(x, kernel, o, stride)
    _native.host_build.lib.mg_conv_wgrad_float(data_address(x), data_address(g),
                                                data_address(dw), data_address(params))
    return dw


def _out_hw(x, kernel, stride):
    """(Ho, Wo) of the padded channels-last ``x``; ValueError where the kernel does not fit."""
    return output_hw(x.shape[1:3], kernel, stride, (0, 0, 0, 0), (1, 1))


def _check_direct(x, other, shapes_match):
    # the kernels read and write without bounds checks: refuse what they cannot take
    if not (_dense_f32(x, other) and shapes_match and other.shape[-1] % 16 == 0
            and _native.host_build is not None and _native.host_build.lib is not None):
        raise ValueError("direct convolution needs C-ordered float32 arrays of matching shapes, "
                         "output channels a multiple of 16 and the host library; got x "
                         f"{x.dtype} {x.shape}, {other.dtype} {other.shape}")
