"""MindSpore's helpers for writing training steps by hand, in PyNative (eager) form: ``jit``,
``depend``, ``fill``, ``dtype``, ``partial``, ``MultitypeFuncGraph`` and ``HyperMap``.

MindSpore's own loss-scaling cell is written with them::

    grad_scale = ops.MultitypeFuncGraph("grad_scale")

    @grad_scale.register("Tensor", "Tensor")
    def tensor_grad_scale(scale, grad):
        return grad * ops.cast(ops.reciprocal(scale), ops.dtype(grad))

    grads = ops.HyperMap()(ops.partial(grad_scale, scale), grads)
    loss = ops.depend(loss, optimizer(grads))

In graph mode these build graph nodes; minigrad runs eagerly (MindSpore's PyNative mode), so
each does at once what the graph would: ``depend`` returns its value (the statements before it
have run), ``jit`` runs the function as it is, ``HyperMap`` maps over the sequences.
"""
import functools
import numbers

import numpy

from minigrad import dtype as dtypes
from minigrad._checks import check_bool, check_callable, check_relation, check_type
from minigrad.ops.arithmetic import as_tensor
from minigrad.ops.creation import full
from minigrad.tensor import Tensor

__all__ = ["jit", "depend", "fill", "dtype", "partial", "MultitypeFuncGraph", "HyperMap"]


def jit(function=None, **options):
    """MindSpore's ``jit`` decorator: ``@jit``, ``@jit(...)`` or ``jit(fn)``, returning the
    function itself.

    MindSpore compiles the function into a static graph; minigrad has only eager execution, so
    the function runs as written, every call (with Python control flow taking its branches per
    call, as in PyNative mode). The compiler options (``mode``, ``input_signature``,
    ``jit_config``, ``capture_mode``, ...) are accepted and have nothing to configure.

    Raises:
        TypeError: ``function`` is given and is not callable.
    """
    if function is None:
        return lambda fn: jit(fn, **options)
    return check_callable("function", function, owner="jit")


# what depend's value may be: data (a Tensor, a number, an array) or a tuple/list of it
_DEPEND_VALUES = (Tensor, tuple, list, numbers.Number, numpy.ndarray, numpy.generic, type(None))


def depend(value, expr):
    """``value``: MindSpore's ordering edge (``expr`` runs before ``value`` is used). In eager
    execution ``expr`` has run already, so only ``value`` is returned; ``expr`` may be anything
    (an optimizer's result, a tuple of updates, None).

    Raises:
        TypeError: for a ``value`` that is not a Tensor, a number, an array, a tuple or a list
            (or None): a str, a dict, another object.
    """
    if not (isinstance(value, _DEPEND_VALUES) or hasattr(value, "__cuda_array_interface__")):
        check_type("value", value, _DEPEND_VALUES, owner="depend",
                   expected="a Tensor, a number, an array, or a tuple or list of them")
    return value


def fill(type, shape, value):  # noqa: A002 (MindSpore's argument name)
    """A Tensor of ``shape`` filled with ``value``, of dtype ``type`` (MindSpore ``ops.fill``).

    Raises:
        TypeError: an unsupported ``type``, a ``shape`` that is not an int or a tuple/list of
            ints, or a ``value`` that is not a number.
        ValueError: a negative size.
    """
    return full(shape, value, dtypes.as_dtype(type, "type"))


def dtype(input):  # noqa: A002 (MindSpore's argument name)
    """The dtype of ``input`` (a Tensor, or an array or number taken as one)."""
    return as_tensor(input, name="input").dtype


def partial(func, *args):
    """``func`` with its first arguments fixed (MindSpore ``ops.partial``; ``functools.partial``).

    Raises:
        TypeError: ``func`` is not callable.
    """
    return functools.partial(check_callable("func", func, owner="partial"), *args)


def _is_number(x):
    return isinstance(x, (numbers.Number, numpy.number, numpy.bool_)) and not isinstance(x, Tensor)


# MindSpore's type names for register(), each with a test and a breadth: of two registrations
# that both match, the one whose names are narrower wins (True is a Bool before it is a Number).
_TYPES = {
    "Tensor": (lambda x: isinstance(x, Tensor), 0),
    "Bool": (lambda x: isinstance(x, (bool, numpy.bool_)), 0),
    "Int": (lambda x: isinstance(x, (int, numpy.integer)) and not isinstance(x, bool), 1),
    "Float": (lambda x: isinstance(x, (float, numpy.floating)), 1),
    "Number": (_is_number, 2),
    "String": (lambda x: isinstance(x, str), 0),
    "None": (lambda x: x is None, 0),
    "Tuple": (lambda x: isinstance(x, tuple), 0),
    "List": (lambda x: isinstance(x, list), 0),
    "Dictionary": (lambda x: isinstance(x, dict), 0),
    "Function": (lambda x: callable(x) and not isinstance(x, Tensor), 1),
    # sparse tensors: MindSpore code registers rules for them; minigrad has none, so no value
    # ever matches them
    "RowTensor": (lambda x: False, 0),
    "COOTensor": (lambda x: False, 0),
    "CSRTensor": (lambda x: False, 0),
}
_ALIASES = {"Dict": "Dictionary", "Bool_": "Bool"}


