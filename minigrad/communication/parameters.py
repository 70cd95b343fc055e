"""The start of data-parallel training: every rank has the same model, with rank 0's values.

``Optimizer`` calls ``synchronize_parameters`` on its parameters when it is made in
data-parallel mode, before any forward pass of every face (the train cells, ``GradScaler``,
``LossScaleOptimizer`` all take an optimizer). Parameters are used through their attributes
(``name``, ``shape``, ``dtype``, ``data``, ``set_data``), so this module needs no import of them.
"""
import collections.abc

from minigrad import _checks
from minigrad.communication import collectives, management, parallel_context

_PARAMETER_ATTRIBUTES = ("name", "shape", "dtype", "data", "set_data")


def _parameters(parameters, owner):
    """``parameters`` (a tuple or list of Parameters, or an iterator of them such as
    ``Cell.get_parameters()``) as a tuple, each entry checked for the attributes used here."""
    _checks.check_type("parameters", parameters, (tuple, list, collections.abc.Iterator),
                       expected="a tuple, list or iterator of Parameters", owner=owner)
    parameters = tuple(parameters)
    for i, p in enumerate(parameters):
        _checks.check_relation(f"parameters[{i}]", p, all(
            hasattr(p, a) for a in _PARAMETER_ATTRIBUTES), "a Parameter", error=TypeError,
            owner=owner)
    return parameters


def check_same_model(parameters):
    """Raise ValueError on every rank unless every rank has the same parameters (count, names,
    shapes, dtypes, in order); the message names the first difference. One all-gather.

    Raises:
        TypeError: ``parameters`` is not a tuple, list or iterator of Parameters.
        ValueError: the ranks' models differ.
    """
    parameters = _parameters(parameters, "check_same_model")
    mine = [(p.name, tuple(p.shape), str(p.dtype)) for p in parameters]
    every = collectives.all_gather_object(mine)
    reference = every[0]
    for rank, theirs in enumerate(every[1:], start=1):
        if theirs == reference:
            continue
        if len(theirs) != len(reference):
            raise ValueError(f"data parallel: the model differs across ranks: rank 0 has "
                             f"{len(reference)} parameters, rank {rank} has {len(theirs)}")
        i = next(i for i, (a, b) in enumerate(zip(reference, theirs)) if a != b)
        raise ValueError(f"data parallel: the model differs across ranks at parameter {i}: "
                         f"rank 0 has {reference[i][0]!r} of shape {reference[i][1]} and dtype "
                         f"{reference[i][2]}, rank {rank} has {theirs[i][0]!r} of shape "
                         f"{theirs[i][1]} and dtype {theirs[i][2]}")


def broadcast_parameters(parameters, root=0):
    """Give every rank rank ``root``'s parameter values: one broadcast per parameter, written
    through ``set_data`` (so an optimizer's fp32 master copy of an fp16 parameter is re-read).

    Raises:
        TypeError: as ``check_same_model``; a ``root`` that is not an int.
        ValueError: a ``root`` that is not a rank of the group.
    """
    parameters = _parameters(parameters, "broadcast_parameters")
    root = _checks.check_int("root", root, low=0, high=management.get_group_size() - 1,
                             owner="broadcast_parameters")
    for p in parameters:
        value = collectives.broadcast(p.data, root)
        if management.get_rank() != root:
            p.set_data(value)


def synchronize_parameters(parameters):
    """``check_same_model``, then (with the context's ``parameter_broadcast``, default True)
    ``broadcast_parameters`` from rank 0; nothing in a group of one (the parameters are
    checked there too).

    Raises:
        TypeError / ValueError: as ``check_same_model``.
    """
    parameters = _parameters(parameters, "synchronize_parameters")
    if management.get_group_size() == 1:
        return
    check_same_model(parameters)
    if parallel_context.get_auto_parallel_context("parameter_broadcast"):
        broadcast_parameters(parameters)
