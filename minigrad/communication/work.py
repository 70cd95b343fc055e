"""Independent pieces of work shared out across the group, each computed by one rank (KAISA's
distributed inversion: each rank inverts a share of the layers' factors, and every rank then has
every inverse).

The plan is greedy by cost, the same on every rank: the costliest item first, each to the rank
with the least cost so far (ties: the lowest rank). One ``all_gather_object`` then gives every
rank every result, as its owner computed it, so the ranks hold the same values bit for bit.
"""
from minigrad.communication import collectives, management


def plan_shares(costs, size):
    """Which rank computes each item: a list ``owner[i]`` in ``range(size)``.

    Raises:
        ValueError: for a negative or non-finite cost, or ``size`` < 1.
    """
    if size < 1:
        raise ValueError(f"plan_shares: 'size' must be >= 1, got {size!r}")
    for i, c in enumerate(costs):
        if not 0 <= c < float("inf"):
            raise ValueError(f"plan_shares: 'costs' element {i} must be a finite number >= 0, "
                             f"got {c!r}")
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
        ValueError: as ``plan_shares``, or when ``compute`` returns the wrong number of results.
    """
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
