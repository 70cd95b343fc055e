"""Argument checks shared by the layers; every message names the argument and the value."""
import numbers

import numpy


def positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, numpy.integer)):
        raise TypeError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return int(value)


def pair(name, value):
    """An int or a pair of positive ints, as a pair."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
        return tuple(positive_int(name, v) for v in value)
    v = positive_int(name, value)
    return v, v


def real(name, value, ok, expected):
    """``float(value)`` if it is a real number (not a bool) for which ``ok(value)`` holds; else
    ValueError ``"<name> must be a float <expected>, got <value>"``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not ok(value):
        raise ValueError(f"{name} must be a float {expected}, got {value!r}")
    return float(value)


def boolean(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
    return value


def one_of(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def data_format(value):
    """Check a 2-D layer's ``data_format``: "NCHW" (MindSpore's default). "NHWC" is a GPU-only
    layout in MindSpore; minigrad computes NCHW only, so it is refused like any other value."""
    if value != "NCHW":
        raise ValueError(f"data_format must be 'NCHW' (minigrad's 2-D layers compute NCHW; 'NHWC' is "
                         f"not supported), got {value!r}")
    return value


def pad_mode_padding(pad_mode, padding):
    """Validate Conv2d/pooling ``pad_mode`` and ``padding``; return padding as a 4-tuple.

    ``padding`` (int or (top, bottom, left, right)) is only allowed with ``pad_mode="pad"``.
    """
    if isinstance(pad_mode, str):
        pad_mode = pad_mode.lower()
    one_of("pad_mode", pad_mode, ("same", "valid", "pad"))
    if isinstance(padding, (tuple, list)):
        if len(padding) != 4:
            raise ValueError(f"padding must be an int or a 4-tuple (top, bottom, left, right), got {padding!r}")
        pads = tuple(padding)
    else:
        pads = (padding,) * 4
    for p in pads:
        if isinstance(p, bool) or not isinstance(p, (int, numpy.integer)) or p < 0:
            raise ValueError(f"padding must be non-negative ints, got {padding!r}")
    if pad_mode != "pad" and any(pads):
        raise ValueError(f"padding must be 0 when pad_mode is {pad_mode!r}, got {padding!r} "
                         f"(use pad_mode='pad' for explicit padding)")
    return pad_mode, tuple(int(p) for p in pads)

