"""2-D convolution (OIHW weight) by im2col and one matrix product per group, channels-last.

Forward: the patch matrix ``cols`` (rows: the N·Ho·Wo output pixels; columns: the kh·kw·C kernel
taps in (i, j, c) order, so each tap moves the C channels of a pixel as one run) is written in
one pass from the widened input where it lies, the padding read as zeros, by a native host
pass (``_image_host``). Without it (CuPy; no host library), the input, widened and
zero-padded, is copied into a channels-last (N, Hp, Wp, C) array (a channels-last fp32 input
with no padding is used as it is); a strided view exposes every kernel window, and one copy
turns the windows into ``cols``. A 1x1, stride-1, unpadded convolution of a channels-last
input copies nothing: ``cols`` is a view of the input. ``out = cols @ Wᵀ`` (W: the weight as
an (O, kh·kw·C) matrix in the same column order, read transposed by the BLAS) has one row of O
channels per output pixel: it is the output stored channels-last, returned as its
(N, O, Ho, Wo) view without a copy. The bias is added in place (fp16: widened, added and
rounded in one pass, Dense's epilogue).

Backward: ``g`` is the output gradient as an (N·Ho·Wo, O) matrix (a view of a channels-last
gradient; otherwise an (O, N·Ho·Wo) copy, which moves runs of Ho·Wo values, read transposed);
``dW = gᵀ @ cols`` (as ``(colsᵀ @ g)ᵀ`` where the BLAS runs that faster), ``db = Σ_rows g``
(``_util.sum_axes``: BLAS speed, pairwise accuracy).
dx, stored channels-last, takes one of two routes. At stride 1 (kernel larger than 1x1, padding
within the dilated kernel, O <= C) it is one more convolution, of g with the flipped kernel: g's
patch matrix times the flipped weight, no scatter at all. Otherwise ``g @ W_tap`` is computed for
every kernel tap at once into a tap-major (kh·kw, N·Ho·Wo, C) array, and col2im adds each tap's
dense block back where that tap read the padded input (one add per tap, over runs of Wo·C values
at stride 1; none for a 1x1, stride-1, unpadded convolution, whose one block is ``dx``).

Direct kernel: a one-group, undilated convolution with at most 64 input and output channels,
output channels a multiple of 16, and a kernel larger than 1x1 (``_image_host.direct_applies``;
NumPy, with the host library) writes no patch matrix at all. A native kernel sums each output
pixel's taps from the zero-padded, channels-last input, which backward keeps in place of the
patch matrix (kh·kw times smaller); dW is a second kernel over that input and g, and dx at
stride 1 the first kernel again, on g padded with the flipped kernel (at other strides, or
input channels not a multiple of 16, the tap products and col2im). These sums run in another
order than the BLAS's, so results agree with the patch-matrix path to float32 rounding;
``_image_host`` has the measurements that set where the kernel is used.

fp16 follows the matmul rule (``dtype.acc_dtype``): the input is widened to fp32 once, before
the im2col copy (cheaper than widening the kh·kw times larger patch matrix); the products and
col2im's sums run in fp32, and each result is rounded to fp16 once.

Groups: each group multiplies its own patch matrix (its Cg input channels) with its block of
O/G output channels.

The rule also runs on Tensors, for higher-order gradients (``saves``:
``minigrad.autograd.function``): there the patch matrices are x's taps gathered by recorded
getitem and stack ops from a recorded zero padding (a ``Scatter``), and col2im adds each tap's
patch gradients back by a ``Scatter``, the op whose own rule gathers them again.

``im2col`` (patches in the weight's (c, i, j) column order) is public for THOR, whose conv
factor A is built from a layer's input patches; ``same_padding`` for the nn layers.
"""
import numpy

