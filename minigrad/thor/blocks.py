"""One THOR curvature block per recording layer: factors, damping, block inverses, preconditioning.

For a layer with weight gradient ``g`` (Dense ``(out, in)``; Conv2d ``(O, C·kh·kw)`` after a
reshape; Embedding ``(vocab, E)``) the layer keeps its R input rows ``a`` and the rows ``d`` of
the gradient at its output over N samples, backpropagated with the seed s (the loss scale).
The loss trained is ``L = w · Σ_n ℓ_n``: ``w = 1/N`` for a batch mean (``loss_reduction``
"mean"), ``w = 1`` for a sum (reduction "sum", and "none", whose per-sample losses the train
cells backpropagate with a seed of ones, i.e. their sum). Then ``d = s·w·δ`` with δ the
per-sample output gradient ``∂ℓ_n/∂y``, and the factors are::

    A = Σ a aᵀ / R              (the mean over samples, and over positions for a convolution)
    G = Σ d dᵀ / (w · s²)       (= w · Σ_n Σ_t δ_nt δ_ntᵀ: (1/N) Σ δ δᵀ for a mean, Σ δ δᵀ
                                 for a sum)

so ``A ⊗ G`` is the empirical Fisher of the loss actually trained (``w · Σ_n`` of the per-sample
Fishers: exact for one sample of a Dense layer; the standard KFC approximation for a
convolution), whatever the loss scale. A sum loss has N times the gradient and N times the
curvature of the mean, so the preconditioned step is the same up to the damping.

Each factor gets its damping ``δ = √λ`` (MindSpore's split of the seed's ``λ``: ``(A + √λ I) ⊗ (G +
√λ I)`` holds ``λ I`` plus cross terms ``√λ (A ⊗ I + I ⊗ G)``), or with ``relative_damping`` the
factor's own scale ``√λ · tr(F) / dim(F)``; never less than ``damping_floor``. The damped factor is
cut into diagonal blocks of ``split_dim`` (the last one padded with the identity); at a refresh the
blocks of every refreshing layer that have the same size are inverted together, in one call of
``linalg.inv_spd_ladder`` (see ``invert_together``). The preconditioned gradient is::

    g̃ = blkdiag(G + δ_G I)⁻¹ · g · blkdiag(A + δ_A I)⁻¹        (Embedding: A⁻¹ · g · G⁻¹)
"""
import math
import time

import numpy

from minigrad import backend
from minigrad.backend import read_scalars
from minigrad.linalg import inv_spd_ladder
from minigrad.linalg import inverses as first_inverses

KINDS = ("dense", "conv", "embedding")


