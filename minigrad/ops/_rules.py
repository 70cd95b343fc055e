"""The array-or-Tensor functions the gradient rules are written with.

A rule (a Function's ``backward``) runs on NumPy/CuPy arrays on the first-order path and on
Tensors under ``create_graph`` (``minigrad.autograd.function``). Operators, ``.sum``,
``.reshape``, ``.T``, ``.astype`` and ``widen``/``store`` already mean the same on both; these
few functions stand in for the ``xp.*`` calls that do not: an array goes to NumPy/CuPy (one
type check more than calling it directly), a Tensor to the differentiable op.
"""
from minigrad import backend
from minigrad.tensor import Tensor


def exp(x):
    """eˣ elementwise."""
    return x.exp() if isinstance(x, Tensor) else backend.get_array_module(x).exp(x)


def log(x):
    """ln x elementwise."""
    return x.log() if isinstance(x, Tensor) else backend.get_array_module(x).log(x)


def tanh(x):
    """tanh x elementwise."""
    return x.tanh() if isinstance(x, Tensor) else backend.get_array_module(x).tanh(x)


def where(condition, x, y):
    """``x`` where ``condition``, else ``y`` (the condition is not differentiated)."""
    if isinstance(x, Tensor) or isinstance(y, Tensor):
        from minigrad.ops.math import where as select  # ops.math imports the rules' modules
        return select(condition, x, y)
    return backend.get_array_module(condition, x, y).where(condition, x, y)
