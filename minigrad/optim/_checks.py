"""Argument checks shared by the optimizers and learning-rate schedules (MindSpore's rules).

Each returns the value converted (an int becomes a float where a float is expected) or raises
TypeError (wrong type) / ValueError (out of range) naming the owner, the argument and the value.
"""
import math
import numbers


def check_float(value, name, owner, low=None, high=None, low_inclusive=True, high_inclusive=True):
    """``value`` as a finite float in the given range; ints are converted, bools and others
    rejected (an inf learning rate, eps or loss_scale only ever yields inf, NaN or zero steps)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"For '{owner}', the argument '{name}' must be a float, "
                        f"but got {value!r} of type {type(value).__name__}")
    value = float(value)
    too_low = low is not None and (value < low if low_inclusive else value <= low)
    too_high = high is not None and (value > high if high_inclusive else value >= high)
    if too_low or too_high or not math.isfinite(value):
        raise ValueError(f"For '{owner}', the argument '{name}' must be finite and in "
                         f"{_interval(low, high, low_inclusive, high_inclusive)}, but got {value}")
    return value


def check_positive_float(value, name, owner):
    return check_float(value, name, owner, low=0.0, low_inclusive=False)


def check_non_negative_float(value, name, owner):
    return check_float(value, name, owner, low=0.0)


def check_positive_int(value, name, owner):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"For '{owner}', the argument '{name}' must be an int, "
                        f"but got {value!r} of type {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"For '{owner}', the argument '{name}' must be a positive int, but got {value}")
    return int(value)


def check_bool(value, name, owner):
    if not isinstance(value, bool):
        raise TypeError(f"For '{owner}', the argument '{name}' must be a bool, "
                        f"but got {value!r} of type {type(value).__name__}")
    return value


def _interval(low, high, low_inclusive, high_inclusive):
    left = ("[" if low_inclusive else "(") + ("-inf" if low is None else str(low))
    right = ("inf" if high is None else str(high)) + ("]" if high_inclusive else ")")
    return f"{left}, {right}"
