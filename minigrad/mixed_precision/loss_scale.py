"""TensorFlow's ``LossScale`` family (``tf.mixed_precision.experimental``) on the shared
``ScaleCore``.

``loss_scale()`` is the current scale as a float32 scalar Tensor; ``update(grads)`` takes the
*unscaled* gradients and returns ``(None, should_apply_gradients)`` (eager semantics: the scale is
updated directly, so there is no op to run). The dynamic rule is TF's: on a non-finite step
``scale = max(scale / multiplier, 1)`` (a float32 division, as TF); after ``increment_period``
finite steps in a row ``scale *= multiplier`` if that stays finite.
"""
import abc
import math
import numbers

import numpy

from minigrad.amp import float_status
from minigrad._checks import check_float, check_relation, check_type, describe, is_real
from minigrad.amp.core import GROWTH_RANGE, ScaleCore, float32_scale, make_report
from minigrad.tensor import Tensor


class LossScale(abc.ABC):
    """Abstract base: a loss scale that can be called and updated. Cannot be instantiated."""

    def __init__(self):
        self.last_report = None

    def __call__(self):
        """The current loss scale as a float32 scalar Tensor."""
        return Tensor(numpy.float32(self.core.scale))

    def __float__(self):
        """The current scale as a Python float: TF 2.4's ``float(optimizer.loss_scale)``."""
        return float(self.core.scale)

    def numpy(self):
        """The current scale as a float32 NumPy scalar: TF 2.4's
        ``optimizer.loss_scale.numpy()``."""
        return numpy.float32(self.core.scale)

    def update(self, grads):
        """Update the scale from ``grads``: unscaled gradients, a Tensor or any nesting of
        lists, tuples and dicts of them (flattened as TF's ``nest.flatten``; None ignored).

        Returns:
            ``(None, should_apply_gradients)``; ``should_apply_gradients`` is False when a
            gradient holds inf/NaN. ``last_report`` names such gradients ``"grads[i]"`` (``i``:
            the position in the flattened ``grads``).
        """
        arrays = _arrays(grads)
        overflow = float_status.check(arrays)
        # no parameters here: a gradient is named by its position in the flattened ``grads``
        names = [f"grads[{i}]" for i in range(len(arrays))]
        return None, self._decide(overflow, None, names, arrays)

    def _decide(self, overflow, loss, names, arrays):
        before = self.core.scale
        self.core.update(overflow)
        make_report(self.core, before, overflow, loss, names, arrays, owner=self)
        return not overflow

    @abc.abstractmethod
    def get_config(self):
        """The constructor arguments as a dict."""

    @classmethod
    def from_config(cls, config):
        """``cls(**config)``.

        Raises:
            TypeError: for a ``config`` that is not a dict, and the constructor's errors.
        """
        check_type("config", config, dict, expected="a dict (get_config()'s)",
                   owner=f"{cls.__name__}.from_config")
        return cls(**config)


class NotANumberError(TypeError, ValueError):
    """A loss scale that is not a number: TF raises ValueError there, minigrad's convention is
    TypeError; this is both, so code written for either catches it."""


