"""2-D max and average pooling over (N, C, H, W) input, in the input's memory layout.

Both loop over the kh·kw kernel taps, each step one vectorised op on a strided slice of the
padded input (``windows.window_slices``, which conv2d's col2im also uses), so nothing is copied
per window and the loop is short. The output, the argmax and the input gradient keep the
input's layout (``ops/windows.py``): channels-last in, channels-last out. fp16 input is widened
once and compared or summed in fp32 (NumPy's fp16 arithmetic is slow); the maximum is one of
the inputs, so its rounding back is exact.

The gradient puts each tap's share back where the tap read the padded input. Where windows
overlap, an element may get shares from several windows: they are summed in the accumulation
dtype (fp32 for fp16) and rounded once. Where they cannot (stride >= kernel on both axes, such
as the common 2x2 pooling with stride 2), an element gets at most one share, so the shares are
written tap by tap straight into an array of the input's dtype: no sums and no rounding pass,
the same bits.

Max pooling of a channels-last NumPy batch takes one native pass each way instead
(``ops/_pool_host.py``): each window read once for its maximum and argmax, each gradient
element written once, with this path's bits (NumPy's tie and NaN rules, the first maximum).

The rules also run on Tensors, for higher-order gradients (``saves``:
``minigrad.autograd.function``): there each tap's share is put back by a ``Scatter`` op (whose
own rule reads it back), and the shares are summed by recorded adds.
"""
import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_bool, check_relation
from minigrad._fp16_host import store, widen
from minigrad.autograd.function import Function
from minigrad.tensor import Tensor
from minigrad.ops import _pool_host
from minigrad.ops._rules import where
from minigrad.ops._util import select_bits
from minigrad.ops.arithmetic import float_tensor
from minigrad.ops.shape import scatter
from minigrad.ops.windows import (crop, empty_image, is_channels_last, output_hw, pad, padding4,
                                  pair, window_slices)

_NO_DILATION = (1, 1)


class _Pool2d(Function):
    """Shared geometry: pad the input, visit each kernel tap's slice of it, scatter back."""
    saves = {}

    def setup(self, x, kernel, stride, padding, fill):
        """The padded input, widened to the accumulation dtype; records the geometry."""
        self.record(x, kernel, stride, padding)
        return self.padded(x, fill)

    def padded(self, x, fill):
        """``x`` padded with ``fill`` (the recorded padding), widened to the accumulation
        dtype."""
        return widen(pad(x, self.padding, fill, self.channels_last) if any(self.padding) else x)

    def record(self, x, kernel, stride, padding):
        """Keep the geometry of a pooling of ``x``: shapes, taps, and how windows overlap."""
        self.x_shape, self.padding, self.x_dtype = x.shape, padding, x.dtype
        self.kernel, self.stride = kernel, stride
        self.out_hw = output_hw(x.shape[2:], kernel, stride, padding, _NO_DILATION)
        self.taps = [(rows, cols) for _, _, rows, cols in
                     window_slices(kernel, stride, _NO_DILATION, self.out_hw)]
        self.disjoint = stride[0] >= kernel[0] and stride[1] >= kernel[1]
        top, bottom, left, right = padding
        # disjoint windows that also cover every padded element (stride == kernel, no margin)
        self.tiles = (stride == kernel and self.out_hw[0] * kernel[0] == x.shape[2] + top + bottom
                      and self.out_hw[1] * kernel[1] == x.shape[3] + left + right)
        self.channels_last = is_channels_last(x)

    def image(self, xp, hw, dtype, zero=False):
        """A new (N, C, *hw) array of ``dtype`` in the input's layout (zeros if ``zero``)."""
        out = empty_image(xp, self.x_shape[:2] + tuple(hw), dtype, self.channels_last)
        if zero:
            out[...] = 0
        return out

    def in_layout(self, xp, g):
        """The output gradient ``g`` stored in the input's layout (a copy if it is not): every
        tap reads g once, and reads in the layout dx is written in run several times faster
        than a transposing read (the gradient of a Flatten after a channels-last pooling comes
        NCHW)."""
        if len(self.taps) == 1 or (is_channels_last(g) if self.channels_last
                                   else g.flags.c_contiguous):
            return g
        out = self.image(xp, g.shape[2:], g.dtype)
        out[...] = g
        return out

    def scatter(self, xp, contribution, write=None):
        """dx: ``contribution(k)``, the gradient reaching tap k, put back where tap k read the
        padded input. Its dtype: the input's for disjoint windows, else the accumulation dtype
        (the shares are summed there and rounded once). ``xp`` None: the contributions are
        Tensors (a create_graph rule). ``write(slot, k)``, if given, writes tap k's share of
        disjoint windows straight into its slot of dx (no temporary)."""
        h, w = self.x_shape[2:]
        top, bottom, left, right = self.padding
        padded_hw = (h + top + bottom, w + left + right)
        if xp is None:
            shape, dx = self.x_shape[:2] + padded_hw, 0
            for k, (rows, cols) in enumerate(self.taps):
                dx = dx + scatter(contribution(k), shape, (slice(None), slice(None), rows, cols))
            return store(crop(dx, self.padding, (h, w)), self.x_dtype)
        if self.disjoint:
            dx = self.image(xp, padded_hw, self.x_dtype, zero=not self.tiles)
            for k, (rows, cols) in enumerate(self.taps):
                if write is None:
                    dx[:, :, rows, cols] = contribution(k)
                else:
                    write(dx[:, :, rows, cols], k)
            return crop(dx, self.padding, (h, w))
        dx = self.image(xp, padded_hw, dtypes.acc_dtype(self.x_dtype), zero=True)
        for k, (rows, cols) in enumerate(self.taps):
            dx[:, :, rows, cols] += contribution(k)
        dx = crop(dx, self.padding, (h, w))
        if dx.dtype != self.x_dtype:  # one fast rounding of a dense copy (not of a view)
            dx = store(xp.copy(dx, order="K") if any(self.padding) else dx, self.x_dtype)
        return dx


