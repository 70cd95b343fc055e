"""THOR's argument checks: MindSpore's checks of ``nn.thor`` (in its order), the learning rate
as the base optimizer takes it, and ``split_indices``."""
from minigrad._checks import (
    check_bool,
    check_callable,
    check_float,
    check_int,
    check_non_negative_int,
    check_relation,
    check_type,
)
from minigrad.optim.lr_schedule import LearningRateSchedule
from minigrad.tensor import Tensor
from minigrad.thor.fisher import check_loss


def check_seed_arguments(net, learning_rate, momentum, weight_decay, loss_scale, use_nesterov,
                         decay_filter, frequency, owner="thor"):
    """MindSpore's checks of ``nn.thor``'s arguments, in its order; returns the learning rate
    (a schedule for a callable) and ``loss_scale`` (an int converted to float)."""
    if not hasattr(net, "cells_and_names") or not hasattr(net, "trainable_params"):
        check_type("net", net, (), expected="a Cell", owner=owner)
    learning_rate = learning_rate_object(learning_rate, owner)
    if isinstance(loss_scale, int) and not isinstance(loss_scale, bool):
        loss_scale = check_float("loss_scale", loss_scale, low=0.0, low_open=True, owner=owner)
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
    """``split_indices`` (None: one group of all ``count`` layers) as a list of layer indices."""
    if value is None:
        return [count - 1]
    check_type("split_indices", value, (list, tuple), expected="a list of ints or None",
               owner=owner)
    out = [check_int("split_indices", v, low=0, high=count - 1, owner=owner) for v in value]
    check_relation("split_indices", value, len(out) > 0 and out == sorted(set(out)),
                   "a non-empty, strictly increasing list of layer indices or None", owner=owner)
    return out


def check_fisher_arguments(fisher, fisher_loss, fisher_seed, owner):
    """``fisher_seed`` (an int >= 0 or None) and ``fisher_loss`` (a loss THOR can sample, or
    None), both None unless ``fisher`` is ``"mc"``; returns ``fisher_seed`` as an int or None."""
    fisher_seed = check_non_negative_int("fisher_seed", fisher_seed, allow_none=True, owner=owner)
    if fisher_loss is not None:
        check_loss(fisher_loss, owner, "fisher_loss")
    for name, value in (("fisher_loss", fisher_loss), ("fisher_seed", fisher_seed)):
        check_relation(name, value, value is None or fisher == "mc",
                       f"None with fisher={fisher!r} (it applies to fisher='mc' only)",
                       owner=owner)
    return fisher_seed
