"""Gradient checking: minigrad's backward against a float64 central difference.

``check_backward(fn, inputs)`` follows Chainer's ``check_backward``: for each differentiable input
``x_i`` it draws a random unit direction ``v_i`` and compares

    analytic:  ⟨∇_i L, v_i⟩                     with L = Σ_j ⟨gy_j, y_j⟩, y = fn(x), by backward
    numeric:   (L(x_i + ε v_i) - L(x_i - ε v_i)) / 2ε   with fn evaluated on float64 copies

The numeric side always runs in float64, so it stays precise when the op under test is float16;
only the analytic side carries the tested dtype's rounding, which ``tolerance(dtype)`` allows for.
One direction per input costs two extra forward passes, whatever the input's size.
"""
import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import (
    check_callable,
    check_int,
    check_int_tuple,
    check_non_negative,
    check_operand,
    check_positive,
    check_relation,
)
from minigrad._config import enable_grad, no_grad
from minigrad.autograd.backprop import grad
from minigrad.autograd.engine import run_backward
from minigrad.autograd.function import Function

# (atol, rtol) for the directional derivative of a gradient computed in each dtype
_TOLERANCES = {
    dtypes.float16: (5e-3, 5e-2),
    dtypes.float32: (1e-4, 1e-3),
    dtypes.float64: (1e-6, 1e-5),
}
if dtypes.HAS_LOWP:
    _TOLERANCES[dtypes.bfloat16] = (4e-2, 1e-1)
DEFAULT_EPS = 1e-3


def tolerance(dtype):
    """``(atol, rtol)`` for checking gradients computed in ``dtype`` (float16, bfloat16, float32
    or float64). bfloat16 keeps 8 significant bits where float16 keeps 11: its tolerances are
    eight times float16's absolute one and twice its relative one.

    Raises:
        TypeError: for a non-float dtype.
    """
    dtype = dtypes.as_dtype(dtype)
    if dtype not in _TOLERANCES:
        raise TypeError(f"tolerance(dtype) needs a float dtype, got {dtype}")
    return _TOLERANCES[dtype]


class _Probe(Function):
    """Identity that records the gradient arriving at an input before the engine casts it."""
    def forward(self, x, box):
        self.box = box  # a list outliving the node (the engine frees the node after backward)
        return x

    def backward(self, g):
        self.box.append(g)
        return g


def check_backward(fn, inputs, grad_outputs=None, dtype=None, atol=None, rtol=None, eps=None,
                   seed=0, no_grads=None):
    """Check ``fn``'s backward against a float64 central difference along random directions.

    Args:
        fn: function of Tensors (one per entry of ``inputs``) returning a Tensor or a tuple.
        inputs: Tensors or arrays (NumPy or CuPy); float ones are differentiated, integer and
            bool ones (labels, indices) are passed through untouched.
        grad_outputs: the seed for each output (an array, a Tensor, or a tuple with one entry per
            output, None for outputs not to seed); default standard-normal values in the
            output's dtype.
        dtype: cast the float inputs to this dtype first (the dtype under test).
        atol: absolute tolerance on the directional derivative (the direction has unit norm,
            so ``atol`` suits inputs and seeds of order one); default ``tolerance(d)`` for the
            lowest-precision float input d.
        rtol: relative tolerance on it; default ``tolerance(d)`` likewise.
        eps: finite-difference step along the unit direction; default 1e-3.
        seed: seeds the random grad_outputs and directions (the check is deterministic).
        no_grads: positions of float inputs not to differentiate.

    Each gradient must also have its input's shape and dtype.

    Raises:
        AssertionError: naming the function, the input, both derivatives and the tolerances.
        ValueError: if no input is differentiated (no float input left after ``no_grads``), a
            ``no_grads`` position is not an input's, ``grad_outputs`` has a different number of
            entries than ``fn`` has outputs or a seed that does not broadcast to its output, or
            a tolerance or ``eps`` is out of range.
        TypeError: if ``fn`` returns something other than Tensors, or an argument is of the
            wrong kind (a seed that is not a number or an array, a float ``no_grads``).
    """
    given = inputs
    inputs, skip = _check_arguments("check_backward", fn, inputs, dtype, atol, rtol, eps, seed,
                                    no_grads)
    name = getattr(fn, "__name__", repr(fn))
    rng = numpy.random.RandomState(seed)
    arrays = [_as_array(x, dtype) for x in inputs]
    diff = _differentiated(f"check_backward({name})", given, arrays, skip, no_grads)
    if atol is None or rtol is None:
        lowest = min((arrays[i].dtype for i in diff), key=lambda d: d.itemsize)
        default_atol, default_rtol = tolerance(lowest)
        atol = default_atol if atol is None else atol
        rtol = default_rtol if rtol is None else rtol
    eps = DEFAULT_EPS if eps is None else eps

    grads, seeds = _analytic(fn, arrays, diff, grad_outputs, rng, name)
    for i in diff:
        x, g = arrays[i], grads[i]
        where = f"check_backward({name}): gradient of input {i} (shape {x.shape}, dtype {x.dtype})"
        if g.shape != x.shape:
            raise AssertionError(f"{where} has shape {g.shape}")
        if g.dtype != x.dtype:
            raise AssertionError(f"{where} has dtype {g.dtype}")
        xp = backend.get_array_module(x)
        v = rng.standard_normal(x.shape)
        v /= max(numpy.sqrt((v * v).sum()), 1e-300)
        v = xp.asarray(v)
        got = float((g.astype(numpy.float64) * v).sum())
        expected = _directional(fn, arrays, i, v, seeds, eps)
        off = abs(got - expected) > atol + rtol * abs(expected)
        if not numpy.isfinite([got, expected]).all() or off:
            raise AssertionError(
                f"{where} is wrong: directional derivative along a random unit vector: "
                f"backward gives {got:.6g}, float64 central difference gives {expected:.6g} "
                f"(|difference| {abs(got - expected):.3g} > atol {atol:g} + rtol {rtol:g} * "
                f"|expected|; eps {eps:g})")


