"""Inverted dropout, drawing its masks from ``minigrad.random`` (reproducible after
``set_seed``)."""

import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_bool, check_float
from minigrad._fp16_host import store, widen
from minigrad.autograd.function import Function
from minigrad.ops.arithmetic import float_tensor
from minigrad.random import get_rng


class Dropout(Function):
    """out = x·m·s, m ~ Bernoulli(1 - p) per element, s = 1/(1 - p);  dx = g·m·s (the same mask).

    s is held in the accumulation dtype (fp32 for fp16) and fp16 products are rounded once:
    out = fp16(fp32(x)·fp32(s)). An fp16 s would be off by up to half an fp16 step (and inf for
    p > 1 - 1/65504), so kept values would be rounded twice.
    """
    saves = {}

    def forward(self, x, p):
        xp = backend.get_array_module(x)
        keep = get_rng(xp).random(x.shape, dtype=numpy.float32) >= p
        # fill by mask: no bool -> float cast, and the dtype is fixed by the buffer rather than
        # by a backend's scalar promotion rules
        acc = dtypes.acc_dtype(x.dtype)
        self.scale = xp.zeros(x.shape, acc)
        xp.copyto(self.scale, acc.type(1 / (1 - p)), where=keep)
        return self._apply(x)

    def _apply(self, a):
        return store(widen(a) * self.scale, a.dtype)

    def backward(self, g):
        return self._apply(g)


def dropout(x, p=0.5, training=True):
    """Zero each element with probability ``p`` and scale the rest by 1/(1 - p).

    The expected value is unchanged, so evaluation needs no rescaling: with ``training=False``
    or ``p == 0`` the input is returned as is. MindSpore's older ``keep_prob`` is 1 - p.

    Raises:
        ValueError: if ``p`` is not in [0, 1).
        TypeError: for a non-float tensor, or a ``p`` that is not a real number.
    """
    x = float_tensor(x, "dropout")
    p = check_float("p", p, low=0.0, high=1.0, high_open=True, owner="dropout")
    training = check_bool("training", training)
    if not training or p == 0:
        return x
    return Dropout.apply(x, p=float(p))
