"""An optimizer's ``parameters`` argument: Parameters, or MindSpore's group dicts (``params``,
``lr``, ``weight_decay``, ``grad_centralization``, ``order_params``), checked and flattened."""
from minigrad._checks import check_bool, check_non_negative
from minigrad.optim.lr_schedule import LearningRate
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor

GROUP_KEYS = ("params", "lr", "weight_decay", "grad_centralization", "order_params")


def default_decay_filter(param):
    """MindSpore's default for ungrouped parameters: decay unless the name has 'beta' or 'gamma'."""
    name = param.name or ""
    return "beta" not in name and "gamma" not in name


def parse_parameters(parameters, default_lr, default_wd, owner):
    """(params, lr object per param, weight decay per param, grouped?) from ``parameters``."""
    items = _as_list(parameters, "parameters", owner)
    if all(isinstance(p, Parameter) for p in items):
        _check_unique(items, owner)
        return items, [default_lr] * len(items), [default_wd] * len(items), False
    if not all(isinstance(g, dict) for g in items):
        k, bad = next((k, x) for k, x in enumerate(items) if not isinstance(x, (Parameter, dict)))
        raise TypeError(f"For '{owner}', every element of 'parameters' must be a Parameter (or "
                        "every element "
                        f"a group dict), but element {k} is {type(bad).__name__}")

    params, lrs, decays, order = [], [], [], None
    for k, group in enumerate(items):
        unknown = [key for key in group if key not in GROUP_KEYS]
        if unknown:
            raise KeyError(f"For '{owner}', group {k} has unknown keys {unknown}; allowed: "
                           f"{list(GROUP_KEYS)}")
        if "order_params" in group:
            if len(group) > 1:
                raise ValueError(f"For '{owner}', the 'order_params' group (group {k}) must have "
                                 "no other keys")
            order = _as_list(group["order_params"], "order_params", owner)
            continue
        if "params" not in group:
            raise ValueError(f"For '{owner}', group {k} has no 'params'")
        group_params = _as_list(group["params"], f"group {k} 'params'", owner)
        bad = next((p for p in group_params if not isinstance(p, Parameter)), None)
        if bad is not None:
            raise TypeError(f"For '{owner}', group {k} 'params' must hold Parameters, got "
                            f"{type(bad).__name__}")
        lr = default_lr
        if "lr" in group:
            lr = LearningRate.build(group["lr"], f"group {k} 'lr'", owner,
                                    f"learning_rate_group_{k}")
        wd = default_wd
        if "weight_decay" in group:
            wd = check_non_negative(f"group {k} 'weight_decay'", group["weight_decay"], owner=owner)
        if "grad_centralization" in group:
            check_bool(f"group {k} 'grad_centralization'", group["grad_centralization"],
                       owner=owner)
        params += group_params
        lrs += [lr] * len(group_params)
        decays += [wd] * len(group_params)
    if not params:
        raise ValueError(f"For '{owner}', the parameter groups hold no parameters")
    _check_unique(params, owner)
    if order is not None:
        position = {id(p): i for i, p in enumerate(params)}
        if len(order) != len(params) or any(id(p) not in position for p in order):
            raise ValueError(f"For '{owner}', 'order_params' must hold exactly the parameters of "
                             "the groups "
                             f"({len(params)}), got {len(order)} parameters")
        perm = [position[id(p)] for p in order]
        params, lrs, decays = ([xs[j] for j in perm] for xs in (params, lrs, decays))
    return params, lrs, decays, True


def _as_list(value, name, owner):
    if value is None:
        raise ValueError(f"For '{owner}', the argument '{name}' can not be None")
    if isinstance(value, (Tensor, dict, str)) or not hasattr(value, "__iter__"):
        raise TypeError(f"For '{owner}', the argument '{name}' must be an iterable of Parameters "
                        "or group "
                        f"dicts, but got {type(value).__name__}")
    items = list(value)
    if not items:
        raise ValueError(f"For '{owner}', the argument '{name}' is empty")
    return items


def _check_unique(params, owner):
    seen = set()
    for i, p in enumerate(params):
        if id(p) in seen:
            raise ValueError(f"For '{owner}', parameter {label(p, i)} is given more than once")
        seen.add(id(p))


def label(param, i):
    return repr(param.name) if param.name else f"#{i}"


def describe(value):
    dtype = getattr(value, "dtype", None)
    return f"{type(value).__name__} of dtype {dtype}" if dtype is not None else type(value).__name__


def preview(names, limit=5):
    shown = ", ".join(repr(n) for n in names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}]"
