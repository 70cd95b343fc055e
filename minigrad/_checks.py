"""The package's one argument checker: every public entry point validates its arguments here.

One argument order, ``check_X(name, value, ...)``, and one rule:

* a value of the wrong type raises ``TypeError``, a value of the right type out of range raises
  ``ValueError``;
* the message names the argument, the value received and what was expected::

      stride must be a positive int, got 1.5 (float)
      Model.train: epoch must be a positive int, got 0

  (``owner``, when given, goes in front as ``"owner: "``);
* a bool is not a number (``True`` is refused where an int or a float belongs), a float is not an
  int (``stride=1.5`` is a TypeError, never truncated to 1), and None and strings are never
  numbers; NumPy scalars count as the Python kind they hold (``numpy.int64(3)`` is an int,
  ``numpy.float32(0.5)`` a float, ``numpy.bool_(True)`` a bool).

Each check returns the value as the plain Python object the caller stores (``int``, ``float``,
``bool``), so NumPy scalars do not leak into attributes.

Three rules cover the arguments that are not single numbers:

* a sequence of ints (a shape, axes, kernel sizes, split sections) is a tuple or a list of ints
  (``check_int_tuple``; axes, counted from the end when negative, ``check_axes`` and
  ``check_axis``); an int stands for a one-entry sequence where the caller allows it; a str, a
  set, an array or a Tensor is not a sequence of ints;
* a dtype (``check_dtype``) is a ``numpy.dtype``, a scalar type (``numpy.float16``, ``float``)
  or a dtype's name (``"float16"``), never a value that has a dtype (``numpy.float32(3.0)``,
  an array, a Tensor);
* a path (``check_path``) is a non-empty str or an ``os.PathLike`` whose path is a str.

A sequence of strs (column names) goes through ``check_str_tuple``; an iterable of objects of
one type (an optimizer's Parameters, a container's Cells) through ``check_items``.
"""
import collections.abc
import math
import numbers
import os

import numpy

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
_BOOLS = (bool, numpy.bool_)


class IndexRangeError(IndexError, ValueError):
    """An index outside the axis it indexes: the IndexError that NumPy and PyTorch raise there,
    and a ValueError (a value out of range) by this module's rule, so either ``except`` takes it.
    """


class RequiresGradError(RuntimeError, ValueError):
    """A Tensor argument that autograd cannot differentiate (an output or an input that does
    not require grad): the RuntimeError PyTorch raises there, and a ValueError (a value the
    argument does not take) by this module's rule, so either ``except`` takes it."""


class KeyValueError(KeyError, ValueError):
    """A name that cannot be a key (an empty or dotted attribute name, or one already taken): the
    KeyError that MindSpore raises there, and a ValueError by this module's rule, so either
    ``except`` takes it."""


class StateValueError(RuntimeError, ValueError):
    """A value the object's state cannot take (an empty state dict for an enabled GradScaler):
    the RuntimeError that PyTorch raises there, and a ValueError by this module's rule, so either
    ``except`` takes it."""


def describe(value):
    """``value`` as a message shows it: its repr, cut to 80 characters; an array or a Tensor
    whose repr is longer (or spans lines) by its type, shape and dtype."""
    shown = repr(value)
    if len(shown) <= 80 and "\n" not in shown:
        return shown
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__} of shape {tuple(shape)} and dtype {dtype}"
    shown = " ".join(shown.split())
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _fail(error, name, expected, value, owner, with_type):
    shown = describe(value)
    if with_type:
        shown += f" ({type(value).__name__})"
    prefix = f"{owner}: " if owner else ""
    raise error(f"{prefix}{name} must be {expected}, got {shown}")


def is_int(value):
    """Whether ``value`` is an integer (Python or NumPy), and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, _BOOLS)


def is_real(value):
    """Whether ``value`` is a real number (int or float, Python or NumPy), and not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, _BOOLS)


def check_type(name, value, types, *, expected=None, owner=None):
    """``value`` if ``isinstance(value, types)``, else TypeError.

    ``expected`` words the message (default: ``"a T1 or T2"`` from the type names).
    """
    if isinstance(value, types):
        return value
    if expected is None:
        kinds = types if isinstance(types, tuple) else (types,)
        expected = "a " + " or ".join(k.__name__ for k in kinds)
    _fail(TypeError, name, expected, value, owner, True)