def check_double_backward(fn, inputs, grad_outputs=None, grad_grad_inputs=None, dtype=None,
                          atol=None, rtol=None, eps=None, seed=0, no_grads=None):
    """Check ``fn``'s second derivatives: the backward of its ``create_graph`` backward, against
    a float64 central difference of its float64 first derivative (Chainer's
    ``check_double_backward``).

    The first derivative ``g(x, gy) = Σ_j ⟨gy_j, ∂y_j/∂x⟩`` (``y = fn(x)``, computed by
    ``autograd.grad(..., create_graph=True)``) is a function of the inputs and the seeds; it is
    checked by ``check_backward`` with respect to both, seeded with ``grad_grad_inputs``. The
    numeric side evaluates ``g`` by float64 backprop, so an op whose backward records no graph
    (or a wrong one) fails, and one whose second derivative is not supported raises its error.

    Args:
        fn: as ``check_backward``.
        inputs: as ``check_backward``.
        grad_outputs: the seed ``gy`` of each output (as ``check_backward``'s); default
            standard-normal values in the output's dtype.
        grad_grad_inputs: the seed of each first derivative (one per differentiated input,
            broadcast to its shape); default standard-normal values.
        dtype: as ``check_backward``.
        atol: as ``check_backward``.
        rtol: as ``check_backward``.
        eps: as ``check_backward``.
        seed: as ``check_backward``.
        no_grads: as ``check_backward``.

    Raises:
        AssertionError, ValueError, TypeError: as ``check_backward``; RuntimeError from
            ``create_graph`` through an op without second derivatives.
    """
    from minigrad.tensor import Tensor
    given = inputs
    inputs, skip = _check_arguments("check_double_backward", fn, inputs, dtype, atol, rtol, eps,
                                    seed, no_grads)
    name = getattr(fn, "__name__", repr(fn))
    owner = f"check_double_backward({name})"
    rng = numpy.random.RandomState(seed + 1)  # other draws than check_backward's own
    arrays = [_as_array(x, dtype) for x in inputs]
    diff = _differentiated(owner, given, arrays, skip, no_grads)
    with no_grad():
        outs = _outputs(fn(*[Tensor(a) for a in arrays]), name)
    if grad_outputs is None:
        seeds = [rng.standard_normal(o.shape).astype(o.dtype) for o in outs]
    else:
        seeds = _seeds(owner, "grad_outputs", grad_outputs, [o.shape for o in outs])
    seeded = [j for j, s in enumerate(seeds) if s is not None and dtypes.is_float(outs[j].dtype)]
    check_relation("grad_outputs", grad_outputs, bool(seeded), "seeds with one for a float "
                   "output at least (else there is no first derivative to check)", owner=owner)
    n = len(arrays)

    def first_derivative(*args):
        xs, gys = list(args[:n]), args[n:]
        with enable_grad():
            for i in diff:
                if not xs[i].requires_grad:  # the numeric side's plain float64 Tensors
                    xs[i] = xs[i].detach().requires_grad_()
            ys = _outputs(fn(*xs), name)
            return grad([ys[j] for j in seeded], [xs[i] for i in diff], list(gys),
                        create_graph=any(a.requires_grad for a in args), allow_unused=True,
                        materialize_grads=True)
    first_derivative.__name__ = f"first derivative of {name}"
    seed_arrays = [_as_array(seeds[j], None).astype(outs[j].dtype) for j in seeded]
    if grad_grad_inputs is None:
        grad_grad_inputs = tuple(rng.standard_normal(arrays[i].shape) for i in diff)
    else:  # one per differentiated input (the outputs of the first derivative)
        given_seeds = grad_grad_inputs
        grad_grad_inputs = tuple(_seeds(owner, "grad_grad_inputs", grad_grad_inputs,
                                        [arrays[i].shape for i in diff]))
        check_relation("grad_grad_inputs", given_seeds,
                       any(s is not None for s in grad_grad_inputs), "seeds with one for a "
                       "differentiated input at least (else no gradient is checked)", owner=owner)
    check_backward(first_derivative, arrays + seed_arrays, grad_outputs=grad_grad_inputs,
                   atol=atol, rtol=rtol, eps=eps, seed=seed,
                   no_grads=[i for i in range(n) if i not in diff])


