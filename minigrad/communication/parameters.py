"""The start of data-parallel training: every rank has the same model, with rank 0's values.

``Optimizer`` calls ``synchronize_parameters`` on its parameters when it is made in
data-parallel mode, before any forward pass of every face (the train cells, ``GradScaler``,
``LossScaleOptimizer`` all take an optimizer). Parameters are used through their attributes
(``name``, ``shape``, ``dtype``, ``data``, ``set_data``), so this module needs no import of them.
"""
from minigrad.communication import collectives, management, parallel_context


def check_same_model(parameters):
    """Raise ValueError on every rank unless every rank has the same parameters (count, names,
    shapes, dtypes, in order); the message names the first difference. One all-gather."""
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
    through ``set_data`` (so an optimizer's fp32 master copy of an fp16 parameter is re-read)."""
    for p in parameters:
        value = collectives.broadcast(p.data, root)
        if management.get_rank() != root:
            p.set_data(value)


def synchronize_parameters(parameters):
    """``check_same_model``, then (with the context's ``parameter_broadcast``, default True)
    ``broadcast_parameters`` from rank 0; nothing in a group of one."""
    if management.get_group_size() == 1:
        return
    parameters = tuple(parameters)
    check_same_model(parameters)
    if parallel_context.get_auto_parallel_context("parameter_broadcast"):
        broadcast_parameters(parameters)
