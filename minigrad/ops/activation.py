"""Activations: gelu, leaky_relu, softmax, log_softmax; and erf.

fp16 inputs are evaluated in fp32 and the result is rounded once to fp16 (the dtype policy for
softmax and friends): ``exp`` of an fp16 logit overflows at 11.1, and a row sum of many small
probabilities loses most of its bits in fp16. Every rule also runs on Tensors, for higher-order
gradients (``saves``: ``minigrad.autograd.function``).
"""
import math

import numpy

from minigrad import backend
from minigrad._checks import check_axis, check_bool, check_float
from minigrad._fp16_host import store, widen
from minigrad.autograd.function import OUTPUT, Function
from minigrad.ops._rules import exp, tanh, where
from minigrad.ops.arithmetic import float_tensor
from minigrad.tensor import Tensor

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715


# ---- erf without SciPy --------------------------------------------------------------------
# NumPy has no erf and CuPy's lives in cupyx, so erf is built from two Chebyshev series, fitted
# at import time to Python's math.erf/math.erfc (so no coefficient tables are copied in):
#   |x| < 2:       erf(x) = x · S(x²),                 S(u) = erf(√u)/√u on [0, 4]
#   2 <= |x| < 6:  erf(x) = 1 - e^(-x²) · L(|x|),      L(x) = e^(x²) erfc(x) on [2, 6]
#   |x| >= 6:      erf(x) = ±1 (erfc(6) ≈ 2e-17)
# Both series are smooth and converge fast (17 and 22 terms reach float64 accuracy); each dtype
# uses only the terms above its machine epsilon.

def _chebyshev_fit(f, lo, hi, degree=40):
    nodes = numpy.cos(numpy.pi * (numpy.arange(degree + 1) + 0.5) / (degree + 1))
    values = [f(lo + (hi - lo) * (t + 1) / 2) for t in nodes]
    return numpy.polynomial.chebyshev.chebfit(nodes, values, degree)


def _small_erf_ratio(u):
    return math.erf(math.sqrt(u)) / math.sqrt(u) if u > 0 else 2 / math.sqrt(math.pi)


_ERF_SMALL = _chebyshev_fit(_small_erf_ratio, 0.0, 4.0)
_ERFCX_LARGE = _chebyshev_fit(lambda x: math.erfc(x) * math.exp(x * x), 2.0, 6.0)


def _clenshaw(coefficients, t, dtype):
    """Σ c_k T_k(t) for t in [-1, 1], dropping the tail below ``dtype``'s epsilon."""
    eps = numpy.finfo(dtype).eps / 4
    # Python floats: a NumPy float64 scalar would promote a float32 array to float64
    last = numpy.nonzero(numpy.abs(coefficients) > eps)[0].max()
    used = [float(c) for c in coefficients[:last + 1]]
    b1 = b2 = 0.0
    for c in used[:0:-1]:
        b1, b2 = c + 2 * t * b1 - b2, b1
    return used[0] + t * b1 - b2


def _erf(x):
    """The error function elementwise on a float32/float64 NumPy or CuPy array."""
    xp = backend.get_array_module(x)
    a = xp.abs(x)
    u = xp.minimum(x * x, 4.0)
    small = a * _clenshaw(_ERF_SMALL, u / 2 - 1, x.dtype)
    t = xp.clip(a, 2.0, 6.0) / 2 - 2
    large = 1 - xp.exp(-xp.minimum(x * x, 36.0)) * _clenshaw(_ERFCX_LARGE, t, x.dtype)
    out = xp.where(a < 2, small, xp.where(a < 6, large, 1.0))
    return xp.copysign(out, x).astype(x.dtype, copy=False)


class Erf(Function):
    """out = erf(x);  dx = g · 2/√π · e^(-x²). fp16 is computed in fp32."""
    saves = {"x": 0}

    def forward(self, x):
        self.x = x
        return store(_erf(widen(x)), x.dtype)

    def backward(self, g):
        x = widen(self.x)
        return store(widen(g) * (2 / math.sqrt(math.pi)) * exp(-x * x), g.dtype)


def _erf_of(x):
    """erf of an array or, under ``create_graph``, of a Tensor (the ``Erf`` op)."""
    return Erf.apply(x) if isinstance(x, Tensor) else _erf(x)


# ---- gelu and leaky_relu --------------------------------------------------------------------

def _gelu_tanh(x):
    """tanh(√(2/π)(x + 0.044715 x³)), the tanh form's term."""
    return tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x * x * x))


class GeLU(Function):
    """out = x Φ(x);  dx = g (Φ(x) + x φ(x)) exactly, or the derivative of the tanh form.

    Exact: Φ(x) = (1 + erf(x/√2)) / 2.  Tanh form: Φ(x) ≈ (1 + tanh(√(2/π)(x + 0.044715 x³))) / 2.
    """
    saves = {"x": 0, "t": lambda node: _gelu_tanh(widen(node.x))}

    def forward(self, x, approximate):
        self.x, self.approximate = x, approximate
        x32 = widen(x)
        if approximate:
            self.t = _gelu_tanh(x32)
            cdf = 0.5 * (1 + self.t)
        else:
            cdf = _normal_cdf(x32)
        return store(x32 * cdf, x.dtype)

    def backward(self, g):
        x = widen(self.x)
        if self.approximate:
            t = self.t
            slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (
                1 + 3 * _GELU_CUBIC * x * x)
        else:
            slope = _normal_cdf(x) + x * exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))
        return store(widen(g) * slope, g.dtype)


