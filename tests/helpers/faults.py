"""Fault injection for the loss-scaled steps: values written into chosen gradients, and a
bit-exact snapshot of what a skipped step must leave unchanged."""
import numpy

from minigrad import Tensor


class GradientInjector:
    """Leaf-gradient hooks on ``params`` that write chosen values into their gradients.

    While ``faults`` holds ``{param index: (flat position, value)}``, every backward pass puts
    ``value`` at ``position % size`` of that parameter's gradient (the gradient as the loss-scaled
    step computes it, still multiplied by the scale). ``plan`` (``{step: faults}``) and
    ``at(step)`` set ``faults`` step by step.
    """

    def __init__(self, params, plan=None):
        self.plan = {} if plan is None else plan
        self.faults = {}
        for i, p in enumerate(params):
            p.register_hook(self._hook(i))

    def at(self, step):
        """Inject ``plan[step]`` (nothing when the plan has no entry for ``step``)."""
        self.faults = self.plan.get(step, {})

    def _hook(self, index):
        def hook(grad):
            hit = self.faults.get(index)
            if hit is None:
                return None
            g = grad.asnumpy().copy()
            g.reshape(-1)[hit[0] % g.size] = hit[1]
            return Tensor(g)
        return hook


def _frozen(value):
    if isinstance(value, Tensor):
        value = value.asnumpy()
    if isinstance(value, numpy.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def snapshot(net, optimizer):
    """Every parameter of ``net`` and every entry of ``optimizer.state_dict()`` (moments, fp32
    masters, the step count, the learning rate) as (dtype, shape, bytes): equal snapshots are
    bit-identical states."""
    return ([_frozen(p.data) for p in net.get_parameters()],
            {k: _frozen(v) for k, v in optimizer.state_dict().items()})
