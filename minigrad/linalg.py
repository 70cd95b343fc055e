"""Batched inversion of symmetric positive definite (SPD) matrices, for THOR's curvature blocks.

``batched_inv_spd(x)`` inverts every matrix of a stack ``x`` of shape (..., n, n) at once::

    x = L Lᵀ            (Cholesky)
    X = L⁻¹             (triangular inverse)
    x⁻¹ = Xᵀ X

On NumPy the first two steps are one recursion over 2x2 blocks ``x = [[A11, ·], [A21, A22]]``
(a blocked right-looking Cholesky that carries the inverse of its factor)::

    X11 = L11⁻¹ of A11              (recursion)
    L21 = A21 X11ᵀ;  S = A22 - L21 L21ᵀ   (the Schur complement)
    X22 = L22⁻¹ of S                (recursion)
    X21 = -X22 L21 X11

down to leaves of ``_CHOL_LEAF`` columns (``numpy.linalg.cholesky`` and forward substitution).
Every other step is a batched matrix product over the whole stack, so the stack costs a few
dozen NumPy calls, not one LAPACK call per matrix (NumPy's batched Cholesky loops over the
matrices and is slower than this whole inverse). On a CPU (one BLAS thread) it takes about
0.25x the time of ``numpy.linalg.inv`` (an LU factorisation) on 64 blocks of 128x128 float32,
as accurately (``benchmarks/thor.py`` measures it). On CuPy the factor comes from CuPy's
batched potrf and the triangular inverse from the same 2x2 recursion ``L⁻¹ = [[L11⁻¹, 0],
[-L22⁻¹ L21 L11⁻¹, L22⁻¹]]``, both halves of every matrix inverted together as one stack.

Cholesky fails loudly on a matrix that is not positive definite in the working precision, where
LU returns an inverse that can be off by 100 %. ``inv_spd_ladder`` uses that signal: the blocks
that fail are retried with more damping, then in float64, then the previous inverse is kept; only
when none of that helps does it raise, naming the layer. It never falls back to LU and never
returns a non-finite inverse.
"""
import numpy

from minigrad import backend
from minigrad.backend import read_scalar
from minigrad.tensor import Tensor

_LEAF = 16
_CHOL_LEAF = 32
FLOATS = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64))


class NotPositiveDefiniteError(ValueError):
    """Some matrices of a stack are not positive definite (or not finite).

    Attributes:
        indices: the positions (in the flattened stack) of the failing matrices.
    """

    def __init__(self, message, indices):
        super().__init__(message)
        self.indices = tuple(int(i) for i in indices)


def batched_inv_spd(x):
    """Inverse of each SPD matrix of the stack ``x``: Cholesky and a blocked triangular inverse.

    Args:
        x: a Tensor or a NumPy/CuPy array of shape (..., n, n), float32 or float64, each matrix
            symmetric positive definite (only its lower triangle is read).

    Returns:
        The inverses, of ``x``'s shape, dtype and device (a Tensor when ``x`` is one).

    Raises:
        TypeError: ``x`` is not a Tensor or array, or its dtype is not float32/float64.
        ValueError: ``x`` has fewer than 2 dimensions or its matrices are not square.
        NotPositiveDefiniteError (a ValueError): a matrix is not finite or not positive definite
            in ``x``'s precision; ``indices`` lists them.
    """
    array = _check_stack(x, "x")
    inv = _inverse(array.reshape((-1,) + array.shape[-2:]))
    if isinstance(inv, NotPositiveDefiniteError):
        raise inv
    inv = inv.reshape(array.shape)
    return Tensor(inv) if isinstance(x, Tensor) else inv


