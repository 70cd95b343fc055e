"""Inverted dropout, drawing its masks from ``minigrad.random`` (reproducible after ``set_seed``)."""
import numbers

import numpy

from minigrad import backend
from minigrad.autograd.function import Function
from minigrad.ops._util import as_tensor, check_float
from minigrad.random import get_rng


class Dropout(Function):
    """out = x·m/(1 - p), m ~ Bernoulli(1 - p) per element;  dx = g·m/(1 - p) (the same mask)."""
    def forward(self, x, p):
        xp = backend.get_array_module(x)
        keep = get_rng(xp).random(x.shape, dtype=numpy.float32) >= p
        # fill by mask: no bool -> fp16 cast or fp16 multiply (both slow in NumPy), and the
        # dtype is fixed by the buffer rather than by a backend's scalar promotion rules
        self.scale = xp.zeros(x.shape, x.dtype)
        xp.copyto(self.scale, x.dtype.type(1 / (1 - p)), where=keep)
        return x * self.scale

    def backward(self, g):
        return g * self.scale


def dropout(x, p=0.5, training=True):
    """Zero each element with probability ``p`` and scale the rest by 1/(1 - p).

    The expected value is unchanged, so evaluation needs no rescaling: with ``training=False``
    or ``p == 0`` the input is returned as is. MindSpore's older ``keep_prob`` is 1 - p.

    Raises:
        ValueError: if ``p`` is not in [0, 1).
        TypeError: for a non-float tensor, or a ``p`` that is not a real number.
    """
    x = as_tensor(x)
    check_float(x, "dropout")
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"dropout probability p must be a float in [0, 1), got {p!r} "
                        f"({type(p).__name__})")
    if not 0 <= p < 1:
        raise ValueError(f"dropout probability p must be in [0, 1), got {p!r}")
    if not training or p == 0:
        return x
    return Dropout.apply(x, p=float(p))
