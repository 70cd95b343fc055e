"""THOR's refresh phase: from the layers' records of one step to new factors and inverses.

``refresh`` runs at the start of every applied THOR step. Per layer it takes the record of the
step (``layer.thor_pending``, consumed), computes the traces of its factors, and decides with
the refresh rule (``schedule.RefreshRule``) whether the layer refreshes: the frequency rule
from the step number, the trace rule from the traces. Only then are the factors formed (two
products per refreshing layer) and, when finite, stored (as a running average with
``factor_decay``); the damped blocks of every refreshing layer are inverted together
(``blocks.invert_together``). A layer whose factors are not finite keeps its factors and
inverses (action "kept"). What happened goes into the step's ``ThorReport``.

``reduce_factors`` is the data-parallel reduction of the records (the identity in one process).
"""
import math
import time

import numpy

from minigrad import backend, communication
from minigrad.backend import read_scalars
from minigrad.thor.blocks import invert_together
from minigrad.thor.report import LayerReport


def refresh(opt, step, seeds, lam, report):
    """Consume the layers' records of ``step`` into ``opt.blocks`` (see the module docstring).

    Args:
        opt: the THOR optimizer (its blocks, rule and damping options).
        seeds: ``(training seed, G seed)``: the backward scales of the training pass (the
            traces; the empirical G) and of the pass G was recorded from (``fisher="mc"``: the
            sampled pass; None when none ran).
        lam: the step's damping λ.
        report: the step's ``ThorReport`` (its ``layers`` and ``seconds`` are filled).
    """
    start = time.perf_counter()
    blocks, rule, mean = opt.blocks, opt.rule, opt.batch_mean
    pendings, traces = _take_records(blocks, seeds[0], mean, report)
    trace_rule = rule.rule == "trace"
    if not trace_rule and all(p is None for p in pendings) and \
            all(rule.decide(b, step, False) == "reuse" for b in blocks):
        report.seconds["factors"], report.seconds["inverses"] = time.perf_counter() - start, 0.0
        return  # a reuse step: nothing recorded, nothing to invert
    if trace_rule:  # decide on the (reduced) traces first, then form only the factors needed
        traces = [t for _, t in opt.reduce_factors([(None, t) for t in traces])]
        wanted = [_trace_decision(rule, b, t, report.layers[b.name])
                  for b, t in zip(blocks, traces)]
    else:
        wanted = [block.layer.thor_record == "factors" for block in blocks]
    factors = []
    for block, pending, want in zip(blocks, pendings, wanted):
        if not want or seeds[1] is None or pending is None:
            factors.append(None)
            continue
        formed = time.perf_counter()
        factors.append(block.factors_from(pending, seeds[1], mean))
        report.layers[block.name].factor_seconds = time.perf_counter() - formed
    if trace_rule:
        factors = [f for f, _ in opt.reduce_factors([(f, None) for f in factors])]
    else:
        reduced = opt.reduce_factors(list(zip(factors, traces)))
        factors, traces = [r[0] for r in reduced], [r[1] for r in reduced]
    to_invert = []
    candidates, checks = _check_factors(blocks, factors, opt.factor_decay)
    for block, new, current, want, candidate, (finite, stored_traces) in zip(
            blocks, factors, traces, wanted, candidates, checks):
        entry = report.layers[block.name]
        if current is not None:
            entry.trace_a, entry.trace_g = current
        formed = time.perf_counter() if new is not None else None
        recorded = _store_factors(block, candidate, finite, entry)
        if trace_rule:
            refreshing = want and recorded
            block.due = want and new is None  # mc: served by the next step's sampled pass
        else:
            refreshing = entry.action != "kept" and rule.decide(block, step, recorded) == "refresh"
        if refreshing:
            damping = block.dampings(stored_traces[recorded], math.sqrt(lam),
                                     opt.relative_damping, opt.damping_floor)
            to_invert.append((block, damping, block.damped_stacks(damping), current))
            entry.action, (entry.damping_a, entry.damping_g) = "refresh", damping
        if formed is not None:
            entry.factor_seconds += time.perf_counter() - formed
    report.seconds["factors"] = time.perf_counter() - start
    start = time.perf_counter()
    _invert(to_invert, report)
    report.refresh = any(r.action == "refresh" for r in report.layers.values())
    report.seconds["inverses"] = time.perf_counter() - start


def _take_records(blocks, seed, mean, report):
    """Each layer's record of the step (consumed) and its traces; a report entry per layer."""
    pendings, recorded = [], []
    for block in blocks:
        pending = block.layer.thor_pending
        if pending is not None:  # (a Cell attribute write costs: only when there is a record)
            block.layer.thor_pending = None
        pendings.append(pending)
        report.layers[block.name] = LayerReport(
            block.name, "frozen" if block.frozen else "reuse",
            damping_a=block.damping_used[0], damping_g=block.damping_used[1])
        recorded.append(block.recorded_traces(pending))
    values = iter(read_scalars([v for pair in recorded if pair is not None for v in pair]))
    traces = [None if pair is None else
              block.traces_from(pending, seed, mean, (next(values), next(values)))
              for block, pending, pair in zip(blocks, pendings, recorded)]
    return pendings, traces