def inv_spd_ladder(blocks, damping, previous=None, name="", retries=3, growth=10.0, *,
                   first=None):
    """Invert a stack of damped SPD blocks, recovering the blocks whose Cholesky fails.

    The ladder, per failing block: (1) add ``growth``, ``growth²``, ... (``retries`` times)
    times the damping already in the block (``damping``; when it is 0, 1e-6 of the block's mean
    diagonal) and retry; (2) retry in float64 with the largest damping; (3) keep that block of
    ``previous``; (4) raise. A block holding inf or NaN skips (1) and (2).

    Args:
        blocks: array (b, n, n), float32 or float64.
        damping: the damping already added to the blocks' diagonals: a float >= 0, or one per
            block (a sequence).
        previous: None or an array like ``blocks``: the inverses to keep as step (3) (a block
            of it that is not finite counts as absent).
        name: the layer, for the error message: a str, or one per block (a sequence); blocks
            of several layers can so be inverted in one call.
        retries: step (1)'s number of tries.
        growth: step (1)'s damping factor per try.
        first: what ``inverses([blocks])`` gave for ``blocks`` when it was already called
            (several stacks' inverses and checks in one read of the device); None: computed
            here.

    Returns:
        ``(inverses, steps)``: the inverses (``blocks``' dtype, all finite) and a dict with the
        indices of the blocks that needed each step: ``{"damped": [...], "float64": [...],
        "previous": [...]}`` (empty lists when all factorised at once).

    Raises:
        NotPositiveDefiniteError: a block that no step recovers (the message names ``name``).
    """
    blocks = _check_stack(blocks, "blocks")
    steps = {"damped": [], "float64": [], "previous": []}
    result = _inverse(blocks) if first is None else first
    if not isinstance(result, NotPositiveDefiniteError):
        return result, steps
    xp = backend.get_array_module(blocks)
    out = xp.zeros_like(blocks)
    failed = numpy.zeros(blocks.shape[0], bool)
    failed[list(result.indices)] = True
    good = numpy.flatnonzero(~failed)
    if good.size:
        healthy = _inverse(blocks[good])  # the healthy blocks factorise as a stack
        if isinstance(healthy, NotPositiveDefiniteError):
            failed[good[list(healthy.indices)]] = True
            good = numpy.flatnonzero(~failed)
            healthy = _inverse(blocks[good]) if good.size else None
        if good.size:
            out[good] = healthy
    n = blocks.shape[-1]
    eye = xp.eye(n, dtype=blocks.dtype)
    dampings = numpy.broadcast_to(numpy.asarray(damping, numpy.float64), (blocks.shape[0],))
    names = ([f"block {i}" + (f" of {name}" if name else "") for i in range(blocks.shape[0])]
             if isinstance(name, str) else list(name))
    for i in numpy.flatnonzero(failed):
        block, damping, name = blocks[i:i + 1], float(dampings[i]), names[i]
        inv, step = None, None
        if read_scalar(xp.isfinite(block).all()):
            trace = read_scalar(xp.trace(block[0]))
            base = damping if damping > 0 else 1e-6 * max(trace / n, 1e-30)
            extra = 0.0
            for k in range(1, retries + 1):
                extra = base * (growth ** k - 1.0)
                inv = _single(block + extra * eye)
                if inv is not None:
                    step = "damped"
                    break
            if inv is None:
                inv = _single((block + extra * eye).astype(numpy.float64))
                step = "float64" if inv is not None else None
                inv = None if inv is None else inv.astype(blocks.dtype)
                if inv is not None and not read_scalar(xp.isfinite(inv).all()):
                    inv, step = None, None  # finite in float64, not representable in float32
        if inv is None and previous is not None and read_scalar(xp.isfinite(previous[i]).all()):
            inv, step = previous[i:i + 1], "previous"
        if inv is None:
            raise NotPositiveDefiniteError(
                f"{name} ({n}x{n}) is not positive definite even with "
                f"{growth ** retries:g}x its damping {damping:g} and in float64, and there is "
                f"no previous inverse to keep (increase the damping, or lower the learning rate)",
                [i])
        out[i] = inv[0]
        steps[step].append(int(i))
    return out, steps


# ---- internals ------------------------------------------------------------------------------

