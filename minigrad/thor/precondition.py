"""THOR's per-parameter gradient rules between the refresh and the momentum update.

For each parameter with a gradient (unscaled, in float32 for fp16 parameters)::

    g̃ = G⁻¹ · g · A⁻¹        THOR layers' weights, with the stored inverses (thor.blocks)
    g̃ = g / (g² / (w·N²) + √λ)  LayerNorm's gamma and beta: MindSpore's diagonal Fisher
                                  g² / N for a batch-mean loss (w = 1/N), g² / N² for a sum
    g̃ = g                    every other parameter (biases, BatchNorm, ...)
    g̃ = ν · g̃                optional KL clip (kl_clip): ν = min(1, √(c / |Σ lr² g̃·g|))
    g̃ = g̃ + wd · w           weight decay where decay_filter(param) holds
    g̃ = g̃ · 1 / max(‖g̃‖, 1)  optional per-tensor clip (enable_clip_grad), as MindSpore
"""
import math

import numpy

from minigrad.optim.optimizer import _divide
from minigrad.thor.blocks import CurvatureBlock


def prepare_gradients(opt, arrays, inv_scale, lam, lrs, report):
    """Every parameter's gradient as the momentum rule sees it (see the module docstring).

    Args:
        opt: the THOR optimizer.
        arrays: the raw gradients (None for a parameter without one).
        inv_scale: the inverse of the cell's loss scale.
        lam: the step's λ.
        lrs: the step's learning rates (one per source).
        report: the step's ``ThorReport`` (``kl_scale``).
    """
    sqrt_lam = math.sqrt(lam)
    n = opt.batch_size
    diagonal = n if opt.batch_mean else n * n
    prepared, raw = [None] * len(arrays), {}
    for i, grad in enumerate(arrays):
        if grad is None:
            continue
        dtype = opt.parameters[i].data.dtype
        dtype = numpy.dtype(numpy.float32) if dtype == numpy.float16 else dtype
        g = opt._unscale(_divide(grad, inv_scale), dtype)
        role = opt._roles[i]
        if isinstance(role, CurvatureBlock) and role.G_inv is not None:
            raw[i] = g
            g = role.precondition(g)
        elif role == "diagonal":
            g = g / (g * g / diagonal + sqrt_lam)
        prepared[i] = g
    if opt.kl_clip is not None and raw:
        total = sum(lrs[opt._lr_index[i]] ** 2 * float((prepared[i] * g).sum())
                    for i, g in raw.items())
        nu = min(1.0, math.sqrt(opt.kl_clip / abs(total))) if total else 1.0
        report.kl_scale = nu
        for i in raw:
            prepared[i] = prepared[i] * nu
    for i, g in enumerate(prepared):
        if g is None:
            continue
        data = opt.parameters[i].data
        weight = opt._master(i, data) if data.dtype == numpy.float16 else data
        g = opt._add_weight_decay(i, g, weight)
        if opt.enable_clip_grad:
            norm = math.sqrt(float((g * g).sum()))
            if norm > 1.0:
                g = g * (1.0 / norm)
        prepared[i] = g
    return prepared
