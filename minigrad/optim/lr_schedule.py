"""Learning rates: the schedules (MindSpore names and formulas), and the objects through which
an optimizer reads its rate at each step.

Two forms of schedule, as in MindSpore:

* ``LearningRateSchedule`` objects are called with the optimizer's ``global_step`` (an int, or a
  one-element Tensor) and return the learning rate of that step as a Python float. Pass one as
  ``learning_rate`` to any optimizer.
* The list generators (``piecewise_constant_lr``, ``exponential_decay_lr``, ``cosine_decay_lr``,
  ...) return a Python list with one learning rate per step; an optimizer given a list uses
  entry ``global_step`` and repeats the last entry after the end.

In the formulas ``s`` is the step and ``current_epoch = floor(i / step_per_epoch)``.

An optimizer turns its ``learning_rate`` argument into one of three objects (``LearningRate.
build``), called as ``lr(step) -> float`` at each step, whose ``.learning_rate`` is what users
see: ``FixedLR`` (a 0-d ``Parameter``), ``ListLR`` (per-step values; a 1-D Tensor) or
``ScheduleLR`` (the ``LearningRateSchedule`` itself).
"""
import math
import numbers
from collections.abc import Iterable

import numpy

from minigrad import backend
from minigrad._checks import (
    check_bool,
    check_float,
    check_non_negative,
    check_positive,
    check_positive_int,
    check_relation,
    check_type,
    describe,
)
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor


class LearningRateSchedule:
    """Base class: subclasses implement ``construct(global_step) -> float``.

    ``schedule(global_step)`` accepts an int or a one-element Tensor/array and returns a float.
    """

    def __call__(self, global_step):
        if not isinstance(global_step, numbers.Integral):  # a Tensor, array or NumPy scalar
            array = numpy.asarray(global_step)
            check_relation("the shape of global_step", array.shape, array.size == 1,
                           "of one element (global_step an int or a one-element Tensor)",
                           owner=type(self).__name__)
            global_step = array.reshape(()).item()
        return float(self.construct(int(global_step)))

    def construct(self, global_step):
        raise NotImplementedError(f"{type(self).__name__} must implement construct(global_step)")

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class ExponentialDecayLR(LearningRateSchedule):
    r"""``lr = learning_rate * decay_rate ** p`` with ``p = s / decay_steps`` (floored if
    ``is_stair``).

    Raises:
        TypeError: ``learning_rate``/``decay_rate`` not a float, ``decay_steps`` not an int,
            ``is_stair`` not a bool.
        ValueError: ``learning_rate`` or ``decay_rate`` <= 0, ``decay_steps`` < 1.
    """

    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        self.learning_rate, self.decay_rate, self.decay_steps, self.is_stair = _check_decay(
            type(self).__name__, learning_rate, decay_rate, decay_steps, is_stair)

    def construct(self, global_step):
        return self.learning_rate * self.decay_rate ** self._p(global_step)

    def _p(self, global_step):
        p = global_step / self.decay_steps
        return math.floor(p) if self.is_stair else p