class FixedLossScale(LossScale):
    """A constant scale; ``update`` always returns ``(None, True)`` (it cannot react to infs).
    ``get_config()`` gives the value as a Python float, as passed (TF keeps
    ``float(loss_scale_value)``); calling the loss scale gives it in float32.

    Raises:
        NotANumberError (a TypeError and a ValueError, TF raises ValueError):
            ``loss_scale_value`` not an int/float: "loss_scale_value must be a Python int or
            float ..." as TF's message begins.
        ValueError: below 1 ("loss_scale_value must be at least 1 ...", as TF's), NaN or inf
            (TF accepts inf), or inf in float32.
    """

    def __init__(self, loss_scale_value):
        super().__init__()
        # TF's messages, "loss_scale_value must be a Python int or float." and "... must be at
        # least 1.", begin these, so code matching TF's text matches minigrad's
        owner = "FixedLossScale"
        if not is_real(loss_scale_value):
            raise NotANumberError(f"{owner}: loss_scale_value must be a Python int or float (or "
                                  f"a NumPy real number), got {describe(loss_scale_value)} "
                                  f"({type(loss_scale_value).__name__})")
        value = float(loss_scale_value)
        check_relation("loss_scale_value", loss_scale_value, value >= 1 and math.isfinite(value),
                       "at least 1 and finite", owner=owner)
        self.core = ScaleCore(value, growth_interval=None, owner="FixedLossScale",
                              names={"scale": "loss_scale_value"})
        self._loss_scale_value = value

    def update(self, grads):
        """``(None, True)``: a fixed scale applies every step.

        Raises:
            TypeError: for ``grads`` that are not Tensors or None (in lists, tuples or dicts),
                as every loss scale's ``update``.
        """
        if not isinstance(grads, (Tensor, list, tuple)):
            _arrays(grads)
        return None, True

    def get_config(self):
        return {"loss_scale_value": self._loss_scale_value}

    def __repr__(self):
        return f"FixedLossScale({self._loss_scale_value})"


class DynamicLossScale(LossScale):
    """TF's dynamic loss scale.

    Args:
        initial_loss_scale: starting scale (default 2**15, about half of fp16's max).
        increment_period: finite steps in a row before the scale grows (default 2000).
        multiplier: growth factor, and the divisor on overflow (default 2).
        floor: the lowest scale (``ScaleCore``); default TF's 1; None: no floor but float32's
            smallest normal value, as PyTorch's ``GradScaler``.
        cap: the highest scale (``ScaleCore``; default off).
        hysteresis: overflowing steps in a row tolerated before backing off (``ScaleCore``;
            default 1: at once).
        max_consecutive_skips: stop with an error after this many skipped steps in a row
            (``ScaleCore``; default off).

    ``increment_period`` goes through ``int()`` as TF's ``DynamicLossScale`` does (TF's own
    tests pass ``2.0``), for whole numbers only: TF would truncate ``2.5`` to 2 without a word,
    minigrad refuses it, and a float above 2**53 (a float that large holds no exact whole
    number). ``get_config()`` holds TF's three keys, plus each extra that is not at its default
    (so that ``from_config`` rebuilds the same loss scale).

    Raises:
        TypeError: an argument that is not a number (``increment_period``: not a real number).
        ValueError: an argument out of range, naming it and the value.
    """

    _EXTRAS = {"floor": 1.0, "cap": None, "hysteresis": 1, "max_consecutive_skips": None}

    def __init__(self, initial_loss_scale=2 ** 15, increment_period=2000, multiplier=2.0, *,
                 floor=1.0, cap=None, hysteresis=1, max_consecutive_skips=None):
        super().__init__()
        multiplier = check_float("multiplier", multiplier, **GROWTH_RANGE, owner="DynamicLossScale")
        increment_period = _as_period(increment_period)
        self.core = ScaleCore(initial_loss_scale, multiplier, 1.0 / multiplier, increment_period,
                              floor=floor, cap=cap, hysteresis=hysteresis,
                              max_consecutive_skips=max_consecutive_skips, owner="DynamicLossScale",
                              names={"scale": "initial_loss_scale",
                                     "growth_interval": "increment_period",
                                     "backoff_divisor": "multiplier"},
                              backoff_divisor=multiplier)  # TF: max(scale / multiplier, 1)
        self._config = {"initial_loss_scale": float(initial_loss_scale),
                        "increment_period": int(increment_period), "multiplier": multiplier}
        self._config.update((key, getattr(self.core, key)) for key, default in self._EXTRAS.items()
                            if getattr(self.core, key) != default)

    initial_loss_scale = property(lambda self: self._config["initial_loss_scale"])
    increment_period = property(lambda self: self._config["increment_period"])
    multiplier = property(lambda self: self._config["multiplier"])

    def get_config(self):
        return dict(self._config)

    def __repr__(self):
        return (f"DynamicLossScale(current_loss_scale={float(self.core.scale)}, "
                f"num_good_steps={self.core.counter}, "
                f"initial_loss_scale={self.initial_loss_scale}, "
                f"increment_period={self.increment_period}, multiplier={self.multiplier})")


