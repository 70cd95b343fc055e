"""THOR's argument checks: MindSpore's checks of ``nn.thor`` (in its order), the learning rate
as the base optimizer takes it, and ``split_indices``."""
from minigrad._checks import (
    check_bool,
    check_callable,
    check_float,
    check_int,
    check_type,
)
from minigrad.optim.lr_schedule import LearningRateSchedule
from minigrad.tensor import Tensor


def check_seed_arguments(net, learning_rate, momentum, weight_decay, loss_scale, use_nesterov,
                         decay_filter, frequency, owner="thor"):
    """MindSpore's checks of ``nn.thor``'s arguments, in its order; returns the learning rate
    (a schedule for a callable) and ``loss_scale`` (an int converted to float)."""
    if not hasattr(net, "cells_and_names") or not hasattr(net, "trainable_params"):
        check_type("net", net, (), expected="a Cell", owner=owner)
    learning_rate = learning_rate_object(learning_rate, owner)
    if isinstance(loss_scale, int) and not isinstance(loss_scale, bool):
        loss_scale = float(loss_scale)
    check_type("loss_scale", loss_scale, float, expected="a float > 0.0", owner=owner)
    check_float("loss_scale", loss_scale, low=0.0, low_open=True, owner=owner)
    check_type("momentum", momentum, float, expected="a float >= 0.0", owner=owner)
    check_float("momentum", momentum, low=0.0, owner=owner)
    check_type("weight_decay", weight_decay, (int, float), expected="an int or a float >= 0.0",
               owner=owner)
    check_float("weight_decay", weight_decay, low=0.0, owner=owner)
    check_bool("use_nesterov", use_nesterov, owner=owner)
    check_callable("decay_filter", decay_filter, owner=owner)
    check_int("frequency", frequency, low=2, owner=owner)
    return learning_rate, loss_scale


class _CallableLR(LearningRateSchedule):
    def __init__(self, fn):
        self.fn = fn

    def construct(self, global_step):
        return self.fn(global_step)


def learning_rate_object(value, owner):
    if isinstance(value, (Tensor, LearningRateSchedule)):
        return value
    if callable(value):
        return _CallableLR(value)
    raise TypeError(f"{owner}: learning_rate must be a Tensor (0-d, or 1-D with one value per "
                    f"step) or a schedule, got {value!r} ({type(value).__name__})")


def check_split_indices(value, count, owner):
    if value is None:
        return [count - 1]
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{owner}: split_indices must be a list of ints or None, got {value!r}")
    out = [check_int("split_indices", v, low=0, high=count - 1, owner=owner) for v in value]
    if out != sorted(set(out)):
        raise ValueError(f"{owner}: split_indices must be strictly increasing, got {value!r}")
    return out