def _invert(jobs, report):
    """Invert the damped blocks of the refreshing layers together and store the inverses (and
    the trace rule's reference, from the step's traces). With the parallel context's
    ``distributed_inversion`` each rank inverts a share of the layers (balanced by the cost of
    their blocks, ``b s³``) and receives the others' (``communication.share_work``)."""
    if jobs and communication.shares_inversions():
        def invert(indices):
            done = invert_together([jobs[i][:3] for i in indices])
            return [done[jobs[i][0]] for i in indices]
        shared = communication.share_work([_inversion_cost(job) for job in jobs], invert)
        results = {job[0]: result for job, result in zip(jobs, shared)}
    else:
        results = invert_together([job[:3] for job in jobs]) if jobs else {}
    for block, damping, _, current in jobs:
        inverses, ladder, seconds = results[block]
        block.store_inverses(inverses, damping)
        block.trace_ref = None if current is None else block.damped_trace(current, damping)
        entry = report.layers[block.name]
        entry.ladder, entry.inverse_seconds = ladder, seconds


def _inversion_cost(job):
    return sum(stack.shape[0] * stack.shape[-1] ** 3 for _, stack, _, _ in job[2])


def _trace_decision(rule, block, traces, entry):
    """The trace rule's test for one layer: True when it should refresh at this step."""
    decision, entry.delta = rule.test(block, traces)
    if decision == "frozen":
        entry.action = "frozen"
    return decision == "refresh"


def _check_factors(blocks, factors, decay):
    """For each block: the factors that storing its new ``factors`` gives (``averaged``; None
    without new factors), whether the new factors are finite, and ``(tr A, tr G)`` of the
    factors it holds after the step, ``[if not stored, if stored]``; every value read from the
    device in one transfer (a refresh step would otherwise wait for it per layer and value)."""
    candidates, pending = [], []
    for block, new in zip(blocks, factors):
        candidate = None if new is None else block.averaged(new[0], new[1], decay)
        candidates.append(candidate)
        xp = backend.get_array_module(new[1] if new is not None else block.G)
        finite = None if new is None else xp.isfinite(new[0]).all() & xp.isfinite(new[1]).all()
        kept = None if block.A is None else block.trace_values()
        stored = None if candidate is None else block.trace_values(candidate)
        pending.append((finite, kept, stored))
    values = iter(read_scalars([v for entry in pending for part in entry if part is not None
                                for v in (part if isinstance(part, tuple) else (part,))]))

    def take(part, n):
        return None if part is None else tuple(next(values) for _ in range(n))
    checks = []
    for finite, kept, stored in pending:
        finite = take(finite, 1)
        checks.append((finite is not None and bool(finite[0]), (take(kept, 2), take(stored, 2))))
    return candidates, checks


def _store_factors(block, candidate, finite, entry):
    """Store ``candidate`` (``_check_factors``) in ``block`` when given and finite (True); mark
    "kept" when not finite."""
    if candidate is None:
        return False
    if not finite:
        entry.action = "kept"
        return False
    block.A, block.G = candidate
    entry.action = "record"
    return True


def reduce_factors(records, split_indices):
    """The data-parallel reduction of one step's records: one ``(factors, traces)`` per THOR
    layer (``(A, G)`` or None, ``(tr A, tr G)`` or None), returned in the same form.

    In a single process it is the identity. In data-parallel mode
    (``communication.is_data_parallel()``) each ``split_indices`` group of layers is averaged
    across the ranks in one all-reduce (what the group holds: factors and traces together), so
    every rank inverts the same factors and the trace rule decides the same on every rank.
    Averaging the factors, not the inverses (MindSpore averages inverses), gives the factors of
    the whole global batch.
    """
    if not communication.is_data_parallel():
        return records
    out, start = list(records), 0
    for stop in split_indices:
        group = range(start, stop + 1)
        start = stop + 1
        pieces = []
        for k in group:
            factors, traces = records[k]
            pieces += [f.reshape(-1) for f in factors or ()]
            if traces is not None:
                pieces.append(numpy.asarray(traces, numpy.float32))
        if not pieces:
            continue
        xp = backend.get_array_module(pieces[0])
        flat = communication.all_reduce_(xp.concatenate([xp.asarray(p) for p in pieces]),
                                         "mean")
        offset = 0
        for k in group:
            factors, traces = records[k]
            if factors is not None:
                parts = []
                for f in factors:
                    parts.append(flat[offset:offset + f.size].reshape(f.shape))
                    offset += f.size
                factors = tuple(parts)
            if traces is not None:
                traces = tuple(backend.as_numpy(flat[offset:offset + 2]).tolist())
                offset += 2
            out[k] = (factors, traces)
    return out
