"""``Function``: one differentiable op, forward on raw arrays, backward on gradient arrays; and
``run_backward``, the reverse pass over a graph of them.

A subclass implements::

    class Exp(Function):
        def forward(self, x):            # arrays in, array (or tuple of arrays) out
            self.y = xp.exp(x)           # keep only what backward needs
            return self.y
        def backward(self, gy):          # one gradient per output
            return gy * self.y           # one gradient per input (None: no gradient)

``Exp.apply(tensor)`` runs it and, when gradients are recorded, links the output tensors to the
node so that ``Tensor.backward`` can walk the graph. Non-tensor arguments go to ``forward`` as
keyword arguments. ``backward`` must not modify the gradients it receives.

Autocast: a class's ``autocast`` label says how ``minigrad.amp.autocast`` treats the op's
inputs while ``_config.config.autocast_dtype`` is set: ``"low"`` ops (matmul, Dense, conv) take
float32 inputs in the low-precision dtype, ``"fp32"`` ops (softmax, exp, log, pow, sums, norms,
losses) take fp16 inputs in float32; unlabelled ops (None) run in their inputs' dtype. The casts
are ``autocast_inputs``, which the ops install (it records ``ops.cast`` nodes, so gradients
return in the inputs' dtypes). A class defined with another label raises ValueError.

The reverse pass (``run_backward``) is an iterative topological walk over the nodes. Gradients
flow from the roots to the leaves. A node is processed only after every node that
consumes its outputs, so each output gradient is complete when its node runs; the order comes from
an explicit-stack depth-first search (no recursion, so a 10,000-op chain is fine). Unless
``retain_graph`` is set, each node releases its inputs and saved arrays as soon as it has run.

Leaf gradients are handed out fresh: never aliased with one another or with the seed, writable,
in the leaf's shape and dtype, so optimizers and loss scalers may update them in place.

``on_gradient_ready`` lets a caller see each leaf's gradient as soon as it is final (every node
that sends it a gradient has run), while backward goes on with the other nodes: data-parallel
training starts all-reducing the last layers' gradients then (PyTorch DDP's autograd hooks).
"""
import contextlib

import numpy

import minigrad.tensor as _tensor
from minigrad import backend
from minigrad._config import config
from minigrad.tensor import make

AUTOCAST_LABELS = (None, "low", "fp32")  # a Function's ``autocast`` label (module docstring)


class Function:
    # inputs: the input tensors while the graph is alive (None once freed)
    # needs_grad: per input, whether it wants a gradient
    # n_outputs / out_hooks: for the engine; out_hooks[i] lists hooks on output i
    inputs = None
    needs_grad = ()
    n_outputs = 1
    out_hooks = None
    freed = False
    autocast = None  # None, "low" or "fp32": the op's autocast label (module docstring)
    autocast_inputs = None  # (label, inputs) -> inputs cast for autocast; installed by the ops

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.autocast not in AUTOCAST_LABELS:
            raise ValueError(f"{cls.__qualname__}.autocast must be one of {AUTOCAST_LABELS}, "
                             f"got {cls.autocast!r}")

    def forward(self, *arrays, **kwargs):
        raise NotImplementedError

    def backward(self, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs, **kwargs):
        """Run the op on tensors; return a Tensor (or a tuple of them for several outputs)."""
        if cls.autocast is not None and config.autocast_dtype is not None:
            inputs = Function.autocast_inputs(cls.autocast, inputs)
        fn = cls()
        out = fn.forward(*[t.data for t in inputs], **kwargs)
        record = None
        if config.grad_enabled:
            needs = tuple([t.requires_grad for t in inputs])
            if True in needs:
                record = fn
                fn.inputs = inputs
                fn.needs_grad = needs
        if type(out) is tuple:
            fn.n_outputs = len(out)
            if record:
                fn.out_meta = [(o.shape, o.dtype) for o in out]
            return tuple(make(o, record, i) for i, o in enumerate(out))
        return make(out, record, 0)

    def release(self):
        """Drop references to inputs and saved arrays so the graph can be garbage-collected."""
        self.__dict__.clear()
        self.freed = True

    def __repr__(self):
        return f"<{type(self).__name__} backward>"


# ---- the reverse pass -------------------------------------------------------------------------
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


def run_backward(roots, seeds, retain_graph=False, targets=None):
    """Backpropagate ``seeds`` (arrays, one per root tensor).

    With ``targets=None`` the gradients of leaf tensors that require grad are added to their
    ``.grad`` (Torch style). With a list of tensors, their gradients are returned instead (``None``
    for a target that the roots do not depend on) and no ``.grad`` is touched.
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
                entry[1] = entry[1] + grad
            return
        slots = node_grads.get(fn)
        if slots is None:
            slots = node_grads[fn] = [None] * fn.n_outputs
        i = tensor._index
        slots[i] = grad if slots[i] is None else slots[i] + grad

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
            for callback, i in calls:
                callback(i, entry[1])

    # Scaled gradients are meant to overflow now and then: the float status reports it, so NumPy's
    # per-op RuntimeWarnings would only be noise.
    with numpy.errstate(over="ignore", invalid="ignore", divide="ignore"):
        order = _toposort([r._ctx for r in roots if r._ctx is not None])
        ready = _ready_plan(order, targets) if _listeners else {}
        for fn in order:
            grads = node_grads.pop(fn, None)
            if grads is None:
                if ready:
                    report(fn)
                continue
            if fn.out_hooks:
                grads = [_run_hooks(fn.out_hooks.get(i), g) for i, g in enumerate(grads)]
            for t in inner_targets:
                if t._ctx is fn:
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
            if ready:  # only under on_gradient_ready: no call per node otherwise
                report(fn)

    return _deliver(seeds, targets, leaf_grads, captured, hooked)


def _deliver(seeds, targets, leaf_grads, captured, hooked):
    """The end of ``run_backward``: each gradient (its leaf hooks run, unless they ran when it
    was reported final, ``hooked``) made ``_fresh`` and returned per target, or added to its
    leaf's ``.grad``."""
    seen = {_owner(s) for s in seeds}
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
        g = _fresh(g, leaf, seen)
        leaf.grad = _tensor.make(g if leaf.grad is None else leaf.grad.data + g, None, 0)
    return None


def _fill_missing(fn, grads):
    xp = backend.get_array_module(*[g for g in grads if g is not None])
    return [xp.zeros(shape, dtype) if g is None else g
            for g, (shape, dtype) in zip(grads, fn.out_meta)]


def _run_hooks(hooks, grad):
    if not hooks or grad is None:
        return grad
    for hook in hooks:
        result = hook(_tensor.make(grad, None, 0))
        if result is not None:
            grad = result.data if isinstance(result, _tensor.Tensor) else result
    return grad


def _owner(array):
    base = array.base
    return id(array if base is None else base)


def _fresh(grad, tensor, seen):
    """``grad`` as the gradient of ``tensor``: its dtype, its shape, writable, not aliased."""
    if grad.dtype != tensor.data.dtype:
        grad = grad.astype(tensor.data.dtype)
    if grad.shape != tensor.data.shape:
        raise RuntimeError(f"gradient shape {grad.shape} does not match tensor shape "
                           f"{tensor.data.shape}: an op's backward is wrong")
    key = _owner(grad)
    if key in seen or not getattr(grad.flags, "writeable", True):  # CuPy arrays have no such flag
        grad = grad.copy()
        key = id(grad)
    seen.add(key)
    return grad
