"""Independent pieces of work shared out across the group, each computed by one rank (KAISA's
distributed inversion: each rank inverts a share of the layers' factors, and every rank then has
every inverse).

The plan is greedy by cost, the same on every rank: the costliest item first, each to the rank
with the least cost so far (ties: the lowest rank). One ``all_gather_object`` then gives every
rank every result, as its owner computed it, so the ranks hold the same values bit for bit.
"""
from minigrad import _checks
from minigrad.communication import collectives, management


def _costs(costs, owner):
    """``costs`` (a tuple or list of finite reals >= 0) as a list of floats."""
    _checks.check_type("costs", costs, (tuple, list),
                       expected="a tuple or list of finite numbers >= 0", owner=owner)
    return [_checks.check_non_negative(f"costs[{i}]", c, owner=owner)
            for i, c in enumerate(costs)]


def plan_shares(costs, size):
    """Which rank computes each item: a list ``owner[i]`` in ``range(size)``.

    Args:
        costs: one cost per item, a tuple or list of finite real numbers >= 0.
        size: the number of ranks, a positive int.

    Raises:
        TypeError: ``costs`` not a tuple or list of real numbers, ``size`` not an int.
        ValueError: for a negative or non-finite cost, or ``size`` < 1.
    """
    costs = _costs(costs, "plan_shares")
    size = _checks.check_positive_int("size", size, owner="plan_shares")
    load, owner = [0.0] * size, [0] * len(costs)
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        rank = min(range(size), key=lambda r: (load[r], r))
        owner[i], load[rank] = rank, load[rank] + costs[i]
    return owner


def share_work(costs, compute):
    """Compute ``len(costs)`` independent items, each on one rank: ``compute(indices)`` returns
    the results of those items (a list, in their order); every rank gets every result, in item
    order. In a group of one, ``compute(all indices)``. Every rank must call it with the same
    costs (it is a collective).

    Raises:
        TypeError: as ``plan_shares``, or a ``compute`` that is not callable.
        ValueError: as ``plan_shares``, or when ``compute`` returns the wrong number of results.
    """
    costs = _costs(costs, "share_work")
    _checks.check_callable("compute", compute, owner="share_work")
    size = management.get_group_size()
    indices = list(range(len(costs)))
    owner = plan_shares(costs, size)
    mine = [i for i in indices if owner[i] == management.get_rank()]
    results = list(compute(mine)) if mine else []
    if len(results) != len(mine):
        raise ValueError(f"share_work: 'compute' returned {len(results)} results for "
                         f"{len(mine)} items")
    if size == 1:
        return results
    gathered = collectives.all_gather_object(results)
    position = [0] * size
    out = []
    for i in indices:
        out.append(gathered[owner[i]][position[owner[i]]])
        position[owner[i]] += 1
    return out
