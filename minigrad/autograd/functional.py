"""PyTorch's ``torch.autograd.functional``: vector-Jacobian and Jacobian-vector products,
Hessian-vector products, whole Jacobians and Hessians of a function of Tensors.

All of them are built on ``autograd.grad``; the products with second derivatives
(``vhp``, ``hvp``, ``jvp``, ``hessian``) on its ``create_graph``::

    vjp(f, x, v)   = vᵀ J                  one backward
    jvp(f, x, v)   = J v                   the double-vjp trick: u ↦ Jᵀu is linear in u, and
                                           its vjp with v is J v (two backwards)
    vhp(f, x, v)   = vᵀ H = ∇ₓ ⟨∇f, v⟩      two backwards
    hvp(f, x, v)   = H v                   the jvp of x ↦ ∇f(x) (three backwards; equal to vhp
                                           for a twice continuously differentiable f)
    jacobian(f, x), hessian(f, x)          one vjp per output element, in reverse mode

``inputs`` is a Tensor or a tuple of Tensors; results follow its structure (and the outputs').
(The module sits in the ops' layer: it stacks Jacobian rows with ``ops.stack``.)
The inputs are differentiated as fresh leaves (with ``create_graph``, one that requires grad is
kept where it is, so the result is differentiable in it); the outputs and results come back
without a graph unless ``create_graph``. With ``strict=False`` (default) an input the outputs do
not depend on gets zeros; ``strict=True`` raises instead.
"""
from minigrad import backend
from minigrad._checks import check_bool, check_relation, check_type
from minigrad._config import enable_grad
from minigrad.autograd.backprop import grad
from minigrad.ops.join import stack
from minigrad.tensor import Tensor, make


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), vᵀ J)``: the vector-Jacobian product of ``func`` at ``inputs``.

    Args:
        func: a function of Tensors returning a Tensor or a tuple of Tensors.
        inputs: a Tensor or a tuple of Tensors.
        v: one seed per output (a Tensor, or a tuple); None for a one-element output (ones).
        create_graph: return results with a graph (differentiable again). Default False.
        strict: raise for an input the outputs do not depend on. Default False (zeros).

    Raises:
        TypeError: for inputs or outputs that are not Tensors, or a flag that is not a bool.
        ValueError: for a ``v`` that does not match the outputs.
        RuntimeError: in strict mode, for an input the outputs do not depend on.
    """
    create_graph, strict = _flags(create_graph, strict, "vjp")
    with enable_grad():
        inputs, as_tuple = _inputs(inputs, create_graph, "vjp")
        outputs, out_tuple = _outputs(func(*inputs), "vjp")
        result = _grad(outputs, inputs, v, create_graph, strict, "vjp")
    return _result(outputs, out_tuple, create_graph), _result(result, as_tuple, create_graph)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``: the Jacobian-vector product of ``func`` at ``inputs``, by the
    double-vjp trick (every op on the way needs its second derivative).

    Args:
        func: as ``vjp``.
        inputs: as ``vjp``.
        v: one tangent per input (a Tensor, or a tuple); None for a one-element input (ones).
        create_graph: as ``vjp``.
        strict: as ``vjp``.

    Raises:
        TypeError, ValueError, RuntimeError: as ``vjp``.
    """
    create_graph, strict = _flags(create_graph, strict, "jvp")
    with enable_grad():
        inputs, as_tuple = _inputs(inputs, create_graph, "jvp")
        outputs, out_tuple = _outputs(func(*inputs), "jvp")
        result = _jvp(outputs, inputs, v, create_graph, strict, "jvp")
    return _result(outputs, out_tuple, create_graph), _result(result, out_tuple, create_graph)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), vᵀ H)``: the vector-Hessian product of a function with one-element
    output, ``∇ₓ ⟨∇ₓ func, v⟩``.

    Args:
        func: a function of Tensors returning a one-element Tensor.
        inputs: as ``vjp``.
        v: one vector per input (a Tensor, or a tuple); None for a one-element input (ones).
        create_graph: as ``vjp``.
        strict: as ``vjp``.

    Raises:
        TypeError, ValueError, RuntimeError: as ``vjp``; ValueError for an output of more than
            one element.
    """
    create_graph, strict = _flags(create_graph, strict, "vhp")
    with enable_grad():
        inputs, as_tuple = _inputs(inputs, create_graph, "vhp")
        output = _scalar_output(func(*inputs), "vhp")
        gradient = _grad([output], inputs, None, True, strict, "vhp")
        result = _grad(gradient, inputs, v, create_graph, strict, "vhp")
    return _result([output], False, create_graph), _result(result, as_tuple, create_graph)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)``: the Hessian-vector product of a function with one-element output,
    the Jacobian-vector product of its gradient (equal to ``vhp`` when the second derivatives
    are continuous, H being symmetric then).

    Arguments and errors as ``vhp``.
    """
    create_graph, strict = _flags(create_graph, strict, "hvp")
    with enable_grad():
        inputs, as_tuple = _inputs(inputs, create_graph, "hvp")
        output = _scalar_output(func(*inputs), "hvp")
        gradient = _grad([output], inputs, None, True, strict, "hvp")
        result = _jvp(gradient, inputs, v, create_graph, strict, "hvp")
    return _result([output], False, create_graph), _result(result, as_tuple, create_graph)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for output i and input j a Tensor of shape
    ``outputs[i].shape + inputs[j].shape`` (nested tuples for tuple outputs and inputs), one
    vjp per output element.

    Args:
        func: as ``vjp``.
        inputs: as ``vjp``.
        create_graph: as ``vjp``.
        strict: as ``vjp``.
        vectorize: must be False (PyTorch's batched vjp is not implemented).
        strategy: must be ``"reverse-mode"`` (there is no forward mode).

    Raises:
        TypeError, RuntimeError: as ``vjp``. ValueError: for another ``vectorize`` or
            ``strategy``.
    """
    create_graph, strict = _flags(create_graph, strict, "jacobian")
    _reverse_only(vectorize, strategy, "jacobian")
    with enable_grad():
        inputs, as_tuple = _inputs(inputs, create_graph, "jacobian")
        outputs, out_tuple = _outputs(func(*inputs), "jacobian")
        rows = [_jacobian_of(o, inputs, create_graph, strict) for o in outputs]
    rows = [_result(r, as_tuple, create_graph) for r in rows]
    return tuple(rows) if out_tuple else rows[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function with one-element output: for inputs i and j a Tensor of shape
    ``inputs[i].shape + inputs[j].shape`` (nested tuples for tuple inputs), the Jacobian of its
    gradient.

    Arguments and errors as ``jacobian`` (``outer_jacobian_strategy`` is its ``strategy``);
    ValueError for an output of more than one element.
    """
    create_graph, strict = _flags(create_graph, strict, "hessian")
    _reverse_only(vectorize, outer_jacobian_strategy, "hessian")

    def gradient(*xs):
        output = _scalar_output(func(*xs), "hessian")
        return tuple(_grad([output], xs, None, True, strict, "hessian"))
    result = jacobian(gradient, inputs if isinstance(inputs, tuple) else (inputs,),
                      create_graph=create_graph, strict=strict)
    return result if isinstance(inputs, tuple) else result[0][0]


# ---- the pieces -------------------------------------------------------------------------------
def _flags(create_graph, strict, owner):
    return (check_bool("create_graph", create_graph, owner=owner),
            check_bool("strict", strict, owner=owner))


def _reverse_only(vectorize, strategy, owner):
    check_relation("vectorize", check_bool("vectorize", vectorize, owner=owner), not vectorize,
                   "False (a batched vjp is not implemented)", owner=owner)
    check_type("strategy", strategy, str, owner=owner)
    check_relation("strategy", strategy, strategy == "reverse-mode",
                   "'reverse-mode' (there is no forward mode)", owner=owner)


def _inputs(inputs, keep_graph, owner):
    """The inputs as a tuple of leaves to differentiate (an input that requires grad is kept
    when ``keep_graph``), and whether they came as a tuple."""
    as_tuple = isinstance(inputs, tuple)
    items = inputs if as_tuple else (inputs,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{owner}: inputs[{i}] must be a Tensor, got {type(t).__name__}")
    return tuple(t if keep_graph and t.requires_grad else make(t.data, None, 0).requires_grad_()
                 for t in items), as_tuple


def _outputs(out, owner):
    as_tuple = isinstance(out, tuple)
    items = out if as_tuple else (out,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{owner}: the function must return Tensors, got "
                            f"{type(t).__name__} as output {i}")
    return list(items), as_tuple


def _scalar_output(out, owner):
    if not isinstance(out, Tensor):
        raise TypeError(f"{owner}: the function must return one Tensor, got {type(out).__name__}")
    if out.size != 1:
        raise ValueError(f"{owner}: the function must return a one-element Tensor, got shape "
                         f"{out.shape}")
    return out


def _grad(outputs, inputs, v, create_graph, strict, owner):
    """Σᵢ ⟨vᵢ, ∂outputsᵢ/∂inputs⟩ per input, zeros (or, strict, an error) where it is None."""
    seeds = _matching("v", v, outputs, owner)
    used = [(o, s) for o, s in zip(outputs, seeds) if o.requires_grad]
    grads = [None] * len(inputs)
    if used:
        grads = grad([o for o, _ in used], inputs, [s for _, s in used], retain_graph=True,
                     create_graph=create_graph, allow_unused=True)
    return [_zeros_or_raise(g, t, i, strict, owner) for i, (g, t) in enumerate(zip(grads, inputs))]


def _jvp(outputs, inputs, v, create_graph, strict, owner):
    """J v by the double-vjp trick: the vjp with a dummy u is Jᵀu, linear in u; its vjp with v
    is J v."""
    dummies = [make(backend.get_array_module(o.data).zeros(o.shape, o.dtype), None, 0)
               .requires_grad_() for o in outputs]
    transposed = _grad(outputs, inputs, dummies, True, strict, owner)
    return _grad(transposed, dummies, _matching("v", v, inputs, owner), create_graph, strict,
                 owner)


def _jacobian_of(output, inputs, create_graph, strict):
    """The rows of d output / d inputs, one vjp per element of ``output``, stacked."""
    xp = backend.get_array_module(output.data)
    rows = [[] for _ in inputs]
    for k in range(output.size):
        seed = xp.zeros(output.size, output.dtype)
        seed[k] = 1
        grads = _grad([output], inputs, [Tensor(seed.reshape(output.shape))], create_graph, strict,
                      "jacobian")
        for row, g in zip(rows, grads):
            row.append(g.reshape(-1))
    return [stack(row).reshape(output.shape + t.shape) if row else
            make(xp.zeros(output.shape + t.shape, t.dtype), None, 0)
            for row, t in zip(rows, inputs)]


def _matching(name, vectors, like, owner):
    """``vectors`` (None, a Tensor or a tuple) as one entry per tensor of ``like``; None only
    for a one-element tensor (ones)."""
    items = [vectors] * len(like) if vectors is None else (
        list(vectors) if isinstance(vectors, (tuple, list)) else [vectors])
    if len(items) != len(like):
        raise ValueError(f"{owner}: {name} has {len(items)} entries for {len(like)} tensors")
    out = []
    for i, (v, t) in enumerate(zip(items, like)):
        if v is None:
            if t.size != 1:
                raise ValueError(f"{owner}: {name} is needed for a tensor of shape {t.shape} "
                                 f"(None means ones, for one-element tensors only)")
            v = make(backend.get_array_module(t.data).ones(t.shape, t.dtype), None, 0)
        elif not isinstance(v, Tensor):
            raise TypeError(f"{owner}: {name}[{i}] must be a Tensor, got {type(v).__name__}")
        elif v.shape != t.shape:
            raise ValueError(f"{owner}: {name}[{i}] has shape {v.shape}, expected {t.shape}")
        out.append(v)
    return out


def _zeros_or_raise(g, t, i, strict, owner):
    if g is not None:
        return g
    if strict:
        raise RuntimeError(f"{owner}: the output is independent of input {i}, which strict=True "
                           f"does not allow")
    return make(backend.get_array_module(t.data).zeros(t.shape, t.dtype), None, 0)


def _result(tensors, as_tuple, create_graph):
    out = tuple(t if create_graph else t.detach() for t in tensors)
    return out if as_tuple else out[0]
