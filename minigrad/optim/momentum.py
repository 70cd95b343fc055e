"""``Momentum``: heavy-ball / Nesterov momentum (MindSpore nn.Momentum, ops.ApplyMomentum)."""
from minigrad.optim import slots
from minigrad._checks import check_bool, check_non_negative
from minigrad.optim.optimizer import Optimizer


class Momentum(Optimizer):
    r"""Momentum SGD, as MindSpore's ``ApplyMomentum``::

        v = momentum * v + g
        w = w - lr * v                          (use_nesterov=False)
        w = w - lr * (g + momentum * v)         (use_nesterov=True)

    ``g`` is the gradient after loss-scale division and weight decay (``g + wd * w`` on the
    parameters that pass the decay filter: names without 'beta'/'gamma' unless grouped). ``v``
    (state ``"moments"``) starts at zero and is fp32.

    Args:
        params: Parameters or group dicts (see ``Optimizer``).
        learning_rate: see ``Optimizer``.
        momentum (float): >= 0.
        weight_decay (float): >= 0. Default 0.0.
        loss_scale (float): > 0, divides the gradients. Default 1.0.
        use_nesterov (bool): Default False.

    Raises:
        TypeError: ``momentum`` not a float, ``use_nesterov`` not a bool (and the base checks).
        ValueError: ``momentum`` < 0 (and the base checks).
    """
    state_names = ("moments",)

    def __init__(self, params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0,
                 use_nesterov=False):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.momentum = check_non_negative("momentum", momentum, owner=type(self).__name__)
        self.use_nesterov = check_bool("use_nesterov", use_nesterov, owner=type(self).__name__)

    def _fused_rule(self):
        return slots.rule_for(self, Momentum, slots.Rule(slots.MOMENTUM, ("moments",),
                                                           momentum="momentum",
                                                           nesterov="use_nesterov"))

    def update(self, state, weight, grad, lr):
        v = state["moments"]
        v *= self.momentum
        v += grad
        if self.use_nesterov:
            weight -= lr * grad
            weight -= (lr * self.momentum) * v
        else:
            weight -= lr * v
