"""The reverse pass over a graph of ``Function`` nodes: ``run_backward``.

It is an iterative topological walk over the nodes. Gradients flow from the roots to the leaves.
A node is processed only after every node that consumes its outputs, so each output gradient is
complete when its node runs; the order comes from an explicit-stack depth-first search (no
recursion, so a 10,000-op chain is fine). Unless
``retain_graph`` is set, each node releases its inputs and saved arrays as soon as it has run.
With ``create_graph``, each node runs ``Function.graph_backward``: the gradients are Tensors whose
own graph can be differentiated again; and with ``targets`` too, only the nodes on a path from
the roots to a target run (a node below the targets may have no second derivative, and its
gradient graph would be built for nothing). Without it every node runs, so that the hooks of the
whole graph fire (THOR's sampled pass asks for no gradient, ``targets=[]``, only for them).

Leaf gradients are handed out fresh: never aliased with one another or with the seed, writable,
in the leaf's shape and dtype, so optimizers and loss scalers may update them in place.

``on_gradient_ready`` lets a caller see each leaf's gradient as soon as it is final (every node
that sends it a gradient has run), while backward goes on with the other nodes: data-parallel
training starts all-reducing the last layers' gradients then (PyTorch DDP's autograd hooks).
"""
import contextlib
import sys

import numpy

from minigrad import backend
from minigrad._fp16_host import MIN_SIZE, add_halves, store, widen
from minigrad.autograd.function import Copy
from minigrad.tensor import Tensor, make


def _toposort(roots):
    """Nodes reachable from ``roots``, each before the nodes that produced its inputs."""
    order, visited = [], set()
    stack = [(fn, False) for fn in roots]
    while stack:
        fn, expanded = stack.pop()
        if expanded:
            order.append(fn)
            continue
        if fn in visited:
            continue
        if fn.freed:
            raise RuntimeError(
                "backward through a graph that has already been freed: call "
                "backward(retain_graph=True) the first time to backprop twice")
        visited.add(fn)
        stack.append((fn, True))
        for t, need in zip(fn.inputs, fn.needs_grad):
            child = t._ctx
            if need and child is not None and child not in visited:
                stack.append((child, False))
    order.reverse()
    return order


def _leading_to(order, targets):
    """The nodes of ``order`` whose backward sends a gradient on towards a target: those with an
    input that is a target leaf, that the node of a non-leaf target made, or that such a node
    made. (The node of a non-leaf target runs only if another target lies below it.)"""
    leaves = {id(t) for t in targets if t._ctx is None}
    makers = {t._ctx for t in targets if t._ctx is not None}
    needed = set()
    for fn in reversed(order):  # producers first
        for t, need in zip(fn.inputs, fn.needs_grad):
            child = t._ctx
            if need and (id(t) in leaves if child is None else
                         child in needed or child in makers):
                needed.add(fn)
                break
    return needed


_listeners = []  # (id(leaf) -> index, callback) of each active on_gradient_ready block


@contextlib.contextmanager
def on_gradient_ready(tensors, callback):
    """Within the block, every backward calls ``callback(i, grad)`` once the gradient of the leaf
    ``tensors[i]`` is final (its hooks applied; an array, to be read before backward ends), in
    the order the gradients become final. Only gradients the backward hands out are reported
    (with ``targets``, those of the targets): not a leaf it gives no gradient."""
    listener = ({id(t): i for i, t in enumerate(tensors)}, callback)
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def _ready_plan(order, targets):
    """node -> [(leaf, [(callback, i), ...])]: the listened leaves (among ``targets`` unless it
    is None) whose last gradient that node sends."""
    wanted = {}
    handed_out = None if targets is None else {id(t) for t in targets}
    for index_of, callback in _listeners:
        for key, i in index_of.items():
            if handed_out is None or key in handed_out:
                wanted.setdefault(key, []).append((callback, i))
    last = {}
    for fn in order:
        for t, need in zip(fn.inputs, fn.needs_grad):
            if need and t._ctx is None and id(t) in wanted:
                last[id(t)] = (fn, t)
    plan = {}
    for key, (fn, t) in last.items():
        plan.setdefault(fn, []).append((t, wanted[key]))
    return plan


