"""``SGD``: stochastic gradient descent with optional momentum, dampening and Nesterov (MindSpore
nn.SGD)."""
from minigrad.optim import slots
from minigrad._checks import check_bool, check_non_negative, check_relation
from minigrad.optim.optimizer import Optimizer


class SGD(Optimizer):
    r"""Stochastic gradient descent (MindSpore ``nn.SGD`` / ``ops.SGD`` semantics).

    With ``g`` the gradient after loss-scale division and weight decay (``g + wd * w``, applied to
    every parameter: MindSpore's SGD has no 'beta'/'gamma' filter), per step::

        if momentum > 0:
            v = g                                   (first update of the parameter)
            v = momentum * v + (1 - dampening) * g  (later updates)
            g = g + momentum * v  if nesterov  else  v
        w = w - lr * g

    Args:
        params: Parameters or group dicts (see ``Optimizer``).
        learning_rate: see ``Optimizer``. Default 0.1.
        momentum (float): >= 0. Default 0.0.
        dampening (float): >= 0. Default 0.0.
        weight_decay (float): L2 coefficient >= 0. Default 0.0.
        nesterov (bool): Nesterov momentum; needs ``momentum > 0`` and ``dampening == 0``.
        loss_scale (float): > 0, divides the gradients. Default 1.0.

    Raises:
        TypeError: ``momentum``/``dampening`` not a float, ``nesterov`` not a bool (and the
            base class's checks).
        ValueError: ``momentum``, ``dampening`` or ``weight_decay`` < 0; ``nesterov`` with
            ``momentum <= 0`` or ``dampening != 0``.
    """

    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale,
                         decay_filter=lambda p: True)
        self.momentum = check_non_negative("momentum", momentum, owner="SGD")
        self.dampening = check_non_negative("dampening", dampening, owner="SGD")
        self.nesterov = check_bool("nesterov", nesterov, owner="SGD")
        check_relation("nesterov", nesterov,
                       not nesterov or (self.momentum > 0.0 and self.dampening == 0.0),
                       f"False unless momentum > 0 and dampening == 0 (momentum={self.momentum}, "
                       f"dampening={self.dampening})", owner="SGD")
        self.state_names = ("accum",) if self.momentum > 0 else ()

    def _fused_rule(self):
        return slots.rule_for(self, SGD, slots.Rule(
            slots.SGD, ("accum",) if self.momentum > 0 else (), momentum="momentum",
            dampening="dampening", nesterov="nesterov"))

    def init_state(self, weight):
        return {}  # "accum" starts as the first gradient (MindSpore's per-parameter 'stat' flag)

    def update(self, state, weight, grad, lr):
        if self.momentum > 0:
            accum = state.get("accum")
            if accum is None:
                accum = state["accum"] = grad.copy()
            else:
                accum *= self.momentum
                accum += grad if self.dampening == 0.0 else (1.0 - self.dampening) * grad
            grad = grad + self.momentum * accum if self.nesterov else accum
        weight -= lr * grad
