"""Tensor creation: zeros, ones, full, zeros_like, ones_like, arange; and ``square``.

New tensors are made on ``set_context(device_target=...)`` (or ``device=``); the ``*_like``
functions follow their argument's device. Created tensors are leaves without gradient.
"""
import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_float, check_int, check_int_tuple, check_number, is_int
from minigrad._config import config
from minigrad._fp16_host import convert, widen
from minigrad.autograd.function import Function
from minigrad.ops.arithmetic import as_tensor, leaf


def _module(device):
    device = backend.check_device(config.device_target if device is None else device)
    return backend.cupy if device == "GPU" else numpy


def _shape(shape):
    if is_int(shape):
        shape = (shape,)
    return check_int_tuple("shape", shape, None, low=0)


def full(shape, value, dtype=None, device=None):
    """A tensor of ``shape`` filled with ``value``.

    ``dtype`` defaults to float32 for a float value, int64 for an int, bool for a bool.

    Raises:
        TypeError: for a shape that is not an int or a tuple/list of ints, a value that is not a
            number (None, a str: NumPy would fill NaN), or an unsupported dtype.
        ValueError: for a negative size.
    """
    check_number("value", value)
    dtype = dtypes.default_dtype(value) if dtype is None else dtypes.as_dtype(dtype)
    if type(value) is int and not dtypes.is_float(dtype):
        check_int("value", value)  # no integer dtype holds an int beyond int64
    return leaf(_module(device).full(_shape(shape), value, dtype))


def zeros(shape, dtype=dtypes.float32, device=None):
    """A tensor of ``shape`` filled with 0, of ``dtype`` (default float32; None: float32, as
    MindSpore's ``ops.zeros`` and PyTorch's ``torch.zeros``)."""
    return full(shape, 0, dtypes.float32 if dtype is None else dtype, device)


def ones(shape, dtype=dtypes.float32, device=None):
    """A tensor of ``shape`` filled with 1, of ``dtype`` (default float32; None: float32, as
    MindSpore's ``ops.ones`` and PyTorch's ``torch.ones``)."""
    return full(shape, 1, dtypes.float32 if dtype is None else dtype, device)


def full_like(x, value, dtype=None):
    """A tensor with ``x``'s shape and device (and dtype unless given) filled with ``value``."""
    x = as_tensor(x)
    check_number("value", value)
    xp = backend.get_array_module(x.data)
    dtype = x.dtype if dtype is None else dtypes.as_dtype(dtype)
    return leaf(xp.full(x.shape, value, dtype))


def zeros_like(x, dtype=None):
    """Zeros with ``x``'s shape, device and dtype (no gradient flows to ``x``)."""
    return full_like(x, 0, dtype)


def ones_like(x, dtype=None):
    """Ones with ``x``'s shape, device and dtype (no gradient flows to ``x``)."""
    return full_like(x, 1, dtype)


def arange(start, stop=None, step=1, dtype=None, device=None):
    """``[start, start + step, ...)`` below ``stop`` (``arange(n)`` counts 0..n-1).

    ``dtype`` defaults to int64 when all of start, stop and step are ints, else float32.

    Raises:
        TypeError: for a start, stop or step that is not an int or a float (None, a bool, a str).
        ValueError: if ``step`` is 0, a value is NaN, infinite or an int beyond int64, or the
            range would hold 2**62 elements or more.
    """
    for name, value in (("start", start), ("stop", stop), ("step", step)):
        if value is not None or name != "stop":
            _check_bound(name, value)
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must be non-zero, got 0")
    # NumPy sizes the range as (stop - start) / step before it finds it empty or too long
    if abs((float(stop) - float(start)) / float(step)) >= 2.0 ** 62:
        raise ValueError(f"arange: start, stop and step must give fewer than 2**62 elements, got "
                         f"start={start!r}, stop={stop!r}, step={step!r}")
    if dtype is None:
        ints = all(isinstance(v, (int, numpy.integer)) for v in (start, stop, step))
        dtype = dtypes.int64 if ints else dtypes.float32
    return leaf(_module(device).arange(start, stop, step, dtype=dtypes.as_dtype(dtype)))


def _check_bound(name, value):
    """An int (within int64) or a finite float, kept as it is (ints keep arange's dtype int)."""
    if is_int(value):
        check_int(name, value, owner="arange")
    else:
        check_float(name, value, owner="arange")


class Square(Function):
    """out = x²;  dx = 2 x g."""
    saves = {"x": 0}

    def forward(self, x):
        self.x = x
        return x * x

    def backward(self, g):
        if dtypes.is_low_precision(g.dtype):
            # in fp32, rounded once: 2·x overflows fp16 for |x| > 32752 where 2·x·g may not
            return convert(widen(g) * (2 * widen(self.x)), g.dtype)
        return g * (2 * self.x)


def square(x):
    """x² elementwise, in ``x``'s dtype."""
    return Square.apply(as_tensor(x))