class NaturalExpDecayLR(ExponentialDecayLR):
    r"""``lr = learning_rate * exp(-decay_rate * p)`` with ``p = s`` (or ``floor(s / decay_steps) *
    decay_steps`` if ``is_stair``), as in MindSpore (``decay_steps`` only matters for the stair)."""

    def construct(self, global_step):
        p = global_step
        if self.is_stair:
            p = (global_step // self.decay_steps) * self.decay_steps
        return self.learning_rate * math.exp(-self.decay_rate * p)


class InverseDecayLR(ExponentialDecayLR):
    r"""``lr = learning_rate / (1 + decay_rate * p)`` with ``p = s / decay_steps`` (floored if
    stair)."""

    def construct(self, global_step):
        return self.learning_rate / (1.0 + self.decay_rate * self._p(global_step))


class CosineDecayLR(LearningRateSchedule):
    r"""``lr = min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * min(s, decay_steps) /
    decay_steps))``.

    Raises:
        TypeError: ``min_lr``/``max_lr`` not a float, ``decay_steps`` not an int.
        ValueError: ``min_lr`` < 0, ``max_lr`` <= 0, ``max_lr`` <= ``min_lr``, ``decay_steps`` < 1.
    """

    def __init__(self, min_lr, max_lr, decay_steps):
        owner = type(self).__name__
        self.min_lr, self.max_lr = _check_min_max(owner, min_lr, max_lr)
        self.decay_steps = check_positive_int("decay_steps", decay_steps, owner=owner)

    def construct(self, global_step):
        p = min(global_step, self.decay_steps) / self.decay_steps
        return self.min_lr + 0.5 * (self.max_lr - self.min_lr) * (1.0 + math.cos(math.pi * p))


class PolynomialDecayLR(LearningRateSchedule):
    r"""``lr = (learning_rate - end_learning_rate) * (1 - s' / d) ** power + end_learning_rate``.

    ``s' = min(s, decay_steps)`` and ``d = decay_steps``; with ``update_decay_steps``, ``s' = s``
    and ``d = decay_steps * max(ceil(s / decay_steps), 1)`` (the decay restarts every period).

    Raises:
        TypeError: a float argument is not a float, ``decay_steps`` not an int,
            ``update_decay_steps`` not a bool.
        ValueError: ``learning_rate`` or ``power`` <= 0, ``end_learning_rate`` < 0, ``decay_steps``
            < 1.
    """

    def __init__(self, learning_rate, end_learning_rate, decay_steps, power,
                 update_decay_steps=False):
        owner = type(self).__name__
        self.learning_rate = check_positive("learning_rate", learning_rate, owner=owner)
        self.end_learning_rate = check_non_negative("end_learning_rate", end_learning_rate,
                                                    owner=owner)
        self.decay_steps = check_positive_int("decay_steps", decay_steps, owner=owner)
        self.power = check_positive("power", power, owner=owner)
        self.update_decay_steps = check_bool("update_decay_steps", update_decay_steps, owner=owner)

    def construct(self, global_step):
        step, decay_steps = global_step, self.decay_steps
        if self.update_decay_steps:
            decay_steps = decay_steps * max(math.ceil(step / decay_steps), 1)
        else:
            step = min(step, decay_steps)
        delta = self.learning_rate - self.end_learning_rate
        return delta * (1.0 - step / decay_steps) ** self.power + self.end_learning_rate


class WarmUpLR(LearningRateSchedule):
    r"""``lr = learning_rate * min(s, warmup_steps) / warmup_steps``.

    Raises:
        TypeError: ``learning_rate`` not a float, ``warmup_steps`` not an int.
        ValueError: ``learning_rate`` < 0, ``warmup_steps`` < 1.
    """

    def __init__(self, learning_rate, warmup_steps):
        owner = type(self).__name__
        self.learning_rate = check_non_negative("learning_rate", learning_rate, owner=owner)
        self.warmup_steps = check_positive_int("warmup_steps", warmup_steps, owner=owner)

    def construct(self, global_step):
        return self.learning_rate * min(global_step, self.warmup_steps) / self.warmup_steps


# ---- per-step lists ------------------------------------------------------------------------------
def piecewise_constant_lr(milestone, learning_rates):
    """``learning_rates[t]`` for the steps in ``[milestone[t-1], milestone[t])``; length
    ``milestone[-1]``.

    >>> piecewise_constant_lr([2, 5], [0.1, 0.05])
    [0.1, 0.1, 0.05, 0.05, 0.05]

    Raises:
        TypeError: either argument is not a list/tuple, an element has the wrong type.
        ValueError: different lengths, a milestone < 1 or smaller than the one before.
    """
    owner = "piecewise_constant_lr"
    for name, value in (("milestone", milestone), ("learning_rates", learning_rates)):
        check_type(name, value, (list, tuple), owner=owner)
    stops, last = [], 0
    for i, stop in enumerate(milestone):
        stop = check_positive_int(f"milestone[{i}]", stop, owner=owner)
        check_relation(f"milestone[{i}]", stop, stop >= last, f">= milestone[{i - 1}] ({last})",
                       owner=owner)
        stops.append(stop)
        last = stop
    rates = [check_float(f"learning_rates[{i}]", lr, owner=owner)
             for i, lr in enumerate(learning_rates)]
    check_relation("learning_rates", learning_rates, len(rates) == len(stops),
                   f"one rate per milestone (milestone={describe(milestone)})", owner=owner)
    lrs, last = [], 0
    for stop, lr in zip(stops, rates):
        lrs += [lr] * (stop - last)
        last = stop
    return lrs


def exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                         is_stair=False):
    """``learning_rate * decay_rate ** (current_epoch / decay_epoch)`` (exponent floored if
    ``is_stair``)."""
    owner = "exponential_decay_lr"
    _check_decay(owner, learning_rate, decay_rate, decay_epoch, is_stair, "decay_epoch")
    return _per_epoch(owner, ExponentialDecayLR(learning_rate, decay_rate, decay_epoch, is_stair),
                      total_step, step_per_epoch)


