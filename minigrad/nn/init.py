"""Weight initializers, MindSpore style: ``initializer("he_uniform", (64, 32), float32)``.

An ``Initializer`` fills a host NumPy array in place (``init(array)``); ``initializer`` builds the
array, fills it and returns a Tensor on the default device. Random draws come from minigrad's
seeded generator, so ``minigrad.set_seed(n)`` makes networks reproducible.

Fans, for a weight of shape ``(out, in, *kernel)``: fan_in = in · prod(kernel), fan_out =
out · prod(kernel); a 1-D shape has fan_in = fan_out = its length.
"""
import math
import numbers

import numpy

from minigrad import dtype as dtypes
from minigrad._checks import (
    check_float,
    check_in,
    check_int_tuple,
    check_non_negative,
    check_relation,
    check_type,
    describe,
)
from minigrad._config import config
from minigrad.random import get_rng
from minigrad.tensor import Tensor


def _rng():
    return get_rng(numpy)


def _shape(shape, owner):
    """``shape`` (a tuple or list of ints >= 0, or one int) as a tuple, for ``owner``'s
    ``sample``."""
    return check_int_tuple("shape", shape, low=0, owner=f"{owner}.sample")


def _fans(shape):
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _gain(nonlinearity, negative_slope):
    """Recommended gain of He/Kaiming initialisation for a nonlinearity."""
    try:
        square = negative_slope ** 2
    except OverflowError:  # |slope| > 1e154: the gain is 0 to double precision
        square = math.inf
    gains = {"linear": 1.0, "conv2d": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3, "relu": math.sqrt(2.0),
             "leaky_relu": math.sqrt(2.0 / (1 + square))}
    return gains[check_in("nonlinearity", nonlinearity, sorted(gains))]


class Initializer:
    """Base class: ``init(array)`` fills a NumPy array in place and returns it."""

    def __call__(self, array):
        array[...] = self.sample(array.shape)
        return array

    def sample(self, shape):
        raise NotImplementedError

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Constant(Initializer):
    """Every element equals ``value``.

    Raises:
        TypeError: for a ``value`` that is not a real number.
        ValueError: for NaN or an infinity (an initial weight must be finite).
    """

    def __init__(self, value):
        self.value = check_float("value", value, owner="Constant")

    def sample(self, shape):
        return numpy.full(_shape(shape, type(self).__name__), self.value, numpy.float64)


class Zero(Constant):
    """All zeros."""

    def __init__(self):
        super().__init__(0.0)


class One(Constant):
    """All ones."""

    def __init__(self):
        super().__init__(1.0)


class Normal(Initializer):
    """N(mean, sigma²). Default sigma 0.01 (MindSpore's ``"normal"``)."""

    def __init__(self, sigma=0.01, mean=0.0):
        self.sigma = check_non_negative("sigma", sigma, owner="Normal")
        self.mean = check_float("mean", mean, owner="Normal")

    def sample(self, shape):
        return _rng().normal(self.mean, self.sigma, _shape(shape, "Normal"))


class TruncatedNormal(Initializer):
    """N(0, sigma²) restricted to [-2 sigma, 2 sigma] (redrawn outside). Default sigma 0.01."""

    def __init__(self, sigma=0.01):
        self.sigma = check_non_negative("sigma", sigma, owner="TruncatedNormal")

    def sample(self, shape):
        rng = _rng()
        values = rng.standard_normal(_shape(shape, "TruncatedNormal"))
        outside = numpy.abs(values) > 2
        while outside.any():
            values[outside] = rng.standard_normal(int(outside.sum()))
            outside = numpy.abs(values) > 2
        return values * self.sigma


class Uniform(Initializer):
    """U(-scale, scale). Default scale 0.07."""

    def __init__(self, scale=0.07):
        self.scale = check_non_negative("scale", scale, owner="Uniform")

    def sample(self, shape):
        return _rng().uniform(-self.scale, self.scale, _shape(shape, "Uniform"))


class _He(Initializer):
    def __init__(self, negative_slope=0.0, mode="fan_in", nonlinearity="leaky_relu"):
        owner = type(self).__name__
        # checked, and kept as given: a NumPy float32 slope squares in float32, as it always has
        check_float("negative_slope", negative_slope, owner=owner)
        check_in("mode", mode, ("fan_in", "fan_out"), owner=owner)
        _gain(nonlinearity, negative_slope)
        self.negative_slope, self.mode, self.nonlinearity = negative_slope, mode, nonlinearity

    def std(self, shape):
        """The standard deviation ``gain / sqrt(fan)`` for a weight of ``shape``.

        Raises:
            TypeError / ValueError: for a ``shape`` that is not a tuple of ints >= 0, or whose
                fan (``mode``) is 0.
        """
        owner = type(self).__name__
        shape = _shape(shape, owner)
        fan_in, fan_out = _fans(shape)
        fan = fan_in if self.mode == "fan_in" else fan_out
        check_relation("shape", shape, fan > 0, f"a shape whose {self.mode} is not 0",
                       owner=f"{owner}.std")
        return _gain(self.nonlinearity, self.negative_slope) / math.sqrt(fan)


