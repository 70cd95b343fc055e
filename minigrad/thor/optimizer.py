"""``THOR``: the second-order optimizer (Trace-based Hardware-driven layer-ORiented natural
gradient descent).

One step, for gradients ``g`` of a network converted to THOR layers (``nn.DenseThor``,
``nn.Conv2dThor``, ``nn.EmbeddingThor``; ``nn.thor`` converts and builds in one call)::

    g = g / loss_scale                                  (and / the cell's loss scale, if passed)
    refresh (on its steps): A, G from the layers' records; damped block inverses (thor.refresh,
                            thor.blocks; fisher="mc": G from a loss on sampled labels, see
                            thor.fisher)
    g̃ = G⁻¹ · g · A⁻¹        THOR layers' weights, with the stored inverses; LayerNorm's
                            diagonal rule; KL clip, weight decay, clip (thor.precondition)
    v = μ v + g̃;  w = w - lr · v     (Nesterov: w = w - lr · (g̃ + μ v))

The curvature is that of the loss actually trained: G is divided by the loss's batch-mean
factor for ``loss_reduction="mean"`` and not for "sum" or "none" (see ``thor.blocks``).

Second-order state (factors, inverses) is float32 whatever the network's dtype. A step whose
gradients hold inf or NaN is skipped as a whole (an fp16 overflow under a fixed loss scale with
``drop_overflow_update=False``): parameters, momentum and THOR state stay bit-identical. A layer
whose recorded factors are not finite keeps its factors and inverses. ``last_report`` (a
``ThorReport``) says after each step what happened; ``state_dict`` holds the THOR state, so a
checkpoint resumes bit-identically.
"""
import time

import numpy

from minigrad import backend
from minigrad._checks import (check_bool, check_float, check_in, check_positive_int,
                              check_relation, check_type)
from minigrad.optim.momentum import Momentum
from minigrad.optim.optimizer import Optimizer, _inverse_scale
from minigrad.thor.arguments import (check_fisher_arguments, check_seed_arguments,
                                      check_split_indices)
from minigrad.thor.blocks import find_blocks
from minigrad.thor.fisher import FISHERS, SampledFisher
from minigrad.thor.precondition import prepare_gradients
from minigrad.thor.refresh import reduce_factors, refresh
from minigrad.thor.report import ThorReport
from minigrad.thor.schedule import RefreshRule, StepValue
from minigrad.thor.state import load_thor_state, thor_state

REDUCTIONS = ("mean", "sum", "none")


