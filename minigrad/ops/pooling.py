"""2-D max and average pooling over NCHW input.

Both loop over the kh·kw kernel taps, each step one vectorised op on a strided slice of the
padded input (the same ``window_slices`` that conv2d's col2im uses), so nothing is copied per
window and the loop is short.
"""
import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_bool
from minigrad._fp16_host import store, widen
from minigrad.autograd.function import Function
from minigrad.ops.arithmetic import float_tensor
from minigrad.ops.conv import output_hw, padding4, pair, window_slices

_NO_DILATION = (1, 1)


class _Pool2d(Function):
    """Shared geometry: pad the input, then visit each kernel tap's slice of it."""
    def setup(self, x, kernel, stride, padding, fill):
        xp = backend.get_array_module(x)
        self.x_shape, self.padding = x.shape, padding
        self.out_hw = output_hw(x.shape[2:], kernel, stride, padding, _NO_DILATION)
        self.taps = list(window_slices(kernel, stride, _NO_DILATION, self.out_hw))
        top, bottom, left, right = padding
        if not any(padding):
            return x
        padded = xp.full((*x.shape[:2], x.shape[2] + top + bottom, x.shape[3] + left + right),
                         fill, x.dtype)
        padded[:, :, top:top + x.shape[2], left:left + x.shape[3]] = x
        return padded

    def scatter(self, contribution, dtype):
        """dx: add ``contribution(k)`` (the gradient reaching tap k) into the padded input.

        Overlapping windows add several contributions to one element: the sum runs in the
        accumulation dtype (fp32 for fp16) and is rounded to ``dtype`` once.
        """
        xp = backend.get_array_module(contribution(0))
        n, c, h, w = self.x_shape
        top, bottom, left, right = self.padding
        dx = xp.zeros((n, c, h + top + bottom, w + left + right), dtypes.acc_dtype(dtype))
        for k, (_, _, rows, cols) in enumerate(self.taps):
            dx[:, :, rows, cols] += contribution(k)
        dx = dx[:, :, top:top + h, left:left + w] if any(self.padding) else dx
        return store(dx, dtype)


class MaxPool2d(_Pool2d):
    """out = max over each window (padding counts as -inf);  dx = g at the window's argmax.

    Ties: the first maximum in row-major window order receives the whole gradient. An element
    that is the maximum of several overlapping windows gets the sum of their g, in fp32 for
    fp16, rounded once.
    """
    def forward(self, x, kernel, stride, padding):
        xp = backend.get_array_module(x)
        padded = self.setup(x, kernel, stride, padding, -numpy.inf)
        out = self.argmax = None
        for k, (_, _, rows, cols) in enumerate(self.taps):
            candidate = padded[:, :, rows, cols]
            if out is None:
                out = candidate.copy()
                self.argmax = xp.zeros(out.shape, numpy.min_scalar_type(len(self.taps)))
                continue
            better = candidate > out   # strict: an earlier tap keeps ties
            xp.maximum(out, candidate, out=out)
            xp.copyto(self.argmax, self.argmax.dtype.type(k), where=better)
        return out

    def backward(self, g):
        xp = backend.get_array_module(g)
        wide = widen(g)
        zero = wide.dtype.type(0)
        return self.scatter(lambda k: xp.where(self.argmax == k, wide, zero), g.dtype)


class AvgPool2d(_Pool2d):
    """out = Σ window / count (count: kh·kw, or the non-padding elements);  dx = Σ g / count over
    the windows holding the element, each share and the sum in fp32 for fp16, rounded once."""
    def forward(self, x, kernel, stride, padding, count_include_pad):
        padded = self.setup(x, kernel, stride, padding, 0)
        acc = dtypes.acc_dtype(x.dtype)
        total = None
        for _, _, rows, cols in self.taps:
            part = padded[:, :, rows, cols].astype(acc)   # a fresh array: safe to add into
            if total is None:
                total = part
            else:
                total += part
        self.count = self._count(kernel, stride, padding, count_include_pad, acc,
                                 backend.get_array_module(x))
        return store(total / self.count, x.dtype)

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
        share = widen(g) / self.count   # fp32 for fp16: not rounded yet
        return self.scatter(lambda k: share, g.dtype)


def _pool_arguments(x, kernel_size, stride, padding, op):
    x = float_tensor(x, op)
    if x.ndim != 4:
        raise ValueError(f"{op}: x must have 4 dimensions (N, C, H, W), got x of shape {x.shape}")
    kernel = pair("kernel_size", kernel_size)
    stride = kernel if stride is None else pair("stride", stride)
    padding = padding4(padding)
    if max(padding[:2]) >= kernel[0] or max(padding[2:]) >= kernel[1]:
        # a window lying wholly in the padding would have no input element
        raise ValueError(f"{op} padding {padding} must be smaller than the kernel size {kernel}")
    output_hw(x.shape[2:], kernel, stride, padding, _NO_DILATION)
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
