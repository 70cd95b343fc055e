"""The Tensor's operators and op methods (``t + u``, ``t @ w``, ``t.sum()``, ``t.backward()``),
installed on ``minigrad.Tensor`` by ``install()`` when ``minigrad.ops`` is imported.

``minigrad.tensor`` sits below the autograd engine and the ops (the ops build on Tensor), so it
cannot import them; the ops attach these methods to the class instead, as Chainer's
``install_variable_arithmetics`` does for its ``Variable``. Each method calls its op directly,
so an operator costs one Python call more than the op itself.

Besides minigrad's own methods, the class gets the MindSpore 2.x Tensor spellings
(``argmax``, ``permute``, ``half``, ``float``, ``to(dtype)``, ``unsqueeze``, ...). A PyTorch-only
name (``t.cuda()``, ``t.clone()``, ...) raises an AttributeError naming the minigrad
equivalent (``Tensor.__getattr__`` reads ``PYTORCH_ONLY``).
"""
from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import (check_axis, check_bool, check_broadcast, check_operand,
                              check_relation)
from minigrad.autograd import backprop
from minigrad.autograd.engine import run_backward
from minigrad.ops import arithmetic, creation, linalg, math, reduction, shape
from minigrad.ops.arithmetic import leaf
from minigrad.ops.shape import broadcast_to as _broadcast_to
from minigrad.tensor import Tensor, seed_like

# PyTorch Tensor names minigrad spells otherwise: name -> what to write instead
PYTORCH_ONLY = {
    "cpu": "t.to('CPU')",
    "cuda": "t.to('GPU')",
    "clone": "t.copy() (a new leaf) or t * 1 (differentiable)",
    "contiguous": "nothing: minigrad's ops take any memory layout",
    "type": "t.astype(dtype)",
    "long": "t.astype(minigrad.int64)",
    "double": "t.astype(minigrad.float64)",
    "detach_": "t = t.detach()",
    "zero_": "ops.zeros_like(t), or t[...] = 0 on a leaf",
    "fill_": "ops.full_like(t, value), or t[...] = value on a leaf",
    "is_cuda": "t.device == 'GPU'",
    "grad_fn": "t.is_leaf (minigrad keeps the creating op private)",
    "data_ptr": "t.data (the NumPy/CuPy array)",
    "numel": "t.size",
    "unsqueeze_": "t = t.unsqueeze(dim)",
}


