"""PyTorch's autograd entry points: ``grad`` returns the gradients of outputs with respect to
inputs, ``backward`` adds them to ``.grad``. With ``create_graph=True`` the backward pass is
recorded too, so its gradients can be differentiated again: second and higher derivatives,
gradient penalties, Hessian-vector products (``minigrad.autograd.functional``)::

    x = Tensor([1.0, 2.0], requires_grad=True)
    y = (x ** 3).sum()
    (g,) = autograd.grad(y, x, create_graph=True)    # 3x², a Tensor with a graph
    (h,) = autograd.grad(g.sum(), x)                 # 6x
"""
from minigrad import backend
from minigrad._checks import RequiresGradError, check_bool, check_relation, check_type
from minigrad.autograd.engine import accumulate, run_backward
from minigrad.tensor import Tensor, make, seed_like


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs`` (PyTorch's
    ``torch.autograd.grad``): Σᵢ ⟨grad_outputsᵢ, ∂outputsᵢ/∂input⟩ for each input, as a tuple.
    Nothing is added to any ``.grad``.

    Args:
        outputs: a Tensor or a sequence of Tensors that require grad.
        inputs: a Tensor or a sequence (any iterable: ``net.trainable_params()``) of Tensors
            that require grad, leaves or not.
        grad_outputs: the seed of each output (a Tensor, an array or a number, broadcast to the
            output's shape and cast to its dtype), one per output; None (default) or a None
            entry: ones, for a one-element output only. Under ``create_graph`` a seed that
            requires grad stays in the graph (the gradients are differentiable in it too).
        retain_graph: keep the graph for another backward. Default: ``create_graph``.
        create_graph: record the backward pass, so that the gradients (Tensors with a graph)
            can be differentiated again. Default False.
        allow_unused: return None for an input the outputs do not depend on, instead of raising.
            Default: ``materialize_grads``.
        materialize_grads: return zeros instead of None for such an input. Default False.

    Returns:
        A tuple with one gradient per input, each in its input's shape and dtype.

    Raises:
        TypeError: for an ``outputs``/``inputs`` entry that is not a Tensor, or a flag that is
            not a bool.
        ValueError: for a number of ``grad_outputs`` other than the number of outputs, a seed
            that does not broadcast to its output, or ``materialize_grads=True`` with
            ``allow_unused=False``.
        RuntimeError: for an output or an input that does not require grad, a missing seed of
            an output of more than one element, an input the outputs do not depend on (unless
            ``allow_unused``), a graph already freed, or an op whose second derivative is not
            supported (under ``create_graph``).
    """
    owner = "autograd.grad"
    outputs = _tensors("outputs", outputs, owner)
    inputs = _tensors("inputs", inputs, owner)
    create_graph = check_bool("create_graph", create_graph, owner=owner)
    materialize_grads = check_bool("materialize_grads", materialize_grads, owner=owner)
    if allow_unused is None:
        allow_unused = materialize_grads
    allow_unused = check_bool("allow_unused", allow_unused, owner=owner)
    check_relation("allow_unused", allow_unused, allow_unused or not materialize_grads,
                   "True (or None) with materialize_grads=True", owner=owner)
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            check_relation(f"inputs[{i}]", t, False, "a Tensor that requires grad (nothing is "
                           "differentiated with respect to it otherwise: set requires_grad=True "
                           "before computing the outputs)", error=RequiresGradError, owner=owner)
    seeds = _seeds(owner, outputs, grad_outputs, create_graph, ("outputs", "grad_outputs"))
    retain = create_graph if retain_graph is None else check_bool("retain_graph", retain_graph,
                                                                  owner=owner)
    grads = run_backward(outputs, seeds, retain, targets=inputs, create_graph=create_graph)
    result = []
    for i, (t, g) in enumerate(zip(inputs, grads)):
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"{owner}: inputs[{i}] appears not to have been used in the "
                                   f"graph of the outputs; pass allow_unused=True to get None "
                                   f"for it (or materialize_grads=True for zeros)")
            if materialize_grads:
                g = make(backend.get_array_module(t.data).zeros(t.shape, t.dtype), None, 0)
        elif not isinstance(g, Tensor):
            g = make(g, None, 0)
        result.append(g)
    return tuple(result)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Add the gradients of ``tensors`` to the ``.grad`` of the leaves (PyTorch's
    ``torch.autograd.backward``; ``Tensor.backward`` is this for one tensor).

    Args:
        tensors: a Tensor or a sequence of Tensors that require grad.
        grad_tensors: their seeds, as ``grad_outputs`` of ``grad``.
        retain_graph: keep the graph for another backward. Default: ``create_graph``.
        create_graph: record the backward pass: ``.grad`` then holds Tensors with a graph
            (accumulated out of place, so each sum is differentiable too). Default False.
        inputs: a Tensor or a sequence of Tensors (leaves or not): add gradients to their
            ``.grad`` only. Default None: every leaf that requires grad.

    Raises:
        TypeError, ValueError, RuntimeError: as ``grad``.
    """
    owner = "autograd.backward"
    tensors = _tensors("tensors", tensors, owner)
    create_graph = check_bool("create_graph", create_graph, owner=owner)
    seeds = _seeds(owner, tensors, grad_tensors, create_graph, ("tensors", "grad_tensors"))
    retain = create_graph if retain_graph is None else check_bool("retain_graph", retain_graph,
                                                                  owner=owner)
    if inputs is None:
        run_backward(tensors, seeds, retain, create_graph=create_graph)
        return
    inputs = _tensors("inputs", inputs, owner)
    grads = run_backward(tensors, seeds, retain, targets=inputs, create_graph=create_graph)
    for t, g in zip(inputs, grads):
        if g is not None:
            accumulate(t, g)


def _tensors(name, value, owner):
    """``value`` (a Tensor, or a non-empty sequence or iterator of them) as a list of Tensors.
    A str, a dict or an array is no sequence of Tensors (an array would give its elements)."""
    if isinstance(value, Tensor):
        return [value]
    expected = "a Tensor or a non-empty sequence of Tensors"
    items = None
    if not isinstance(value, (str, bytes, dict)) and not hasattr(value, "shape"):
        try:
            items = list(value)
        except TypeError:
            pass
    if items is None:
        check_type(name, value, (), expected=expected, owner=owner)
    # PyTorch refuses empty outputs and inputs too: there is nothing to differentiate
    check_relation(name, value, len(items) > 0, expected, owner=owner)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            check_type(f"{name}[{i}]", t, Tensor, owner=owner)
    return items


def _seeds(owner, outputs, grad_outputs, create_graph, names):
    """One seed per output: an array, or under ``create_graph`` a given seed that requires grad
    (cast and broadcast by recorded ops). ``names``: the arguments (outputs, seeds) as the
    caller calls them, for the messages."""
    if grad_outputs is None or isinstance(grad_outputs, Tensor) or not isinstance(
            grad_outputs, (list, tuple)):
        grad_outputs = [grad_outputs] * len(outputs) if grad_outputs is None else [grad_outputs]
    outs, gs = names
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"{owner}: got {len(grad_outputs)} {gs} for {len(outputs)} {outs} (one "
                         f"per output, None for ones)")
    seeds = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if not out.requires_grad:
            check_relation(f"{outs}[{i}]", out, False, "a Tensor that requires grad (an input "
                           "had requires_grad=True, and it was not made under no_grad)",
                           error=RequiresGradError, owner=owner)
        if create_graph and isinstance(g, Tensor) and g.requires_grad:
            if g.dtype != out.dtype:
                g = g.astype(out.dtype)
            seeds.append(g if g.shape == out.shape else g.broadcast_to(out.shape))
        else:
            seeds.append(seed_like(out, g, gs if len(outputs) == 1 else f"{gs}[{i}]"))
    return seeds
