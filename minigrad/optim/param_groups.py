"""An optimizer's ``parameters`` argument: Parameters, or MindSpore's group dicts (``params``,
``lr``, ``weight_decay``, ``grad_centralization``, ``order_params``), checked and flattened."""
import numpy

from minigrad._checks import check_bool, check_non_negative, check_relation, check_type
from minigrad.optim.lr_schedule import LearningRate
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor

GROUP_KEYS = ("params", "lr", "weight_decay", "grad_centralization", "order_params")


def default_decay_filter(param):
    """MindSpore's default for ungrouped parameters: decay unless the name has 'beta' or 'gamma'.

    Raises:
        TypeError: for a ``param`` that is not a Parameter.
    """
    check_type("param", param, Parameter, owner="default_decay_filter")
    name = param.name or ""
    return "beta" not in name and "gamma" not in name


def parse_parameters(parameters, default_lr, default_wd, owner, name="parameters"):
    """(params, lr object per param, weight decay per param, grouped?) from ``parameters``
    (the argument ``name`` in messages)."""
    items = _as_list(parameters, name, owner, "an iterable of Parameters or group dicts")
    if all(isinstance(p, Parameter) for p in items):
        _check_unique(items, name, owner)
        return items, [default_lr] * len(items), [default_wd] * len(items), False
    for k, item in enumerate(items):
        check_type(f"{name}[{k}]", item, (Parameter, dict),
                   expected="a Parameter or a group dict", owner=owner)
    check_relation(name, [type(x).__name__ for x in items],
                   all(isinstance(g, dict) for g in items), "all Parameters or all group dicts",
                   error=TypeError, owner=owner)
    return _parse_groups(items, default_lr, default_wd, owner)


def _parse_groups(items, default_lr, default_wd, owner):
    params, lrs, decays, order = [], [], [], None
    for k, group in enumerate(items):
        keys = list(group)
        unknown = [key for key in keys if key not in GROUP_KEYS]
        check_relation(f"the keys of group {k}", keys, not unknown,
                       f"a subset of {list(GROUP_KEYS)} (unknown {unknown})", error=KeyError,
                       owner=owner)
        if "order_params" in group:
            check_relation(f"the keys of group {k}", keys, len(keys) == 1,
                           "['order_params'] alone", owner=owner)
            order = _as_list(group["order_params"], "order_params", owner)
            for j, p in enumerate(order):
                check_type(f"order_params[{j}]", p, Parameter, owner=owner)
            continue
        check_relation(f"the keys of group {k}", keys, "params" in group,
                       "a list including 'params'", owner=owner)
        group_params = _as_list(group["params"], f"group {k} 'params'", owner)
        for j, p in enumerate(group_params):
            check_type(f"group {k} 'params'[{j}]", p, Parameter, owner=owner)
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
    check_relation("the number of Parameters in the groups", len(params), bool(params), ">= 1",
                   owner=owner)
    _check_unique(params, "the groups' parameters", owner)
    if order is not None:
        position = {id(p): i for i, p in enumerate(params)}
        exact = (len(order) == len(params) and {id(p) for p in order} == set(position))
        check_relation("order_params", [_name(p, i) for i, p in enumerate(order)], exact,
                       f"the {len(params)} parameters of the groups, each once "
                       f"({preview([_name(p, i) for i, p in enumerate(params)])})", owner=owner)
        perm = [position[id(p)] for p in order]
        params, lrs, decays = ([xs[j] for j in perm] for xs in (params, lrs, decays))
    return params, lrs, decays, True


def _as_list(value, name, owner, expected="an iterable of Parameters"):
    check_relation(name, value, value is not None, expected,
                   owner=owner)  # None: a ValueError, as MindSpore raises
    # an array (a 0-d one cannot even be iterated), a Tensor, a dict or a str holds no Parameters
    iterable = (not isinstance(value, (Tensor, numpy.ndarray, dict, str, bytes))
                and hasattr(value, "__iter__"))
    check_relation(name, value, iterable, expected, error=TypeError, owner=owner)
    items = list(value)
    check_relation(name, items, bool(items), "non-empty", owner=owner)
    return items


def _check_unique(params, name, owner):
    seen = set()
    for i, p in enumerate(params):
        check_relation(f"{name}[{i}]", _name(p, i), id(p) not in seen,
                       "a Parameter not given before", owner=owner)
        seen.add(id(p))


def _name(param, i):
    return param.name or f"#{i}"


def label(param, i):
    return repr(param.name) if param.name else f"#{i}"


def preview(names, limit=5):
    shown = ", ".join(repr(n) for n in names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}]"
