"""``RMSProp`` (MindSpore ``nn.RMSProp``: ``ApplyRMSProp`` / ``ApplyCenteredRMSProp``)."""
from minigrad import backend
from minigrad._checks import check_bool, check_float, check_non_negative
from minigrad.optim.optimizer import Optimizer


class RMSProp(Optimizer):
    r"""Root-mean-square propagation, MindSpore's rule::

        s = decay * s + (1 - decay) * g * g
        m = momentum * m + lr * g / sqrt(s + epsilon)                        (centered=False)
        ḡ = decay * ḡ + (1 - decay) * g,  m = momentum * m + lr * g / sqrt(s - ḡ² + epsilon)
                                                                             (centered=True)
        w = w - m

    ``g`` is the gradient after loss-scale division and L2 weight decay (``g + wd * w``, names
    without 'beta'/'gamma' unless grouped). State ``"mean_square"`` and ``"moment"`` (and
    ``"mean_grad"`` when centered), fp32, from zero. With ``momentum=0`` this is
    ``w -= lr * g / sqrt(s + epsilon)``: PyTorch's ``RMSprop(alpha=decay)`` and Keras's
    ``RMSprop(rho=decay)`` put epsilon outside the square root instead (a difference of order
    epsilon / sqrt(s)).

    Args:
        params: Parameters or group dicts (see ``Optimizer``).
        learning_rate: see ``Optimizer``. Default 0.1 (MindSpore's; Keras's is 0.001).
        decay (float): the averaging factor of ``s`` (Keras's ``rho``), >= 0. Default 0.9.
        momentum (float): >= 0. Default 0.0.
        epsilon (float): > 0, added to the mean square under the root. Default 1e-10.
        use_locking (bool): accepted for MindSpore compatibility (updates are never concurrent).
        centered (bool): normalise by the variance estimate ``s - ḡ²``. Default False.
        loss_scale (float): > 0, divides the gradients. Default 1.0.
        weight_decay (float): >= 0. Default 0.0.

    Raises:
        TypeError: ``decay``, ``momentum``, ``epsilon`` not floats; ``use_locking``/``centered``
            not bools (and the base class's checks).
        ValueError: ``decay`` or ``momentum`` < 0, ``epsilon`` <= 0 (and the base checks).
    """

    def __init__(self, params, learning_rate=0.1, decay=0.9, momentum=0.0, epsilon=1e-10,
                 use_locking=False, centered=False, loss_scale=1.0, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        owner = "RMSProp"
        self.decay = check_non_negative("decay", decay, owner=owner)
        self.momentum = check_non_negative("momentum", momentum, owner=owner)
        self.epsilon = check_float("epsilon", epsilon, low=0.0, low_open=True, owner=owner)
        self.use_locking = check_bool("use_locking", use_locking, owner=owner)
        self.centered = check_bool("centered", centered, owner=owner)
        self.state_names = ("mean_square", "moment") + (("mean_grad",) if self.centered else ())

    def update(self, state, weight, grad, lr):
        xp = backend.get_array_module(weight)
        decay, s, m = self.decay, state["mean_square"], state["moment"]
        s *= decay
        s += (1.0 - decay) * (grad * grad)
        denominator = s
        if self.centered:
            mean = state["mean_grad"]
            mean *= decay
            mean += (1.0 - decay) * grad
            denominator = s - mean * mean
        m *= self.momentum
        m += lr * grad / xp.sqrt(denominator + self.epsilon)
        weight -= m