def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires grad.

    Args:
        gradient: the seed (``sens``); default ones for a one-element tensor, required
            otherwise. Broadcast to ``self.shape`` and cast to ``self.dtype``.
        retain_graph: keep the graph so that ``backward`` can run on it again. Default:
            ``create_graph``.
        create_graph: record the backward pass, so that the gradients (``.grad`` then holds
            Tensors with a graph) can be differentiated again. Default False.
        inputs: a Tensor or a sequence of Tensors: accumulate into their ``.grad`` only.

    Raises:
        RuntimeError: if ``self`` does not require grad, the graph was already freed,
            ``gradient`` is missing for a tensor of more than one element, or (under
            ``create_graph``) an op's second derivative is not supported.
        ValueError: if ``gradient``'s shape does not broadcast to ``self.shape``.
        TypeError: if ``retain_graph`` or ``create_graph`` is not a bool.
    """
    if not self.requires_grad:
        raise RuntimeError("backward() on a tensor that does not require grad "
                           "(no input had requires_grad=True, or it was made under no_grad)")
    if create_graph is not False or inputs is not None:
        backprop.backward(self, [gradient], retain_graph, create_graph, inputs)
        return
    retain_graph = False if retain_graph is None else check_bool("retain_graph", retain_graph)
    run_backward([self], [seed_like(self, gradient)], retain_graph)


def to(self, *args, device=None, dtype=None):
    """Move to ``"CPU"``/``"GPU"`` and/or cast; differentiable (gradients flow back).

    Positional arguments are read by kind, so that MindSpore 2.x's ``t.to(dtype)``, PyTorch's
    ``t.to("cpu")`` and ``t.to("GPU", float16)`` all work: a device name (``"CPU"``, ``"GPU"``,
    any case, or PyTorch's ``"cuda"``) is the device, anything else the dtype.

    Raises:
        TypeError: for more than two positional arguments, a device or a dtype given twice
            (positionally and by keyword), or a positional value that is neither a device name
            nor a dtype (a str that is neither raises ValueError).
        ValueError: for an unknown device name or dtype.
    """
    if len(args) > 2:
        raise TypeError(f"to() takes a device and/or a dtype, got {len(args)} positional "
                        f"arguments {args!r}")
    for arg in args:
        if isinstance(arg, str) and _device_name(arg) is not None:
            check_relation("device", device, device is None, f"given once (positional {arg!r} "
                           f"given too)", error=TypeError, owner="Tensor.to")
            device = _device_name(arg)
        else:
            check_relation("dtype", dtype, dtype is None, f"given once (positional {arg!r} "
                           f"given too)", error=TypeError, owner="Tensor.to")
            dtype = _positional_dtype(arg)
    out = self
    if device is not None and backend.check_device(device) != self.device:
        out = arithmetic.to_device(out, device)
    if dtype is not None:
        out = arithmetic.cast(out, dtype)
    return out


def _positional_dtype(arg):
    """``arg`` (a positional argument of ``to`` that names no device) as a dtype."""
    try:
        return dtypes.as_dtype(arg, "args", owner="Tensor.to")
    except (TypeError, ValueError) as error:
        check_relation("args", arg, False, f"a device name ({', '.join(backend.DEVICES)}) or a "
                       f"dtype", error=type(error), owner="Tensor.to")


def _device_name(name):
    upper = name.split(":", 1)[0].upper()
    upper = "GPU" if upper == "CUDA" else upper
    return upper if upper in backend.DEVICES else None


def _argext(name):
    def method(self, axis=None, keepdims=False):
        x = self.data
        if axis is not None:
            axis = check_axis("axis", axis, x.ndim, owner=name)
        keepdims = check_bool("keepdims", keepdims)
        if x.size == 0:
            raise ValueError(f"{name} of an empty tensor of shape {x.shape}")
        out = getattr(x, name)(axis=axis)
        if keepdims:
            out = out.reshape([1] * x.ndim if axis is None else
                              [1 if i == axis else n for i, n in enumerate(x.shape)])
        return leaf(backend.get_array_module(x).asarray(out, dtype=dtypes.int32))
    method.__name__ = name
    method.__doc__ = (f"Indices of the {name[3:]}imum along ``axis`` (None: of the flattened "
                      f"tensor) as int32, MindSpore's index dtype; not differentiable.")
    return method


def _other(self, value, name):
    """``value``, the operand of an elementwise op method, checked under the method's own name:
    data (``check_operand``) whose shape broadcasts with ``self``'s."""
    if not isinstance(value, Tensor):
        value = check_operand(name, value)
    shape = getattr(value, "shape", ())
    if shape != self.shape:
        check_broadcast(("self", name), (self.shape, shape))
    return value


def _matmul_other(self, value):
    """``value``, the right operand of ``matmul``, checked under the method's name: data with at
    least one dimension whose rows match ``self``'s last axis."""
    if not isinstance(value, Tensor):
        value = check_operand("other", value)
    shape = getattr(value, "shape", ())
    rows = shape[-2] if len(shape) >= 2 else (shape[0] if shape else None)
    if rows is None or not self.shape or rows != self.shape[-1]:
        check_relation("other", value, False, f"of at least 1 dimension with "
                       f"{self.shape[-1] if self.shape else '?'} rows (self has shape "
                       f"{self.shape}), got shape {shape}", owner="Tensor.matmul")
    return value


def _cast_to(dtype):
    def method(self):
        return arithmetic.cast(self, dtype)
    method.__doc__ = f"``self`` cast to {dtype} (MindSpore 2.x and PyTorch spelling)."
    return method


def _shape_args(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def copy(self):
    """A new leaf holding a copy of the data (MindSpore's ``Tensor.copy``)."""
    return leaf(self.data.copy())


def __getattr__(self, name):
    """Only for names the class lacks: a PyTorch spelling gets a pointer to minigrad's."""
    if name in PYTORCH_ONLY:
        raise AttributeError(f"'Tensor' object has no attribute {name!r} (a PyTorch name); in "
                             f"minigrad write {PYTORCH_ONLY[name]}")
    raise AttributeError(f"'Tensor' object has no attribute {name!r}")


_METHODS = {
    # operators
    "__add__": lambda self, other: arithmetic.add(self, other),
    "__radd__": lambda self, other: arithmetic.add(other, self),
    "__sub__": lambda self, other: arithmetic.sub(self, other),
    "__rsub__": lambda self, other: arithmetic.sub(other, self),
    "__mul__": lambda self, other: arithmetic.mul(self, other),
    "__rmul__": lambda self, other: arithmetic.mul(other, self),
    "__truediv__": lambda self, other: arithmetic.div(self, other),
    "__rtruediv__": lambda self, other: arithmetic.div(other, self),
    "__pow__": lambda self, other: arithmetic.pow(self, other),
    "__rpow__": lambda self, other: arithmetic.pow(other, self),
    "__matmul__": lambda self, other: linalg.matmul(self, other),
    "__rmatmul__": lambda self, other: linalg.matmul(other, self),
    "__neg__": lambda self: math.neg(self),
    "__abs__": lambda self: math.abs(self),
    "__getitem__": lambda self, index: shape.getitem(self, index),
    # comparisons record no graph and return bool tensors; against None, NotImplemented makes
    # Python compare identities: ``t == None`` is False and ``t in [None]`` works, as with
    # PyTorch tensors (None in arithmetic is still refused)
    "__eq__": lambda self, other: (NotImplemented if other is None
                                   else arithmetic.equal(self, other)),
    "__ne__": lambda self, other: (NotImplemented if other is None
                                   else arithmetic.not_equal(self, other)),
    "__lt__": lambda self, other: arithmetic.less(self, other),
    "__le__": lambda self, other: arithmetic.less_equal(self, other),
    "__gt__": lambda self, other: arithmetic.greater(self, other),
    "__ge__": lambda self, other: arithmetic.greater_equal(self, other),
    "__getattr__": __getattr__,
    # autograd, device and dtype
    "backward": backward,
    "to": to,
    "astype": lambda self, dtype: arithmetic.cast(self, dtype),
    "half": _cast_to(dtypes.float16),
    "bfloat16": _cast_to("bfloat16"),  # an ImportError without ml_dtypes (minigrad[lowp])
    "float": _cast_to(dtypes.float32),
    "int": _cast_to(dtypes.int32),
    "bool": _cast_to(dtypes.bool_),
    "copy": copy,
    # the functional ops as methods
    "sum": lambda self, axis=None, keepdims=False: reduction.sum(self, axis, keepdims),
    "mean": lambda self, axis=None, keepdims=False: reduction.mean(self, axis, keepdims),
    "max": lambda self, axis=None, keepdims=False: reduction.max(self, axis, keepdims),
    "min": lambda self, axis=None, keepdims=False: reduction.min(self, axis, keepdims),
    "argmax": _argext("argmax"),
    "argmin": _argext("argmin"),
    "reshape": lambda self, *shape_: shape.reshape(self, _shape_args(shape_)),
    "view": lambda self, *shape_: shape.reshape(self, _shape_args(shape_)),
    "flatten": lambda self: shape.reshape(self, (-1,)),
    "transpose": lambda self, *axes: shape.transpose(self, _shape_args(axes) or None),
    "permute": lambda self, *axes: shape.transpose(self, _shape_args(axes)),
    "swapaxes": lambda self, a, b: shape.swapaxes(self, a, b),
    "expand_dims": lambda self, axis: shape.expand_dims(self, axis),
    "unsqueeze": lambda self, dim: shape.expand_dims(self, dim),
    "squeeze": lambda self, axis=None: shape.squeeze(self, axis),
    "broadcast_to": lambda self, shape: _broadcast_to(self, shape),
    "exp": lambda self: math.exp(self),
    "log": lambda self: math.log(self),
    "sqrt": lambda self: math.sqrt(self),
    "square": lambda self: creation.square(self),
    "abs": lambda self: math.abs(self),
    "neg": lambda self: math.neg(self),
    "tanh": lambda self: math.tanh(self),
    "sigmoid": lambda self: math.sigmoid(self),
    "relu": lambda self: math.relu(self),
    "clip": lambda self, min=None, max=None: math.clip(self, min, max),
    "clamp": lambda self, min=None, max=None: math.clip(self, min, max),
    "add": lambda self, other: arithmetic.add(self, _other(self, other, "other")),
    "sub": lambda self, other: arithmetic.sub(self, _other(self, other, "other")),
    "mul": lambda self, other: arithmetic.mul(self, _other(self, other, "other")),
    "div": lambda self, other: arithmetic.div(self, _other(self, other, "other")),
    "pow": lambda self, exponent: arithmetic.pow(self, _other(self, exponent, "exponent")),
    "matmul": lambda self, other: linalg.matmul(self, _matmul_other(self, other)),
    "T": property(lambda self: shape.transpose(self, None), doc="The axes reversed."),
}


def install(cls=Tensor):
    """Attach the operators and methods to ``cls`` (``minigrad.Tensor``; its subclasses, such as
    ``Parameter``, inherit them)."""
    for name, method in _METHODS.items():
        if callable(method) and getattr(method, "__name__", "") == "<lambda>":
            method.__name__ = name
        setattr(cls, name, method)