class CurvatureBlock:
    """The second-order state of one layer (all float32, on the layer's device).

    Attributes:
        name: the weight's name; kind: "dense", "conv" or "embedding".
        A, G: the current factors (None until the first record); A of an Embedding is a vector.
        A_inv, G_inv: stacks of block inverses (b, s, s); A_inv of an Embedding is a vector.
        trace_ref: ``tr(A + δ_A I) · tr(G + δ_G I)`` at the last refresh (the trace rule's base).
        due: the trace rule asked for a refresh that the step's records could not serve
            (``fisher="mc"``: G exists only on steps planned to record it); the next step does.
        frozen: True once the trace rule froze the layer (its inverses are kept for good).
        refreshes: how many times the inverses were computed.
    """

    def __init__(self, layer, name, split_dim):
        self.layer = layer
        self.name = name
        self.kind = layer.thor_kind
        weight = layer.embedding_table if self.kind == "embedding" else layer.weight
        shape = weight.shape
        if self.kind == "embedding":
            self.a_dim, self.g_dim = shape
        else:
            self.g_dim, self.a_dim = shape[0], int(numpy.prod(shape[1:]))
        self.weight = weight
        self.split_dim = split_dim
        self.A = self.G = self.A_inv = self.G_inv = None
        self.trace_ref = None    # damped trace product at the last refresh
        self.frozen = False
        self.due = False
        self.refreshes = 0
        self.damping_used = (None, None)

    # ---- factors --------------------------------------------------------------------------------
    def factors_from(self, pending, scale, mean=True):
        """``(A, G)`` of one recorded batch, float32 (see the module docstring; ``mean``: the
        loss is a batch mean, else a sum); None when the record has no G rows."""
        if pending is None or pending.get("a_rows") is None or pending.get("g_rows") is None:
            return None
        a_rows, g_rows = pending["a_rows"], pending["g_rows"]
        a = a_rows if self.kind == "embedding" else a_rows.T @ a_rows
        a = a / numpy.float32(max(pending["rows"], 1))
        g = (g_rows.T @ g_rows) * numpy.float32(self.g_weight(pending, scale, mean))
        return a, g

    @staticmethod
    def recorded_traces(pending):
        """The unread traces ``(Σ aᵀa, Σ dᵀd)`` of one record (device scalars on the GPU), or
        None; ``traces_from`` scales them once read (``backend.read_scalars``, several layers'
        in one transfer)."""
        if pending is None or pending.get("g_trace") is None:
            return None
        return pending["a_trace"], pending["g_trace"]

    def traces_from(self, pending, scale, mean=True, values=None):
        """``(tr A, tr G)`` of one recorded batch (from any record mode), or None; ``values``:
        the record's ``recorded_traces`` already read (else they are read here)."""
        if pending is None or pending.get("g_trace") is None:
            return None
        a_trace, g_trace = values if values is not None else \
            read_scalars(self.recorded_traces(pending))
        return (a_trace / max(pending["rows"], 1),
                g_trace * self.g_weight(pending, scale, mean))

    @staticmethod
    def g_weight(pending, scale, mean):
        """The factor ``1 / (w · s²)`` that turns ``Σ d dᵀ`` into G."""
        return (pending["batch"] if mean else 1.0) / (scale * scale)

    def damped_trace(self, traces, damping):
        """``tr(A + δ_A I) · tr(G + δ_G I)`` for ``traces`` and ``damping`` (the trace rule's
        measure)."""
        da, dg = damping
        return (traces[0] + da * self.a_dim) * (traces[1] + dg * self.g_dim)

    def dampings(self, traces, sqrt_lambda, relative, floor):
        """Per-factor damping: ``√λ`` (``√λ · tr(F) / dim F`` when relative), at least ``floor``."""
        if relative:
            return (max(sqrt_lambda * traces[0] / self.a_dim, floor),
                    max(sqrt_lambda * traces[1] / self.g_dim, floor))
        return max(sqrt_lambda, floor), max(sqrt_lambda, floor)

    def averaged(self, a, g, decay):
        """The factors that storing ``(a, g)`` gives: the running average ``decay · old +
        (1 - decay) · new`` when ``decay`` is given and factors exist, else ``(a, g)``."""
        if decay is None or self.A is None:
            return a, g
        return decay * self.A + (1.0 - decay) * a, decay * self.G + (1.0 - decay) * g

    def set_factors(self, a, g, decay):
        """Store new factors (``averaged``)."""
        self.A, self.G = self.averaged(a, g, decay)

    def trace_values(self, factors=None):
        """The unread ``(tr A, tr G)`` of ``factors`` (default: the stored ones; an Embedding's
        A is its diagonal), as device scalars on the GPU."""
        a, g = (self.A, self.G) if factors is None else factors
        xp = backend.get_array_module(g)
        return (a.sum() if self.kind == "embedding" else xp.trace(a)), xp.trace(g)

    def factor_traces(self):
        """``(tr A, tr G)`` of the stored factors, read as Python floats (one transfer)."""
        return tuple(read_scalars(self.trace_values()))

    # ---- inverses -------------------------------------------------------------------------------
    def damped_stacks(self, damping):
        """The damped diagonal blocks to invert: ``[(label, stack, damping, previous)]`` for
        G and (unless the layer is an Embedding, whose A is diagonal) A."""
        da, dg = damping
        jobs = [("G", split_blocks(self.G, self.split_dim, dg), dg, self.G_inv)]
        if self.kind != "embedding":
            jobs.append(("A", split_blocks(self.A, self.split_dim, da), da, self.A_inv))
        return [(label, stack, d, prev if prev is not None and prev.shape == stack.shape
                 else None) for label, stack, d, prev in jobs]

    def store_inverses(self, inverses, damping):
        """Keep the new block inverses ``{"A": stack, "G": stack}`` (an Embedding's A inverse
        is computed here: the reciprocal of its damped diagonal)."""
        if self.kind == "embedding":
            self.A_inv = (1.0 / (self.A + numpy.float32(damping[0]))).astype(numpy.float32)
        else:
            self.A_inv = inverses["A"]
        self.G_inv = inverses["G"]
        self.damping_used = damping
        self.refreshes += 1

    # ---- preconditioning ------------------------------------------------------------------------
    def precondition(self, grad):
        """``G⁻¹ · grad · A⁻¹`` (Embedding ``A⁻¹ · grad · G⁻¹``) with the stored inverses."""
        shape = grad.shape
        if self.kind == "embedding":
            return right_multiply(grad * self.A_inv[:, None], self.G_inv)
        matrix = grad.reshape(self.g_dim, self.a_dim)
        out = left_multiply(self.G_inv, right_multiply(matrix, self.A_inv))
        return out.reshape(shape)


def split_blocks(factor, size, damping):
    """The damped diagonal blocks of ``factor`` (n, n) as a stack (b, s, s): ``s = min(n, size)``,
    the last block padded with the identity when ``size`` does not divide ``n``."""
    xp = backend.get_array_module(factor)
    n = factor.shape[0]
    s = min(n, size)
    count = math.ceil(n / s)
    blocks = xp.zeros((count, s, s), numpy.float32)
    for b in range(count):
        lo, hi = b * s, min(n, (b + 1) * s)
        blocks[b, :hi - lo, :hi - lo] = factor[lo:hi, lo:hi]
        if hi - lo < s:
            idx = xp.arange(hi - lo, s)
            blocks[b, idx, idx] = 1.0 - damping  # identity after the damping below
    idx = xp.arange(s)
    blocks[:, idx, idx] += numpy.float32(damping)
    return blocks


