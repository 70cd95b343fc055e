"""Joining and splitting: concat, stack, split.

Every rule also runs on Tensors, for higher-order gradients (``saves``:
``minigrad.autograd.function``): concat's rule is a split, split's a concat, stack's a split
along the stacked axis.
"""
import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad.autograd.function import Function
from minigrad._checks import (check_axis, check_int, check_int_tuple, check_relation, check_type,
                              is_int)
from minigrad.ops.arithmetic import as_tensor, cast
from minigrad.tensor import Tensor


class Concat(Function):
    """out = [x₀, x₁, ...] joined along axis;  dxᵢ = the slice of g that xᵢ filled."""
    storage = True
    saves = {}

    def forward(self, *arrays, axis):
        self.axis = axis
        self.bounds = numpy.cumsum([a.shape[axis] for a in arrays])[:-1].tolist()
        return backend.get_array_module(*arrays).concatenate(arrays, axis=axis)

    def backward(self, g):
        return _pieces(g, self.bounds, self.axis)


class Stack(Function):
    """out = [x₀, x₁, ...] stacked along a new axis;  dxᵢ = g taken at index i of that axis."""
    storage = True
    saves = {}

    def forward(self, *arrays, axis):
        self.axis = axis
        return backend.get_array_module(*arrays).stack(arrays, axis=axis)

    def backward(self, g):
        if isinstance(g, Tensor):
            pieces = _pieces(g, list(range(1, g.shape[self.axis])), self.axis)
            return tuple(p.squeeze(self.axis) for p in pieces)
        return tuple(backend.get_array_module(g).moveaxis(g, self.axis, 0))


class Split(Function):
    """out = the pieces of x along axis;  dx = the piece gradients joined (zeros for unused
    pieces)."""
    storage = True
    saves = {}

    def forward(self, x, bounds, axis):
        self.axis = axis
        return tuple(backend.get_array_module(x).split(x, bounds, axis=axis))

    def backward(self, *grads):
        if isinstance(grads[0], Tensor):
            return Concat.apply(*grads, axis=self.axis)
        return backend.get_array_module(*grads).concatenate(grads, axis=self.axis)


def _pieces(g, bounds, axis):
    """``g`` cut along ``axis`` at ``bounds``: views of an array, or a Tensor's Split outputs."""
    if isinstance(g, Tensor):
        return Split.apply(g, bounds=bounds, axis=axis)
    return tuple(backend.get_array_module(g).split(g, bounds, axis=axis))


def _same_dtype(tensors, op, least_ndim=0):
    """``tensors`` (a non-empty list or tuple) as Tensors of one dtype, each of at least
    ``least_ndim`` dimensions; errors name ``tensors`` (an entry as ``tensors[i]``)."""
    expected = "a non-empty list or tuple of Tensors"
    if not isinstance(tensors, (list, tuple)):
        check_type("tensors", tensors, (list, tuple), expected=expected, owner=op)
    check_relation("tensors", tensors, len(tensors) > 0, expected, owner=op)
    given, tensors = tensors, [t if isinstance(t, Tensor) else as_tensor(t, name=f"tensors[{i}]")
                               for i, t in enumerate(tensors)]
    if least_ndim and any(t.ndim < least_ndim for t in tensors):
        # NumPy's and PyTorch's concatenate refuse 0-d tensors (there is no axis to join along)
        check_relation("tensors", given, False, f"{expected} of at least {least_ndim} "
                                                f"dimension (0-d tensors have no axis to join "
                                                f"along; stack them)", owner=op)
    common = dtypes.promote_types(*[t.dtype for t in tensors])
    return [cast(t, common) for t in tensors]


def concat(tensors, axis=0):
    """Join tensors along an existing ``axis`` (default 0); mixed dtypes promote (fp16 + fp32:
    fp32).

    Raises:
        TypeError: for ``tensors`` that are not a list or tuple of Tensors, numbers or arrays.
        ValueError: for an empty list, 0-d tensors, an axis out of range, or shapes that differ
            off ``axis``.
    """
    tensors = _same_dtype(tensors, "concat", least_ndim=1)
    first = tensors[0]
    ax = check_axis("axis", axis, first.ndim)
    for i, t in enumerate(tensors):
        if t.ndim != first.ndim or any(a != b for k, (a, b) in enumerate(zip(t.shape, first.shape))
                                       if k != ax):
            raise ValueError(f"concat along axis {axis}: tensor {i} has shape {t.shape}, which "
                             f"does not match tensor 0's shape {first.shape} off that axis")
    return Concat.apply(*tensors, axis=ax)


def stack(tensors, axis=0):
    """Join equal-shaped tensors along a new ``axis`` (default 0; from -ndim-1 to ndim).

    Raises:
        TypeError: for ``tensors`` that are not a list or tuple of Tensors, numbers or arrays.
        ValueError: for an empty list, an axis out of range, or differing shapes.
    """
    tensors = _same_dtype(tensors, "stack")
    first = tensors[0]
    for i, t in enumerate(tensors):
        if t.shape != first.shape:
            raise ValueError(f"stack needs tensors of one shape: tensor {i} has shape {t.shape}, "
                             f"tensor 0 has {first.shape}")
    ax = check_axis("axis", axis, first.ndim + 1)
    return Stack.apply(*tensors, axis=ax)


def split(x, sections_or_indices, axis=0):
    """Cut ``x`` along ``axis`` into a tuple of tensors (views of ``x``'s data).

    ``sections_or_indices`` is either an int n (n equal pieces) or a sorted sequence of cut
    indices, as in ``numpy.split``: ``[2, 5]`` gives ``x[:2], x[2:5], x[5:]``.

    Raises:
        ValueError: if n does not divide the axis length, n < 1, an axis out of range, or a 0-d
            ``x``.
        TypeError: if ``sections_or_indices`` is neither an int nor a list/tuple of ints (a bool
            is neither).
    """
    x = as_tensor(x)
    check_relation("x", x, x.ndim > 0, "a Tensor of at least 1 dimension (a 0-d tensor has no "
                                       "axis to split)", owner="split")
    ax = check_axis("axis", axis, x.ndim)
    length = x.shape[ax]
    given = sections_or_indices
    if isinstance(given, range) or (isinstance(given, numpy.ndarray) and given.ndim == 1
                                    and given.dtype.kind in "iu"):
        given = list(given)  # cut indices as numpy.split takes them
    if is_int(given):
        n = check_int("sections_or_indices", given, low=1, owner="split")
        check_relation("sections_or_indices", given, length % n == 0,
                       f"a divisor of the length {length} of axis {axis} (shape {x.shape})",
                       owner="split")
        bounds = [length // n * i for i in range(1, n)]
    else:  # a float count or index is refused, never truncated by int()
        bounds = list(check_int_tuple("sections_or_indices", given, scalar=False, owner="split"))
    return Split.apply(x, bounds=bounds, axis=ax)
