"""Optimizer test helpers: four named parameters (and ``params`` of any shapes), the NumPy path
on demand, and float64 re-implementations of each optimizer's documented update rule.

The rules follow MindSpore's documented formulas (``nn.SGD``, ``ops.ApplyMomentum``,
``ops.Adam``, ``nn.AdamWeightDecay``): each ``rule(state, w, g, lr, t)`` returns the new weight
for gradient ``g`` (already divided by the loss scale and, for L2 decay, with ``wd * w`` added)
at the optimizer's ``t``-th update (``t`` counts from 1), keeping its buffers in ``state``.
"""
import contextlib
import math

import numpy

import minigrad
from minigrad import _native

# Two names with 'beta'/'gamma', which the default weight-decay filter leaves out.
NAMES = ("fc.weight", "bn.gamma", "bn.beta", "fc.bias")
SHAPES = ((5,), (3,), (3,), (7,))
NO_BETA_GAMMA = tuple("beta" not in n and "gamma" not in n for n in NAMES)


def initial_weights():
    """The float32 starting values of the four parameters."""
    rng = numpy.random.default_rng(7)
    return [rng.standard_normal(s).astype(numpy.float32) for s in SHAPES]


def make_params(dtype=numpy.float32):
    """Fresh Parameters named ``NAMES`` holding ``initial_weights()`` in ``dtype``."""
    return [minigrad.Parameter(a.astype(dtype), name=n) for a, n in zip(initial_weights(), NAMES)]


def params(*shapes, dtype=numpy.float32, names=None):
    """Parameters of these shapes, standard-normal from seed 0, named ``p0, p1, ...``."""
    names = names or [f"p{i}" for i in range(len(shapes))]
    rng = numpy.random.default_rng(0)
    return [minigrad.Parameter(rng.standard_normal(s).astype(dtype), name=n)
            for s, n in zip(shapes, names)]


def ones_like(ps):
    """A gradient of ones for each parameter (host arrays)."""
    return tuple(numpy.ones(p.shape, p.dtype) for p in ps)


def numpy_path(on=True):
    """A context in which every optimizer step takes its NumPy path (``on`` False: a context
    that changes nothing). It is ``minigrad._native.numpy_fallback()``, the package's switch for
    comparing the native and NumPy paths in one process (``MINIGRAD_NATIVE=0`` switches a whole
    process): no host library, so ``Optimizer.last_step_fused`` stays False and
    ``takes_scaled_gradients`` is False (a loss-scaled cell unscales first)."""
    return _native.numpy_fallback() if on else contextlib.nullcontext()


def run_reference(init, steps, lr, rule, weight_decay=0.0, decay=None, loss_scale=1.0):
    """The float64 weights after ``steps`` (one list of gradients, None for no gradient, per
    step) from ``init``.

    ``lr(t, i)`` is parameter ``i``'s rate at step ``t`` (from 0); ``rule`` one rule for every
    parameter or a list of one per parameter; each gradient is divided by ``loss_scale`` and
    gets ``weight_decay * w`` added on the parameters ``decay`` selects (all when None).
    """
    ws = [numpy.asarray(a, numpy.float64).copy() for a in init]
    rules = rule if isinstance(rule, (list, tuple)) else [rule] * len(ws)
    states = [{} for _ in ws]
    for t, grads in enumerate(steps):
        for i, g in enumerate(grads):
            if g is None:
                continue
            g = g.astype(numpy.float64) / loss_scale
            if weight_decay and (decay is None or decay[i]):
                g = g + weight_decay * ws[i]
            ws[i] = rules[i](states[i], ws[i], g, lr(t, i), t + 1)
    return ws


def sgd(momentum=0.0, dampening=0.0, nesterov=False):
    """nn.SGD: the buffer starts as the first gradient, then ``m * v + (1 - dampening) * g``."""
    def rule(s, w, g, lr, t):
        if momentum > 0:
            s["v"] = g.copy() if "v" not in s else momentum * s["v"] + (1 - dampening) * g
            g = g + momentum * s["v"] if nesterov else s["v"]
        return w - lr * g
    return rule


def momentum(m, nesterov=False):
    """ops.ApplyMomentum: ``v = m * v + g``; ``w -= lr * v`` (Nesterov: ``lr * (g + m * v)``)."""
    def rule(s, w, g, lr, t):
        s["v"] = m * s.get("v", 0.0) + g
        return w - (lr * (g + m * s["v"]) if nesterov else lr * s["v"])
    return rule


def adam(b1=0.9, b2=0.999, eps=1e-8, nesterov=False):
    """ops.Adam: ``lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)``, eps outside the bias correction."""
    def rule(s, w, g, lr, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        lr_t = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        numerator = b1 * s["m"] + (1 - b1) * g if nesterov else s["m"]
        return w - lr_t * numerator / (numpy.sqrt(s["v"]) + eps)
    return rule


def adam_weight_decay(wd, b1=0.9, b2=0.999, eps=1e-6):
    """nn.AdamWeightDecay: decoupled decay ``lr * (m / (sqrt(v) + eps) + wd * w)``, no bias
    correction."""
    def rule(s, w, g, lr, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        return w - lr * (s["m"] / (numpy.sqrt(s["v"]) + eps) + wd * w)
    return rule
