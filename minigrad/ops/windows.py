"""Window geometry and memory layout of the image ops (conv2d, max and average pooling).

Geometry: kernel, stride, dilation and padding as pairs and 4-tuples, the output size, the
'same' padding, and the slice of the padded input that each kernel tap reads.

Layout: an image batch always has the shape (N, C, H, W), and its array may keep its elements
in one of two memory orders:

- NCHW ("channels-first", C order): what ``numpy.zeros((N, C, H, W))`` gives;
- NHWC ("channels-last"): ``x.transpose(0, 2, 3, 1)`` is C-ordered, so the C channels of one
  pixel lie side by side.

The values do not depend on the order: only the speed does. ``conv2d`` returns its output
channels-last, the order its matrix product writes (one row of C values per output pixel), and
reads a channels-last input with one plain copy into its patch matrix (an NCHW input is
transposed on the way). Elementwise ops, BatchNorm and pooling keep their input's order, so a
conv net computes channels-last from its first convolution to its flattening (``reshape`` gives
C order, as NumPy's does).
"""
import functools
import math

from minigrad import backend
from minigrad._checks import check_int_tuple, check_relation
from minigrad.ops import _scratch


def pair(name, value):
    """``value`` as (h, w) of positive ints: an int, a pair, or MindSpore's 4-tuple (1, 1, h, w).

    Raises:
        TypeError: naming ``name`` for a value that is not an int or a tuple/list of ints.
        ValueError: naming ``name`` for a wrong length or an entry < 1.
    """
    if _ints_at_least(value, 2, 1):  # already what the checker returns (each op call checks)
        return value
    if isinstance(value, (tuple, list)) and len(value) == 4:
        items = check_int_tuple(name, value, 4, low=1)
        check_relation(name, value, items[:2] == (1, 1),
                       "an int, a pair or MindSpore's 4-tuple (1, 1, h, w)")
        return items[2:]
    return check_int_tuple(name, value, 2, low=1)


def padding4(padding, name="padding"):
    """``padding`` as (top, bottom, left, right) from an int, a pair (ph, pw) or a 4-tuple.

    Raises:
        TypeError: for a value that is not an int or a tuple/list of ints.
        ValueError: for a wrong length or a negative entry.
    """
    if _ints_at_least(padding, 4, 0):
        return padding
    if isinstance(padding, (tuple, list)) and len(padding) == 2:
        ph, pw = check_int_tuple(name, padding, 2, low=0)
        return ph, ph, pw, pw
    return check_int_tuple(name, padding, 4, low=0)


def _ints_at_least(value, length, low):
    """Whether ``value`` is a tuple of ``length`` Python ints, each >= ``low``: an argument
    that needs no conversion, answered without the checker's general (slower) path."""
    return (type(value) is tuple and len(value) == length
            and all(type(v) is int and v >= low for v in value))


