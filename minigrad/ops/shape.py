"""Shape ops: reshape, transpose, swapaxes, expand_dims, squeeze, broadcast_to, getitem; and
``scatter``, getitem's adjoint.

Every rule also runs on Tensors, for higher-order gradients (``saves``:
``minigrad.autograd.function``): the rules of these linear ops are each other's forwards
(getitem's is scatter and scatter's is getitem; broadcast_to's is a sum).
"""
import math

import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._fp16_host import store, widen
from minigrad.autograd.function import Function
from minigrad._checks import IndexRangeError, check_axis, check_int_tuple, check_relation
from minigrad.ops._util import normalize_axis, unbroadcast
from minigrad.ops.arithmetic import as_tensor
from minigrad.tensor import Tensor, _unwrap_index


class Reshape(Function):
    """out = x viewed with a new shape;  dx = g reshaped back."""
    storage = True
    saves = {}

    def forward(self, x, shape):
        self.shape = x.shape
        return x.reshape(shape)

    def backward(self, g):
        return g.reshape(self.shape)


class Transpose(Function):
    """out = x with axes permuted;  dx = g with the inverse permutation."""
    storage = True
    saves = {}

    def forward(self, x, axes):
        self.inverse = tuple(range(x.ndim)[::-1] if axes is None else numpy.argsort(axes))
        return x.transpose(axes)

    def backward(self, g):
        return g.transpose(self.inverse)


class BroadcastTo(Function):
    """out = x broadcast to ``shape``;  dx = g summed over the broadcast axes."""
    storage = True
    saves = {}

    def forward(self, x, shape):
        self.shape = x.shape
        return backend.get_array_module(x).broadcast_to(x, shape)

    def backward(self, g):
        return unbroadcast(g, self.shape)


class GetItem(Function):
    """out = x[index];  dx = scatter(g, x.shape, index): zeros with g added at index."""
    storage = True
    saves = {}

    def forward(self, x, index):
        self.shape, self.index = x.shape, index
        return x[index]

    def backward(self, g):
        return scatter(g, self.shape, self.index)


class Scatter(Function):
    """out = zeros of ``shape`` with g added at ``index``;  dg = gy[index].

    Integer-array indices may repeat an element: their values add up, accumulated in fp32 for
    fp16 (a scatter-add is a reduction). Slices and bool masks select each element once.
    """
    saves = {}

    def forward(self, g, shape, index):
        self.index = index
        return _scatter(g, shape, index)

    def backward(self, gy):
        return gy[self.index]


def _scatter(g, shape, index):
    xp = backend.get_array_module(g)
    if not _may_repeat(index):
        out = xp.zeros(shape, g.dtype)
        out[index] = g
        return out
    out = xp.zeros(shape, dtypes.acc_dtype(g.dtype))
    xp.add.at(out, index, widen(g))
    return store(out, g.dtype)


def scatter(g, shape, index):
    """Zeros of ``shape`` with ``g`` added at ``index`` (an index as ``getitem`` takes, already
    unwrapped; repeated integer indices add up): the gradient of ``x[index]``, and a
    differentiable op itself. ``g`` is an array, or a Tensor (the ``Scatter`` op)."""
    if isinstance(g, Tensor):
        return Scatter.apply(g, shape=shape, index=index)
    return _scatter(g, shape, index)


def _may_repeat(index):
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, list) or (getattr(i, "ndim", 0) > 0 and i.dtype.kind != "b")
               for i in items)


def reshape(x, shape):
    """``x`` with a new shape: an int or a tuple/list of ints, one of which may be -1 (the size
    that keeps the number of elements).

    Raises:
        TypeError: for a shape that is not an int or a tuple/list of ints.
        ValueError: for an entry below -1, two -1 entries, or a shape of another size.
    """
    x = as_tensor(x)
    shape = check_int_tuple("shape", shape, low=-1)
    if shape.count(-1) > 1 or not _reshapes(x.shape, shape):
        check_relation("shape", shape, False, f"a shape of {x.size} elements (one entry may be "
                                              f"-1), to reshape x of shape {x.shape}")
    return Reshape.apply(x, shape=shape)


def _reshapes(old, new):
    known = math.prod(n for n in new if n != -1)
    size = math.prod(old)
    return known == size if -1 not in new else (known > 0 and size % known == 0) or size == 0