def right_multiply(matrix, blocks):
    """``matrix @ blkdiag(blocks)`` for ``matrix`` (m, n) and ``blocks`` (b, s, s), b·s >= n."""
    xp = backend.get_array_module(matrix)
    count, s, _ = blocks.shape
    m, n = matrix.shape
    if count == 1 and s == n:
        return matrix @ blocks[0]
    padded = xp.zeros((m, count * s), matrix.dtype)
    padded[:, :n] = matrix
    out = xp.matmul(padded.reshape(m, count, s).transpose(1, 0, 2), blocks)  # (b, m, s)
    return out.transpose(1, 0, 2).reshape(m, count * s)[:, :n]


def left_multiply(blocks, matrix):
    """``blkdiag(blocks) @ matrix`` for ``blocks`` (b, s, s) and ``matrix`` (n, m), b·s >= n
    (C-contiguous)."""
    xp = backend.get_array_module(matrix)
    count, s, _ = blocks.shape
    n, m = matrix.shape
    if count == 1 and s == n:
        return blocks[0] @ matrix
    padded = xp.zeros((count * s, m), matrix.dtype)
    padded[:n] = matrix
    return xp.matmul(blocks, padded.reshape(count, s, m)).reshape(count * s, m)[:n]


def invert_together(jobs):
    """Invert the damped stacks of several layers, one ``inv_spd_ladder`` call per block size.

    Args:
        jobs: ``[(block, damping, [(label, stack, d, previous), ...])]`` (``damped_stacks``).

    Returns:
        ``{block: (inverses {label: stack}, ladder {label: steps}, seconds)}``; a layer's seconds
        are its share (by block count) of the time of the calls it took part in.
    """
    groups = {}
    for block, _, stacks in jobs:
        for label, stack, d, prev in stacks:
            groups.setdefault(stack.shape[1:], []).append((block, label, stack, d, prev))
    out = {block: ({}, {}, 0.0) for block, _, _ in jobs}
    stacks = []
    for items in groups.values():
        xp = backend.get_array_module(items[0][2])
        stacks.append(xp.concatenate([it[2] for it in items]) if len(items) > 1 else items[0][2])
    start = time.perf_counter()
    firsts = first_inverses(stacks)  # on the GPU: every group's checks in one read
    first_seconds = (time.perf_counter() - start) / max(sum(s.shape[0] for s in stacks), 1)
    for items, stack, first in zip(groups.values(), stacks, firsts):
        xp = backend.get_array_module(stack)
        damping = numpy.concatenate([numpy.full(it[2].shape[0], it[3]) for it in items])
        nan = numpy.float32("nan")
        previous = xp.concatenate([it[4] if it[4] is not None else xp.full_like(it[2], nan)
                                   for it in items])
        names = [f"{it[0].name} (factor {it[1]}) block {k}" for it in items
                 for k in range(it[2].shape[0])]
        start = time.perf_counter()
        inverse, steps = inv_spd_ladder(stack, damping, previous, names, first=first)
        seconds = (time.perf_counter() - start) / stack.shape[0] + first_seconds
        offset = 0
        for block, label, part, _, _ in items:
            count = part.shape[0]
            inverses, ladder, total = out[block]
            inverses[label] = inverse[offset:offset + count]
            local = {k: [i - offset for i in v if offset <= i < offset + count]
                     for k, v in steps.items()}
            if any(local.values()):
                ladder[label] = local
            out[block] = (inverses, ladder, total + seconds * count)
            offset += count
    return out


def find_blocks(net, params, split_dim, owner):
    """The curvature block of each THOR layer, and each parameter's role: a block, "diagonal"
    (LayerNorm's gamma/beta, tagged ``thor_diagonal`` by the converter) or None (plain)."""
    index = {id(p): i for i, p in enumerate(params)}
    roles = [None] * len(params)
    blocks = []
    for _, cell in net.cells_and_names():
        kind = getattr(cell, "thor_kind", None)
        if kind in KINDS:
            weight = cell.embedding_table if kind == "embedding" else cell.weight
            if id(weight) in index:
                block = CurvatureBlock(cell, weight.name, split_dim)
                blocks.append(block)
                roles[index[id(weight)]] = block
        elif getattr(cell, "thor_diagonal", False):
            for p in (getattr(cell, "gamma", None), getattr(cell, "beta", None)):
                if p is not None and id(p) in index:
                    roles[index[id(p)]] = "diagonal"
    if not blocks:
        raise ValueError(f"{owner}: net has no THOR layer with a trainable weight (convert it "
                         f"with nn.ConvertNetUtils().convert_to_thor_net, or build it with "
                         f"nn.thor)")
    return blocks, roles