def _check_stack(x, name):
    array = x.data if isinstance(x, Tensor) else x
    xp = backend.get_array_module(array)
    if not isinstance(array, xp.ndarray):
        raise TypeError(f"batched_inv_spd: '{name}' must be a Tensor or an array, "
                        f"but got {type(x).__name__}")
    if array.dtype not in FLOATS:
        raise TypeError(f"batched_inv_spd: '{name}' must be float32 or float64, but got "
                        f"{array.dtype} (invert float16 curvature in float32)")
    if array.ndim < 2 or array.shape[-1] != array.shape[-2]:
        raise ValueError(f"batched_inv_spd: '{name}' must be a stack of square matrices of shape "
                         f"(..., n, n), but got shape {tuple(array.shape)}")
    return array


def _inverse(stack):
    """Inverses of a (b, n, n) stack, or a NotPositiveDefiniteError naming the failing ones."""
    return inverses([stack])[0]


def inverses(stacks):
    """``_inverse`` of each (b, n, n) stack of ``stacks``; on the GPU every stack is factorised
    and inverted first and all their checks come back in one read of the device."""
    results = [None] * len(stacks)
    device = []
    for k, stack in enumerate(stacks):
        if stack.shape[0] == 0 or stack.shape[-1] == 0:
            results[k] = stack.copy()
        elif backend.get_array_module(stack) is numpy:
            results[k] = _host_inverse(stack)
        else:
            device.append(k)
    if device:
        done = [_device_inverse(stacks[k]) for k in device]
        xp = backend.get_array_module(stacks[device[0]])
        flags = backend.as_numpy(xp.concatenate([f for _, f in done], axis=1)).astype(bool)
        start = 0
        for k, (inv, f) in zip(device, done):
            count = f.shape[1]
            results[k] = _checked(stacks[k], inv, flags[:, start:start + count])
            start += count
    return results


def _host_inverse(stack):
    """``_inverse`` of a NumPy stack: the blocked Cholesky inverse, else find the failures."""
    if bool(numpy.isfinite(stack).all()):
        tri = _cholesky_inverse(stack)
        if tri is not None:
            inv = numpy.matmul(tri.transpose(0, 2, 1), tri)
            if bool(numpy.isfinite(inv).all()):
                return inv
    chol = _cholesky(stack)
    if chol is None:  # NumPy raised for the whole stack: find the failing matrices
        factored = numpy.array([_cholesky(stack[i:i + 1]) is not None
                                for i in range(stack.shape[0])])
        return _checked(stack, None, numpy.stack([factored, factored]))
    diag = numpy.diagonal(chol, axis1=-2, axis2=-1)
    factored = numpy.isfinite(chol).all(axis=(-2, -1)) & (diag > 0).all(axis=-1)
    inv = None
    if factored.all():
        tri = _tri_inverse(chol)
        inv = numpy.matmul(tri.transpose(0, 2, 1), tri)
    finite = factored if inv is None else numpy.isfinite(inv).all(axis=(-2, -1))
    return _checked(stack, inv, numpy.stack([factored, finite]))


def _device_inverse(stack):
    """The unchecked inverses of a CuPy stack and, per matrix, whether its Cholesky factor
    exists and its inverse is finite (a (2, b) device array; nothing is read). CuPy's batched
    Cholesky does not raise for a matrix that is not positive definite: its factor holds a
    non-positive or NaN pivot, which the flags catch."""
    xp = backend.get_array_module(stack)
    try:
        chol = xp.linalg.cholesky(stack)
    except numpy.linalg.LinAlgError:  # an array type that raises as NumPy does
        factored = numpy.array([_cholesky(stack[i:i + 1]) is not None
                                for i in range(stack.shape[0])])
        flags = xp.asarray(numpy.stack([factored, factored]))
        return None, flags
    diag = xp.diagonal(chol, axis1=-2, axis2=-1)
    factored = xp.isfinite(chol).all(axis=(-2, -1)) & (diag > 0).all(axis=-1)
    tri = _tri_inverse(chol)
    inv = xp.matmul(xp.swapaxes(tri, -1, -2), tri)
    return inv, xp.stack([factored, xp.isfinite(inv).all(axis=(-2, -1))])


