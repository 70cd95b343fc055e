"""Learning-rate objects of an optimizer: ``lr(step) -> float``, and ``.learning_rate``, what
users see (a 0-d ``Parameter`` for a fixed rate, a 1-D Tensor for per-step values, or the
``LearningRateSchedule``)."""
import numbers
from collections.abc import Iterable

import numpy

from minigrad._checks import check_non_negative
from minigrad.optim.lr_schedule import LearningRateSchedule
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor


class LearningRate:
    @staticmethod
    def build(value, name, owner, parameter_name="learning_rate"):
        """A ``FixedLR``, ``ListLR`` or ``ScheduleLR`` for ``value`` (checked; errors say
        ``name``)."""
        if isinstance(value, LearningRateSchedule):
            return ScheduleLR(value)
        if isinstance(value, bool):
            raise TypeError(f"For '{owner}', the argument '{name}' must be a float, Tensor, "
                            "Iterable or "
                            f"LearningRateSchedule, but got {value!r}")
        if isinstance(value, numbers.Real):
            return FixedLR(check_non_negative(name, value, owner=owner), parameter_name)
        array = value.asnumpy() if isinstance(value, Tensor) else value
        # a Tensor, or a NumPy array (an Iterable to MindSpore)
        if isinstance(array, numpy.ndarray):
            if array.ndim > 1:
                raise ValueError(f"For '{owner}', a Tensor or array '{name}' must be 0-d or 1-D, "
                                 f"but got shape {array.shape}")
            if array.dtype.kind not in "fiu":
                raise TypeError(f"For '{owner}', the argument '{name}' must hold numbers, "
                                f"but got an array of dtype {array.dtype}")
            values = array.astype(numpy.float64).reshape(-1).tolist()
            bad = next((v for v in values if not 0 <= v < float("inf")), None)  # NaN and inf too
            if bad is not None:
                raise ValueError(f"For '{owner}', the argument '{name}' must be finite and >= 0, "
                                 f"but contains {bad}")
        elif isinstance(value, Iterable) and not isinstance(value, (str, bytes, dict)):
            # MindSpore: any Iterable (list, tuple, range, generator, ...) gives one rate per step
            values = [check_non_negative(f"{name}[{k}]", v, owner=owner)
                      for k, v in enumerate(value)]
        else:
            raise TypeError(f"For '{owner}', the argument '{name}' must be a float, Tensor, "
                            "Iterable or "
                            f"LearningRateSchedule, but got {type(value).__name__}")
        if not values:
            raise ValueError(f"For '{owner}', the argument '{name}' is empty")
        if isinstance(array, numpy.ndarray) and array.ndim == 0:
            return FixedLR(values[0], parameter_name)
        return ListLR(values)


class FixedLR:
    def __init__(self, value, name):
        self.learning_rate = Parameter(numpy.array(value, numpy.float32), name=name,
                                       requires_grad=False)

    def __call__(self, step):
        return float(self.learning_rate.data)


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