def _as_period(value, name="increment_period", owner="DynamicLossScale"):
    """``int(value)`` for a whole real number (TF converts ``increment_period`` with ``int``),
    or TypeError/ValueError naming ``name``; the range is ScaleCore's check."""
    check_relation(name, value, is_real(value), "an int", error=TypeError, owner=owner)
    check_relation(name, value, math.isfinite(value) and value == int(value),
                   "a whole number", owner=owner)
    # a float above 2**53 holds no exact whole number: 4.6e16 is not a step count anyone wrote
    check_relation(name, value, isinstance(value, numbers.Integral)
                   or abs(value) <= 2 ** 53, "an int, or a whole float <= 2**53", owner=owner)
    return int(value)


def get(identifier):
    """A ``LossScale`` from an identifier.

    int/float -> ``FixedLossScale``; ``"dynamic"`` -> ``DynamicLossScale()``; a dict -> the
    config of a ``DynamicLossScale`` (keys ``initial_loss_scale``/``increment_period``/
    ``multiplier`` and the extras ``floor``/``cap``/``hysteresis``/``max_consecutive_skips``) or
    of a ``FixedLossScale`` (key ``loss_scale_value``); a ``LossScale`` -> itself; None -> None.

    Raises:
        ValueError: for anything else, naming the identifier (TF's message: "Could not
            interpret loss scale identifier: ..."), or a number below 1, not finite, or inf in
            float32 (a ``FixedLossScale`` cannot hold it).
    """
    return _get(identifier, "identifier")


def _get(identifier, name, owner=None):
    """``get(identifier)`` whose errors name the argument ``name`` the identifier came in (the
    ``loss_scale`` of ``Policy`` or ``LossScaleOptimizer``)."""
    if identifier is None or isinstance(identifier, LossScale):
        return identifier
    if isinstance(identifier, (int, float)) and not isinstance(identifier, bool):
        check_relation(name, identifier, math.isfinite(identifier) and identifier >= 1,
                       "at least 1 and finite (a fixed loss scale)", owner=owner)
        float32_scale(identifier, name, owner or "get")
        return FixedLossScale(identifier)
    # (a Tensor would compare elementwise)
    if isinstance(identifier, str) and identifier == "dynamic":
        return DynamicLossScale()
    if isinstance(identifier, dict):
        if set(identifier) == {"loss_scale_value"}:
            return FixedLossScale.from_config(identifier)
        dynamic_keys = {"initial_loss_scale", "increment_period", "multiplier",
                        *DynamicLossScale._EXTRAS}
        if identifier and set(identifier) <= dynamic_keys:
            return DynamicLossScale.from_config(identifier)
    prefix = f"{owner}: " if owner else ""
    raise ValueError(f"{prefix}Could not interpret loss scale identifier: {describe(identifier)} "
                     f"({name} must be an int or float, 'dynamic', a LossScale config dict, a "
                     f"LossScale or None)")


def _arrays(grads):
    """The arrays of the gradients in ``grads`` (None for None), flattened in TF's order:
    lists and tuples in order, dicts by sorted key."""
    out = []
    stack = [grads]
    while stack:
        g = stack.pop()
        if g is None:
            out.append(None)
        elif isinstance(g, Tensor):
            out.append(g.data)
        elif isinstance(g, (list, tuple)):
            stack.extend(reversed(g))
        elif isinstance(g, dict):
            stack.extend(g[k] for k in reversed(sorted(g)))
        else:
            check_relation("grads", g, False, "Tensors or None (in lists, tuples or dicts)",
                           error=TypeError, owner="LossScale.update")
    return out
