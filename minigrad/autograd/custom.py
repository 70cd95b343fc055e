"""Custom functions PyTorch's way: a ``Function`` subclass with static ``forward(ctx, ...)`` and
``backward(ctx, ...)`` on Tensors, run by ``F.apply(...)``::

    class Exp(minigrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    y = Exp.apply(x)

``Function.__init_subclass__`` tells the two kinds of subclass apart by their ``forward``: a
static one makes the class a custom function whose ``apply`` is ``apply`` below; an instance
method is an op on arrays (``minigrad.autograd.function``).

As in PyTorch: ``forward`` runs with gradient recording off and returns a Tensor or a tuple
(non-Tensor items pass through); ``backward`` gets one gradient per output (zeros for an output
that received none, unless ``ctx.set_materialize_grads(False)``) and returns one per forward
argument (None for arguments that are not Tensors or need none); each is checked against its
input's shape and cast to its dtype. ``backward`` runs without recording, except under
``create_graph``: then it runs on the graph, with ``ctx.saved_tensors`` holding the input
Tensors and the output Tensors of the node, so a ``backward`` written with differentiable ops
gives second derivatives. A Tensor saved that is neither an input nor an output (an
intermediate of ``forward``, computed without a graph) is a constant there, as in PyTorch.
``setup_context(ctx, inputs, output)`` may fill ``ctx`` instead of ``forward`` (PyTorch 2's
spelling, with a ``forward`` without ``ctx``).
"""
import inspect

from minigrad import dtype as dtypes
from minigrad._config import config, no_grad, using_config
from minigrad.autograd.function import Function
from minigrad.tensor import Tensor, make


class FunctionCtx:
    """The ``ctx`` of a custom function: what ``forward`` leaves for ``backward``.

    Attributes:
        needs_input_grad: one bool per forward argument: whether it is a Tensor that
            requires grad (with recording on).
    """

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self._saved = None           # the Tensors given to save_for_backward
        self._node = None            # the graph node, once apply has made it
        self._non_differentiable = ()

    def save_for_backward(self, *tensors):
        """Keep ``tensors`` (Tensors or None) for ``backward``'s ``ctx.saved_tensors``.

        Raises:
            TypeError: for an argument that is neither a Tensor nor None.
        """
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward takes Tensors or None, got "
                                f"{type(t).__name__} as argument {i}")
        self._saved = tensors

    @property
    def saved_tensors(self):
        """The Tensors of ``save_for_backward``, in its order: under ``create_graph`` an input
        as the input Tensor itself and an output as the node's output, both in the graph.

        Raises:
            RuntimeError: after the graph was freed (a second backward without retain_graph).
        """
        if self._saved is None:
            return ()
        node = self._node
        if node is not None and node.freed:
            raise RuntimeError("saved_tensors of a graph that has already been freed: call "
                               "backward(retain_graph=True) the first time to backprop twice")
        return tuple(_unpack(t, node) for t in self._saved)

    def mark_non_differentiable(self, *outputs):
        """Mark outputs that get no gradient (indices, masks): ``backward`` receives zeros for
        them."""
        self._non_differentiable = outputs

    def set_materialize_grads(self, value):
        """Whether ``backward`` receives zeros (True, default) or None for an output that
        received no gradient."""
        self.materialize_grads = bool(value)


def _unpack(saved, node):
    """A saved Tensor as ``backward`` sees it: in the graph of a ``create_graph`` pass."""
    if saved is None or node is None or not config.grad_enabled:
        return saved
    for t in node.inputs:
        if t is saved:
            return t
    for i, out in enumerate(node.outputs):
        if out is saved:
            return make(saved.data, node, i)
    return saved


class CustomNode(Function):
    """The graph node of one call of a custom function: its backward is the user's, run on
    Tensors (without recording, or on the graph under ``create_graph``)."""
    saves = {}

    def backward(self, *grads):
        with no_grad():
            grads = self.call_user_backward([None if g is None else make(g, None, 0)
                                             for g in grads])
        return tuple(None if g is None else g.data for g in grads)

    def graph_backward(self, grads):
        with using_config(grad_enabled=True, autocast_dtype=None):
            return self.call_user_backward(grads)

    def call_user_backward(self, grads):
        cls, ctx = self.function, self.ctx
        name = cls.__name__
        result = cls.backward(ctx, *grads)
        result = result if isinstance(result, tuple) else (result,)
        arguments = len(ctx.needs_input_grad)
        if len(result) < arguments or any(g is not None for g in result[arguments:]):
            raise RuntimeError(f"{name}.backward returned {len(result)} gradients, expected "
                               f"{arguments} (one per forward argument, None where there is none)")
        out = []
        for position, t in zip(self.positions, self.inputs):
            g = result[position]
            if g is None:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                raise TypeError(f"{name}.backward returned a {type(g).__name__} as the gradient "
                                f"of argument {position}, expected a Tensor or None")
            if g.shape != t.shape:
                raise RuntimeError(f"{name}.backward returned a gradient of shape {g.shape} for "
                                   f"argument {position} of shape {t.shape}")
            out.append(g if g.dtype == t.dtype else g.astype(t.dtype))
        for position, g in enumerate(result[:arguments]):
            if g is not None and position not in self.positions:
                raise RuntimeError(f"{name}.backward returned a gradient for argument "
                                   f"{position}, which is not a Tensor")
        return tuple(out)


def apply(cls, *args, **kwargs):
    """Run the custom function ``cls`` on ``args`` (Tensors and other values) and record one
    node for its outputs; return the Tensor (or tuple) ``forward`` returned."""
    record = config.grad_enabled
    needs = tuple(record and isinstance(a, Tensor) and a.requires_grad for a in args)
    ctx = FunctionCtx(needs)
    setup = inspect.getattr_static(cls, "setup_context", None)
    with no_grad():
        if setup is None:
            out = cls.forward(ctx, *args, **kwargs)
        else:
            out = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args, out)
    if True not in needs:
        return out
    items = out if isinstance(out, tuple) else (out,)
    node = CustomNode()
    node.function, node.ctx = cls, ctx
    node.positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
    node.inputs = tuple(args[i] for i in node.positions)
    node.needs_grad = tuple(needs[i] for i in node.positions)
    outputs = [o for o in items if isinstance(o, Tensor)]
    node.n_outputs = len(outputs)
    node.out_meta = [(o.shape, o.dtype) for o in outputs]
    node.materialize_grads = ctx.materialize_grads
    node.outputs = outputs  # the forward's Tensors, to find saved outputs by
    ctx._node = node
    wrapped, k = [], 0
    for o in items:
        if isinstance(o, Tensor):
            constant = not dtypes.is_float(o.dtype) or any(o is m for m in ctx._non_differentiable)
            wrapped.append(make(o.data, None if constant else node, k))
            k += 1
        else:
            wrapped.append(o)
    return tuple(wrapped) if isinstance(out, tuple) else wrapped[0]