def check_number(name, value, *, owner=None):
    """``value`` if it is a real number or a bool (Python or NumPy): a value an array can be
    filled with. None, strings and complex numbers raise TypeError (NumPy would turn None and
    ``"nan"`` into NaN)."""
    if isinstance(value, numbers.Real) or isinstance(value, _BOOLS):
        return value
    _fail(TypeError, name, "a number (int, float or bool)", value, owner, True)


def check_bool(name, value, *, owner=None):
    """``value`` as a Python bool; only ``True``/``False`` (or NumPy's bools) pass: 0, 1, None
    and ``''`` raise TypeError (a truthy stand-in for a flag hides a misplaced argument)."""
    if isinstance(value, _BOOLS):
        return bool(value)
    _fail(TypeError, name, "a bool", value, owner, True)


def check_flag(name, value, *, owner=None):
    """``value`` as a Python bool: a bool (Python or NumPy) or a one-element bool Tensor or array,
    as ``amp.all_finite`` and the overflow checks return a step's verdict. Anything else (0, 1,
    None, a str, a float Tensor) raises TypeError."""
    if isinstance(value, _BOOLS):
        return bool(value)
    if getattr(value, "dtype", None) == numpy.bool_ and getattr(value, "size", None) == 1:
        return bool(value)
    _fail(TypeError, name, "a bool or a one-element bool Tensor", value, owner, True)


def _int_words(low, high):
    if high is None:
        if low is None:
            return "an int"
        return {1: "a positive int", 0: "a non-negative int"}.get(low, f"an int >= {low}")
    if low is None:
        return f"an int <= {high}"
    return f"an int in [{low}, {high}]"


def check_int(name, value, *, low=None, high=None, allow_none=False, owner=None):
    """``value`` as a Python int with ``low <= value <= high`` (each bound optional).

    Ints beyond int64 are refused even without bounds (no array dtype or native kernel holds
    them; NumPy would raise a bare OverflowError later). ``allow_none``: None passes through.

    Raises:
        TypeError: for a non-int (a float, a bool, a str, None unless allowed).
        ValueError: for an int out of range.
    """
    words = _int_words(low, high) + (" or None" if allow_none else "")
    if value is None and allow_none:
        return None
    if not is_int(value):
        _fail(TypeError, name, words, value, owner, True)
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        _fail(ValueError, name, words, value, owner, False)
    if not INT64_MIN <= value <= INT64_MAX:
        _fail(ValueError, name, f"{words} that fits in int64 (|value| < 2**63)", value, owner,
              False)
    return value


def check_positive_int(name, value, *, allow_none=False, owner=None):
    """``check_int`` with ``low=1``."""
    return check_int(name, value, low=1, allow_none=allow_none, owner=owner)


def check_non_negative_int(name, value, *, allow_none=False, owner=None):
    """``check_int`` with ``low=0``."""
    return check_int(name, value, low=0, allow_none=allow_none, owner=owner)


def _interval(low, high, low_open, high_open, finite):
    """The interval as written in a message; an unbounded end is open when ``finite`` refuses
    the infinity there (``(0.0, inf)``), closed when it accepts it (``(0.0, inf]``)."""
    left = ("-inf" if low is None else str(low))
    left = ("(" if low_open or (low is None and finite) else "[") + left
    right = ("inf" if high is None else str(high))
    right += ")" if high_open or (high is None and finite) else "]"
    return f"{left}, {right}"


def check_float(name, value, *, low=None, high=None, low_open=False, high_open=False,
                finite=True, allow_none=False, owner=None):
    """``value`` as a Python float in the interval from ``low`` to ``high`` (each optional;
    ``low_open``/``high_open`` exclude the end). An int converts; NaN never passes, and
    inf only with ``finite=False``. ``allow_none``: None passes through.

    The message writes the interval: ``momentum must be a finite float in [0.0, inf), got -0.1``.

    Raises:
        TypeError: for a non-number (a bool, a str, a complex, None unless allowed).
        ValueError: for NaN, an infinity when ``finite``, or a number out of the interval.
    """
    if value is None and allow_none:
        return None
    words = "a finite float" if finite else "a float"
    if low is not None or high is not None:
        words += " in " + _interval(low, high, low_open, high_open, finite)
    if allow_none:
        words += " or None"
    if not is_real(value):
        _fail(TypeError, name, words, value, owner, True)
    number = float(value)
    bad = (math.isnan(number) or (finite and math.isinf(number))
           or (low is not None and (number <= low if low_open else number < low))
           or (high is not None and (number >= high if high_open else number > high)))
    if bad:
        _fail(ValueError, name, words, value, owner, False)
    return number


