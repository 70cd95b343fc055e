"""THOR's Monte-Carlo Fisher (``fisher="mc"``): G from a loss on labels sampled from the model.

With the empirical Fisher (``fisher="empirical"``, MindSpore's) G is recorded from the backward
pass of the training loss. With ``fisher="mc"`` (kfac-jax's and kfac-pytorch's default) THOR
hooks the loss Cell; on the steps where the layers record factors, right after the loss's
forward pass it draws labels ``ŷ`` from the model's own output distribution, computes the same
loss on them and backpropagates it once more, seeded with the same loss scale, through the
kept graph; the THOR layers take G from that pass only. The training loss's backward pass then
runs as usual and gives the parameter gradients. On the other steps the hook does nothing.

The model distribution is the one whose negative log-likelihood is the loss, so that the
expectation of G over the samples is the true Fisher (equal to the Gauss-Newton matrix here):

- ``nn.SoftmaxCrossEntropyWithLogits``: ``ŷ ~ Categorical(softmax(logits))`` per row (class ids
  when ``sparse``, one-hot rows otherwise).
- ``nn.MSELoss``: ``ŷ ~ N(output, σ²)`` per element with ``σ² = 1 / (2c)``, ``c`` the weight of
  one ``(x - y)²`` in the per-sample loss: ``σ² = k / 2`` for ``reduction="mean"`` over ``k``
  elements per sample, ``½`` for "sum" and "none" (kfac-jax's squared-error loss: variance ½
  for ``‖x - y‖²``; ``N(output, 1)`` is the same rule for ``½‖x - y‖²``).

Other losses are refused (a ``TypeError`` naming the loss). The draws of step ``k`` come from
``numpy.random.default_rng([seed, k])`` (and the rank in data-parallel training), with ``seed``
from ``minigrad.random`` at construction unless given: a run repeats after
``minigrad.set_seed``, and a checkpoint (which holds the seed) resumes bit-identically. The
noise is drawn on the host and moved to the logits' device, so CPU and GPU draw the same labels.
"""
import time

import numpy

from minigrad import backend, communication
from minigrad import random as mg_random
from minigrad._checks import check_non_negative_int, check_relation
from minigrad._config import enable_grad, is_grad_enabled
from minigrad.autograd.engine import run_backward
from minigrad.tensor import Tensor, make, seed_like

FISHERS = ("empirical", "mc")
_SAMPLERS = {}  # loss class -> sampler(loss, output array, labels Tensor, rng) -> label array


def register_sampler(loss_class, sampler):
    """Register ``sampler(loss, output, labels, rng) -> labels`` for ``loss_class`` (exact type);
    ``minigrad.nn`` (the layer above, which owns the losses) registers its losses."""
    _SAMPLERS[loss_class] = sampler


def supported_losses():
    return sorted(cls.__name__ for cls in _SAMPLERS)


def check_loss(loss, owner="THOR", name="loss"):
    """``loss`` if THOR can sample its model distribution, else TypeError naming it (as the
    argument ``name``)."""
    return check_relation(name, loss, type(loss) in _SAMPLERS,
                          f"a loss whose model distribution fisher='mc' can sample labels from "
                          f"(supported losses: {supported_losses()}, exact types)",
                          error=TypeError,
                          owner=owner)


def sample_categorical(logits, rng, one_hot, dtype):
    """One class per row of ``logits`` (N, C) from ``softmax(logits)``: ids of ``dtype``, or one-hot
    rows of ``dtype`` when ``one_hot``. Inverse-CDF sampling with host uniforms."""
    xp = backend.get_array_module(logits)
    z = logits.astype(numpy.float64) - logits.max(axis=1, keepdims=True)
    p = xp.exp(z)
    cdf = xp.cumsum(p, axis=1) / p.sum(axis=1, keepdims=True)
    u = backend.to_device(rng.random((logits.shape[0], 1)), backend.device_of(logits))
    ids = xp.minimum((cdf < u).sum(axis=1), logits.shape[1] - 1)
    if not one_hot:
        return ids.astype(dtype)
    rows = xp.zeros(logits.shape, dtype)
    rows[xp.arange(logits.shape[0]), ids] = 1
    return rows


def sample_gaussian(output, rng, variance, dtype):
    """``output + √variance · ε`` with host standard normals ``ε``, as ``dtype``."""
    eps = backend.to_device(rng.standard_normal(output.shape), backend.device_of(output))
    return (output.astype(numpy.float64) + numpy.sqrt(variance) * eps).astype(dtype)


class SampledFisher:
    """The sampled pass of one THOR optimizer (see the module docstring).

    Attributes:
        seed: the sampling seed (an int; saved in checkpoints).
        loss: the hooked loss Cell (None until known); explicit: it was given (``fisher_loss``).
        armed: True on steps where the layers record factors (set by THOR's plan).
        ran: the backward scale of this step's sampled pass, or None when none ran.
        seconds: the wall time of that pass (sampling, loss, backward).
    """

    def __init__(self, blocks, seed, owner="THOR"):
        self.blocks = blocks
        if seed is None:
            seed = int(mg_random.get_rng(numpy).integers(2 ** 32))
        else:
            seed = check_non_negative_int("fisher_seed", seed, owner=owner)
        self.seed = int(seed)
        self.loss, self._handle, self.explicit = None, None, False
        self.armed, self.ran, self.seconds = False, None, 0.0
        self.step, self.scale = 0, 1.0
        for block in blocks:
            block.layer.thor_fisher = "mc"

    def use_loss(self, loss, owner="THOR"):
        """Hook ``loss`` (a supported loss Cell) for the sampled pass, replacing an earlier one."""
        check_loss(loss, owner)
        if loss is self.loss:
            return
        if self._handle is not None:
            self._handle.remove()
        self.loss, self._handle = loss, loss.register_forward_hook(self._after_loss)

    def rng(self, step):
        key = [self.seed, step]
        if communication.is_data_parallel():
            key.append(communication.get_rank())
        return numpy.random.default_rng(key)

    def _after_loss(self, cell, inputs, output):
        """The loss Cell's forward hook: on an armed step, the sampled pass (a second call of the
        loss in one step runs it again: the layers keep their last call's records)."""
        if not self.armed or len(inputs) < 2 or not is_grad_enabled() or \
                all(b.layer.thor_pending is None for b in self.blocks):
            return  # not a recording step, or a loss call of another network
        logits, labels = inputs[0], inputs[1]
        if not isinstance(logits, Tensor) or not logits.requires_grad:
            return
        start = time.perf_counter()
        labels = labels if isinstance(labels, Tensor) else Tensor(labels)
        sampled = _SAMPLERS[type(cell)](cell, logits.data, labels, self.rng(self.step))
        with enable_grad():
            loss = cell.construct(logits, make(sampled, None, 0))
        for block in self.blocks:
            block.layer.thor_sampling = True
        try:
            run_backward([loss], [seed_like(loss, numpy.asarray(self.scale, numpy.float32))],
                                retain_graph=True, targets=[])
        finally:
            for block in self.blocks:
                block.layer.thor_sampling = False
        self.ran, self.seconds = self.scale, time.perf_counter() - start
        return