def natural_exp_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                         is_stair=False):
    """``learning_rate * exp(-decay_rate * e)`` with ``e = current_epoch`` (rounded down to a
    multiple of ``decay_epoch`` if ``is_stair``)."""
    owner = "natural_exp_decay_lr"
    _check_decay(owner, learning_rate, decay_rate, decay_epoch, is_stair, "decay_epoch")
    return _per_epoch(owner, NaturalExpDecayLR(learning_rate, decay_rate, decay_epoch, is_stair),
                      total_step, step_per_epoch)


def inverse_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                     is_stair=False):
    """``learning_rate / (1 + decay_rate * current_epoch / decay_epoch)`` (ratio floored if
    ``is_stair``)."""
    owner = "inverse_decay_lr"
    _check_decay(owner, learning_rate, decay_rate, decay_epoch, is_stair, "decay_epoch")
    return _per_epoch(owner, InverseDecayLR(learning_rate, decay_rate, decay_epoch, is_stair),
                      total_step, step_per_epoch)


def cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch):
    """``min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * min(current_epoch, decay_epoch) /
    decay_epoch))``."""
    owner = "cosine_decay_lr"
    _check_min_max(owner, min_lr, max_lr)
    check_positive_int("decay_epoch", decay_epoch, owner=owner)
    return _per_epoch(owner, CosineDecayLR(min_lr, max_lr, decay_epoch), total_step, step_per_epoch)


def polynomial_decay_lr(learning_rate, end_learning_rate, total_step, step_per_epoch, decay_epoch,
                        power,
                        update_decay_epoch=False):
    """``PolynomialDecayLR``'s formula evaluated per epoch (``current_epoch`` for the step)."""
    owner = "polynomial_decay_lr"
    check_positive_int("decay_epoch", decay_epoch, owner=owner)
    check_bool("update_decay_epoch", update_decay_epoch, owner=owner)
    schedule = PolynomialDecayLR(learning_rate, end_learning_rate, decay_epoch, power,
                                 update_decay_epoch)
    return _per_epoch(owner, schedule, total_step, step_per_epoch)


def warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch):
    """``learning_rate * min(current_epoch, warmup_epoch) / warmup_epoch``."""
    owner = "warmup_lr"
    check_positive_int("warmup_epoch", warmup_epoch, owner=owner)
    return _per_epoch(owner, WarmUpLR(learning_rate, warmup_epoch), total_step, step_per_epoch)


# ---- helpers -------------------------------------------------------------------------------------
def _check_decay(owner, learning_rate, decay_rate, decay_steps, is_stair, steps_name="decay_steps"):
    return (check_positive("learning_rate", learning_rate, owner=owner),
            check_positive("decay_rate", decay_rate, owner=owner),
            check_positive_int(steps_name, decay_steps, owner=owner),
            check_bool("is_stair", is_stair, owner=owner))


