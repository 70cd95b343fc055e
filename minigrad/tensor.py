"""``Tensor``: an n-d array on NumPy or CuPy that records the ops applied to it for autograd.

The array lives in ``tensor.data`` (a ``numpy.ndarray`` or ``cupy.ndarray``); ``tensor._ctx`` is
the ``Function`` that made it (``None`` for a leaf) and ``tensor.grad`` receives the gradient of
a leaf after ``backward()``.

This module holds the data, conversions and graph bookkeeping. The operators (``t + u``,
``t @ w``, ``t[i]``, comparisons), ``backward`` and the op methods (``t.sum()``, ``t.reshape()``,
``t.to()``, ...) belong to the layers above: ``minigrad.ops`` installs them on the class when it
is imported (``minigrad/ops/tensor_methods.py``), which ``import minigrad`` always does.
"""
from copy import deepcopy as _deepcopy

import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_bool, check_callable, check_operand, check_relation
from minigrad._config import config


class Tensor:
    """An array with reverse-mode autograd.

    Args:
        data: array-like (NumPy/CuPy array, Python scalar or nested list, or another Tensor).
        dtype: one of the ``minigrad.dtype`` names; default: the array's own dtype, or float32 for
            Python floats, int64 for Python ints.
        requires_grad: record ops on this tensor so that ``backward`` fills ``.grad``.
        device: ``"CPU"`` or ``"GPU"``; default: the device of ``data`` when it is a Tensor or
            a CuPy array, else (host data: a NumPy array or scalar, Python numbers) the
            context's ``set_context(device_target=...)`` (CPU by default), so that under a GPU
            context ``Tensor(numpy_array)`` is copied to the GPU as PyTorch's default device
            does, and a training step never mixes host and device arrays.

    Raises:
        TypeError: for an unsupported dtype, or data that is not numbers (a str, None, a dict).
        ValueError: for nested lists of unequal lengths.
    """
    __slots__ = ("data", "requires_grad", "grad", "_ctx", "_index", "_hooks", "__weakref__")
    __array_priority__ = 1000  # numpy_scalar * tensor goes to Tensor.__rmul__

    def __init__(self, data, dtype=None, requires_grad=False, device=None):
        if isinstance(data, Tensor):
            device = data.device if device is None else device
            data = data.data
        python_data = not hasattr(data, "dtype")
        if python_data:
            data = _python_numbers(data)
        if dtype is not None:
            dtype = dtypes.as_dtype(dtype)
        elif python_data:
            dtype = dtypes.default_dtype(data)
        if device is None:  # host data follows the context; a device array stays there
            on_device = not python_data and backend.device_of(data) == "GPU"
            device = "GPU" if on_device else config.device_target
        array = backend.to_device(data, device)
        if dtype is not None and array.dtype != dtype:
            array = array.astype(dtype)
        elif array.dtype not in dtypes.SUPPORTED:
            array = array.astype(dtypes.as_dtype(array.dtype, "data's dtype"))
        self.data = array
        self.requires_grad = check_bool("requires_grad", requires_grad)
        self.grad = None
        self._ctx = None
        self._index = 0
        self._hooks = None

    # ---- array properties -------------------------------------------------------------------
    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    device = property(lambda self: backend.device_of(self.data))
    is_leaf = property(lambda self: self._ctx is None)

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        """The sub-tensors along axis 0 (each through ``__getitem__``, so gradients flow).

        Raises:
            TypeError: for a 0-d tensor (as PyTorch; without ``__iter__``, Python's sequence
                protocol would take indexing's IndexError for the end and yield nothing).
        """
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self.data)))

    def __contains__(self, element):
        """``element in t``: whether any element equals it (NumPy and PyTorch:
        ``(t == element).any()``)."""
        other = element.data if isinstance(element, Tensor) else element
        return bool(backend.read_scalar((self.data == other).any()))  # a GPU tensor: one read

    def dim(self):
        return self.data.ndim

    def asnumpy(self):
        """Host NumPy copy of the data (no copy on CPU)."""
        return backend.as_numpy(self.data)

    numpy = asnumpy

    def item(self):
        return backend.read_scalar(self.data)

    def tolist(self):
        """The values as nested Python lists (a GPU tensor is read to the host, explicitly)."""
        return backend.as_numpy(self.data).tolist()

    def __array__(self, dtype=None, copy=None):
        """NumPy's conversion protocol: ``numpy.array(t)`` copies (``copy=True``),
        ``numpy.asarray(t)`` shares a CPU tensor's memory when no cast is needed, and
        ``copy=False`` raises ValueError when a copy cannot be avoided (a cast, or a GPU
        tensor)."""
        array = self.asnumpy()
        shared = array is self.data
        if dtype is not None and numpy.dtype(dtype) != array.dtype:
            if copy is False:
                raise ValueError(f"numpy copy=False: converting a {array.dtype} Tensor to "
                                 f"{numpy.dtype(dtype)} needs a copy")
            return array.astype(dtype)
        if copy is False and not shared:
            raise ValueError("numpy copy=False: a GPU Tensor is copied to the host")
        return array.copy() if copy and shared else array

    def __dlpack__(self, **kwargs):
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.data.__dlpack_device__()

    def _one_element(self, what):
        if self.data.size != 1:
            raise TypeError(f"only a one-element Tensor converts to {what}, got shape {self.shape}")
        return backend.read_scalar(self.data)

    def __float__(self):
        return float(self._one_element("a Python float"))

    def __int__(self):
        return int(self._one_element("a Python int"))

    def __index__(self):
        """A 0-d integer (or bool) tensor is an index (``range(t)``, ``seq[t]``), as a 0-d NumPy
        integer array is (PyTorch also takes shape (1,); NumPy would then read ``array[t]`` as a
        scalar index instead of an index array, so minigrad does not)."""
        if self.data.dtype.kind not in "biu" or self.data.ndim != 0:
            raise TypeError(f"only a 0-d integer Tensor is an index, got shape {self.shape} and "
                            f"dtype {self.dtype}")
        return int(self.data.item())

    def __bool__(self):
        """The truth of a one-element tensor (on the GPU an explicit read of the device, which
        waits for it); NumPy's (and CuPy's) ValueError for more elements."""
        if self.data.size != 1:
            raise ValueError(f"The truth value of a Tensor of shape {self.shape} is ambiguous "
                             f"(one element is needed): use t.any() or t.all()")
        return bool(backend.read_scalar(self.data))

    def __repr__(self):
        body = numpy.array2string(self.asnumpy(), precision=4, separator=", ", threshold=20)
        extra = ", requires_grad=True" if self.requires_grad else ""
        dev = ", device=GPU" if self.device == "GPU" else ""
        return f"Tensor(shape={list(self.shape)}, dtype={self.dtype}{dev}{extra}, value=\n{body})"

    def __str__(self):
        """The values as NumPy prints them (MindSpore 2.x's ``str``: ``print(loss)`` shows
        ``2.3025851``); ``repr`` adds the shape and dtype."""
        return str(self.asnumpy())

    def __format__(self, format_spec):
        """``format(t, ".3f")`` / ``f"{t:.3f}"`` format the value of a 0-d tensor (as PyTorch);
        an empty spec gives ``str(t)``; a spec for a tensor with dimensions is a TypeError."""
        if not format_spec:
            return str(self)
        if self.data.ndim == 0:
            return format(self.data.item(), format_spec)
        raise TypeError(f"format spec {format_spec!r} needs a 0-d Tensor, got shape {self.shape} "
                        f"(format t.item() or t.asnumpy())")

    __hash__ = object.__hash__

    def __deepcopy__(self, memo):
        """A new tensor with copies of every attribute (data, grad, name, ...).

        Raises:
            RuntimeError: for a tensor computed in a graph (as PyTorch: only graph leaves can be
                deep-copied; a copy of the graph would send ``backward`` into copies of the leaves,
                leaving their ``.grad`` unset). Deep-copy ``t.detach()`` instead.
        """
        if self._ctx is not None:
            raise RuntimeError("only graph leaves support deepcopy: this tensor was computed from "
                               "others "
                               "(deep-copy t.detach() for its value)")
        cls = type(self)
        new = _new(cls)
        memo[id(self)] = new
        for klass in cls.__mro__:
            for name in getattr(klass, "__slots__", ()):
                if name != "__weakref__" and hasattr(self, name):
                    object.__setattr__(new, name, _deepcopy(getattr(self, name), memo))
        if hasattr(self, "__dict__"):  # a subclass without __slots__
            new.__dict__.update(_deepcopy(self.__dict__, memo))
        return new

    # ---- autograd (backward and the op methods are installed by minigrad.ops) -------------
    def detach(self):
        """A new leaf sharing this tensor's data, cut from the graph."""
        return make(self.data, None, 0)

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` in place and return ``self``.

        Raises:
            TypeError: for a ``requires_grad`` that is not a bool.
            RuntimeError: for ``requires_grad_(False)`` on a tensor computed in a graph.
        """
        requires_grad = check_bool("requires_grad", requires_grad)
        if self._ctx is not None and not requires_grad:
            raise RuntimeError("requires_grad_(False) on a non-leaf tensor: use detach()")
        self.requires_grad = requires_grad
        return self

    def register_hook(self, hook):
        """Call ``hook(grad) -> Tensor or None`` with this tensor's gradient during backward.

        A returned tensor replaces the gradient. Layer hooks (THOR's G = E[D Dᵀ]) use this on a
        layer's output to see the gradient arriving there.

        Raises:
            TypeError: if ``hook`` is not callable.
            RuntimeError: on a tensor that does not require grad (no gradient ever reaches it;
                PyTorch refuses the same).
        """
        check_callable("hook", hook, owner="Tensor.register_hook")
        if not self.requires_grad:
            raise RuntimeError("register_hook on a tensor that does not require grad: no gradient "
                               "reaches it (set requires_grad, or hook a tensor computed from one "
                               "that has it)")
        if self._ctx is None:
            self._hooks = (self._hooks or []) + [hook]
        else:
            hooks = self._ctx.out_hooks
            if hooks is None:
                hooks = self._ctx.out_hooks = {}
            hooks.setdefault(self._index, []).append(hook)
        return hook

    def __setitem__(self, index, value):
        if self.requires_grad and self._ctx is not None:
            raise RuntimeError("in-place assignment to a tensor that is part of a graph")
        self.data[_unwrap_index(index)] = value.data if isinstance(value, Tensor) else value


def make(array, ctx, index):
    """Wrap an xp array without checks (the internal fast path); ``ctx`` is its creator or None."""
    t = _new(Tensor)
    t.data = array
    t.requires_grad = ctx is not None
    t.grad = None
    t._ctx = ctx
    t._index = index
    t._hooks = None
    return t


_new = object.__new__


def seed_like(tensor, gradient, name="gradient"):
    """The backprop seed for ``tensor``: ones, or ``gradient`` (argument ``name``: a Tensor, an
    array or a number) broadcast and cast to it."""
    xp = backend.get_array_module(tensor.data)
    if gradient is None:
        if tensor.size != 1:
            raise RuntimeError(f"backward() of a tensor of shape {tensor.shape} needs a gradient "
                               f"argument (implicit ones only for one-element tensors)")
        return xp.ones(tensor.shape, tensor.dtype)
    if isinstance(gradient, Tensor):
        g = gradient.data
    elif isinstance(gradient, numpy.ndarray) or hasattr(gradient, "__cuda_array_interface__"):
        g = gradient
    else:  # None entries, strs ("nan" would become NaN), ragged lists: named
        g = check_operand(name, gradient)
    # the seed (sens) may live on another device or in another dtype
    g = backend.to_device(g, tensor.device).astype(tensor.dtype, copy=False)
    if g.shape != tensor.shape:
        try:
            g = xp.broadcast_to(g, tensor.shape)
        except ValueError:
            raise ValueError(f"{name} of shape {g.shape} does not broadcast to the tensor's "
                             f"shape {tensor.shape}") from None
    return g


def _unwrap_index(index):
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in index)
    return index


def from_dlpack(obj):
    """A tensor sharing memory with any DLPack-capable array (NumPy, CuPy, PyTorch, ...), on the
    device the array is on whatever the context's device (no copy): a host array gives a CPU
    tensor (through ``numpy.from_dlpack``), a CUDA array a GPU tensor (``cupy.from_dlpack``).
    The way back is the array library's own ``from_dlpack`` of the tensor (``Tensor.__dlpack__``),
    e.g. ``torch.from_dlpack(t)`` or ``cupy.from_dlpack(t)``. Also ``Tensor.from_dlpack``.

    Raises:
        TypeError: ``obj`` does not speak DLPack (no ``__dlpack_device__``).
        RuntimeError: a CUDA array without CuPy and a GPU; what the array library raises for
            what it cannot export (PyTorch: a BufferError for a tensor that requires grad, a
            RuntimeError for bfloat16).
    """
    check_relation("obj", obj, hasattr(obj, "__dlpack_device__"),
                   "an array with DLPack support (__dlpack__ and __dlpack_device__)",
                   error=TypeError, owner="from_dlpack")
    device_type = obj.__dlpack_device__()[0]
    xp = backend.cupy if device_type == 2 else numpy  # 2 is kDLCUDA
    if xp is None:
        raise RuntimeError(f"from_dlpack: a CUDA array needs CuPy and a GPU "
                           f"({backend.CUPY_IMPORT_ERROR})")
    array = xp.from_dlpack(obj)
    return Tensor(array, device=backend.device_of(array))


def _python_numbers(data, name="data", owner="Tensor"):
    """``data`` (a Python number or nested lists of numbers) as a NumPy array, or an error that
    names the argument ``name`` and shows the value (``check_operand``: None, strs, ragged lists
    and ints beyond int64 are refused)."""
    return numpy.asarray(check_operand(name, data, owner=owner))


Tensor.from_dlpack = staticmethod(from_dlpack)
