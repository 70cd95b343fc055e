"""Functional differentiation, MindSpore style: ``grad``, ``value_and_grad``, ``GradOperation``.

These return gradients instead of writing ``.grad``: the positional inputs to differentiate are
re-wrapped as fresh leaves, the weights (Parameters) are differentiated in place, and the output
is seeded with ones — or with ``sens`` (this is how a loss scale enters backprop).

They nest, as MindSpore's and JAX's do: called inside the function that another of them
differentiates, one records its backward (``create_graph``), keeps its inputs in the outer
graph (an input that already requires grad is differentiated where it is, not re-wrapped) and
returns its value and gradients with their graph, so ``grad(grad(f))`` is f'' and a loss may
hold a gradient penalty. ``config.grad_depth`` counts the calls running their function.
"""
from minigrad import backend
from minigrad._checks import check_bool, check_callable, check_int_tuple, check_type
from minigrad._config import config, enable_grad
from minigrad.autograd.engine import run_backward
from minigrad.tensor import Tensor, make, seed_like


def _positions(grad_position, n):
    single = isinstance(grad_position, int)
    positions = (grad_position,) if single else grad_position
    if not isinstance(positions, (tuple, list)) or not all(isinstance(p, int) for p in positions):
        raise TypeError(f"grad_position must be an int or a tuple of ints (or None), "
                        f"got {grad_position!r}")
    for p in positions:
        if not -n <= p < n:
            raise ValueError(f"grad_position={grad_position!r} is out of range for {n} inputs")
    return tuple(p % n for p in positions), single


def _differentiate(fn, args, positions, weights, has_aux, sens):
    """Run ``fn(*args)`` and backprop; return (outputs, input grads, weight grads).

    The outputs are ``fn``'s own: ``value_and_grad`` detaches them (unless nested),
    ``GradOperation`` drops them.
    """
    nested = config.grad_depth > 0
    args = list(args)
    unique = list(dict.fromkeys(positions))  # a position asked for twice is one input
    for p in unique:
        if not isinstance(args[p], Tensor):
            raise TypeError(f"input {p} to differentiate must be a Tensor, got "
                            f"{type(args[p]).__name__}")
        if not (nested and args[p].requires_grad):
            args[p] = make(args[p].data, None, 0).requires_grad_()
    leaves = [args[p] for p in positions]
    weights = [weights] if isinstance(weights, Tensor) else list(weights or ())  # one Parameter
    config.grad_depth += 1
    try:
        if config.grad_enabled:
            out = fn(*args)
        else:
            with enable_grad():
                out = fn(*args)
    finally:
        config.grad_depth -= 1
    if has_aux:
        if not isinstance(out, tuple) or not out:
            raise TypeError("has_aux=True needs fn to return a tuple (output, aux...), "
                            f"got {type(out).__name__}")
        roots = [out[0]]
    else:
        roots = list(out) if isinstance(out, tuple) else [out]
    if sens is not None and len(roots) > 1:
        sens_list = list(sens) if isinstance(sens, (tuple, list)) else [sens] * len(roots)
    else:
        sens_list = [sens] * len(roots)
    differentiable = [(r, s) for r, s in zip(roots, sens_list) if r.requires_grad]
    targets = leaves + weights
    if differentiable:
        seeds = [seed_like(r, s if s is not None else _ones(r)) for r, s in differentiable]
        grads = run_backward([r for r, _ in differentiable], seeds, retain_graph=nested,
                             targets=targets, create_graph=nested)
    else:
        grads = [None] * len(targets)
    grads = [make(_zeros(t), None, 0) if g is None else g if nested else make(g, None, 0)
             for t, g in zip(targets, grads)]
    return out, grads[:len(leaves)], tuple(grads[len(leaves):])


def _detached(out):
    """``out`` (a Tensor or a tuple) as plain Tensors, as MindSpore returns them: their graph has
    been used and freed, and a loop such as ``total = total + value`` must not keep growing it."""
    if isinstance(out, tuple):
        return tuple(o.detach() if isinstance(o, Tensor) else o for o in out)
    return out.detach() if isinstance(out, Tensor) else out


def _ones(t):
    return backend.get_array_module(t.data).ones(t.shape, t.dtype)


