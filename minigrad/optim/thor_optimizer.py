"""``THOR``: the second-order optimizer (Trace-based Hardware-driven layer-ORiented natural
gradient descent).

One step, for gradients ``g`` of a network converted to THOR layers (``nn.DenseThor``,
``nn.Conv2dThor``, ``nn.EmbeddingThor``; ``nn.thor`` converts and builds in one call)::

    g = g / loss_scale                                  (and / the cell's loss scale, if passed)
    refresh (on its steps): A, G from the layers' records; damped block inverses (thor_blocks)
                            (fisher="mc": G from a loss on sampled labels, see thor_fisher)
    g̃ = G⁻¹ · g · A⁻¹        THOR layers' weights, with the stored inverses
    g̃ = g / (g² / N + √λ)    LayerNorm's gamma and beta (a diagonal Fisher, as MindSpore)
    g̃ = g                    every other parameter (biases, BatchNorm, ...)
    g̃ = ν · g̃                optional KL clip (kl_clip): ν = min(1, √(c / |Σ lr² g̃·g|))
    g̃ = g̃ + wd · w           weight decay where decay_filter(param) holds
    g̃ = g̃ · 1 / max(‖g̃‖, 1)  optional per-tensor clip (enable_clip_grad), as MindSpore
    v = μ v + g̃;  w = w - lr · v     (Nesterov: w = w - lr · (g̃ + μ v))

Second-order state (factors, inverses) is float32 whatever the network's dtype. A step whose
gradients hold inf or NaN is skipped as a whole (an fp16 overflow under a fixed loss scale with
``drop_overflow_update=False``): parameters, momentum and THOR state stay bit-identical. A layer
whose recorded factors are not finite keeps its factors and inverses. ``last_report`` (a
``ThorReport``) says after each step what happened; ``state_dict`` holds the THOR state, so a
checkpoint resumes bit-identically.
"""
import math
import time

import numpy

from minigrad import backend, communication
from minigrad._checks import (
    check_bool,
    check_float,
    check_in,
    check_positive_int,
)
from minigrad.optim.momentum import Momentum
from minigrad.optim.optimizer import Optimizer, _divide, _inverse_scale
from minigrad.optim.thor_args import check_seed_arguments, check_split_indices
from minigrad.optim.thor_blocks import CurvatureBlock, invert_together
from minigrad.optim.thor_fisher import FISHERS, SampledFisher
from minigrad.optim.thor_report import LayerReport, ThorReport
from minigrad.optim.thor_schedule import RefreshRule, StepValue
from minigrad.optim.thor_state import load_thor_state, thor_state

KINDS = ("dense", "conv", "embedding")