class MultitypeFuncGraph:
    """A function with one implementation per tuple of argument types (MindSpore's
    ``ops.MultitypeFuncGraph``): ``@f.register("Tensor", "Tensor")`` adds one; calling ``f``
    runs the registered implementation whose types the arguments have.

    Type names: "Tensor", "Number" (int, float, bool and NumPy numbers), "Int", "Float", "Bool",
    "String", "None", "Tuple", "List", "Dictionary" (or "Dict"), "Function"; "RowTensor",
    "COOTensor" and "CSRTensor" are accepted and match nothing (minigrad has no sparse tensors).
    When several registrations fit, the one with the narrowest types is called (a bool goes to
    "Bool" before "Number"), and of equally narrow ones the first registered.

    Args:
        name: the function's name (for messages).
        read_value: accepted for MindSpore compatibility (Parameters are read as Tensors).

    Raises:
        TypeError: ``name`` is not a str, ``read_value`` not a bool. ValueError: ``name`` is
            empty. ``register`` raises ValueError for an unknown type name
            and TypeError for a non-str one; a call raises TypeError naming the argument types
            when no registration fits.
    """

    def __init__(self, name, read_value=False):
        self.name = check_type("name", name, str, owner="MultitypeFuncGraph")
        check_relation("name", name, name != "", "a non-empty str", owner="MultitypeFuncGraph")
        self.read_value = check_bool("read_value", read_value, owner="MultitypeFuncGraph")
        self.entries = []  # (type names, function), in registration order

    def register(self, *type_names):
        """Decorator adding an implementation for arguments of ``type_names``."""
        names = tuple(_type_name(n) for n in type_names)

        def add(fn):
            self.entries.append((names, fn))
            return fn
        return add

    def __call__(self, *args):
        best = None
        for names, fn in self.entries:
            if len(names) == len(args) and all(_TYPES[n][0](a) for n, a in zip(names, args)):
                breadth = sum(_TYPES[n][1] for n in names)
                if best is None or breadth < best[0]:
                    best = (breadth, fn)
        if best is None:
            given = ", ".join(type(a).__name__ for a in args)
            known = "; ".join(", ".join(names) for names, _ in self.entries) or "none"
            raise TypeError(f"MultitypeFuncGraph {self.name!r} has no implementation for "
                            f"arguments of types ({given}); registered: {known}")
        return best[1](*args)

    def __repr__(self):
        return f"MultitypeFuncGraph({self.name!r}, {len(self.entries)} implementations)"


def _type_name(name):
    check_type("type_names", name, str, expected="type names (strs)",
               owner="MultitypeFuncGraph.register")
    name = _ALIASES.get(name, name)
    return check_relation("type_names", name, name in _TYPES,
                          f"type names, each one of {sorted(_TYPES)}",
                          owner="MultitypeFuncGraph.register")


class HyperMap:
    """Apply a function elementwise over sequences (MindSpore's ``ops.HyperMap``).

    ``HyperMap()(fn, seq1, seq2, ...)`` or ``HyperMap(fn)(seq1, seq2, ...)``: for tuples (or
    lists) of equal length, ``fn`` is applied to the i-th elements of each, recursing into
    nested tuples/lists, and the results come back in a tuple (a list for lists); arguments
    that are not sequences are passed to ``fn`` as they are.

    Args:
        ops: the function to apply, or None to give it at each call.
        reverse: accepted for MindSpore compatibility (the order of evaluation has no visible
            effect in eager execution).

    Raises:
        TypeError: the function is not callable, ``reverse`` is not a bool, or arguments mixing
            tuples, lists and non-sequences.
        ValueError: sequences of different lengths.
    """

    def __init__(self, ops=None, reverse=False):
        if ops is not None:
            check_callable("ops", ops, owner="HyperMap")
        self.ops, self.reverse = ops, check_bool("reverse", reverse, owner="HyperMap")

    def __call__(self, *args):
        fn = self.ops
        if fn is None:
            if not args:
                raise TypeError("HyperMap() without a function needs one as the first argument")
            fn, args = check_callable("fn", args[0], owner="HyperMap"), args[1:]
        return _hyper_map(fn, args)


def _hyper_map(fn, args):
    if not any(isinstance(a, (tuple, list)) for a in args):
        return fn(*args)
    kind = type(args[0])
    if any(type(a) is not kind for a in args) or kind not in (tuple, list):
        raise TypeError(f"HyperMap: the arguments must all be tuples, all lists or all "
                        f"non-sequences, got {[type(a).__name__ for a in args]}")
    length = len(args[0])
    if any(len(a) != length for a in args):
        raise ValueError(f"HyperMap: the sequences must have one length, got "
                         f"{[len(a) for a in args]}")
    return kind(_hyper_map(fn, [a[i] for a in args]) for i in range(length))