def check_positive(name, value, *, finite=True, allow_none=False, owner=None):
    """``check_float`` in ``(0, inf)`` (``(0, inf]`` with ``finite=False``): a number > 0."""
    return check_float(name, value, low=0.0, low_open=True, finite=finite,
                       allow_none=allow_none, owner=owner)


def check_non_negative(name, value, *, finite=True, allow_none=False, owner=None):
    """``check_float`` in ``[0, inf)`` (``[0, inf]`` with ``finite=False``): a number >= 0."""
    return check_float(name, value, low=0.0, finite=finite, allow_none=allow_none, owner=owner)


def check_in(name, value, choices, *, fold=None, owner=None):
    """``value`` if it is one of ``choices``.

    When every choice is a str, a non-str value is a TypeError (a Tensor or a number given for a
    mode such as ``pad_mode``), an unknown str a ValueError; otherwise any value not among the
    choices is a ValueError. ``fold`` (a function of a str, such as ``str.lower``) spells a str
    value as the choices do before the comparison, and the folded value is returned; the
    message shows the value as given.
    """
    choices = tuple(choices)
    words = f"one of {list(choices)}"
    if choices and all(type(c) is str for c in choices):
        if not isinstance(value, str):
            _fail(TypeError, name, words, value, owner, True)
        spelled = value if fold is None else fold(value)
        if spelled in choices:
            return spelled
    elif any(value is c or (type(value) is type(c) and value == c) for c in choices):
        return value
    _fail(ValueError, name, words, value, owner, False)


def check_relation(name, value, holds, expected, *, error=ValueError, owner=None):
    """``value`` if ``holds``, else ``error`` with the one message: ``name must be <expected>,
    got <value>`` (and the value's type for a TypeError).

    For a rule the caller tests itself: between arguments (``min_scale <= max_scale``), against
    state (an optimizer built for another network, a key a state dict cannot hold) or against
    the context (a device other than ``device_target``)::

        check_relation("min_scale", low, low <= high, f"<= max_scale ({high})")
        # ValueError: min_scale must be <= max_scale (1024.0), got 2048.0

    ``error`` is ValueError (out of range), TypeError (the wrong kind of object), or the type a
    peer's documentation names (e.g. KeyError for a missing key).
    """
    if holds:
        return value
    _fail(error, name, expected, value, owner, error is TypeError)


def check_operand(name, value, *, owner=None):
    """A non-Tensor operand of an op as a NumPy array or scalar: a number or a bool (Python or
    NumPy), or an array or nested list/tuple of them (the caller takes Tensors first).

    Raises:
        TypeError: for None, a str, a complex number, an object, or an array of them (NumPy
            would turn None and ``"nan"`` into NaN, or keep an object array).
        ValueError: for nested lists of unequal lengths, or an int that does not fit in int64.
    """
    expected = "a Tensor, a number or an array of numbers"
    if isinstance(value, (str, bytes)) or value is None:
        _fail(TypeError, name, expected, value, owner, True)
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        _fail(ValueError, name, expected + " (ints within int64)", value, owner, False)
    if hasattr(value, "__cuda_array_interface__"):  # a device array: its dtype, never a copy
        if value.dtype.kind not in "biuf":
            _fail(TypeError, name, expected, value, owner, True)
        return value
    try:
        array = numpy.asarray(value)
    except (ValueError, OverflowError):  # ragged nested lists, or an int beyond int64 inside
        _fail(ValueError, name, expected + " (nested lists of equal lengths, ints within int64)",
              value, owner, False)
    if array.dtype.kind not in "biuf":
        _fail(TypeError, name, expected, value, owner, True)
    return array if isinstance(value, (list, tuple)) else value


def check_broadcast(names, shapes, *, owner=None):
    """The shape the operands ``names`` of ``shapes`` broadcast to (NumPy's rule).

    Raises:
        ValueError: naming the last operand and the shapes of the others, when they do not
            broadcast together.
    """
    try:
        return numpy.broadcast_shapes(*shapes)
    except ValueError:
        others = " and ".join(f"{n} of shape {s}" for n, s in zip(names[:-1], shapes[:-1]))
        prefix = f"{owner}: " if owner else ""
        raise ValueError(f"{prefix}{names[-1]} must have a shape that broadcasts with {others}, "
                         f"got {names[-1]} of shape {shapes[-1]}") from None