class THOR(Optimizer):
    """THOR over the THOR layers of ``net`` (see the module docstring for the step).

    Args (MindSpore's ``nn.thor``, then minigrad's options):
        net: the network (already converted: ``nn.thor`` converts it for you).
        learning_rate: a 0-d Tensor, a 1-D Tensor with one value per step (the last value is
            used past its end), or a schedule (``LearningRateSchedule`` or ``fn(step)``).
        damping: λ, as ``learning_rate`` (each factor gets ``√λ``; see ``thor.blocks``).
        momentum (float): >= 0.
        weight_decay (int, float): >= 0. Default 0.0.
        loss_scale (float): > 0; an int is converted. Default 1.0.
        batch_size (int): the N of LayerNorm's rule ``g² / N`` (``g² / N²`` for a sum loss).
            The factors use each batch's actual size (MindSpore multiplies G by
            ``batch_size²``, wrong on a short last batch).
        use_nesterov (bool): Default False.
        decay_filter: ``fn(param) -> bool``, default ``lambda x: x.name not in []`` (all).
        split_indices: None, or increasing layer indices closing each all-reduce group of the
            factors in data-parallel training (``reduce_factors``). Default: one group.
        enable_clip_grad (bool): clip each preconditioned gradient to norm 1.0. Default False.
        frequency (int): >= 2, the refresh period of factors and inverses. Default 100.
        split_dim (int): the size of the diagonal blocks of each factor. Default 128.
        refresh: "frequency" (default) or "trace" (the paper's rule; see ``thor.schedule``).
        omega1, omega2: the trace rule's thresholds. Default 0.01 and 0 (the paper's ResNet-50).
        factor_frequency, inverse_frequency: separate periods (default ``frequency``).
        factor_decay: None (default: each refresh uses its own batch, as MindSpore) or a float
            in [0, 1): the factors become the running average ``decay · F + (1 - decay) · F_new``.
        relative_damping (bool): damp each factor by ``√λ · tr(F) / dim F``. Default False.
        damping_floor (float): the least damping of a factor. Default 0.0.
        kl_clip: None (default) or a float > 0: the KL / Fisher-norm clip of the update.
        fisher: "empirical" (default, MindSpore's: G from the training loss's gradients) or
            "mc" (G from the gradients of the loss on labels sampled from the model's output
            distribution; the update still uses the true-label gradient; see ``thor.fisher``).
        fisher_loss: with "mc", the loss Cell to sample (``nn.SoftmaxCrossEntropyWithLogits``
            or ``nn.MSELoss``). Default None: the ``loss_fn`` of the ``WithLossCell`` that the
            train cell (``TrainOneStepCell``, ``Model``) wraps; an explicit one wins.
        fisher_seed: with "mc", the sampling seed (int >= 0). Default None: drawn from
            ``minigrad.random`` (so ``minigrad.set_seed`` repeats the run).
        loss_reduction: how the trained loss reduces its per-sample losses: "mean", "sum" or
            "none" ("none" trains their sum: the train cells seed backprop with ones). Default
            None: the ``reduction`` of ``fisher_loss`` if given, else of the ``loss_fn`` of the
            ``WithLossCell`` the train cell wraps (read when it binds THOR), else "mean"
            (MindSpore's assumption). Pass it in a custom ``value_and_grad`` loop over a sum.

    Raises:
        TypeError: ``learning_rate`` not a Tensor or schedule; ``loss_scale``, ``momentum``
            not a float (an int ``loss_scale`` is converted); ``weight_decay`` neither float
            nor int; ``use_nesterov``/``enable_clip_grad``/``relative_damping`` not a bool;
            ``frequency`` (or ``batch_size``, ``split_dim``) not an int; ``net`` not a Cell;
            ``fisher_loss`` not a supported loss; ``fisher_seed`` not an int >= 0;
            ``loss_reduction`` not a str.
        ValueError: ``loss_scale`` <= 0; ``weight_decay`` or ``momentum`` < 0; ``frequency``
            < 2; ``net`` without THOR layers or trainable parameters; a bad option value
            (``fisher`` not "empirical" or "mc"; ``fisher_loss``/``fisher_seed`` without "mc";
            ``loss_reduction`` not "mean", "sum" or "none").
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
                 fisher_seed=None, loss_reduction=None):
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
        fisher_seed = check_fisher_arguments(fisher, fisher_loss, fisher_seed, owner)
        self.blocks, self._roles = find_blocks(net, self.parameters, self.split_dim, owner)
        self.loss_reduction, self._reduction_explicit = "mean", loss_reduction is not None
        if loss_reduction is not None:
            self.loss_reduction = check_in("loss_reduction", loss_reduction, REDUCTIONS,
                                           owner=owner)
        self.sampler = None
        if fisher == "mc":
            self.sampler = SampledFisher(self.blocks, fisher_seed, owner)
            if fisher_loss is not None:
                reduction = self._reduction_of(fisher_loss)  # checked before the loss is hooked
                self.sampler.use_loss(fisher_loss, owner)
                self.sampler.explicit = True
                self.loss_reduction = reduction
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

    @property
    def batch_mean(self):
        """True when the trained loss is a batch mean (``loss_reduction`` "mean")."""
        return self.loss_reduction == "mean"

    def bind_loss_cell(self, network):
        """Called by the train cells with the network they differentiate: read the reduction of
        its ``loss_fn`` (a ``WithLossCell``'s) unless ``loss_reduction`` or ``fisher_loss`` was
        given, and with ``fisher="mc"`` and no ``fisher_loss`` hook that loss.

        Raises:
            TypeError: the network's loss is not one THOR can sample (``fisher="mc"``).
            ValueError: its ``reduction`` is a str other than "mean", "sum" or "none".
        """
        loss = getattr(network, "loss_fn", None)
        if loss is None or (self.sampler is not None and self.sampler.explicit):
            return
        reduction = self._reduction_of(loss)  # checked before the loss is hooked: a refused
        if self.sampler is not None:          # network leaves THOR and the loss as they were
            self.sampler.use_loss(loss, "THOR")
        self.loss_reduction = reduction

    def _reduction_of(self, loss):
        """The reduction THOR uses with ``loss``: its checked ``reduction``, or the one THOR
        has (given explicitly, or "mean" for a loss without a ``reduction`` str)."""
        reduction = getattr(loss, "reduction", None)
        if self._reduction_explicit or not isinstance(reduction, str):
            return self.loss_reduction
        return check_in(f"{type(loss).__name__}.reduction", reduction, REDUCTIONS, owner="THOR")

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
        report = ThorReport(step + 1)
        self.last_report = report
        if self.sampler is not None:
            report.seconds["sampling"], self.sampler.seconds = self.sampler.seconds, 0.0
        bad = _nonfinite_names(self.parameters, arrays)
        if bad:
            report.applied = False
            report.reason = f"non-finite gradients in {bad[:4]}"
            return True
        lam = self.damping(step)
        lrs = [lr(step) for lr in self._lr_sources]
        report.damping, report.learning_rate = lam, lrs[0]
        refresh(self, step, (seed, seed if self.sampler is None else g_seed), lam, report)
        start = time.perf_counter()
        prepared = prepare_gradients(self, arrays, inv_scale, lam, lrs, report)
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
        if ran is None and any(b.layer.thor_pending is not None and
                               b.layer.thor_record == "factors" for b in self.blocks):
            where = "no loss to sample is known: pass fisher_loss=, or train through " \
                    "TrainOneStepCell(WithLossCell(net, loss), opt) or Model(net, loss, opt)" \
                if self.sampler.loss is None else \
                f"the hooked loss {type(self.sampler.loss).__name__} was not called with " \
                f"gradients enabled in this step"
            raise RuntimeError(f"THOR(fisher='mc'): the layers recorded factors at step "
                               f"{self.global_step} but no sampled pass ran: {where}")
        return ran

    def reduce_factors(self, records):
        """The data-parallel reduction of one step's records (``refresh.reduce_factors``
        over this optimizer's ``split_indices``): the identity in a single process."""
        return reduce_factors(records, self.split_indices)

    def _plan(self, step):
        """Tell each THOR layer what to record in ``step``."""
        sampled = self.sampler is not None
        for block in self.blocks:
            mode = self.rule.record_mode(block, step, sampled)
            if block.layer.thor_record != mode:  # (a Cell attribute write costs)
                block.layer.thor_record = mode
        if sampled:
            self.sampler.armed = any(b.layer.thor_record == "factors" for b in self.blocks)
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
            TypeError: a ``state_dict`` that is not a dict.
            ValueError: a missing or malformed ``"thor"`` entry (naming the layer and field),
                and the base class's errors.
        """
        check_type("state_dict", state_dict, dict, owner="THOR.load_state_dict")
        check_relation("state_dict", state_dict, "thor" in state_dict, "a THOR optimizer's "
                       "state_dict() (it has no 'thor' entry)", owner="THOR.load_state_dict")
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



def _nonfinite_names(parameters, arrays):
    """Names of the parameters whose gradient holds inf or NaN, with one read of the device."""
    present = [(p.name, g) for p, g in zip(parameters, arrays) if g is not None]
    if not present:
        return []
    xp = backend.get_array_module(present[0][1])
    finite = backend.as_numpy(xp.stack([xp.isfinite(g).all() for _, g in present])).tolist()
    return [name for (name, _), ok in zip(present, finite) if not ok]