class MaxPool2d(_Pool2d):
    """out = max over each window (padding counts as -inf);  dx = g at the window's argmax.

    Ties: the first maximum in row-major window order receives the whole gradient. An element
    that is the maximum of several overlapping windows gets the sum of their g, in fp32 for
    fp16, rounded once.

    The argmax is kept as each window's tap index (uint8 up to 255 taps). Taps are visited in
    order and only a strictly greater value moves it, so the running index is the maximum of
    ``k · (tap k beat the running maximum)``: integer arithmetic, no masked writes. The
    gradient reaching tap k is g's bit patterns times ``argmax == k`` (g or +0, exactly what a
    select gives, without its branches).
    """
    def forward(self, x, kernel, stride, padding):
        xp = backend.get_array_module(x)
        self.record(x, kernel, stride, padding)
        x = widen(x)
        if self.channels_last and xp is numpy:  # one native pass, the padding read in place
            native = _pool_host.max_pool(x, kernel, stride, padding, self.out_hw)
            if native is not None:
                out, self.argmax = native
                return store(out, self.x_dtype)
        padded = self.padded(x, -numpy.inf)
        (rows, cols), *others = self.taps
        out = self.image(xp, self.out_hw, padded.dtype)
        out[...] = padded[:, :, rows, cols]
        index = numpy.min_scalar_type(len(self.taps))
        self.argmax = self.image(xp, self.out_hw, index, zero=True)
        for k, (rows, cols) in enumerate(others, 1):
            candidate = padded[:, :, rows, cols]
            better = candidate > out   # strict: an earlier tap keeps ties
            xp.maximum(out, candidate, out=out)
            xp.maximum(self.argmax, better * index.type(k), out=self.argmax)
        return store(out, self.x_dtype)

    def backward(self, g):
        if isinstance(g, Tensor):
            zero = g.dtype.type(0)
            return self.scatter(None, lambda k: where(self.argmax == k, g, zero))
        xp = backend.get_array_module(g)
        g = self.in_layout(xp, g)
        g = g if self.disjoint else widen(g)  # disjoint: each g is copied once, not summed
        if self.channels_last and xp is numpy:
            dx = _pool_host.max_pool_grad(g, self.argmax, self.x_shape, self.kernel,
                                           self.stride, self.padding, self.disjoint)
            if dx is not None:
                return store(dx, self.x_dtype)
        return self.scatter(xp, lambda k: select_bits(g, self.argmax == k),
                            write=lambda slot, k: select_bits(g, self.argmax == k, out=slot))