def _normal_cdf(x):
    """Φ(x) = (1 + erf(x/√2)) / 2."""
    return 0.5 * (1 + _erf_of(x * (1 / math.sqrt(2))))


class LeakyReLU(Function):
    """out = x if x > 0 else alpha·x;  dx = g if x > 0 else alpha·g."""
    saves = {}

    def forward(self, x, alpha):
        self.positive, self.alpha = x > 0, alpha
        return self.select(x)

    def select(self, a):
        # both branches are of a's dtype: no scalar-promotion differences between backends
        return where(self.positive, a, a * self.alpha)

    def backward(self, g):
        return self.select(g)


def gelu(x, approximate=True):
    """Gaussian error linear unit, x·Φ(x) with Φ the standard normal CDF.

    ``approximate=True`` (default, as MindSpore's ``GeLU`` primitive) uses the tanh form
    0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))); ``False`` the exact 0.5·x·(1 + erf(x/√2)).
    fp16 is computed in fp32.

    Raises:
        TypeError: for a non-float tensor.
    """
    x = float_tensor(x, "gelu")
    return GeLU.apply(x, approximate=check_bool("approximate", approximate))


def erf(x):
    """The error function erf(x) = 2/√π ∫₀ˣ e^(-t²) dt elementwise (fp16 computed in fp32).

    Raises:
        TypeError: for a non-float tensor.
    """
    return Erf.apply(float_tensor(x, "erf"))


def leaky_relu(x, alpha=0.2):
    """x where x > 0, else alpha·x (``alpha`` default 0.2, MindSpore's ``nn.LeakyReLU``).

    Raises:
        TypeError: for a non-float tensor, or an ``alpha`` that is not a real number.
        ValueError: for an infinite or NaN ``alpha`` (any finite slope, negative included, as
            PyTorch's ``negative_slope``).
    """
    x = float_tensor(x, "leaky_relu")
    return LeakyReLU.apply(x, alpha=check_float("alpha", alpha, owner="leaky_relu"))


# ---- softmax and log_softmax ------------------------------------------------------------------

def _shifted(x, axis):
    """x - max(x) along ``axis`` in the accumulation dtype (fp32 for fp16)."""
    x = widen(x)
    if x.ndim and x.shape[axis] == 0:  # nothing to shift (and max has no identity); a 0-d x is
        # one element along its axis 0, as NumPy's reductions and PyTorch's softmax take it
        return x
    return x - x.max(axis=axis, keepdims=True)


class Softmax(Function):
    """out = eˣ / Σ eˣ along axis;  dx = out · (g - Σ g·out)."""
    autocast = "fp32"
    saves = {"out": OUTPUT}

    def forward(self, x, axis):
        xp = backend.get_array_module(x)
        e = xp.exp(_shifted(x, axis))
        self.out, self.axis = e / e.sum(axis=axis, keepdims=True), axis
        return store(self.out, x.dtype)

    def backward(self, g):
        y, g32 = widen(self.out), widen(g)
        return store(y * (g32 - (g32 * y).sum(axis=self.axis, keepdims=True)), g.dtype)


class LogSoftmax(Function):
    """out = x - log Σ eˣ along axis;  dx = g - e^out · Σ g."""
    autocast = "fp32"
    saves = {"out": OUTPUT}

    def forward(self, x, axis):
        xp = backend.get_array_module(x)
        z = _shifted(x, axis)
        self.axis = axis
        # log Σ eᶻ >= 0 (the maximum contributes e⁰); an empty axis has no sum to take the log of
        self.out = z - xp.log(xp.exp(z).sum(axis=axis, keepdims=True)) if z.size else z
        return store(self.out, x.dtype)

    def backward(self, g):
        g32 = widen(g)
        dx = g32 - exp(widen(self.out)) * g32.sum(axis=self.axis, keepdims=True)
        return store(dx, g.dtype)


def _along_axis(cls, name, formula):
    def op(x, axis=-1):
        x = float_tensor(x, name)
        return cls.apply(x, axis=check_axis("axis", axis, x.ndim))
    op.__name__ = name
    op.__doc__ = (f"{formula} along ``axis`` (default -1).\n\n"
                  f"    The maximum is subtracted first (no overflow); fp16 is computed in fp32\n"
                  f"    and returned in fp16.\n\n"
                  f"    Raises:\n"
                  f"        TypeError: for a non-float tensor or a non-int axis.\n"
                  f"        ValueError: for an axis out of range.\n")
    return op


softmax = _along_axis(Softmax, "softmax", "softmax(x)ᵢ = e^xᵢ / Σⱼ e^xⱼ")
log_softmax = _along_axis(LogSoftmax, "log_softmax", "log_softmax(x)ᵢ = xᵢ - log Σⱼ e^xⱼ")