def same_padding(in_hw, kernel, stride=1, dilation=1):
    """(top, bottom, left, right) padding for pad_mode='same': output size ceil(in / stride).

    As in MindSpore and TensorFlow, an odd total puts the extra row/column at the bottom/right.
    ``in_hw`` is the input's (height, width); ``kernel``, ``stride``, ``dilation`` ints or pairs.

    Raises:
        TypeError: for an ``in_hw`` that is not a pair of ints, or sizes that are not ints or
            pairs of ints.
        ValueError: for a negative ``in_hw`` entry, or sizes below 1.
    """
    if not _ints_at_least(in_hw, 2, 0):
        in_hw = check_int_tuple("in_hw", in_hw, 2, low=0, scalar=False, owner="same_padding")
    pads = []
    for n, k, s, d in zip(in_hw, pair("kernel", kernel), pair("stride", stride),
                          pair("dilation", dilation)):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads += [total // 2, total - total // 2]
    return tuple(pads)


def output_hw(in_hw, kernel, stride, padding, dilation, name="kernel"):
    """Output (height, width) of a window op; ValueError, naming the kernel's argument ``name``,
    when the padded input is too small."""
    (h, w), (kh, kw), (sh, sw), (dh, dw) = in_hw, kernel, stride, dilation
    top, bottom, left, right = padding
    out = ((h + top + bottom - dh * (kh - 1) - 1) // sh + 1,
           (w + left + right - dw * (kw - 1) - 1) // sw + 1)
    if min(out) < 1:
        raise ValueError(f"{name} {(kh, kw)} with dilation {(dh, dw)} must fit the input of "
                         f"height x width {h}x{w} with padding {padding}")
    return out


@functools.lru_cache(maxsize=512)
def window_slices(kernel, stride, dilation, out_hw):
    """(i, j, rows, cols) for each kernel tap: the slices of the padded input seen by tap (i, j)
    (a tuple, cached per geometry: a training step asks for the same few every time)."""
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out_hw
    return tuple((i, j, slice(i * dh, i * dh + sh * (ho - 1) + 1, sh),
                  slice(j * dw, j * dw + sw * (wo - 1) + 1, sw))
                 for i in range(kh) for j in range(kw))


@functools.lru_cache(maxsize=512)
def inside_window_slices(kernel, stride, dilation, padding, in_hw, out_hw):
    """(i, j, rows, cols, out_rows, out_cols) for each kernel tap (i, j) that reads some input
    element: the slices of the unpadded input that tap reads (``rows``, ``cols``) and the
    output positions reading them (``out_rows``, ``out_cols``); what the tap reads in the
    padding is left out. A tuple, cached per geometry."""
    per_axis = []
    for k, s, d, before, n_in, n_out in zip(kernel, stride, dilation, padding[::2], in_hw,
                                            out_hw):
        taps = []
        for i in range(k):
            offset = d * i - before  # input position of output 0
            first = max(0, -(offset // s))  # the first output reading inside the input
            last = min(n_out, (n_in - 1 - offset) // s + 1)
            if first < last:
                start = s * first + offset
                taps.append((i, slice(start, start + s * (last - first - 1) + 1, s),
                             slice(first, last)))
        per_axis.append(taps)
    return tuple((i, j, rows, cols, out_rows, out_cols) for i, rows, out_rows in per_axis[0]
                 for j, cols, out_cols in per_axis[1])


def is_channels_last(x):
    """Whether the (N, C, H, W) array ``x`` is stored channels-last (module docstring)."""
    return x.transpose(0, 2, 3, 1).flags.c_contiguous


def empty_image(xp, shape, dtype, channels_last, scratch=False):
    """An uninitialised (N, C, H, W) array of ``dtype``, stored channels-last or NCHW; with
    ``scratch``, from the pool of reusable temporaries (``ops._scratch``)."""
    empty = _scratch.empty if scratch else (lambda xp, shape, dtype: xp.empty(shape, dtype))
    if not channels_last:
        return empty(xp, shape, dtype)
    n, c, h, w = shape
    return empty(xp, (n, h, w, c), dtype).transpose(0, 3, 1, 2)


def pad(x, padding, fill, channels_last, dtype=None, scratch=False):
    """``x`` (N, C, H, W) with ``padding`` (top, bottom, left, right) rows and columns of
    ``fill`` around each image, as a new array of ``dtype`` (default x's) stored channels-last or
    NCHW (with ``scratch``, a pooled temporary: ``empty_image``); ``x`` itself when there is
    nothing to add, change or reorder."""
    dtype = x.dtype if dtype is None else dtype
    if not any(padding) and x.dtype == dtype and (
            is_channels_last(x) if channels_last else x.flags.c_contiguous):
        return x
    n, c, h, w = x.shape
    top, bottom, left, right = padding
    out = empty_image(backend.get_array_module(x), (n, c, h + top + bottom, w + left + right),
                      dtype, channels_last, scratch)
    # the border, then the inside: every element written once
    out[:, :, :top] = fill
    out[:, :, top + h:] = fill
    out[:, :, top:top + h, :left] = fill
    out[:, :, top:top + h, left + w:] = fill
    out[:, :, top:top + h, left:left + w] = x
    return out


def crop(padded, padding, hw):
    """The (N, C, H, W) inside of ``padded`` (a view): the inverse of ``pad``."""
    top, _, left, _ = padding
    return padded[:, :, top:top + hw[0], left:left + hw[1]]
