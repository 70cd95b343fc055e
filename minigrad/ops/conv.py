"""2-D convolution (NCHW input, OIHW weight) by im2col and one matrix product per group.

Forward: the zero-padded input is laid out channels-last (N, H, W, C), a strided view exposes
every kernel window, one copy turns the windows into the patch matrix ``cols``
(rows: output pixels n·ho·wo; columns: kernel taps i·j·c), and ``cols @ Wᵀ`` is the output.
Channels-last keeps the innermost copy loop contiguous (about 3x faster than copying NCHW
windows). Backward: ``dW = gᵀ @ cols`` and ``dcols = g @ W``; ``dx`` is ``dcols`` added back
into the padded input (col2im), one strided add per kernel tap (kh·kw of them).

fp16 follows the matmul rule (``dtype.acc_dtype``): the input is cast to fp32 once, before the
im2col copy (cheaper than casting the kh·kw times larger patch matrix), the products run in
fp32 and the output is stored fp16.

``im2col`` (patches in the weight's column order) and ``same_padding`` are public for the nn
layers and for THOR, whose conv factor A is built from a layer's input patches.
"""
import math

import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_int_tuple, check_positive_int
from minigrad._fp16_host import store, widen
from minigrad.autograd.function import Function
from minigrad.ops.arithmetic import cast, check_same_float_dtype, float_tensor

# ---- geometry helpers (shared with pooling) ---------------------------------------------------

def pair(name, value):
    """``value`` as (h, w) of positive ints: an int, a pair, or MindSpore's 4-tuple (1, 1, h, w).

    Raises:
        TypeError: naming ``name`` for a value that is not an int or a tuple/list of ints.
        ValueError: naming ``name`` for a wrong length or an entry < 1.
    """
    if isinstance(value, (tuple, list)) and len(value) == 4:
        return check_int_tuple(name, value, 4, low=1)[2:]
    return check_int_tuple(name, value, 2, low=1)


def padding4(padding, name="padding"):
    """``padding`` as (top, bottom, left, right) from an int, a pair (ph, pw) or a 4-tuple.

    Raises:
        TypeError: for a value that is not an int or a tuple/list of ints.
        ValueError: for a wrong length or a negative entry.
    """
    if isinstance(padding, (tuple, list)) and len(padding) == 2:
        ph, pw = check_int_tuple(name, padding, 2, low=0)
        return ph, ph, pw, pw
    return check_int_tuple(name, padding, 4, low=0)