class HeUniform(_He):
    """Kaiming uniform: U(-b, b) with b = gain · sqrt(3 / fan); gain = sqrt(2 / (1 + slope²))."""

    def sample(self, shape):
        shape = _shape(shape, "HeUniform")
        if math.prod(shape) == 0:  # nothing to fill (PyTorch's kaiming_uniform_: a no-op)
            return numpy.zeros(shape)
        bound = math.sqrt(3.0) * self.std(shape)
        return _rng().uniform(-bound, bound, shape)


class HeNormal(_He):
    """Kaiming normal: N(0, (gain / sqrt(fan))²); gain = sqrt(2 / (1 + slope²))."""

    def sample(self, shape):
        shape = _shape(shape, "HeNormal")
        if math.prod(shape) == 0:  # nothing to fill (PyTorch's kaiming_normal_: a no-op)
            return numpy.zeros(shape)
        return _rng().normal(0.0, self.std(shape), shape)


class XavierUniform(Initializer):
    """Glorot uniform: U(-b, b) with b = gain · sqrt(6 / (fan_in + fan_out)). Default gain 1."""

    def __init__(self, gain=1.0):
        check_float("gain", gain, owner="XavierUniform")
        self.gain = gain  # kept as given: a NumPy float32 gain scales in float32, as it always has

    def sample(self, shape):
        shape = _shape(shape, "XavierUniform")
        if math.prod(shape) == 0:  # nothing to fill (PyTorch's xavier_uniform_: a no-op)
            return numpy.zeros(shape)
        fan_in, fan_out = _fans(shape)
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return _rng().uniform(-bound, bound, shape)


# names accepted by ``initializer``, compared lower-case with "_" removed
_BY_NAME = {"normal": Normal, "truncatednormal": TruncatedNormal, "uniform": Uniform,
            "heuniform": HeUniform, "henormal": HeNormal, "xavieruniform": XavierUniform,
            "zero": Zero, "zeros": Zero, "one": One, "ones": One}


def default_initializers(weight_init, bias_init, weight_shape):
    """``(weight_init, bias_init)`` with None replaced by MindSpore 2.x's defaults for Dense and
    Conv2d (PyTorch's too): ``HeUniform(negative_slope=√5)`` weights, that is U(-b, b) with
    b = 1 / sqrt(fan_in), and biases U(-b, b) with the same b (``fan_in`` of
    ``weight_shape``). MindSpore 1.x defaulted to ``"normal"`` (σ = 0.01) and ``"zeros"``;
    pass them to get that back."""
    if weight_init is None:
        weight_init = HeUniform(negative_slope=math.sqrt(5.0))
    if bias_init is None:
        bias_init = Uniform(1.0 / math.sqrt(_fans(weight_shape)[0]))
    return weight_init, bias_init


def initializer(init, shape, dtype=dtypes.float32):
    """A Tensor of ``shape`` and ``dtype`` initialised by ``init``.

    Args:
        init: an ``Initializer``; a name ("normal", "truncated_normal", "uniform", "he_uniform",
            "he_normal", "xavier_uniform", "zeros", "ones"); a number (constant); or a Tensor or
            array of exactly ``shape`` (used as is, cast to ``dtype``).
        shape: int or tuple of ints.
        dtype: default float32.

    Raises:
        ValueError: for an unknown name, a negative dimension, or a Tensor/array of another
            shape.
        TypeError: for any other kind of ``init``, or a dimension that is not an int (a float
            is refused, never truncated).
    """
    return init_tensor("init", init, shape, dtype)


def init_tensor(name, init, shape, dtype=dtypes.float32):
    """``initializer(init, shape, dtype)`` with messages naming the argument ``name`` that
    gave ``init`` (a layer's ``weight_init``, ``gamma_init``...)."""
    # a float dimension is refused, never truncated (int(2.5) would be 2)
    shape = check_int_tuple("shape", shape, low=0)
    dtype = dtypes.as_dtype(dtype)
    if isinstance(init, (Tensor, numpy.ndarray)):
        check_init(name, init, shape)
        # a copy: a new Parameter must not share memory with the tensor it was initialised from
        return Tensor(init.data.copy() if isinstance(init, Tensor) else init.copy(), dtype=dtype)
    init = check_init(name, init)
    return Tensor(init(numpy.empty(shape, numpy.float64)), dtype=dtype, device=config.device_target)


def check_init(name, init, shape=None):
    """``init`` (an Initializer, an initializer's name or a finite number; a Tensor or an array
    passes as it is, of ``shape`` when that is given) checked under the argument ``name``: a
    layer checks the initializer of a bias it does not make too."""
    if isinstance(init, (Tensor, numpy.ndarray)):
        if shape is not None and tuple(init.shape) != tuple(shape):
            shown = describe(init)
            if " of shape " not in shown:
                shown += f" of shape {tuple(init.shape)}"
            raise ValueError(f"{name} must have shape {tuple(shape)}, got {shown}")
        return init
    if isinstance(init, Initializer):
        return init
    if isinstance(init, str):
        return _BY_NAME[check_in(name, init, sorted(_BY_NAME),
                                 fold=lambda text: text.lower().replace("_", ""))]()
    if isinstance(init, numbers.Real) and not isinstance(init, (bool, numpy.bool_)):
        # Python and NumPy numbers alike (MindSpore: numbers.Number)
        return Constant(check_float(name, init))
    check_type(name, init, Initializer, expected="an Initializer, a name, a number or a Tensor")