def transpose(x, axes=None):
    """Permute axes (``None``: reverse them).

    Raises:
        TypeError / ValueError: for ``axes`` that are not a permutation of ``x``'s axes.
    """
    x = as_tensor(x)
    if axes is not None:
        check_int_tuple("axes", axes, scalar=False)
        n = x.ndim
        if sorted(a % n if -n <= a < n else n for a in axes) != list(range(n)):
            check_relation("axes", axes, False, f"a permutation of the {n} axes of a tensor of "
                                                f"shape {x.shape}")
        axes = tuple(int(a) % n for a in axes)
    return Transpose.apply(x, axes=axes)


def swapaxes(x, axis1, axis2):
    """Exchange two axes."""
    x = as_tensor(x)
    axes = list(range(x.ndim))
    a, b = check_axis("axis1", axis1, x.ndim), check_axis("axis2", axis2, x.ndim)
    axes[a], axes[b] = axes[b], axes[a]
    return Transpose.apply(x, axes=tuple(axes))


def expand_dims(x, axis):
    """Insert a size-1 axis at ``axis``."""
    x = as_tensor(x)
    axis = check_axis("axis", axis, x.ndim + 1)
    shape = list(x.shape)
    shape.insert(axis, 1)
    return Reshape.apply(x, shape=tuple(shape))


def squeeze(x, axis=None):
    """Remove size-1 axes (all of them, or those in ``axis``; ValueError if one is not 1)."""
    x = as_tensor(x)
    axes = normalize_axis(axis, x.ndim) if axis is not None else None
    if axes is not None:
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            check_relation("axis", axis, False, f"axes of size 1 of a tensor of shape {x.shape} "
                                                f"(axis {bad[0]} has size {x.shape[bad[0]]})")
    shape = tuple(n for i, n in enumerate(x.shape)
                  if not (n == 1 and (axes is None or i in axes)))
    return Reshape.apply(x, shape=shape)


def broadcast_to(x, shape):
    """``x`` broadcast to ``shape`` (NumPy rules).

    Raises:
        TypeError: for a shape that is not a tuple/list of ints (or one int).
        ValueError: for a shape ``x`` does not broadcast to.
    """
    x = as_tensor(x)
    shape = check_int_tuple("shape", shape, low=0)
    try:
        reachable = numpy.broadcast_shapes(x.shape, shape) == shape
    except ValueError:
        reachable = False
    if not reachable:
        check_relation("shape", shape, False, f"a shape that x of shape {x.shape} broadcasts "
                                              f"to")
    return BroadcastTo.apply(x, shape=shape)


def getitem(x, index):
    """``x[index]``: basic slicing, integer/bool arrays (gradients of repeated indices add).

    ``index`` is what NumPy takes: an int (negative counts from the end), a slice, None (a new
    axis), Ellipsis, a bool (a new axis of one or no entries), an integer or bool array, Tensor
    or nested list, or a tuple of these.

    Raises:
        TypeError: for an index of another kind (a float, a str, a float array), naming ``index``.
        IndexError: for an index outside ``x``'s shape, or more indices than ``x`` has axes (an
            ``_checks.IndexRangeError``: a ValueError too), naming ``index`` and ``x``.
    """
    x = as_tensor(x)
    try:
        return GetItem.apply(x, index=_unwrap_index(index))
    except (IndexError, OverflowError):  # NumPy's errors, reworded only when indexing fails
        _index_error(x, index)
        raise


def _index_error(x, index):
    """Raise the error for an ``index`` that NumPy refused for ``x``: a TypeError when some part
    of it is of a kind that is no index, else an IndexRangeError (out of bounds, too many)."""
    parts = index if isinstance(index, tuple) else (index,)
    check_relation("index", index, all(_is_index(part) for part in parts),
                   "an int, a slice, None, Ellipsis, a bool, an integer or bool array or "
                   "Tensor, or a tuple of them", error=TypeError, owner="getitem")
    check_relation("index", index, False, f"within x of shape {x.shape} (one entry per axis, each "
                                          f"in [-n, n) for an axis of n)", error=IndexRangeError,
                   owner="getitem")


def _is_index(part):
    """Whether ``part`` is of a kind NumPy takes as one entry of an index."""
    if part is None or part is Ellipsis or isinstance(part, (slice, int, numpy.integer,
                                                               numpy.bool_)):
        return True
    part = part.data if isinstance(part, Tensor) else part
    if isinstance(part, list):
        try:
            part = numpy.asarray(part)
        except (TypeError, ValueError, OverflowError):
            return False
        if part.size == 0:
            return True
    dtype = getattr(part, "dtype", None)
    return hasattr(part, "shape") and dtype is not None and dtype.kind in "biu"