from minigrad import backend
from minigrad._checks import check_positive_int, check_relation
from minigrad._fp16_host import store, widen
from minigrad.autograd.function import Function
from minigrad.ops.arithmetic import as_tensor, cast, check_same_float_dtype, float_tensor
from minigrad.ops import _image_host, _scratch
from minigrad.ops._util import sum_axes
from minigrad.ops.join import Concat, stack
from minigrad.ops.linalg import add_bias_narrow
from minigrad.ops.shape import scatter
from minigrad.tensor import Tensor
from minigrad.ops.windows import (inside_window_slices, is_channels_last, output_hw, pad,
                                  padding4, pair, same_padding, window_slices)

__all__ = ["Conv2d", "conv2d", "im2col", "same_padding"]


def _windows(x, kernel, stride, padding, dilation, out_hw):
    """Every kernel window of ``x`` (N, C, H, W) zero-padded, as a strided view of shape
    (N, Ho, Wo, kh, kw, C) into a channels-last copy (or ``x`` itself, when it needs none)."""
    a = pad(x, padding, 0, channels_last=True, scratch=True).transpose(0, 2, 3, 1)
    sn, sh, sw, sc = a.strides
    shape = (a.shape[0], *out_hw, *kernel, a.shape[3])
    strides = (sn, sh * stride[0], sw * stride[1], sh * dilation[0], sw * dilation[1], sc)
    return backend.get_array_module(a).lib.stride_tricks.as_strided(a, shape, strides)


def im2col(x, kernel, stride=1, padding=0, dilation=1):
    """Patches of ``x`` (N, C, H, W): an array of shape (N, Ho, Wo, C·kh·kw), not differentiable.

    The last axis is ordered (c, i, j), like ``weight.reshape(O, -1)`` for an OIHW weight, so a
    groups=1 convolution is ``im2col(x, ...) @ weight.reshape(O, -1).T`` (plus the layout change).
    ``x`` may be a Tensor or an array; the result is an array of ``x``'s dtype and device.
    ``kernel``/``stride``/``dilation`` are ints or pairs, ``padding`` as for ``conv2d``.

    Raises:
        TypeError: for an ``x`` that is not a Tensor, an array or numbers, or sizes that are
            not ints or pairs of ints.
        ValueError: for an ``x`` that is not 4-D, sizes out of range, or a kernel larger than
            the padded input.
    """
    if isinstance(x, Tensor):
        x = x.data
    elif not (isinstance(x, numpy.ndarray) or hasattr(x, "__cuda_array_interface__")):
        x = as_tensor(x).data
    check_relation("x", x, x.ndim == 4, "an (N, C, H, W) Tensor or array", owner="im2col")
    kernel, stride = pair("kernel", kernel), pair("stride", stride)
    dilation = pair("dilation", dilation)
    padding = padding4(padding)
    out_hw = output_hw(x.shape[2:], kernel, stride, padding, dilation)
    windows = _windows(x, kernel, stride, padding, dilation, out_hw)
    size = x.shape[1] * kernel[0] * kernel[1]  # not -1: an empty batch has no size to infer
    return windows.transpose(0, 1, 2, 5, 3, 4).reshape(*x.shape[:1], *out_hw, size)


def _products(lefts, rights, outs=None):
    """[a @ b] for each group's operands (into ``outs``, if given): every conv GEMM goes
    through here (and ``benchmarks/cnn_step.py`` times them here)."""
    if outs is None:
        return [a @ b for a, b in zip(lefts, rights)]
    xp = backend.get_array_module(lefts[0])
    return [xp.matmul(a, b, out=out) for a, b, out in zip(lefts, rights, outs)]


def _join(parts, axis):
    """``parts`` concatenated along ``axis``; a single part itself (no copy)."""
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], Tensor):
        return Concat.apply(*parts, axis=axis)
    return backend.get_array_module(parts[0]).concatenate(parts, axis=axis)


