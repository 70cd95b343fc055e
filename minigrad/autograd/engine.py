"""The reverse-mode engine: an iterative topological walk over ``Function`` nodes.

Gradients flow from the roots to the leaves. A node is processed only after every node that
consumes its outputs, so each output gradient is complete when its node runs; the order comes from
an explicit-stack depth-first search (no recursion, so a 10,000-op chain is fine). Unless
``retain_graph`` is set, each node releases its inputs and saved arrays as soon as it has run.
"""
from minigrad import backend


def _toposort(roots):
    """Nodes reachable from ``roots``, each before the nodes that produced its inputs."""
    order, visited = [], set()
    for root in roots:
        if id(root) in visited:
            continue
        visited.add(id(root))
        stack = [(root, False)]
        while stack:
            fn, expanded = stack.pop()
            if expanded:
                order.append(fn)
                continue
            if fn.freed:
                raise RuntimeError(
                    "backward through a graph that has already been freed: call "
                    "backward(retain_graph=True) the first time to backprop twice")
            stack.append((fn, True))
            for t, need in zip(fn.inputs, fn.needs_grad):
                child = t._ctx
                if need and child is not None and id(child) not in visited:
                    visited.add(id(child))
                    stack.append((child, False))
    order.reverse()
    return order


def _owner(array):
    base = array.base
    return id(array if base is None else base)


def _accumulate(store, key, grad):
    old = store.get(key)
    store[key] = grad if old is None else old + grad


def run_backward(roots, seeds, retain_graph=False, targets=None):
    """Backpropagate ``seeds`` (arrays, one per root tensor).

    With ``targets=None`` the gradients of leaf tensors that require grad are added to their
    ``.grad`` (Torch style). With a list of tensors, their gradients are returned instead (``None``
    for a target that the roots do not depend on) and no ``.grad`` is touched.
    """
    node_grads = {}   # id(fn) -> list of output gradients
    leaf_grads = {}   # id(tensor) -> gradient
    leaves = {}
    wanted = None if targets is None else {id(t): t for t in targets}
    captured = {}

    def send(tensor, grad):
        fn = tensor._ctx
        if fn is None:
            leaves[id(tensor)] = tensor
            _accumulate(leaf_grads, id(tensor), grad)
            return
        slots = node_grads.get(id(fn))
        if slots is None:
            slots = node_grads[id(fn)] = [None] * fn.n_outputs
        i = tensor._index
        slots[i] = grad if slots[i] is None else slots[i] + grad

    for root, seed in zip(roots, seeds):
        send(root, seed)
    nodes = _toposort([r._ctx for r in roots if r._ctx is not None])
    for fn in nodes:
        grads = node_grads.pop(id(fn), None)
        if grads is None:
            continue
        if fn.out_hooks:
            grads = [_run_hooks(fn.out_hooks.get(i), g) for i, g in enumerate(grads)]
        if wanted:
            for t in wanted.values():
                if t._ctx is fn and grads[t._index] is not None:
                    captured[id(t)] = grads[t._index]
        if fn.n_outputs > 1 and any(g is None for g in grads):
            grads = _fill_missing(fn, grads)
        in_grads = fn.backward(*grads)
        if type(in_grads) is not tuple:
            in_grads = (in_grads,)
        for t, need, g in zip(fn.inputs, fn.needs_grad, in_grads):
            if need and g is not None:
                send(t, g)
        if not retain_graph:
            fn.release()
    return _deliver(leaves, leaf_grads, wanted, captured, seeds)


def _fill_missing(fn, grads):
    xp = backend.get_array_module(*[g for g in grads if g is not None])
    return [xp.zeros(shape, dtype) if g is None else g
            for g, (shape, dtype) in zip(grads, fn.out_meta)]


def _run_hooks(hooks, grad):
    if not hooks or grad is None:
        return grad
    from minigrad.tensor import Tensor
    for hook in hooks:
        result = hook(Tensor(grad))
        if result is not None:
            grad = result.data if isinstance(result, Tensor) else result
    return grad


def _deliver(leaves, leaf_grads, wanted, captured, seeds):
    """Hand leaf gradients out: never aliased, always writable, in the leaf's shape and dtype."""
    from minigrad.tensor import Tensor

    seen = {_owner(s) for s in seeds}
    if wanted is not None:
        out = []
        for key, t in wanted.items():
            g = leaf_grads.get(key, captured.get(key))
            out.append(None if g is None else _fresh(g, t, seen))
        return out
    for key, t in leaves.items():
        g = _run_hooks(t._hooks, leaf_grads[key])
        g = _fresh(g, t, seen)
        if t.grad is None:
            t.grad = Tensor(g)
        else:
            t.grad = Tensor(t.grad.data + g)
    return None


def _fresh(grad, tensor, seen):
    if grad.dtype != tensor.data.dtype:
        grad = grad.astype(tensor.data.dtype)
    if grad.shape != tensor.data.shape:
        raise RuntimeError(f"gradient shape {grad.shape} does not match tensor shape "
                           f"{tensor.data.shape}: an op's backward is wrong")
    key = _owner(grad)
    if key in seen or not grad.flags.writeable:
        grad = grad.copy()
        key = _owner(grad)
    seen.add(key)
    return grad
