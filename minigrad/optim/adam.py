"""``Adam`` (bias-corrected, MindSpore ApplyAdam) and ``AdamWeightDecay`` (decoupled decay, no
correction)."""
import math

from minigrad import backend
from minigrad.optim import slots
from minigrad._checks import check_bool, check_float
from minigrad.optim.optimizer import Optimizer


_OPEN_UNIT = {"low": 0.0, "high": 1.0, "low_open": True, "high_open": True}  # (0, 1)


def _check_betas_eps(beta1, beta2, eps, owner):
    return (check_float("beta1", beta1, **_OPEN_UNIT, owner=owner),
            check_float("beta2", beta2, **_OPEN_UNIT, owner=owner),
            check_float("eps", eps, low=0.0, low_open=True, owner=owner))


def _moments(state, grad, beta1, beta2):
    """m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g  (in place)."""
    m, v = state["moment1"], state["moment2"]
    m *= beta1
    m += (1.0 - beta1) * grad
    v *= beta2
    v += (1.0 - beta2) * (grad * grad)
    return m, v


def _denominator(v, eps):
    denom = backend.get_array_module(v).sqrt(v)
    denom += eps
    return denom


class Adam(Optimizer):
    r"""Adam with MindSpore's bias correction folded into the step size (``ApplyAdam``)::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)          (t = global_step + 1)
        w = w - lr_t * m / (sqrt(v) + eps)                                   (use_nesterov=False)
        w = w - lr_t * (beta1 * m + (1 - beta1) * g) / (sqrt(v) + eps)       (use_nesterov=True)

    ``g`` is the gradient after loss-scale division and L2 weight decay (``g + wd * w``, names
    without 'beta'/'gamma' unless grouped). State ``"moment1"``, ``"moment2"`` (fp32, from zero).

    Args:
        params: Parameters or group dicts (see ``Optimizer``).
        learning_rate: see ``Optimizer``. Default 1e-3.
        beta1 (float): in (0, 1). Default 0.9.
        beta2 (float): in (0, 1). Default 0.999.
        eps (float): > 0. Default 1e-8.
        use_locking (bool): accepted for MindSpore compatibility (updates are never concurrent).
        use_nesterov (bool): Default False.
        weight_decay (float): >= 0. Default 0.0.
        loss_scale (float): > 0, divides the gradients. Default 1.0.

    Raises:
        TypeError: ``beta1``, ``beta2``, ``eps`` not floats; ``use_locking``/``use_nesterov`` not
            bools.
        ValueError: ``beta1``/``beta2`` outside (0, 1), ``eps`` <= 0 (and the base checks).
    """
    state_names = ("moment1", "moment2")

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 use_locking=False,
                 use_nesterov=False, weight_decay=0.0, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.beta1, self.beta2, self.eps = _check_betas_eps(beta1, beta2, eps, "Adam")
        self.use_locking = check_bool("use_locking", use_locking, owner="Adam")
        self.use_nesterov = check_bool("use_nesterov", use_nesterov, owner="Adam")

    def _fused_rule(self):
        return slots.rule_for(self, Adam, slots.Rule(
            slots.ADAM, self.state_names, beta1="beta1", beta2="beta2", eps="eps",
            nesterov="use_nesterov", step_size=self._step_size))

    def _step_size(self, lr):
        """lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t), t = global_step + 1 (in float64)."""
        t = self.global_step + 1
        return lr * math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)

    def update(self, state, weight, grad, lr):
        b1 = self.beta1
        m, v = _moments(state, grad, b1, self.beta2)
        numerator = b1 * m + (1.0 - b1) * grad if self.use_nesterov else m
        weight -= self._step_size(lr) * numerator / _denominator(v, self.eps)


class AdamWeightDecay(Optimizer):
    r"""Adam with decoupled weight decay and no bias correction (MindSpore ``nn.AdamWeightDecay``)::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        w = w - lr * (m / (sqrt(v) + eps) + wd * w)

    ``wd`` applies to the parameters that pass the decay filter (names without 'beta'/'gamma'
    unless grouped). The ``wd * w`` term uses ``w`` before the step (applied as
    ``w <- w * (1 - lr * wd)`` first; the rest of the update does not read ``w``).

    Args:
        params: Parameters or group dicts (see ``Optimizer``).
        learning_rate: see ``Optimizer``. Default 1e-3.
        beta1 (float): in (0, 1). Default 0.9.
        beta2 (float): in (0, 1). Default 0.999.
        eps (float): > 0. Default 1e-6.
        weight_decay (float): >= 0. Default 0.0.

    Raises:
        TypeError: ``beta1``, ``beta2``, ``eps`` not floats (and the base checks).
        ValueError: ``beta1``/``beta2`` outside (0, 1), ``eps`` <= 0 (and the base checks).
    """
    state_names = ("moment1", "moment2")
    decoupled_weight_decay = True

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6,
                 weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        self.beta1, self.beta2, self.eps = _check_betas_eps(beta1, beta2, eps, "AdamWeightDecay")

    def _fused_rule(self):
        return slots.rule_for(self, AdamWeightDecay, slots.Rule(
            slots.ADAM_WEIGHT_DECAY, self.state_names, beta1="beta1", beta2="beta2", eps="eps"))

    def update(self, state, weight, grad, lr):
        m, v = _moments(state, grad, self.beta1, self.beta2)
        weight -= lr * (m / _denominator(v, self.eps))
