"""MindSpore's functional loss scaling: ``all_finite``, ``init_status``, ``StaticLossScaler``,
``DynamicLossScaler``.

A hand-written training step (MindSpore's tutorial, unchanged apart from the import)::

    loss_scaler = DynamicLossScaler(scale_value=2**10, scale_factor=2, scale_window=50)
    def forward_fn(x, y):
        return loss_scaler.scale(loss_fn(net(x), y))
    grad_fn = value_and_grad(forward_fn, None, optimizer.parameters)
    status = init_status()
    loss, grads = grad_fn(x, y)
    loss = loss_scaler.unscale(loss)
    is_finite = all_finite(grads, status)
    if is_finite:
        optimizer(loss_scaler.unscale(grads))
    loss_scaler.adjust(is_finite)
"""
import abc

import numpy

from minigrad.amp import float_status
from minigrad._checks import check_flag, check_positive_int, check_relation, check_type
from minigrad.amp.core import ScaleCore, float32_scale
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor


def init_status():
    """The 8-element float32 status buffer, zeroed (MindSpore's ``init_status``): the status
    ``float_status.alloc_status()`` makes, on the context's device."""
    return float_status.alloc_status()


def all_finite(inputs, status=None):
    """MindSpore's ``amp.all_finite``: True, as a bool Tensor of shape ``()``, when no tensor in
    ``inputs`` holds inf or NaN (``float_status.all_finite`` gives the same answer as a Python
    bool, for arrays). The check has read the answer from the device already, so the Tensor is
    on the host whatever the context's device: branching on it reads nothing more.

    Args:
        inputs: a Tensor or a tuple/list of Tensors (None entries are ignored).
        status: a status buffer from ``init_status`` (or None). The check also sets its sticky
            flag, as MindSpore's Ascend status records an overflow; the answer covers
            ``inputs`` only, not what the buffer held before.

    Raises:
        TypeError: ``inputs`` holds something that is not a Tensor; ``status`` is not a status
            buffer. ValueError: as ``float_status.check_overflow``.
    """
    tensors = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    arrays = [_array(t, "inputs") for t in tensors]
    overflow = float_status.check(arrays)
    if status is not None:
        float_status.check_overflow(status, *arrays)
    return Tensor(numpy.array(not overflow), device="CPU")  # read already: on the host


def _array(t, name):
    if t is None:
        return None
    if not isinstance(t, Tensor):
        check_type(name, t, Tensor, expected="a Tensor (or a sequence of them)")
    return t.data


def _map(fn, inputs, owner):
    """``fn`` of each Tensor of ``inputs`` (a Tensor, or a nested tuple or list of them)."""
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(_map(fn, x, owner) for x in inputs)
    if not isinstance(inputs, Tensor):
        check_type("inputs", inputs, Tensor, expected="a Tensor or a tuple or list of Tensors",
                   owner=owner)
    return fn(inputs)


class LossScaler(abc.ABC):
    """Base of the functional loss scalers: ``scale``, ``unscale`` and ``adjust``."""

    def __init__(self, scale_value, owner):
        value = float32_scale(scale_value, "scale_value", owner)
        check_relation("scale_value", scale_value, value >= 1.0, ">= 1", owner=owner)
        self.scale_value = Parameter(Tensor(value), name="scale_value", requires_grad=False)

    def scale(self, inputs):
        """``inputs * scale_value`` (scale cast to each input's dtype); tuples are mapped.

        Raises:
            TypeError: for an input that is not a Tensor (MindSpore's ``Union[Tensor,
                tuple(Tensor)]``).
        """
        s = self.scale_value.data
        return _map(lambda x: x * s.astype(x.dtype), inputs, f"{type(self).__name__}.scale")

    def unscale(self, inputs):
        """``inputs * (1 / scale_value)`` in each input's dtype (as MindSpore: fp16 stays fp16).

        Raises:
            TypeError: for an input that is not a Tensor, as ``scale``.
        """
        inv = float_status.inverse(self.scale_value.data)
        return _map(lambda x: x * inv.astype(x.dtype), inputs, f"{type(self).__name__}.unscale")

    def __repr__(self):
        extra = "".join(f", {k}={getattr(self, k)}" for k in ("scale_factor",
                                                              "scale_window") if hasattr(self, k))
        return f"{type(self).__name__}(scale_value={float(self.scale_value.data)}{extra})"

    @abc.abstractmethod
    def adjust(self, grads_finite):
        """Update the scale from this step's finiteness; return whether it can change."""


class StaticLossScaler(LossScaler):
    """A constant loss scale. ``adjust`` does nothing and returns False.

    Raises:
        TypeError: ``scale_value`` not a float/int.
        ValueError: ``scale_value < 1``, or inf in float32.
    """

    def __init__(self, scale_value):
        super().__init__(scale_value, "StaticLossScaler")

    def adjust(self, grads_finite):
        """Nothing to adjust; returns False.

        Raises:
            TypeError: for a ``grads_finite`` that is not a bool or a one-element bool Tensor.
        """
        check_flag("grads_finite", grads_finite, owner="StaticLossScaler.adjust")
        return False


class DynamicLossScaler(LossScaler):
    """MindSpore's dynamic scaler: on a non-finite step ``scale = max(1, scale / scale_factor)``
    and the counter restarts; on the ``scale_window``-th finite step in a row
    ``scale *= scale_factor`` unless that is inf.

    Args:
        scale_value: initial scale (>= 1).
        scale_factor: growth and backoff factor (an int > 1; MindSpore requires an int).
        scale_window: finite steps between growths (positive int).

    Raises:
        TypeError / ValueError: naming the argument and value.
    """

    def __init__(self, scale_value, scale_factor, scale_window):
        super().__init__(scale_value, "DynamicLossScaler")
        factor = check_positive_int("scale_factor", scale_factor, owner="DynamicLossScaler")
        window = check_positive_int("scale_window", scale_window, owner="DynamicLossScaler")
        check_relation("scale_factor", scale_factor, factor > 1, "an int > 1",
                       owner="DynamicLossScaler")
        self.scale_factor, self.scale_window = int(factor), int(window)
        self.core = ScaleCore(float(self.scale_value.data), factor, 1.0 / factor, int(window),
                              floor=1.0, owner="DynamicLossScaler", names={"scale": "scale_value"},
                              # MindSpore: max(1, scale_value / scale_factor)
                              backoff_divisor=factor)
        self.counter = Parameter(Tensor(numpy.int32(0)), name="counter", requires_grad=False)

    def adjust(self, grads_finite):
        """Update the scale from ``grads_finite`` (a bool or a one-element bool Tensor); returns
        True.

        Raises:
            TypeError: for a ``grads_finite`` of another kind (0, 1, None...), the scale unchanged.
        """
        finite = check_flag("grads_finite", grads_finite, owner="DynamicLossScaler.adjust")
        core = self.core
        core.scale = numpy.float32(self.scale_value.data)  # the user (or a checkpoint) may have
        core.counter = int(self.counter.data)               # set either Parameter
        core.update(not finite)
        self.scale_value.data[...] = core.scale
        self.counter.data[...] = core.counter
        return True


__all__ = ["init_status", "all_finite", "LossScaler", "StaticLossScaler", "DynamicLossScaler"]
