"""Training wrappers: ``WithLossCell`` (network + loss) and ``TrainOneStepCell`` (one update)."""
from minigrad import communication
from minigrad._checks import check_callable, check_positive, check_relation, check_type
from minigrad.autograd import GradOperation
from minigrad.nn.cell import Cell
from minigrad.nn.distributed import DistributedGradReducer


def check_loss_fn(loss_fn):
    """Raise TypeError unless ``loss_fn`` is a callable loss instance: a class (``nn.MSELoss``
    without parentheses) is callable too, and would fail only at the first step."""
    if isinstance(loss_fn, type):
        check_relation("loss_fn", loss_fn, False, f"a loss instance such as {loss_fn.__name__}()",
                       error=TypeError)
    check_callable("loss_fn", loss_fn)


def check_optimizer(optimizer):
    """Raise TypeError unless ``optimizer`` can run a training step (callable on the gradients,
    with a ``parameters`` attribute)."""
    check_relation("optimizer", optimizer, callable(optimizer) and hasattr(optimizer, "parameters"),
                   "callable on gradients with a 'parameters' attribute", error=TypeError)


def check_optimizer_owns(network, optimizer, owner):
    """Raise ValueError when none of ``optimizer.parameters`` is a parameter of ``network``: such
    an optimizer (made for another network) would train nothing, with the loss flat. The train
    cells and ``Model`` (through them) share this check."""
    params = list(optimizer.parameters)
    own = {id(p) for p in network.get_parameters()}
    names = [p.name for p in params[:4]] + (["..."] if len(params) > 4 else [])
    check_relation("optimizer", optimizer,
                   not (params and own) or any(id(p) in own for p in params),
                   f"built from the parameters of the network {type(network).__name__} "
                   f"(optimizer(network.trainable_params(), ...)); it holds {names}", owner=owner)


class WithLossCell(Cell):
    """``loss_fn(backbone(data), label)``.

    Args:
        backbone: the network (a Cell).
        loss_fn: a loss Cell (or any callable of (output, label)).

    Built with ``auto_prefix=False``: the backbone's parameter names are unchanged.

    Raises:
        TypeError: if ``backbone`` is not a Cell or ``loss_fn`` is not a callable instance.
    """
    _takes_policy = False  # not a layer: no Keras dtype policy

    def __init__(self, backbone, loss_fn):
        super().__init__(auto_prefix=False)
        check_type("backbone", backbone, Cell)
        check_loss_fn(loss_fn)
        self._backbone = backbone
        self._loss_fn = loss_fn

    def construct(self, data, label):
        return self._loss_fn(self._backbone(data), label)

    @property
    def backbone_network(self):
        """The wrapped network."""
        return self._backbone

    @property
    def loss_fn(self):
        """The loss (THOR's ``fisher="mc"`` samples labels from its model distribution)."""
        return self._loss_fn


class TrainOneStepCell(Cell):
    """One training step: loss = network(*inputs); gradients; ``optimizer(grads)``; return loss.

    The gradients are those of ``optimizer.parameters``, by
    ``GradOperation(get_by_list=True, sens_param=True)`` with backprop seeded by ``sens``
    (broadcast to the loss's shape and dtype); the network runs once per step.

    Args:
        network: a Cell returning the loss (usually a ``WithLossCell``).
        optimizer: callable on a tuple of gradients, with a ``parameters`` attribute.
        sens: the backprop seed, a positive finite number (a fixed loss scale: 0 would zero
            every gradient, a negative one train uphill). Default 1.0.

    Subclasses (``TrainOneStepWithLossScaleCell``) reuse ``loss_and_grads`` and ``grad_reducer``.
    In data-parallel mode (``minigrad.set_auto_parallel_context(parallel_mode="data_parallel")``)
    ``grad_reducer`` is an ``nn.DistributedGradReducer`` over ``optimizer.parameters``, made
    here (so every rank checks the model and takes rank 0's parameters before the first step);
    backward runs inside its ``overlapping()`` (with ``overlap=True`` the gradients' all-reduces
    start during backward).

    Raises:
        TypeError: if ``network`` is not a Cell, ``optimizer`` is not callable or has no
            ``parameters``, or ``sens`` is not a real number.
        ValueError: if ``sens`` is not positive and finite.
    """
    _takes_policy = False  # not a layer: no Keras dtype policy

    def __init__(self, network, optimizer, sens=1.0):
        super().__init__(auto_prefix=False)
        check_type("network", network, Cell)
        check_optimizer(optimizer)
        check_optimizer_owns(network, optimizer, type(self).__name__)
        sens = check_positive("sens", sens, owner="TrainOneStepCell")
        self.network = network
        self.network.set_grad()
        self.optimizer = optimizer
        self.weights = optimizer.parameters
        self.grad = GradOperation(get_by_list=True, sens_param=True)
        self.sens = sens
        bind = getattr(optimizer, "bind_loss_cell", None)
        if bind is not None:  # THOR's fisher="mc" samples labels from the network's loss_fn
            bind(network)
        if communication.is_data_parallel():
            self.grad_reducer = DistributedGradReducer(self.weights)

    def loss_and_grads(self, inputs, sens):
        """Run the network on ``inputs`` once and backprop from ``sens``: (loss, grads of weights).
        The loss is a plain Tensor (its graph is freed), as MindSpore's train cells return it."""
        losses = []

        def network(*args):
            losses.append(self.network(*args))
            return losses[0]
        tell = getattr(self.optimizer, "set_backward_scale", None)
        if tell is not None:  # THOR divides the backprop seed (the loss scale) out of its factors
            tell(1.0 if sens is None else sens)
        grads = self.grad(network, self.weights)(*inputs, sens)
        return losses[0].detach(), grads

    def grad_reducer(self, grads):
        """Identity: the one place where data-parallel training all-reduces the gradients (a
        ``DistributedGradReducer`` instance attribute replaces it in data-parallel mode)."""
        return grads

    def construct(self, *inputs):
        reducer = self.grad_reducer
        if isinstance(reducer, DistributedGradReducer):  # its all-reduces may overlap backward
            with reducer.overlapping():
                loss, grads = self.loss_and_grads(inputs, self.sens)
        else:
            loss, grads = self.loss_and_grads(inputs, self.sens)
        self.optimizer(reducer(grads))
        return loss