def run_backward(roots, seeds, retain_graph=False, targets=None, create_graph=False):
    """Backpropagate ``seeds`` (arrays, one per root tensor).

    With ``targets=None`` the gradients of leaf tensors that require grad are added to their
    ``.grad`` (Torch style). With a list of tensors, their gradients are returned instead (``None``
    for a target that the roots do not depend on) and no ``.grad`` is touched.

    With ``create_graph`` the gradients are Tensors recorded in the graph, so that they can be
    differentiated again (each node runs ``graph_backward``); a seed may then be a Tensor with a
    graph of its own. Without it they are arrays.
    """
    node_grads = {}   # fn -> list of its output gradients
    leaf_grads = {}   # id(leaf) -> [leaf, gradient]
    captured = {}     # id(non-leaf target) -> gradient
    hooked = set()    # id(leaf) whose hooks ran when its gradient was reported final

    def send(tensor, grad):
        fn = tensor._ctx
        if fn is None:
            entry = leaf_grads.get(id(tensor))
            if entry is None:
                leaf_grads[id(tensor)] = [tensor, grad]
            else:
                entry[1] = _sum(entry, grad)
            return
        slots = node_grads.get(fn)
        if slots is None:
            slots = node_grads[fn] = [None] * fn.n_outputs
        i = tensor._index
        slots[i] = grad if slots[i] is None else _sum(slots, grad, i)

    if create_graph:
        seeds = [s if isinstance(s, Tensor) else make(s, None, 0) for s in seeds]
    for root, seed in zip(roots, seeds):
        send(root, seed)
    inner_targets = [t for t in targets or () if t._ctx is not None]

    def report(fn):  # the listened leaves whose gradient is final once ``fn`` has run
        for leaf, calls in ready.get(fn, ()):
            entry = leaf_grads.get(id(leaf))
            if entry is None:
                continue
            if leaf._hooks:
                entry[1] = _run_hooks(leaf._hooks, entry[1])
                hooked.add(id(leaf))
            g = entry[1].data if create_graph else entry[1]
            for callback, i in calls:
                callback(i, g)

    # Scaled gradients are meant to overflow now and then: the float status reports it, so NumPy's
    # per-op RuntimeWarnings would only be noise.
    with numpy.errstate(over="ignore", invalid="ignore", divide="ignore"):
        order = _toposort([r._ctx for r in roots if r._ctx is not None])
        needed = _leading_to(order, targets) if create_graph and targets is not None else None
        ready = _ready_plan(order, targets) if _listeners else {}
        for fn in order:
            grads = node_grads.pop(fn, None)
            if grads is not None:
                if fn.out_hooks:
                    grads = [_run_hooks(fn.out_hooks.get(i), g) for i, g in enumerate(grads)]
                for t in inner_targets:
                    if t._ctx is fn:
                        captured[id(t)] = grads[t._index]
                if needed is None or fn in needed:
                    if fn.n_outputs > 1 and fn.materialize_grads and any(g is None for g in grads):
                        grads = _fill_missing(fn, grads, create_graph)
                    in_grads = fn.graph_backward(grads) if create_graph else fn.backward(*grads)
                    if type(in_grads) is not tuple:
                        in_grads = (in_grads,)
                    for t, need, g in zip(fn.inputs, fn.needs_grad, in_grads):
                        if need and g is not None:
                            send(t, g)
            if not retain_graph:
                fn.release()
            if ready:  # only under on_gradient_ready: no call per node otherwise
                report(fn)

    return _deliver(seeds, targets, leaf_grads, captured, hooked)


_F16 = numpy.dtype(numpy.float16)
# sys.getrefcount of a gradient that only its list slot holds, seen from ``_sum``: the slot,
# ``_sum``'s ``total`` and the call's own argument
_ONLY_THE_SLOT = 3