def _zeros(t):
    return backend.get_array_module(t.data).zeros(t.shape, t.dtype)


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False):
    """Wrap ``fn`` to return ``(fn(*args), gradients)``.

    Args:
        fn: function of tensors returning a tensor (or a tuple; all outputs are differentiated
            and their gradients summed, unless ``has_aux``).
        grad_position: int or tuple of ints: which positional inputs to differentiate, or
            ``None`` to differentiate only ``weights``. Default 0.
        weights: Parameters (a list, tuple, or a Cell's ``trainable_params()``) to differentiate.
        has_aux: ``fn`` returns ``(output, *aux)``; only ``output`` is differentiated.

    Returns:
        A function returning ``(value, grads)``: ``value`` is ``fn``'s output as plain Tensors
        (no graph: it was used for the gradients and freed; nested in another ``grad``, both
        keep their graph); ``grads`` is one tensor (int position), a tuple (tuple of positions
        or weights only), or ``(input_grads, weight_grads)`` when both.

    Raises:
        TypeError: for an ``fn`` that is not callable, a ``grad_position`` that is not an int or
            a tuple/list of ints (or None), ``weights`` that are not Tensors, or a ``has_aux``
            that is not a bool.
        ValueError: if both ``grad_position`` and ``weights`` are None. The returned function
            raises TypeError for an input to differentiate that is not a Tensor, and ValueError
            for a position out of range.
    """
    _check_arguments(fn, grad_position, weights, has_aux, "value_and_grad")
    if grad_position is None and weights is None:
        raise ValueError("grad_position and weights cannot both be None")

    def wrapped(*args):
        positions, single = ((), False) if grad_position is None else _positions(grad_position,
                                                                                 len(args))
        nested = config.grad_depth > 0
        out, input_grads, weight_grads = _differentiate(fn, args, positions, weights, has_aux, None)
        if not nested:
            out = _detached(out)
        if grad_position is None:
            return out, weight_grads
        input_grads = input_grads[0] if single else tuple(input_grads)
        return out, (input_grads if weights is None else (input_grads, weight_grads))
    return wrapped


def _check_arguments(fn, grad_position, weights, has_aux, owner):
    check_callable("fn", fn, owner=owner)
    if grad_position is not None:  # the range is known when the inputs are
        check_int_tuple("grad_position", grad_position, owner=owner)
    if weights is not None and not isinstance(weights, Tensor):
        check_type("weights", weights, (list, tuple),
                   expected="a Parameter, a list or tuple of Parameters, or None", owner=owner)
        for i, weight in enumerate(weights):
            check_type(f"weights[{i}]", weight, Tensor, expected="a Parameter", owner=owner)
    check_bool("has_aux", has_aux, owner=owner)


def grad(fn, grad_position=0, weights=None, has_aux=False):
    """Like ``value_and_grad`` but returns only the gradients (with ``has_aux``:
    ``(grads, aux)``).

    Raises:
        TypeError, ValueError: as ``value_and_grad``.
    """
    _check_arguments(fn, grad_position, weights, has_aux, "grad")
    vag = value_and_grad(fn, grad_position, weights, has_aux)

    def wrapped(*args):
        out, grads = vag(*args)
        return (grads, tuple(out[1:])) if has_aux else grads
    return wrapped


class GradOperation:
    """MindSpore's higher-order gradient:
    ``GradOperation(get_all, get_by_list, sens_param)(net, weights)``.

    Args:
        get_all: gradients of all positional inputs (a tuple) instead of only the first.
        get_by_list: gradients of ``weights`` (a tuple in their order).
        sens_param: the last positional argument is ``sens``, the seed of backprop (same shape as
            the output, or broadcastable to it); ``TrainOneStepWithLossScaleCell`` passes the loss
            scale here.

    ``grad_fn = GradOperation(get_by_list=True, sens_param=True)(net, weights)``;
    ``grad_fn(*inputs, sens)`` returns the weight gradients. With both ``get_all`` and
    ``get_by_list`` the result is ``(input_grads, weight_grads)``.
    """

    def __init__(self, get_all=False, get_by_list=False, sens_param=False):
        for name, value in (("get_all", get_all), ("get_by_list", get_by_list),
                            ("sens_param", sens_param)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {value!r}")
        self.get_all, self.get_by_list, self.sens_param = get_all, get_by_list, sens_param

    def __call__(self, fn, weights=None):
        if self.get_by_list and weights is None:
            raise ValueError("GradOperation(get_by_list=True) needs weights")

        def grad_fn(*args):
            sens = None
            if self.sens_param:
                if not args:
                    raise TypeError("sens_param=True: the last input must be the sens tensor")
                args, sens = args[:-1], args[-1]
            positions = ()
            if self.get_all or not self.get_by_list:
                positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
                positions = positions if self.get_all else positions[:1]
            _, input_grads, weight_grads = _differentiate(
                fn, args, positions, weights if self.get_by_list else None, False, sens)
            if self.get_by_list:
                return (tuple(input_grads), weight_grads) if self.get_all else weight_grads
            return tuple(input_grads) if self.get_all else input_grads[0]
        return grad_fn