class THOR(Optimizer):
    """THOR over the THOR layers of ``net`` (see the module docstring for the step).

    Args (MindSpore's ``nn.thor``, then minigrad's options):
        net: the network (already converted: ``nn.thor`` converts it for you).
        learning_rate: a 0-d Tensor, a 1-D Tensor with one value per step (the last value is
            used past its end), or a schedule (``LearningRateSchedule`` or ``fn(step)``).
        damping: λ, as ``learning_rate`` (each factor gets ``√λ``; see ``thor_blocks``).
        momentum (float): >= 0.
        weight_decay (int, float): >= 0. Default 0.0.
        loss_scale (float): > 0; an int is converted. Default 1.0.
        batch_size (int): the N of LayerNorm's rule ``g² / N``. The factors use each batch's
            actual size (MindSpore multiplies G by ``batch_size²``, wrong on a short last batch).
        use_nesterov (bool): Default False.
        decay_filter: ``fn(param) -> bool``, default ``lambda x: x.name not in []`` (all).
        split_indices: None, or increasing layer indices closing each all-reduce group of the
            factors in data-parallel training (``reduce_factors``). Default: one group.
        enable_clip_grad (bool): clip each preconditioned gradient to norm 1.0. Default False.
        frequency (int): >= 2, the refresh period of factors and inverses. Default 100.
        split_dim (int): the size of the diagonal blocks of each factor. Default 128.
        refresh: "frequency" (default) or "trace" (the paper's rule; see ``thor_schedule``).
        omega1, omega2: the trace rule's thresholds. Default 0.01 and 0 (the paper's ResNet-50).
        factor_frequency, inverse_frequency: separate periods (default ``frequency``).
        factor_decay: None (default: each refresh uses its own batch, as MindSpore) or a float
            in [0, 1): the factors become the running average ``decay · F + (1 - decay) · F_new``.
        relative_damping (bool): damp each factor by ``√λ · tr(F) / dim F``. Default False.
        damping_floor (float): the least damping of a factor. Default 0.0.
        kl_clip: None (default) or a float > 0: the KL / Fisher-norm clip of the update.
        fisher: "empirical" (default, MindSpore's: G from the training loss's gradients) or
            "mc" (G from the gradients of the loss on labels sampled from the model's output
            distribution; the update still uses the true-label gradient; see ``thor_fisher``).
        fisher_loss: with "mc", the loss Cell to sample (``nn.SoftmaxCrossEntropyWithLogits``
            or ``nn.MSELoss``). Default None: the ``loss_fn`` of the ``WithLossCell`` that the
            train cell (``TrainOneStepCell``, ``Model``) wraps; an explicit one wins.
        fisher_seed: with "mc", the sampling seed (int >= 0). Default None: drawn from
            ``minigrad.random`` (so ``minigrad.set_seed`` repeats the run).

    Raises:
        TypeError: ``learning_rate`` not a Tensor or schedule; ``loss_scale``, ``momentum``
            not a float (an int ``loss_scale`` is converted); ``weight_decay`` neither float
            nor int; ``use_nesterov``/``enable_clip_grad``/``relative_damping`` not a bool;
            ``frequency`` (or ``batch_size``, ``split_dim``) not an int; ``net`` not a Cell;
            ``fisher_loss`` not a supported loss; ``fisher_seed`` not an int >= 0.
        ValueError: ``loss_scale`` <= 0; ``weight_decay`` or ``momentum`` < 0; ``frequency``
            < 2; ``net`` without THOR layers or trainable parameters; a bad option value
            (``fisher`` not "empirical" or "mc"; ``fisher_loss``/``fisher_seed`` without "mc").
        RuntimeError (at a step, before anything changes): with "mc", layers recorded factors
            but no sampled pass ran (the loss is unknown, or the hooked loss was not called).
    """
    state_names = ("moments",)
    update = Momentum.update  # the momentum rule after preconditioning (MindSpore's ApplyMomentum)

    def __init__(self, net, learning_rate, damping, momentum, weight_decay=0.0, loss_scale=1.0,
                 batch_size=32, use_nesterov=False, decay_filter=lambda x: x.name not in [],
                 split_indices=None, enable_clip_grad=False, frequency=100, *, split_dim=128,
                 refresh="frequency", omega1=0.01, omega2=0.0, factor_frequency=None,
                 inverse_frequency=None, factor_decay=None, relative_damping=False,
                 damping_floor=0.0, kl_clip=None, fisher="empirical", fisher_loss=None,
                 fisher_seed=None):
        owner = "thor"
        learning_rate, loss_scale = check_seed_arguments(
            net, learning_rate, momentum, weight_decay, loss_scale, use_nesterov, decay_filter,
            frequency)
        self.momentum = float(momentum)
        self.use_nesterov = use_nesterov
        params = net.trainable_params()
        if not params:
            raise ValueError(f"{owner}: net has no trainable parameters")
        super().__init__(learning_rate, params, weight_decay, loss_scale, decay_filter)
        self.damping = StepValue(damping, "damping", owner)
        self.batch_size = check_positive_int("batch_size", batch_size, owner=owner)
        self.enable_clip_grad = check_bool("enable_clip_grad", enable_clip_grad, owner=owner)
        self.frequency = frequency
        self.split_dim = check_positive_int("split_dim", split_dim, owner=owner)
        self.rule = RefreshRule(refresh, frequency, factor_frequency, inverse_frequency, omega1,
                                omega2, owner)
        self.factor_decay = check_float("factor_decay", factor_decay, low=0.0, high=1.0,
                                        high_open=True, allow_none=True, owner=owner)
        self.relative_damping = check_bool("relative_damping", relative_damping, owner=owner)
        self.damping_floor = check_float("damping_floor", damping_floor, low=0.0, owner=owner)
        self.kl_clip = check_float("kl_clip", kl_clip, low=0.0, low_open=True, allow_none=True,
                                   owner=owner)
        self.fisher = check_in("fisher", fisher, FISHERS, owner=owner)
        if fisher == "empirical" and (fisher_loss is not None or fisher_seed is not None):
            raise ValueError(f"{owner}: fisher_loss and fisher_seed apply to fisher='mc' only, "
                             f"got fisher={fisher!r}")
        self.blocks, self._roles = _find_blocks(net, self.parameters, self.split_dim, owner)
        self.sampler = None
        if fisher == "mc":
            self.sampler = SampledFisher(self.blocks, fisher_seed, owner)
            if fisher_loss is not None:
                self.sampler.use_loss(fisher_loss, owner)
                self.sampler.explicit = True
        self.split_indices = check_split_indices(split_indices, len(self.blocks), owner)
        self.last_report = None
        self._backward_scale = None
        self._plan(0)

    # ---- the step --------------------------------------------------------------------------
    def set_backward_scale(self, scale):
        """Tell THOR the seed of this step's backprop (the loss scale), so that it divides it out
        of G. The train cells call it before each backprop; without a call THOR takes its own
        ``loss_scale`` (MindSpore's convention: the fixed scale seeds backprop). The sampled
        pass of ``fisher="mc"`` is seeded with it too."""
        self._backward_scale = float(scale.item() if hasattr(scale, "item") else scale)
        if self.sampler is not None:
            self.sampler.scale = self._backward_scale

    def bind_loss_cell(self, network):
        """Called by the train cells with the network they differentiate: with ``fisher="mc"``
        and no ``fisher_loss``, hook that network's ``loss_fn`` (a ``WithLossCell``'s).

        Raises:
            TypeError: the network's loss is not one THOR can sample.
        """
        if self.sampler is None or self.sampler.explicit:
            return
        loss = getattr(network, "loss_fn", None)
        if loss is not None:
            self.sampler.use_loss(loss, "THOR")

    def apply_gradients(self, grads, scale=None):
        """One THOR step from ``grads`` (see ``Optimizer.apply_gradients``). Returns True."""
        arrays = self._check_gradients(grads)
        g_seed = self._sampled_seed()
        inv_scale = 1.0 if scale is None else _inverse_scale(scale, "THOR")
        seed = self._backward_scale
        self._backward_scale = None
        if seed is None:
            seed = self.loss_scale / inv_scale
        step = self.global_step
        report = ThorReport(step)
        self.last_report = report
        if self.sampler is not None:
            report.seconds["sampling"], self.sampler.seconds = self.sampler.seconds, 0.0
        bad = [p.name for p, g in zip(self.parameters, arrays)
               if g is not None and not bool(backend.get_array_module(g).isfinite(g).all())]
        if bad:
            report.applied = False
            report.reason = f"non-finite gradients in {bad[:4]}"
            return True
        lam = self.damping(step)
        lrs = [lr(step) for lr in self._lr_sources]
        report.damping, report.learning_rate = lam, lrs[0]
        self._refresh(step, seed if g_seed is None else g_seed, lam, report)
        start = time.perf_counter()
        prepared = self._prepare_all(arrays, inv_scale, lam, lrs, report)
        middle = time.perf_counter()
        for i, grad in enumerate(prepared):
            if grad is not None:
                self._apply_one(i, grad, lrs[self._lr_index[i]])
        self.global_step += 1
        self._plan(self.global_step)
        report.seconds["precondition"] = middle - start
        report.seconds["update"] = time.perf_counter() - middle
        return True

    def _prepare_gradient(self, i, grad, weight):
        return grad  # THOR prepares every gradient before the updates (the KL clip needs all)

    def _fused_rule(self):
        return None

    def _sampled_seed(self):
        """With ``fisher="mc"``: the backward scale of this step's sampled pass (G's to divide
        out), consumed; RuntimeError when layers recorded factors without one."""
        if self.sampler is None:
            return None
        ran, self.sampler.ran = self.sampler.ran, None
        if ran is None and any(b.layer.thor_pending is not None and b.layer.thor_record
                               for b in self.blocks):
            where = "no loss to sample is known: pass fisher_loss=, or train through " \
                    "TrainOneStepCell(WithLossCell(net, loss), opt) or Model(net, loss, opt)" \
                if self.sampler.loss is None else \
                f"the hooked loss {type(self.sampler.loss).__name__} was not called with " \
                f"gradients enabled in this step"
            raise RuntimeError(f"THOR(fisher='mc'): the layers recorded factors at step "
                               f"{self.global_step} but no sampled pass ran: {where}")
        return ran

    def _refresh(self, step, seed, lam, report):
        """Consume the layers' records: new factors, inverses and trace-rule decisions (G's
        records divided by ``seed``, the backward scale of the pass they come from)."""
        t_factors = 0.0
        sqrt_lam = math.sqrt(lam)
        records, to_invert, trace_refs = [], [], {}
        for block in self.blocks:
            start = time.perf_counter()
            pending, block.layer.thor_pending = block.layer.thor_pending, None
            mode = block.layer.thor_record
            entry = LayerReport(block.name, "frozen" if block.frozen else "reuse",
                                damping_a=block.damping_used[0], damping_g=block.damping_used[1])
            report.layers[block.name] = entry
            traces = block.traces_from(pending, seed)
            factors = block.factors_from(pending, seed) if mode == "factors" else None
            records.append((block, factors, traces, entry, start))
        reduced = self.reduce_factors([(r[1], r[2]) for r in records])
        for (block, _, _, entry, start), (factors, traces) in zip(records, reduced):
            if traces is not None:
                entry.trace_a, entry.trace_g = traces
            recorded = False
            if factors is not None:
                xp = backend.get_array_module(factors[1])
                if bool(xp.isfinite(factors[0]).all()) and bool(xp.isfinite(factors[1]).all()):
                    block.set_factors(factors[0], factors[1], self.factor_decay)
                    recorded, entry.action = True, "record"
                else:
                    entry.action = "kept"
            entry.factor_seconds = time.perf_counter() - start
            t_factors += entry.factor_seconds
            delta = None
            if recorded and self.rule.rule == "trace" and block.trace_ref:
                now = block.damped_trace(block.factor_traces(), block.damping_used)
                delta = entry.delta = abs(now - block.trace_ref) / block.trace_ref
            decision = "reuse" if entry.action == "kept" else \
                self.rule.decide(block, step, recorded, delta)
            if decision == "refresh":
                current = block.factor_traces()
                damping = block.dampings(current, sqrt_lam, self.relative_damping,
                                         self.damping_floor)
                to_invert.append((block, damping, block.damped_stacks(damping)))
                trace_refs[block.name] = block.damped_trace(current, damping)
                entry.action, (entry.damping_a, entry.damping_g) = "refresh", damping
            elif decision == "frozen":
                entry.action = "frozen"
        start = time.perf_counter()
        results = invert_together(to_invert) if to_invert else {}
        for block, damping, _ in to_invert:
            inverses, ladder, seconds = results[block]
            block.store_inverses(inverses, damping)
            block.trace_ref = trace_refs[block.name]
            entry = report.layers[block.name]
            entry.ladder, entry.inverse_seconds = ladder, seconds
        t_inverses = time.perf_counter() - start
        report.refresh = any(r.action == "refresh" for r in report.layers.values())
        report.seconds["factors"], report.seconds["inverses"] = t_factors, t_inverses

    def reduce_factors(self, records):
        """The data-parallel reduction of this step's records: one ``(factors, traces)`` per THOR
        layer (``(A, G)`` or None, ``(tr A, tr G)`` or None), returned in the same form.

        In a single process it is the identity. In data-parallel mode
        (``communication.is_data_parallel()``) each ``split_indices`` group of layers is
        averaged across the ranks in one all-reduce (the factors and the traces together), so
        every rank inverts the same factors and the trace rule decides the same on every rank.
        Averaging the factors, not the inverses (MindSpore averages inverses), gives the
        factors of the whole global batch.
        """
        if not communication.is_data_parallel():
            return records
        out, start = list(records), 0
        for stop in self.split_indices:
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
                    traces = tuple(float(v) for v in flat[offset:offset + 2])
                    offset += 2
                out[k] = (factors, traces)
        return out

    def _prepare_all(self, arrays, inv_scale, lam, lrs, report):
        """Every parameter's gradient as the momentum rule sees it (see the module docstring)."""
        sqrt_lam = math.sqrt(lam)
        prepared, raw = [None] * len(arrays), {}
        for i, grad in enumerate(arrays):
            if grad is None:
                continue
            dtype = self.parameters[i].data.dtype
            dtype = numpy.dtype(numpy.float32) if dtype == numpy.float16 else dtype
            g = self._unscale(_divide(grad, inv_scale), dtype)
            role = self._roles[i]
            if isinstance(role, CurvatureBlock) and role.G_inv is not None:
                raw[i] = g
                g = role.precondition(g)
            elif role == "diagonal":
                g = g / (g * g / self.batch_size + sqrt_lam)
            prepared[i] = g
        if self.kl_clip is not None and raw:
            total = sum(lrs[self._lr_index[i]] ** 2 * float((prepared[i] * g).sum())
                        for i, g in raw.items())
            nu = min(1.0, math.sqrt(self.kl_clip / abs(total))) if total else 1.0
            report.kl_scale = nu
            for i in raw:
                prepared[i] = prepared[i] * nu
        for i, g in enumerate(prepared):
            if g is None:
                continue
            data = self.parameters[i].data
            weight = self._master(i, data) if data.dtype == numpy.float16 else data
            g = self._add_weight_decay(i, g, weight)
            if self.enable_clip_grad:
                norm = math.sqrt(float((g * g).sum()))
                if norm > 1.0:
                    g = g * (1.0 / norm)
            prepared[i] = g
        return prepared

    def _plan(self, step):
        """Tell each THOR layer what to record in ``step``."""
        for block in self.blocks:
            block.layer.thor_record = self.rule.record_mode(block, step)
        if self.sampler is not None:
            self.sampler.armed = any(b.layer.thor_record for b in self.blocks)
            self.sampler.step, self.sampler.scale = step, self.loss_scale

    # ---- MindSpore's accessors and the state ----------------------------------------------
    def get_frequency(self):
        """The refresh period (MindSpore's ``get_frequency``)."""
        return self.frequency

    def refresh_counts(self):
        """``{layer name: number of inverse refreshes so far}``."""
        return {b.name: b.refreshes for b in self.blocks}

    def state_dict(self):
        """The base optimizer state plus ``"thor"``: per layer factors, inverses and rule state."""
        result = super().state_dict()
        result["thor"] = thor_state(self.blocks)
        if self.sampler is not None:
            result["thor_fisher_seed"] = self.sampler.seed
        return result

    def load_state_dict(self, state_dict):
        """Restore ``state_dict()``; the THOR part is checked before anything changes.

        Raises:
            ValueError: a missing or malformed ``"thor"`` entry (naming the layer and field),
                and the base class's errors.
        """
        if not isinstance(state_dict, dict) or "thor" not in state_dict:
            raise ValueError("THOR.load_state_dict: the state has no 'thor' entry (save it from "
                             "a THOR optimizer)")
        rest = {k: v for k, v in state_dict.items() if k not in ("thor", "thor_fisher_seed")}
        seed = state_dict.get("thor_fisher_seed")
        if (seed is None) != (self.sampler is None):
            raise ValueError(f"THOR.load_state_dict: the state is of fisher="
                             f"{'empirical' if seed is None else 'mc'}, this optimizer uses "
                             f"fisher={self.fisher!r}")
        seed = None if seed is None else int(numpy.asarray(seed))
        apply = load_thor_state(self.blocks, state_dict["thor"])
        super().load_state_dict(rest)
        apply()
        if seed is not None:
            self.sampler.seed = seed
        self._plan(self.global_step)