def _sum(holder, grad, i=1):
    """``holder[i] + grad``: a second gradient for one tensor. Added into ``holder[i]`` in place
    when nothing else can see that array (it owns its memory, is writable, has the sum's shape
    and dtype, and no other reference to it exists: not a seed, another slot, a view of it, a
    hook's or a caller's), which saves an allocation and a pass at every residual join;
    otherwise a new array (also for Tensors, under ``create_graph``). Large fp16 NumPy arrays
    are added in fp32 and rounded once (``_fp16_host``'s fast conversions): NumPy's own fp16
    addition converts element by element, several times slower, to the same bits."""
    total = holder[i]
    if (type(total) is numpy.ndarray and total.dtype == _F16 and type(grad) is numpy.ndarray
            and grad.dtype == _F16 and total.size >= MIN_SIZE and total.shape == grad.shape):
        summed = add_halves(total, grad)  # one native pass
        if summed is not None:
            return summed
        wide = widen(total)
        wide += widen(grad)
        return store(wide, _F16)
    if (type(total) is not Tensor and total is not grad and total.base is None
            and getattr(total.flags, "writeable", True) and total.shape == grad.shape
            and total.dtype == grad.dtype and sys.getrefcount(total) <= _ONLY_THE_SLOT):
        total += grad
        return total
    return total + grad


def _deliver(seeds, targets, leaf_grads, captured, hooked):
    """The end of ``run_backward``: each gradient (its leaf hooks run, unless they ran when it
    was reported final, ``hooked``) made ``_fresh`` and returned per target, or added to its
    leaf's ``.grad``."""
    seen = {_owner(_array(s)) for s in seeds}
    if targets is not None:
        out = []
        for t in targets:
            entry = leaf_grads.get(id(t))
            g = captured.get(id(t)) if entry is None else (
                entry[1] if id(t) in hooked else _run_hooks(t._hooks, entry[1]))
            out.append(None if g is None else _fresh(g, t, seen))
        return out
    for leaf, g in leaf_grads.values():
        if leaf._hooks and id(leaf) not in hooked:
            g = _run_hooks(leaf._hooks, g)
        accumulate(leaf, _fresh(g, leaf, seen))
    return None


def accumulate(tensor, grad):
    """Add ``grad`` (an array, or a Tensor of a ``create_graph`` backward) to ``tensor.grad``."""
    if isinstance(grad, Tensor):
        tensor.grad = grad if tensor.grad is None else tensor.grad + grad
    else:
        tensor.grad = make(grad if tensor.grad is None else tensor.grad.data + grad, None, 0)


def _fill_missing(fn, grads, create_graph):
    xp = backend.get_array_module(*[_array(g) for g in grads if g is not None])
    zeros = [None if g is not None else xp.zeros(shape, dtype)
             for g, (shape, dtype) in zip(grads, fn.out_meta)]
    return [g if z is None else make(z, None, 0) if create_graph else z
            for g, z in zip(grads, zeros)]


def _run_hooks(hooks, grad):
    """``grad`` through each hook in turn (a returned Tensor replaces it). An array gradient is
    shown to a hook as a Tensor; a Tensor of a ``create_graph`` backward as itself."""
    if not hooks or grad is None:
        return grad
    graph = isinstance(grad, Tensor)
    for hook in hooks:
        result = hook(grad if graph else make(grad, None, 0))
        if result is not None:
            if graph:
                grad = result if isinstance(result, Tensor) else make(result, None, 0)
            else:
                grad = result.data if isinstance(result, Tensor) else result
    return grad


def _array(grad):
    return grad.data if isinstance(grad, Tensor) else grad


def _owner(array):
    base = array.base
    return id(array if base is None else base)


def _fresh(grad, tensor, seen):
    """``grad`` as the gradient of ``tensor``: its dtype, its shape, writable, not aliased (an
    array, or a Tensor of a ``create_graph`` backward, cast and copied by recorded ops)."""
    if grad.dtype != tensor.data.dtype:
        grad = grad.astype(tensor.data.dtype)
    if grad.shape != tensor.data.shape:
        raise RuntimeError(f"gradient shape {grad.shape} does not match tensor shape "
                           f"{tensor.data.shape}: an op's backward is wrong")
    array = _array(grad)
    key = _owner(array)
    if key in seen or not getattr(array.flags, "writeable", True):  # CuPy has no such flag
        grad = Copy.apply(grad) if isinstance(grad, Tensor) else grad.copy()
        key = id(_array(grad))
    seen.add(key)
    return grad