def _checked(stack, inv, flags):
    """``inv``, or the NotPositiveDefiniteError that the host ``flags`` (factored, finite: two
    rows of one bool per matrix) call for."""
    factored, finite = flags[0], flags[1]
    if not factored.all():
        bad = numpy.flatnonzero(~factored)
        return NotPositiveDefiniteError(
            f"batched_inv_spd: {bad.size} of {stack.shape[0]} matrices are not positive definite "
            f"(or not finite) in {stack.dtype}: indices {bad[:8].tolist()}", bad)
    if not finite.all():
        bad = numpy.flatnonzero(~finite)
        return NotPositiveDefiniteError(
            f"batched_inv_spd: the inverses of {bad.size} matrices overflow {stack.dtype}: "
            f"indices {bad[:8].tolist()}", bad)
    return inv


def _single(block):
    """The inverse of a (1, n, n) stack, or None when it is not positive definite."""
    result = _inverse(block)
    return None if isinstance(result, NotPositiveDefiniteError) else result


def _cholesky(stack):
    """Lower Cholesky factors, or None when NumPy refuses the stack (CuPy gives NaN instead)."""
    xp = backend.get_array_module(stack)
    if not read_scalar(xp.isfinite(stack).all()):
        return None
    try:
        return xp.linalg.cholesky(stack)
    except numpy.linalg.LinAlgError:
        return None


def _cholesky_inverse(stack):
    """``L⁻¹`` of the Cholesky factor of each matrix of a NumPy (b, n, n) stack (see the module
    docstring), or None when some matrix is not positive definite."""
    n = stack.shape[-1]
    if n <= _CHOL_LEAF:
        chol = _cholesky(stack)
        return None if chol is None else _substitute(chol)
    h = n // 2
    top = _cholesky_inverse(stack[:, :h, :h])
    if top is None:
        return None
    l21 = numpy.matmul(stack[:, h:, :h], top.transpose(0, 2, 1))
    bottom = _cholesky_inverse(stack[:, h:, h:] - numpy.matmul(l21, l21.transpose(0, 2, 1)))
    if bottom is None:
        return None
    out = numpy.zeros_like(stack)
    out[:, :h, :h] = top
    out[:, h:, h:] = bottom
    out[:, h:, :h] = -numpy.matmul(bottom, numpy.matmul(l21, top))
    return out


def _tri_inverse(lower):
    """Inverse of each lower-triangular matrix of a (b, n, n) stack, by 2x2 block recursion."""
    xp = backend.get_array_module(lower)
    b, n = lower.shape[0], lower.shape[-1]
    if n <= _LEAF:
        return _substitute(lower)
    h = n // 2
    if n % 2 == 0:  # both halves as one stack: one call per level of the recursion
        both = _tri_inverse(xp.concatenate([lower[:, :h, :h], lower[:, h:, h:]]))
        top, bottom = both[:b], both[b:]
    else:
        top, bottom = _tri_inverse(lower[:, :h, :h]), _tri_inverse(lower[:, h:, h:])
    out = xp.zeros_like(lower)
    out[:, :h, :h] = top
    out[:, h:, h:] = bottom
    out[:, h:, :h] = -xp.matmul(bottom, xp.matmul(lower[:, h:, :h], top))
    return out


def _substitute(lower):
    """Inverse of small lower-triangular matrices, row by row (forward substitution)."""
    xp = backend.get_array_module(lower)
    n = lower.shape[-1]
    out = xp.zeros_like(lower)
    recip = 1.0 / xp.diagonal(lower, axis1=-2, axis2=-1)
    out[:, 0, 0] = recip[:, 0]
    for i in range(1, n):
        row = xp.matmul(lower[:, i:i + 1, :i], out[:, :i, :i])[:, 0]
        out[:, i, :i] = -row * recip[:, i, None]
        out[:, i, i] = recip[:, i]
    return out