def thor(net, learning_rate, damping, momentum, weight_decay=0.0, loss_scale=1.0, batch_size=32,
         use_nesterov=False, decay_filter=lambda x: x.name not in [], split_indices=None,
         enable_clip_grad=False, frequency=100, **options):
    """MindSpore's ``nn.thor``: convert ``net`` to THOR layers in place (``ConvertNetUtils``)
    and return a ``THOR`` optimizer over it. ``options`` are THOR's extra keyword arguments.

    Raises:
        TypeError / ValueError: as ``THOR`` (checked after the conversion, which only swaps
            layers for equivalent ones).
    """
    if not _CONVERTERS:
        raise RuntimeError("thor: no network converter is registered (import minigrad.nn)")
    check_seed_arguments(net, learning_rate, momentum, weight_decay, loss_scale, use_nesterov,
                         decay_filter, frequency)  # before the network is changed
    _CONVERTERS[-1](net)
    return THOR(net, learning_rate, damping, momentum, weight_decay, loss_scale, batch_size,
                use_nesterov, decay_filter, split_indices, enable_clip_grad, frequency, **options)


_CONVERTERS = []  # filled by minigrad.nn (the layer above), which owns the THOR layers


def register_converter(convert):
    """Register ``convert(net)`` (``nn.ConvertNetUtils().convert_to_thor_net``) for ``thor``."""
    _CONVERTERS.append(convert)


# ---- helpers ----------------------------------------------------------------------------------
def _find_blocks(net, params, split_dim, owner):
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