def _check_min_max(owner, min_lr, max_lr):
    low = check_non_negative("min_lr", min_lr, owner=owner)
    high = check_positive("max_lr", max_lr, owner=owner)
    check_relation("max_lr", max_lr, high > low, f"> min_lr ({describe(min_lr)})", owner=owner)
    return low, high


def _per_epoch(owner, schedule, total_step, step_per_epoch):
    """The list generators: ``schedule(current_epoch)`` for each of ``total_step`` steps (the
    schedule's formula, with epochs in place of steps)."""
    total_step = check_positive_int("total_step", total_step, owner=owner)
    step_per_epoch = check_positive_int("step_per_epoch", step_per_epoch, owner=owner)
    return [schedule(i // step_per_epoch) for i in range(total_step)]


# ---- what an optimizer reads its rate through ------------------------------------------------
class LearningRate:
    @staticmethod
    def build(value, name, owner, parameter_name="learning_rate"):
        """A ``FixedLR``, ``ListLR`` or ``ScheduleLR`` for ``value`` (checked; errors say
        ``name``)."""
        if isinstance(value, LearningRateSchedule):
            return ScheduleLR(value)
        kinds = "a float, Tensor, Iterable or LearningRateSchedule"
        check_relation(name, value, not isinstance(value, bool), kinds, error=TypeError,
                       owner=owner)
        if isinstance(value, numbers.Real):
            return FixedLR(check_non_negative(name, value, owner=owner), parameter_name)
        array = value.asnumpy() if isinstance(value, Tensor) else value
        # a Tensor, or a NumPy array (an Iterable to MindSpore)
        if isinstance(array, numpy.ndarray):
            check_relation(f"the shape of {name}", array.shape, array.ndim <= 1,
                           "() or (n,): a 0-d or 1-D Tensor or array", owner=owner)
            check_relation(name, array, array.dtype.kind in "fiu",
                           "a Tensor or array of ints or floats", error=TypeError, owner=owner)
            names = [name] if array.ndim == 0 else [f"{name}[{k}]" for k in range(array.size)]
            values = array.astype(numpy.float64).reshape(-1).tolist()
        else:
            iterable = isinstance(value, Iterable) and not isinstance(value, (str, bytes, dict))
            check_relation(name, value, iterable, kinds, error=TypeError, owner=owner)
            # MindSpore: any Iterable (list, tuple, range, generator, ...) gives one rate per step
            values = list(value)
            names = [f"{name}[{k}]" for k in range(len(values))]
        values = [check_non_negative(n, v, owner=owner) for n, v in zip(names, values)]
        check_relation(name, values, bool(values), "non-empty", owner=owner)
        if isinstance(array, numpy.ndarray) and array.ndim == 0:
            return FixedLR(values[0], parameter_name)
        return ListLR(values)


class FixedLR:
    """A fixed rate: a 0-d float32 ``Parameter`` on the context's device, as every parameter.

    The step reads it as a Python float, kept on the host and read from the device again only
    when the Parameter's ``version`` changed (``set_data``, ``load_state_dict``): a step on the
    GPU reads nothing for its rate.
    """

    def __init__(self, value, name):
        self.learning_rate = Parameter(numpy.array(value, numpy.float32), name=name,
                                       requires_grad=False)
        self._value, self._version = float(numpy.float32(value)), self.learning_rate.version

    def __call__(self, step=None):
        rate = self.learning_rate
        if rate.version != self._version:
            self._value, self._version = float(backend.read_scalar(rate.data)), rate.version
        return self._value


class ListLR:
    def __init__(self, values):
        self.values = values
        self.learning_rate = Tensor(numpy.array(values, numpy.float32))

    def __call__(self, step):
        return self.values[min(step, len(self.values) - 1)]


class ScheduleLR:
    def __init__(self, schedule):
        self.learning_rate = schedule

    def __call__(self, step):
        return float(self.learning_rate(step))