def check_callable(name, value, *, owner=None):
    """``value`` if it is callable, else TypeError."""
    if callable(value):
        return value
    _fail(TypeError, name, "callable", value, owner, True)


def check_items(name, value, types, *, expected, owner=None):
    """``value`` (a list, a tuple or another ordered iterable such as a generator; never a str,
    a dict or a set, nor an array or a Tensor, which hold numbers) as a list of its items, each
    an instance of ``types``: the parameters of an optimizer, the cells of a container.
    ``expected`` words the message (``"an iterable of Parameters"``).

    Raises:
        TypeError: for a str, a dict, a set, an array, a Tensor, a value that is not iterable,
            or an item of another type (the message shows the whole value, a generator as the
            list of its items, and which element is of the wrong type).
    """
    if (isinstance(value, (str, bytes, collections.abc.Mapping, collections.abc.Set))
            or hasattr(value, "shape") or not hasattr(value, "__iter__")):
        _fail(TypeError, name, expected, value, owner, True)
    items = list(value)
    for index, item in enumerate(items):
        if not isinstance(item, types):
            shown = value if isinstance(value, (list, tuple)) else items
            _fail(TypeError, name, f"{expected} (element {index} is a {type(item).__name__})",
                  shown, owner, True)
    return items


def check_int_tuple(name, value, length=None, *, low=None, high=None, scalar=True,
                    owner=None):
    """``value`` (a tuple or list of ints, or one int) as a tuple of Python ints: the one rule
    for a sequence of ints (a shape, kernel sizes, split sections).

    An int (when ``scalar``) gives ``length`` copies (``length`` None: a 1-tuple). A sequence
    must have ``length`` entries when ``length`` is given; each entry must be an int (not a bool)
    in ``[low, high]`` (each bound optional) that fits in int64. The message names the whole
    value.

    Raises:
        TypeError: for a value that is neither a tuple/list of ints nor (when ``scalar``) an int:
            None, a str, a float, an array, a Tensor, a sequence holding a non-int.
        ValueError: for a wrong length, or an entry out of range.
    """
    if low is None and high is None:
        plural = "ints"
    elif high is None:
        plural = {1: "positive ints", 0: "non-negative ints"}.get(low, f"ints >= {low}")
    else:
        plural = f"ints in [{low}, {high}]" if low is not None else f"ints <= {high}"
    shape = "a tuple or list" if length is None else f"a {length}-tuple or list"
    words = f"{shape} of {plural}"
    if scalar:
        words = f"{_int_words(low, high)} or {words}"
    if is_int(value) and scalar:
        items = (value,) * (length or 1)
    elif isinstance(value, (tuple, list)):
        items = tuple(value)
        if length is not None and len(items) != length:
            _fail(ValueError, name, words, value, owner, False)
    else:
        _fail(TypeError, name, words, value, owner, True)
    for item in items:
        if not is_int(item):
            _fail(TypeError, name, words, value, owner, True)
        if (low is not None and item < low) or (high is not None and item > high):
            _fail(ValueError, name, words, value, owner, False)
        if not INT64_MIN <= item <= INT64_MAX:
            _fail(ValueError, name, words + " that fit in int64", value, owner, False)
    return tuple(int(item) for item in items)


def check_axes(name, value, ndim, *, owner=None):
    """``value`` (an int or a tuple/list of ints) as a tuple of axes of a tensor of ``ndim``
    dimensions, each counted from the end when negative and returned non-negative, in the order
    given. None is not an axis here: the caller says what None means (all axes, none).

    Raises:
        TypeError: as ``check_int_tuple`` (a float, a bool, None, a str, an array).
        ValueError: for an axis outside ``[-ndim, ndim - 1]`` (a 0-d tensor takes axis 0 or -1,
            as NumPy's reductions do), or an axis given twice.
    """
    span = max(ndim, 1)
    expected = (f"an int or a tuple/list of ints in [{-span}, {span - 1}] (the axes of a tensor "
                f"of {ndim} dimensions)")
    try:
        axes = check_int_tuple(name, value, low=-span, high=span - 1, owner=owner)
    except ValueError:
        _fail(ValueError, name, expected, value, owner, False)
    except TypeError:
        _fail(TypeError, name, expected, value, owner, True)
    axes = tuple(a % span for a in axes)
    if len(set(axes)) != len(axes):
        _fail(ValueError, name, f"{expected}, each once", value, owner, False)
    return axes