class AvgPool2d(_Pool2d):
    """out = Σ window / count (count: kh·kw, or the non-padding elements);  dx = Σ g / count over
    the windows holding the element, each share and the sum in fp32 for fp16, rounded once."""
    def forward(self, x, kernel, stride, padding, count_include_pad):
        xp = backend.get_array_module(x)
        padded = self.setup(x, kernel, stride, padding, 0)
        (rows, cols), *others = self.taps
        total = self.image(xp, self.out_hw, padded.dtype)
        total[...] = padded[:, :, rows, cols]
        for rows, cols in others:
            total += padded[:, :, rows, cols]
        self.count = self._count(kernel, stride, padding, count_include_pad, padded.dtype, xp)
        total /= self.count
        return store(total, x.dtype)

    def _count(self, kernel, stride, padding, include_pad, dtype, xp):
        if include_pad or not any(padding):
            return dtype.type(kernel[0] * kernel[1])
        # elements of each window inside the unpadded input: (rows inside) x (columns inside)
        inside = []
        for size, k, s, before, n_out in zip(self.x_shape[2:], kernel, stride, padding[::2],
                                              self.out_hw):
            start = numpy.arange(n_out) * s - before
            inside.append(numpy.minimum(start + k, size) - numpy.maximum(start, 0))
        return xp.asarray(numpy.outer(*inside), dtype=dtype)

    def backward(self, g):
        xp = None if isinstance(g, Tensor) else backend.get_array_module(g)
        if xp is not None:
            g = self.in_layout(xp, g)
        share = widen(g) / self.count   # fp32 for fp16: not rounded yet
        if self.disjoint:  # each share lands on its elements alone: round it once, here
            share = store(share, g.dtype)
        return self.scatter(xp, lambda k: share)


def _pool_arguments(x, kernel_size, stride, padding, op):
    x = float_tensor(x, op)
    if x.ndim != 4:
        raise ValueError(f"{op}: x must have 4 dimensions (N, C, H, W), got x of shape {x.shape}")
    kernel = pair("kernel_size", kernel_size)
    stride = kernel if stride is None else pair("stride", stride)
    pads = padding4(padding)
    # a window lying wholly in the padding would have no input element
    check_relation("padding", padding, max(pads[:2]) < kernel[0] and max(pads[2:]) < kernel[1],
                   f"smaller than the kernel size {kernel} on each side (padding {pads})",
                   owner=op)
    padding = pads
    output_hw(x.shape[2:], kernel, stride, padding, _NO_DILATION, name="kernel_size")
    return x, kernel, stride, padding


def max_pool2d(x, kernel_size, stride=None, padding=0):
    """Maximum over kh x kw windows of x (N, C, H, W).

    ``kernel_size``/``stride``: int or (h, w); ``stride`` defaults to the kernel size.
    ``padding``: int, (ph, pw) or (top, bottom, left, right), filled with -inf. Output size
    (H + pads - kh) // sh + 1. The gradient goes to the first maximum of each window.

    Raises:
        ValueError: for x not 4-D, bad sizes, padding not smaller than the kernel, or a padded input
            smaller than the kernel.
        TypeError: for a non-float tensor.
    """
    x, kernel, stride, padding = _pool_arguments(x, kernel_size, stride, padding, "max_pool2d")
    return MaxPool2d.apply(x, kernel=kernel, stride=stride, padding=padding)


def avg_pool2d(x, kernel_size, stride=None, padding=0, count_include_pad=True):
    """Mean over kh x kw windows of x (N, C, H, W), accumulated in fp32 for fp16.

    Arguments as for ``max_pool2d``; zero padding. ``count_include_pad`` (default True, as
    PyTorch) divides by kh·kw; False divides by the number of non-padding elements (TensorFlow's
    and MindSpore's 'same' behaviour).

    Raises:
        ValueError, TypeError: as ``max_pool2d``.
    """
    x, kernel, stride, padding = _pool_arguments(x, kernel_size, stride, padding, "avg_pool2d")
    return AvgPool2d.apply(x, kernel=kernel, stride=stride, padding=padding,
                           count_include_pad=check_bool("count_include_pad", count_include_pad))