def _patch_matrices(x, geometry, out_hw, groups):
    """Each group's (N·Ho·Wo, kh·kw·Cg) patch matrix of ``x`` (N, C, H, W), columns in
    (i, j, c) order: for a NumPy array, written in one pass by the native host pass
    (``_image_host.patch_matrix``; float32) or copied from ``_windows`` (a view, with no copy,
    for a 1x1, stride-1, unpadded convolution of a channels-last input); for a CuPy array,
    views of ``_windows``; for a Tensor, its taps gathered by recorded ops (getitem of each
    tap's slice of the zero-padded, channels-last x, stacked)."""
    stride, padding, dilation, kernel = geometry
    (n, c, h, w), (ho, wo), cg = x.shape, out_hw, x.shape[1] // groups
    if isinstance(x, Tensor):
        top, bottom, left, right = padding
        padded = x.transpose(0, 2, 3, 1)
        if any(padding):
            padded = scatter(padded, (n, h + top + bottom, w + left + right, c),
                             (slice(None), slice(top, top + h), slice(left, left + w)))
        taps = [padded[:, rows, cols] for _, _, rows, cols in
                window_slices(kernel, stride, dilation, out_hw)]
        windows = stack(taps, axis=3).reshape(n, ho, wo, *kernel, c)
    # explicit sizes: an empty batch infers none
    shape = (n * ho * wo, kernel[0] * kernel[1] * cg)
    one_per_pixel = kernel == (1, 1) and stride == (1, 1) and not any(padding)
    if isinstance(x, numpy.ndarray) and not (one_per_pixel and is_channels_last(x)):
        # one pass from x where it lies (the native pass), into a pooled temporary when large
        matrices = [_scratch.empty(numpy, shape, x.dtype) for _ in range(groups)]
        if all(_image_host.patch_matrix(x, geometry, out_hw, cols, slice(k * cg, (k + 1) * cg))
               is not None for k, cols in enumerate(matrices)):
            return matrices
    if not isinstance(x, Tensor):
        windows = _windows(x, kernel, stride, padding, dilation, out_hw)
    parts = [windows[..., k * cg:(k + 1) * cg] for k in range(groups)]
    if one_per_pixel or not isinstance(x, numpy.ndarray):
        # a view for 1x1, stride 1, unpadded (each row one pixel's channels); a Tensor; CuPy
        return [part.reshape(shape) for part in parts]
    for part, cols in zip(parts, matrices):  # NumPy's copy of the windows
        cols.reshape(part.shape)[...] = part
    return matrices


def _weight_rows(w, groups):
    """Each group's (O/G, kh·kw·Cg) block of the OIHW weight ``w``, columns in the patch
    matrices' (i, j, c) order."""
    o, cg, kh, kw = w.shape
    og = o // groups
    w = w.transpose(0, 2, 3, 1)
    return [w[k * og:(k + 1) * og].reshape(og, kh * kw * cg) for k in range(groups)]


def _pixel_rows(gy):
    """The (N, O, Ho, Wo) gradient ``gy`` as an (N·Ho·Wo, O) matrix: a view when ``gy`` is stored
    channels-last, else the transposed view of a C-ordered (O, N·Ho·Wo) copy (from an NCHW array
    that copy moves runs of Ho·Wo values: several times faster than NumPy's NHWC copy of it)."""
    n, o, ho, wo = gy.shape
    rows = gy.transpose(0, 2, 3, 1)
    if isinstance(rows, Tensor) or rows.flags.c_contiguous:
        return rows.reshape(n * ho * wo, o)
    xp = backend.get_array_module(gy)
    return xp.ascontiguousarray(gy.transpose(1, 0, 2, 3)).reshape(o, n * ho * wo).T