def numerical_grad(fn, inputs, grad_outputs, eps=DEFAULT_EPS):
    """Elementwise float64 central-difference gradients of ``L = Σ_j ⟨gy_j, fn(inputs)_j⟩``.

    Costs two forward passes per element: for tiny shapes (exhaustive checks).

    Args:
        fn: as for ``check_backward``.
        inputs: Tensors or arrays; integer ones are passed through.
        grad_outputs: an array (or tuple of arrays, None entries skipped) per output.
        eps: the step (a positive number).

    Returns:
        A list with a float64 NumPy array per float input (None for integer inputs).

    Raises:
        TypeError, ValueError: naming the argument, as ``check_backward``.
    """
    check_positive("eps", eps, owner="numerical_grad")
    inputs, _ = _check_arguments("numerical_grad", fn, inputs, None, None, None, eps, 0, None)
    arrays = [_as_array(x, None) for x in inputs]
    seeds = grad_outputs if isinstance(grad_outputs, (list, tuple)) else [grad_outputs]
    for j, s in enumerate(seeds):
        _check_seed("numerical_grad", _entry("grad_outputs", grad_outputs, j), s)
    seeds = [None if s is None else _as_array(s, None).astype(numpy.float64) for s in seeds]
    result = []
    for i, x in enumerate(arrays):
        if not dtypes.is_float(x.dtype):
            result.append(None)
            continue
        xp = backend.get_array_module(x)
        g = numpy.zeros(x.shape)
        for k in numpy.ndindex(*x.shape):
            e = numpy.zeros(x.shape)
            e[k] = 1.0
            g[k] = _directional(fn, arrays, i, xp.asarray(e), seeds, eps)
        result.append(g)
    return result


def _check_arguments(owner, fn, inputs, dtype, atol, rtol, eps, seed, no_grads):
    """The checkers' common arguments checked: ``(inputs as a list, positions not to
    differentiate as a set)``."""
    check_callable("fn", fn, owner=owner)
    several = isinstance(inputs, (list, tuple))
    listed = list(inputs) if several else [inputs]
    for i, x in enumerate(listed):
        if not (hasattr(x, "dtype") and hasattr(x, "shape")):  # a Tensor, or a NumPy/CuPy array
            check_operand(f"inputs[{i}]" if several else "inputs", x, owner=owner)
    if dtype is not None:
        dtypes.as_dtype(dtype, owner=owner)
    check_non_negative("atol", atol, allow_none=True, owner=owner)
    check_non_negative("rtol", rtol, allow_none=True, owner=owner)
    check_positive("eps", eps, allow_none=True, owner=owner)
    check_int("seed", seed, low=0, high=2 ** 32 - 2, owner=owner)  # RandomState's seeds, and +1
    skip = () if no_grads is None else check_int_tuple("no_grads", no_grads, low=0,
                                                       high=max(len(listed) - 1, 0), owner=owner)
    return listed, set(skip)


def _differentiated(owner, given, arrays, skip, no_grads):
    """The positions of the float inputs not in ``no_grads``; ValueError naming both when there
    are none."""
    diff = [i for i, a in enumerate(arrays) if dtypes.is_float(a.dtype) and i not in skip]
    check_relation("inputs", given, bool(diff), f"Tensors or arrays with a float input to "
                                                f"differentiate that no_grads={no_grads!r} "
                                                f"leaves", owner=owner)
    return diff