def same_padding(in_hw, kernel, stride=1, dilation=1):
    """(top, bottom, left, right) padding for pad_mode='same': output size ceil(in / stride).

    As in MindSpore and TensorFlow, an odd total puts the extra row/column at the bottom/right.
    """
    pads = []
    for n, k, s, d in zip(in_hw, pair("kernel", kernel), pair("stride", stride),
                          pair("dilation", dilation)):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads += [total // 2, total - total // 2]
    return tuple(pads)


def output_hw(in_hw, kernel, stride, padding, dilation):
    """Output (height, width) of a window op; ValueError when the padded input is too small."""
    (h, w), (kh, kw), (sh, sw), (dh, dw) = in_hw, kernel, stride, dilation
    top, bottom, left, right = padding
    out = ((h + top + bottom - dh * (kh - 1) - 1) // sh + 1,
           (w + left + right - dw * (kw - 1) - 1) // sw + 1)
    if min(out) < 1:
        raise ValueError(f"input of height x width {h}x{w} with padding {padding} is smaller than "
                         f"the kernel {kh}x{kw} with dilation {(dh, dw)}")
    return out


def window_slices(kernel, stride, dilation, out_hw):
    """Yield (i, j, rows, cols): the slices of the padded input seen by kernel tap (i, j)."""
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out_hw
    for i in range(kh):
        for j in range(kw):
            yield (i, j, slice(i * dh, i * dh + sh * (ho - 1) + 1, sh),
                   slice(j * dw, j * dw + sw * (wo - 1) + 1, sw))


def _windows(a, kernel, stride, dilation, out_hw):
    """Strided view of ``a`` (axes 1, 2 spatial) with shape (N, Ho, Wo, *rest, kh, kw); no copy."""
    xp = backend.get_array_module(a)
    s = a.strides
    shape = (a.shape[0], *out_hw, *a.shape[3:], *kernel)
    strides = (s[0], s[1] * stride[0], s[2] * stride[1], *s[3:], s[1] * dilation[0],
               s[2] * dilation[1])
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


def _pad_channels_last(x, padding, dtype):
    """x (N, C, H, W) as a zero-padded (N, H + pads, W + pads, C) array of ``dtype``."""
    xp = backend.get_array_module(x)
    n, c, h, w = x.shape
    top, bottom, left, right = padding
    out = xp.zeros((n, h + top + bottom, w + left + right, c), dtype)
    out[:, top:top + h, left:left + w] = x.transpose(0, 2, 3, 1)
    return out


def im2col(x, kernel, stride=1, padding=0, dilation=1):
    """Patches of ``x`` (N, C, H, W): an array of shape (N, Ho, Wo, C·kh·kw), not differentiable.

    The last axis is ordered (c, i, j), like ``weight.reshape(O, -1)`` for an OIHW weight, so a
    groups=1 convolution is ``im2col(x, ...) @ weight.reshape(O, -1).T`` (plus the layout change).
    ``x`` may be a Tensor or an array; the result is an array of ``x``'s dtype and device.
    ``kernel``/``stride``/``dilation`` are ints or pairs, ``padding`` as for ``conv2d``.
    """
    x = x.data if hasattr(x, "requires_grad") else x
    kernel, stride = pair("kernel", kernel), pair("stride", stride)
    dilation = pair("dilation", dilation)
    padding = padding4(padding)
    out_hw = output_hw(x.shape[2:], kernel, stride, padding, dilation)
    padded = _pad_channels_last(x, padding, x.dtype)
    # windows (N, Ho, Wo, C, kh, kw): reshaping copies them into weight order
    size = x.shape[1] * kernel[0] * kernel[1]  # not -1: an empty batch has no size to infer
    return _windows(padded, kernel, stride, dilation, out_hw).reshape(*x.shape[:1], *out_hw, size)


def _grouped_mm(a, b):
    """a[g] @ b[g] for each group g, as 2-D products (NumPy's stacked matmul is up to 2x slower)."""
    xp = backend.get_array_module(a)
    out = xp.empty((a.shape[0], a.shape[1], b.shape[2]), a.dtype)
    for group in range(a.shape[0]):
        xp.matmul(a[group], b[group], out=out[group])
    return out


class Conv2d(Function):
    """out[n, o] = Σ_{c, i, j} W[o, c, i, j] · x_pad[n, c, s·h + d·i, s·w + d·j] + b[o].

    dW = gᵀ @ cols,  dx = col2im(g @ W),  db = Σ_{n, h, w} g.
    """
    autocast = "low"

    def forward(self, x, w, b=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
        n, c, h, width = x.shape
        o, cg, kh, kw = w.shape
        acc = dtypes.acc_dtype(x.dtype)
        self.geometry = (stride, dilation, (kh, kw))
        self.out_hw = ho, wo = output_hw((h, width), (kh, kw), stride, padding, dilation)
        self.x_shape, self.x_dtype, self.w_dtype, self.padding = x.shape, x.dtype, w.dtype, padding
        padded = _pad_channels_last(x, padding, acc)
        self.padded_shape = padded.shape
        windows = _windows(padded.reshape(*padded.shape[:3], groups, cg),
                           (kh, kw), stride, dilation, self.out_hw)  # (N, Ho, Wo, G, Cg, kh, kw)
        # cols (G, N·Ho·Wo, kh·kw·Cg): one copy, contiguous rows per group
        # explicit sizes, not -1: an empty batch (n = 0) leaves nothing to infer them from
        self.cols = windows.transpose(3, 0, 1, 2, 5, 6, 4).reshape(groups, n * ho * wo,
                                                                   cg * kh * kw)
        self.w2 = widen(w).reshape(groups, o // groups, cg, kh, kw).transpose(
            0, 1, 3, 4, 2).reshape(groups, o // groups, -1)
        out = _grouped_mm(self.cols, self.w2.transpose(0, 2, 1))           # (G, N·Ho·Wo, O/G)
        # (N, G, O/G, Ho, Wo)
        out = out.reshape(groups, n, ho, wo, o // groups).transpose(1, 0, 4, 2, 3)
        # one pass to NCHW order, adding the bias and rounding to x's dtype on the way
        y = backend.get_array_module(x).empty(out.shape, x.dtype)
        if b is None:
            y[...] = out
        else:
            backend.get_array_module(x).add(out, widen(b).reshape(
                1, groups, -1, 1, 1), out=y)
        return y.reshape(n, o, ho, wo)

    def backward(self, gy):
        xp = backend.get_array_module(gy)
        n, c, h, width = self.x_shape
        groups, og, _ = self.w2.shape
        (ho, wo), acc = self.out_hw, self.w2.dtype
        g = widen(gy).reshape(n, groups, og, ho, wo).transpose(
            1, 0, 3, 4, 2).reshape(groups, n * ho * wo, og)
        gx = gw = gb = None
        if self.needs_grad[0]:
            gx = self._col2im(_grouped_mm(g, self.w2))
        if self.needs_grad[1]:
            stride, dilation, (kh, kw) = self.geometry
            gw = _grouped_mm(g.transpose(0, 2, 1), self.cols).reshape(groups * og, kh, kw, -1)
            gw = store(xp.ascontiguousarray(gw.transpose(0, 3, 1, 2)), self.w_dtype)
        if len(self.needs_grad) > 2 and self.needs_grad[2]:
            gb = gy.sum(axis=(0, 2, 3), dtype=acc).astype(gy.dtype, copy=False)
        return gx, gw, gb

    def _col2im(self, dcols):
        """Add each patch gradient back where its window read the padded input."""
        xp = backend.get_array_module(dcols)
        n, c, h, width = self.x_shape
        stride, dilation, kernel = self.geometry
        groups = dcols.shape[0]
        ho, wo = self.out_hw
        dcols = dcols.reshape(groups, n, ho, wo, *kernel, c // groups)
        dpad = xp.zeros(self.padded_shape, dcols.dtype).reshape(*self.padded_shape[:3], groups,
                                                                c // groups)
        for i, j, rows, cols in window_slices(kernel, stride, dilation, self.out_hw):
            dpad[:, rows, cols] += dcols[:, :, :, :, i, j].transpose(1, 2, 3, 0, 4)
        top, _, left, _ = self.padding
        dx = dpad[:, top:top + h, left:left + width].reshape(n, h, width, c).transpose(0, 3, 1, 2)
        # a C-ordered copy in the compute dtype, then one fast rounding (NumPy's own fp32 -> fp16
        # cast of the transposed view would be the slowest step of an fp16 conv backward)
        return store(xp.ascontiguousarray(dx), self.x_dtype)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation of x (N, C, H, W) with weight (O, C/groups, kh, kw), plus bias (O,).

    out[n, o, h, w] = b[o] + Σ_{c, i, j} W[o, c, i, j] · x_pad[n, g(o)·C/groups + c,
    stride_h·h + dilation_h·i, stride_w·w + dilation_w·j], of size
    H_out = (H + pad_top + pad_bottom - dilation_h·(kh - 1) - 1) // stride_h + 1 (likewise W_out).

    ``stride``/``dilation``: int or (h, w) (default 1). ``padding``: int, (ph, pw) or
    (top, bottom, left, right) of zeros (default 0); ``same_padding`` computes 'same'.
    ``groups`` (default 1) splits channels into independent convolutions. x, weight and bias
    share one dtype (outside autocast, two dtypes are a TypeError); fp16 is computed in fp32
    and stored fp16.

    Raises:
        ValueError: naming the shapes when x is not 4-D, weight not 4-D, channels do not match
            ``groups``, bias is not (O,), or the padded input is smaller than the kernel; for
            non-positive stride/dilation/groups or negative padding.
        TypeError: for non-float tensors, or two dtypes outside autocast (naming both).
    """
    check_same_float_dtype("conv2d", (("x", x), ("weight", weight), ("bias", bias)))
    x, weight = float_tensor(x, "conv2d"), float_tensor(weight, "conv2d", "weight")
    tensors = [x, weight] + ([] if bias is None else [float_tensor(bias, "conv2d", "bias")])
    for name, t, axes in (("x", x, "(N, C, H, W)"), ("weight", weight, "(O, C/groups, kh, kw)")):
        if t.ndim != 4:
            raise ValueError(f"conv2d: {name} must have 4 dimensions {axes}, got {name} of shape "
                             f"{t.shape}")
    groups = check_positive_int("groups", groups)
    o, cg = weight.shape[:2]
    if x.shape[1] != cg * groups or o % groups:
        raise ValueError(f"conv2d: x has {x.shape[1]} channels (shape {x.shape}) but weight "
                         f"{weight.shape} with groups={groups} needs {cg * groups} input channels "
                         f"and out channels divisible by {groups}")
    if bias is not None and tensors[2].shape != (o,):
        raise ValueError(f"conv2d bias must have shape ({o},) for weight {weight.shape}, "
                         f"got {tensors[2].shape}")
    stride, dilation = pair("stride", stride), pair("dilation", dilation)
    padding = padding4(padding)
    output_hw(x.shape[2:], weight.shape[2:], stride, padding, dilation)
    common = numpy.result_type(*[t.dtype for t in tensors])
    tensors = [cast(t, common) for t in tensors]
    return Conv2d.apply(*tensors, stride=stride, padding=padding, dilation=dilation, groups=groups)