class Conv2d(Function):
    """out[n, o] = Σ_{c, i, j} W[o, c, i, j] · x_pad[n, c, s·h + d·i, s·w + d·j] + b[o].

    dW = gᵀ @ cols (or (colsᵀ @ g)ᵀ),  dx = col2im(g @ W) (at stride 1: patches(g) @ flipped W),
    db = Σ_{n, h, w} g  (the module docstring has the layout of each array); with the direct
    kernel, the same sums without patch matrices.
    """
    autocast = "low"
    saves = {"cols": lambda node: _patch_matrices(widen(node.inputs[0]), node.geometry,
                                                  node.out_hw, len(node.w_rows)),
             "w_rows": lambda node: _weight_rows(widen(node.inputs[1]), len(node.w_rows))}

    def forward(self, x, w, b=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
        n, c, h, width = x.shape
        o = w.shape[0]
        self.out_hw = ho, wo = output_hw((h, width), w.shape[2:], stride, padding, dilation)
        self.geometry = (stride, padding, dilation, w.shape[2:])
        self.x_shape, self.x_dtype, self.w_dtype = x.shape, x.dtype, w.dtype
        x, w = widen(x), widen(w)
        self.w_rows = _weight_rows(w, groups)
        if _image_host.direct_applies(x, w, groups, dilation):
            # the direct kernel: no patch matrix; backward reads the padded input instead
            self.cols = None
            self.padded = pad(x, padding, 0, channels_last=True, scratch=True).transpose(
                0, 2, 3, 1)
            w_taps = numpy.ascontiguousarray(self.w_rows[0].T).reshape(*w.shape[2:], c, o)
            out = _image_host.direct_conv(self.padded, w_taps, stride).reshape(-1, o)
        else:
            self.cols = _patch_matrices(x, self.geometry, self.out_hw, groups)
            out = _join(_products(self.cols, [w_rows.T for w_rows in self.w_rows]), axis=1)
        out = add_bias_narrow(out, b, self.x_dtype)
        return out.reshape(n, ho, wo, o).transpose(0, 3, 1, 2)

    def backward(self, gy):
        xp = backend.get_array_module(gy)
        o, groups = gy.shape[1], len(self.w_rows)
        og = o // groups
        needs = self.needs_grad
        g = widen(gy)
        gb = None
        if len(needs) > 2 and needs[2]:
            gb = store(sum_axes(g, (0, 2, 3)).reshape(o), gy.dtype)
        if self.cols is None and not isinstance(g, Tensor):
            return self._direct_gradients(g) + (gb,)
        rows = _pixel_rows(g)
        blocks = [rows[:, k * og:(k + 1) * og] for k in range(groups)]
        gx = gw = None
        if needs[1]:
            kh, kw = self.geometry[3]
            gw = _join(self._weight_gradient(blocks), axis=0)
            gw = gw.reshape(o, kh, kw, self.x_shape[1] // groups).transpose(0, 3, 1, 2)
            gw = store(gw if isinstance(gw, Tensor) else xp.ascontiguousarray(gw), self.w_dtype)
        if needs[0]:
            if self._correlates(g):
                gx = self._correlation_gradient(g)
            elif isinstance(g, Tensor):
                gx = self._col2im_tensor(_products(blocks, self.w_rows))
            else:
                gx = self._tap_gradient(blocks)
        return gx, gw, gb

    def _tap_gradient(self, blocks):
        """dx by col2im of ``g @ W_tap`` for every tap at once, from each group's block of g's
        (N·Ho·Wo, O/G) rows (arrays)."""
        xp = backend.get_array_module(blocks[0])
        taps = self.geometry[3][0] * self.geometry[3][1]
        og = blocks[0].shape[1]
        tap_rows = [w.reshape(og, taps, -1).transpose(1, 0, 2) for w in self.w_rows]
        dtype = numpy.result_type(blocks[0].dtype, tap_rows[0].dtype)
        outs = None if xp is not numpy else [
            _scratch.empty(xp, (taps, blocks[0].shape[0], w.shape[2]), dtype) for w in tap_rows]
        return self._col2im(_products(blocks, tap_rows, outs))

    def _direct_gradients(self, g):
        """(dx, dW) of a convolution the direct kernel computed (``_image_host``): dW from the
        saved padded input and g; dx at stride 1 with padding within the kernel's reach as one
        more direct convolution, of g padded by k-1 minus the forward padding with the kernel
        flipped and its channel axes swapped (``_correlation_gradient`` has the formula),
        otherwise by the tap products and col2im."""
        needs = self.needs_grad
        stride, _, _, kernel = self.geometry
        g_rows = numpy.ascontiguousarray(g.transpose(0, 2, 3, 1))  # a view when channels-last
        gx = gw = None
        if needs[1]:
            gw = _image_host.direct_weight_grad(self.padded, g_rows, kernel, stride)
            gw = store(numpy.ascontiguousarray(gw.transpose(3, 2, 0, 1)), self.w_dtype)
        if not needs[0]:
            return gx, gw
        g_padding = self._reversed_padding()
        c = self.x_shape[1]
        if stride == (1, 1) and min(g_padding) >= 0 and c % 16 == 0:  # dx's channels: vectors
            g_padded = pad(g, g_padding, 0, channels_last=True, scratch=True)
            flipped = numpy.ascontiguousarray(self._flipped_rows()[0]).reshape(*kernel, -1, c)
            gx = _image_host.direct_conv(g_padded.transpose(0, 2, 3, 1), flipped, (1, 1))
            return store(gx, self.x_dtype).transpose(0, 3, 1, 2), gw
        return self._tap_gradient([g_rows.reshape(-1, g.shape[1])]), gw

    def _weight_gradient(self, blocks):
        """Each group's (O/G, kh·kw·Cg) dW block, ``gᵀ @ cols``, computed as ``(colsᵀ @ g)ᵀ``
        when the patch width kh·kw·Cg is at least O/G: both sum the same products over the
        N·Ho·Wo pixels, but the BLAS runs faster with the larger of the two short sides as its
        output's rows (``benchmarks/conv_kernels.py``, OpenBLAS SkylakeX kernels, 2 threads: a
        16-channel 3x3 conv on 64x32x32 takes 5.7 ms as (65536, 144)ᵀ @ (65536, 16), 8.4 ms
        as (16, 65536) @ (65536, 144); for a narrow patch matrix, 3 to 32 channels, the two
        orders were within 20 % of each other either way in different runs)."""
        if self.cols[0].shape[1] >= blocks[0].shape[1]:
            return [d.T for d in _products([cols.T for cols in self.cols], blocks)]
        return _products([block.T for block in blocks], self.cols)

    def _correlates(self, g):
        """Whether dx is computed as a correlation of g (``_correlation_gradient``): an array
        gradient, stride 1, a kernel larger than 1x1, padding within the dilated kernel's
        reach, and no more output than input channels (g's patch matrix then is no larger than
        the patch gradients col2im would add up)."""
        stride, _, _, kernel = self.geometry
        return (not isinstance(g, Tensor) and stride == (1, 1) and kernel != (1, 1)
                and min(self._reversed_padding()) >= 0 and g.shape[1] <= self.x_shape[1])

    def _reversed_padding(self):
        """g's padding (top, bottom, left, right) for dx as a stride-1 correlation of g with the
        flipped kernel: d·(k-1) minus the forward padding on each side (negative where the
        forward padding reaches past the dilated kernel)."""
        _, padding, dilation, kernel = self.geometry
        reach = [d * (k - 1) for d, k in zip(dilation, kernel) for _ in range(2)]
        return tuple(r - p for r, p in zip(reach, padding))

    def _flipped_rows(self):
        """Each group's weight rows (O/G, (i, j, c)), taps reversed, as a ((i, j, o), c)
        matrix: the weight of dx as a correlation of g."""
        kh, kw = self.geometry[3]
        cg = self.x_shape[1] // len(self.w_rows)
        return [w.reshape(w.shape[0], kh, kw, cg)[:, ::-1, ::-1].transpose(1, 2, 0, 3)
                .reshape(kh * kw * w.shape[0], cg) for w in self.w_rows]

    def _correlation_gradient(self, g):
        """dx of a stride-1 convolution as one more convolution, with no col2im:

        dx[n, c, y, x] = Σ_{o, i, j} g_pad[n, o, y + d_h·i, x + d_w·j] · W[o, c, kh-1-i, kw-1-j]

        (g_pad: g zero-padded by d·(k-1) minus the forward padding on each side), so dx is the
        patch matrix of g (N·H·W, kh·kw·O/G per group) times the flipped weight as a
        (kh·kw·O/G, C/G) matrix, stored channels-last. Each sum runs over the same products
        as col2im's sums of ``g @ W``, in the BLAS's order and the products' dtype (fp32 for
        fp16), rounded once."""
        n, c, h, width = self.x_shape
        stride, _, dilation, kernel = self.geometry
        groups = len(self.w_rows)
        cols = _patch_matrices(g, (stride, self._reversed_padding(), dilation, kernel),
                               (h, width), groups)
        dx = _join(_products(cols, self._flipped_rows()), axis=1).reshape(n, h, width, c)
        if dx.dtype != self.x_dtype:
            dx = store(dx, self.x_dtype)
        return dx.transpose(0, 3, 1, 2)

    def _col2im(self, dcols):
        """dx from each group's tap-major patch gradients (kh·kw, N·Ho·Wo, Cg), ``g @ W_tap``
        for every tap: each tap's (N, Ho, Wo, Cg) block, dense, added where the tap read the
        input (runs of Wo·Cg values for stride 1; what it read in the padding is dropped, so dx
        is a dense (N, H, W, C) array, not the inside of a padded one), in the products' dtype,
        rounded once."""
        xp = backend.get_array_module(dcols[0])
        n, c, h, width = self.x_shape
        stride, padding, dilation, kernel = self.geometry
        if kernel == (1, 1) and stride == (1, 1) and not any(padding):
            dx = _join([d[0] for d in dcols], axis=1).reshape(n, h, width, c)  # no sums
        else:  # natively, each element gathered once from its windows in tap order
            dx = (_image_host.col2im(dcols, self.x_shape, self.geometry, self.out_hw)
                  if xp is numpy else None)
        if dx is None:
            ho, wo = self.out_hw
            cg = c // len(dcols)
            dx = xp.zeros((n, h, width, c), dcols[0].dtype)
            taps = inside_window_slices(kernel, stride, dilation, padding, (h, width),
                                        self.out_hw)
            for k, d in enumerate(dcols):
                d = d.reshape(*kernel, n, ho, wo, cg)
                group = dx[..., k * cg:(k + 1) * cg]
                for i, j, rows, cols, out_rows, out_cols in taps:
                    group[:, rows, cols] += d[i, j, :, out_rows, out_cols]
        if dx.dtype != self.x_dtype:  # fp16: one fast rounding
            dx = store(dx, self.x_dtype)
        return dx.transpose(0, 3, 1, 2)

    def _col2im_tensor(self, dcols):
        """dx from each group's (N·Ho·Wo, kh·kw·Cg) patch gradients as Tensors: each tap's
        patch gradients put back by a recorded scatter, summed by recorded adds, rounded
        once."""
        n, c, h, width = self.x_shape
        stride, padding, dilation, kernel = self.geometry
        ho, wo = self.out_hw
        cg = c // len(dcols)
        top, bottom, left, right = padding
        shape, dx = (n, h + top + bottom, width + left + right, c), 0
        for k, d in enumerate(dcols):
            d = d.reshape(n, ho, wo, *kernel, cg)
            for i, j, rows, cols in window_slices(kernel, stride, dilation, self.out_hw):
                index = (slice(None), rows, cols, slice(k * cg, (k + 1) * cg))
                dx = dx + scatter(d[:, :, :, i, j], shape, index)
        dx = dx[:, top:top + h, left:left + width]
        return store(dx, self.x_dtype).transpose(0, 3, 1, 2)


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
    output_hw(x.shape[2:], weight.shape[2:], stride, padding, dilation, name="weight's kernel")
    common = numpy.result_type(*[t.dtype for t in tensors])
    tensors = [cast(t, common) for t in tensors]
    return Conv2d.apply(*tensors, stride=stride, padding=padding, dilation=dilation, groups=groups)
