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
"""
import math
import numbers

import numpy

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
_BOOLS = (bool, numpy.bool_)


def _fail(error, name, expected, value, owner, with_type):
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
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


def check_in(name, value, choices, *, owner=None):
    """``value`` if it is one of ``choices``.

    When every choice is a str, a non-str value is a TypeError (a Tensor or a number given for a
    mode such as ``pad_mode``), an unknown str a ValueError; otherwise any value not among the
    choices is a ValueError.
    """
    choices = tuple(choices)
    words = f"one of {list(choices)}"
    if choices and all(type(c) is str for c in choices):
        if not isinstance(value, str):
            _fail(TypeError, name, words, value, owner, True)
        if value in choices:
            return value
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


def check_callable(name, value, *, owner=None):
    """``value`` if it is callable, else TypeError."""
    if callable(value):
        return value
    _fail(TypeError, name, "callable", value, owner, True)


def check_int_tuple(name, value, length=None, *, low=None, owner=None):
    """``value`` (an int, or a tuple/list of ints) as a tuple of Python ints.

    An int gives ``length`` copies (``length`` None: a 1-tuple). A sequence must have ``length``
    entries when ``length`` is given; each entry is checked as ``check_int(low=low)``, and the
    message names the whole value.

    Raises:
        TypeError: for a value that is neither an int nor a tuple/list of ints.
        ValueError: for a wrong length, or an entry out of range.
    """
    plural = {None: "ints", 1: "positive ints", 0: "non-negative ints"}.get(low, f"ints >= {low}")
    shape = "a sequence" if length is None else f"a {length}-tuple"
    words = f"{_int_words(low, None)} or {shape} of {plural}"
    if is_int(value):
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
        if low is not None and item < low:
            _fail(ValueError, name, words, value, owner, False)
        if not INT64_MIN <= item <= INT64_MAX:
            _fail(ValueError, name, words + " that fit in int64", value, owner, False)
    return tuple(int(item) for item in items)