def check_axis(name, value, ndim, *, owner=None):
    """``value`` as one non-negative axis of a tensor of ``ndim`` dimensions (negative counts
    from the end, as ``check_axes``).

    Raises:
        TypeError: for a value that is not an int (a tuple, a float, None).
        ValueError: for an axis outside ``[-ndim, ndim - 1]``.
    """
    span = max(ndim, 1)
    expected = f"an int in [{-span}, {span - 1}] (an axis of a tensor of {ndim} dimensions)"
    if not is_int(value):
        _fail(TypeError, name, expected, value, owner, True)
    if not -span <= value < span:
        _fail(ValueError, name, expected, value, owner, False)
    return int(value) % span


def check_str_tuple(name, value, *, scalar=True, owner=None):
    """``value`` (a tuple or list of non-empty strs, or one str when ``scalar``) as a tuple of
    strs: column names.

    Raises:
        TypeError: for a value that is neither, or a sequence holding a non-str.
        ValueError: for an empty str, or a name given twice.
    """
    words = ("a str or " if scalar else "") + "a tuple or list of non-empty strs"
    if isinstance(value, str) and scalar:
        items = (value,)
    elif isinstance(value, (tuple, list)):
        items = tuple(value)
    else:
        _fail(TypeError, name, words, value, owner, True)
    if not all(isinstance(item, str) for item in items):
        _fail(TypeError, name, words, value, owner, True)
    if not all(items) or len(set(items)) != len(items):
        _fail(ValueError, name, words + ", each once", value, owner, False)
    return items


def check_dtype(name, value, supported, *, allow_none=False, owner=None):
    """``value`` as one of the ``numpy.dtype`` objects ``supported``: the one rule for a dtype.

    A dtype is a ``numpy.dtype``, a scalar type (``numpy.float16``, Python's ``float``, ``int``,
    ``bool``) or a dtype's name (``"float16"``). A value that merely has a dtype — a NumPy scalar
    such as ``numpy.float32(3.0)``, an array, a Tensor — is not one (NumPy would take its
    dtype). ``allow_none``: None passes through (the caller's default).

    Raises:
        TypeError: for a value that is not a dtype, a scalar type or a str (None unless allowed).
        ValueError: for a str that names no dtype, or a dtype not in ``supported``.
    """
    words = f"one of {[str(d) for d in supported]}" + (" or None" if allow_none else "")
    if value is None and allow_none:
        return None
    is_type = isinstance(value, type) and issubclass(value, (numpy.generic, bool, int, float))
    if not (isinstance(value, (numpy.dtype, str)) or is_type):
        _fail(TypeError, name, words + " (a dtype, a scalar type or a dtype's name)", value,
              owner, True)
    if isinstance(value, str) and value not in _DTYPE_ALIASES and value not in {
            numpy.dtype(d).name for d in supported}:
        # a dtype's name is its name: NumPy's parser reads odd strs as dtypes ("n", "\x00",
        # "f4") and raises a ValueError, or a SyntaxError ("0 00"), for others
        _fail(ValueError, name, words, value, owner, False)
    dtype = numpy.dtype(value)
    if dtype not in supported:
        _fail(ValueError, name, words, value, owner, False)
    return dtype


# the spellings of a dtype other than its name that NumPy, PyTorch and MindSpore users write
_DTYPE_ALIASES = ("half", "float", "double", "int", "bool_")


def check_path(name, value, *, allow_none=False, owner=None):
    """``value`` (a non-empty str, or an ``os.PathLike`` whose path is a str) as a str: the one
    rule for a file or folder path. ``allow_none``: None passes through.

    Raises:
        TypeError: for anything else (None unless allowed, bytes, a number).
        ValueError: for an empty path.
    """
    words = "a non-empty str or os.PathLike path" + (" or None" if allow_none else "")
    if value is None and allow_none:
        return None
    path = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(path, str):
        _fail(TypeError, name, words, value, owner, True)
    if not path:
        _fail(ValueError, name, words, value, owner, False)
    return path