def _entry(name, value, j):
    """The name of entry ``j`` of argument ``name`` (the argument itself when not a sequence)."""
    return f"{name}[{j}]" if isinstance(value, (tuple, list)) else name


def _check_seed(owner, name, seed):
    """A seed (None, a Tensor, an array, a number or nested lists of numbers) checked."""
    if seed is not None and not (hasattr(seed, "dtype") and hasattr(seed, "shape")):
        check_operand(name, seed, owner=owner)


def _seeds(owner, name, value, shapes):
    """``value`` (one seed, or a tuple/list with one per shape; None entries: no seed) as a list
    of arrays (or None) broadcast to ``shapes``; errors name ``name``."""
    seeds = list(value) if isinstance(value, (tuple, list)) else [value]
    check_relation(name, value, len(seeds) == len(shapes),
                   f"one seed or a tuple/list of {len(shapes)} (one per output)", owner=owner)
    out = []
    for j, (seed, shape) in enumerate(zip(seeds, shapes)):
        _check_seed(owner, _entry(name, value, j), seed)
        if seed is None:
            out.append(None)
            continue
        array = _as_array(seed, None)
        if array.shape != shape:
            xp = backend.get_array_module(array)
            try:
                array = xp.broadcast_to(array, shape)
            except ValueError:
                check_relation(_entry(name, value, j), seed, False,
                               f"a seed that broadcasts to the shape {shape}", owner=owner)
        out.append(array)
    return out


def _as_array(x, dtype):
    from minigrad.tensor import Tensor
    array = x.data if isinstance(x, Tensor) else x
    xp = backend.get_array_module(array)
    array = xp.asarray(array)
    if dtype is not None and dtypes.is_float(array.dtype):
        array = array.astype(dtypes.as_dtype(dtype))
    return array


def _outputs(out, name):
    from minigrad.tensor import Tensor
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(f"check_backward({name}): fn must return Tensors, got "
                            f"{type(o).__name__}")
    return outs


def _analytic(fn, arrays, diff, grad_outputs, rng, name):
    """Run fn and backward; return (gradient per input, None if not differentiated; float64
    seed per output, None if not seeded)."""
    from minigrad.tensor import Tensor
    leaves = [Tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
    boxes = [[] for _ in arrays]
    with enable_grad():
        probes = [_Probe.apply(t, box=boxes[i]) if i in diff else t for i, t in enumerate(leaves)]
        outs = _outputs(fn(*probes), name)
    if grad_outputs is None:
        given = [None] * len(outs)
    else:
        given = _seeds(f"check_backward({name})", "grad_outputs", grad_outputs,
                       [o.shape for o in outs])
    roots, seeds, seeds64 = [], [], []
    for o, gy in zip(outs, given):
        xp = backend.get_array_module(o.data)
        if not dtypes.is_float(o.dtype) or not o.requires_grad:
            seeds64.append(None)
            continue
        if gy is None and grad_outputs is None:
            gy = rng.standard_normal(o.shape)
        elif gy is None:
            seeds64.append(None)
            continue
        gy = xp.asarray(_as_array(gy, None)).astype(o.dtype)
        roots.append(o)
        seeds.append(gy)
        seeds64.append(gy.astype(numpy.float64))
    if grad_outputs is not None and not roots and any(
            dtypes.is_float(o.dtype) and o.requires_grad for o in outs):
        check_relation("grad_outputs", grad_outputs, False, "seeds with one for a float output "
                       "at least (else no gradient is checked)", owner=f"check_backward({name})")
    if roots:
        run_backward(roots, seeds, targets=[leaves[i] for i in diff])
    grads = [box[0] if box else
             backend.get_array_module(a).zeros(a.shape, a.dtype) if i in diff else None
             for i, (box, a) in enumerate(zip(boxes, arrays))]
    return grads, seeds64


def _directional(fn, arrays, i, v, seeds, eps):
    """Central difference of L along ``v`` for input ``i``, all float inputs in float64."""
    from minigrad.tensor import Tensor
    x64 = [a.astype(numpy.float64) if dtypes.is_float(a.dtype) else a for a in arrays]

    def objective(sign):
        args = list(x64)
        args[i] = x64[i] + sign * eps * v
        with no_grad():
            outs = _outputs(fn(*[Tensor(a) for a in args]), "fn")
        # a seed given as a NumPy array meets the output on its device
        return sum(float((o.data.astype(numpy.float64) * backend.to_device(s, o.device)).sum())
                   for o, s in zip(outs, seeds) if s is not None)
    return (objective(1.0) - objective(-1.0)) / (2 * eps)
