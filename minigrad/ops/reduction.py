"""Reductions: sum, mean, max, min (axis, keepdims). fp16 accumulates in fp32.

Every rule also runs on Tensors, for higher-order gradients (``saves``:
``minigrad.autograd.function``).
"""
from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_bool
from minigrad._fp16_host import convert
from minigrad.autograd.function import Function
from minigrad.ops._util import normalize_axis, sum_acc
from minigrad.ops.arithmetic import as_tensor
from minigrad.tensor import Tensor


def _memory_order(x):
    """The axes of the array ``x`` from the slowest-varying in memory to the fastest (C order
    for an array whose strides do not say, as a broadcast or a one-element one)."""
    if x.flags.c_contiguous or x.ndim < 2:
        return None
    return tuple(sorted(range(x.ndim), key=lambda i: (-abs(x.strides[i]), i)))


def _expand(g, shape, axes, keepdims, order=None):
    """Put back the reduced axes of ``g`` (as size 1) and broadcast it to ``shape`` (a new
    array, stored in the axis ``order`` of ``_memory_order`` of the input: a channels-last
    batch's gradient stays channels-last for the ops below; or a Tensor recorded in the
    graph)."""
    if not keepdims:
        g = g.reshape([1 if i in axes else n for i, n in enumerate(shape)])
    if isinstance(g, Tensor):
        return g.broadcast_to(shape)
    xp = backend.get_array_module(g)
    if order is None:
        out = xp.empty(shape, g.dtype)
    else:
        out = xp.empty([shape[i] for i in order], g.dtype).transpose(
            [order.index(i) for i in range(len(shape))])
    out[...] = g
    return out


class Sum(Function):
    """out = Σ_axes x;  dx = g broadcast back over the reduced axes."""
    autocast = "fp32"
    saves = {}

    def forward(self, x, axes, keepdims):
        self.shape, self.axes, self.keepdims = x.shape, axes, keepdims
        self.order = _memory_order(x)
        return sum_acc(x, axes, keepdims)

    def backward(self, g):
        return _expand(g, self.shape, self.axes, self.keepdims, self.order)


class Mean(Function):
    """out = Σ_axes x / n;  dx = g / n broadcast back."""
    autocast = "fp32"
    saves = {}

    def forward(self, x, axes, keepdims):
        self.shape, self.axes, self.keepdims = x.shape, axes, keepdims
        self.order = _memory_order(x)
        self.n = 1
        for a in axes:
            self.n *= x.shape[a]
        if dtypes.is_low_precision(x.dtype):
            return convert(convert(x, dtypes.float32).mean(axis=axes, keepdims=keepdims), x.dtype)
        return x.mean(axis=axes, keepdims=keepdims).astype(x.dtype, copy=False)

    def backward(self, g):
        # divide in fp32 for fp16: n itself may exceed the fp16 range (65504)
        if dtypes.is_low_precision(g.dtype):
            g = convert(convert(g, dtypes.float32) / self.n, g.dtype)
        else:
            g = g / self.n
        return _expand(g, self.shape, self.axes, self.keepdims, self.order)


class _Extreme(Function):
    """out = max/min over axes;  dx = g shared evenly among the elements equal to out."""
    saves = {}

    def forward(self, x, axes, keepdims):
        if x.size == 0:
            name = type(self).__name__.lower()
            raise ValueError(f"{name}: x must be a non-empty tensor (the {name} of no elements is "
                             f"undefined), got an empty tensor of shape {x.shape}")
        self.shape, self.axes, self.keepdims = x.shape, axes, keepdims
        out = self.reduce(x, axis=axes, keepdims=True)
        self.mask = x == out
        return out if keepdims else out.reshape([n for i, n in enumerate(x.shape) if i not in axes])

    def backward(self, g):
        count = self.mask.sum(axis=self.axes, keepdims=True)
        share = _expand(g, self.shape, self.axes, self.keepdims)
        if dtypes.is_low_precision(g.dtype):
            # divide in fp32 and round once: the count itself may exceed fp16's range (65504)
            share = convert(share, dtypes.float32) * self.mask
            return convert(share / count.astype(dtypes.float32), g.dtype)
        return share * self.mask / count.astype(g.dtype)


class Max(_Extreme):
    def reduce(self, x, **kw):
        return x.max(**kw)


class Min(_Extreme):
    def reduce(self, x, **kw):
        return x.min(**kw)


_RAISES = """

    Raises:
        TypeError: for an ``axis`` that is not an int or a tuple of ints.
        ValueError: for an ``axis`` out of range{}.
"""


def _reducer(cls, doc):
    def reduce(x, axis=None, keepdims=False):
        x = as_tensor(x)
        if keepdims is not False and keepdims is not True:  # the check only off the usual path
            keepdims = check_bool("keepdims", keepdims)
        return cls.apply(x, axes=normalize_axis(axis, x.ndim), keepdims=keepdims)
    reduce.__name__ = cls.__name__.lower()
    reduce.__doc__ = doc + _RAISES.format(", or an empty tensor" if cls in (Max, Min) else "")
    return reduce


sum = _reducer(Sum, "Sum over ``axis`` (None: all axes; int or tuple), fp32-accumulated for fp16.")
mean = _reducer(Mean,
                "Mean over ``axis`` (None: all axes; int or tuple), fp32-accumulated for fp16.")
max = _reducer(Max, "Maximum over ``axis``; the gradient is shared evenly among tied maxima.")
min = _reducer(Min, "Minimum over ``axis``; the gradient is shared evenly among tied minima.")
