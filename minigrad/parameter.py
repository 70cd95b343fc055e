"""``Parameter``: a named leaf tensor that a Cell owns and an optimizer updates."""
import numbers
import operator

from minigrad._checks import check_bool, check_operand, check_relation, check_type
from minigrad._config import no_grad
from minigrad.tensor import Tensor


class Parameter(Tensor):
    """A trainable tensor with a name.

    Args:
        default_input: the initial value (Tensor or array-like).
        name: dotted name; a Cell sets it to the attribute path (``"fc1.weight"``) when the
            parameter is registered and no name was given.
        requires_grad: whether optimizers and ``trainable_params`` include it (a bool; another
            type is a TypeError). Default True.

    Parameters are always leaves: ops on them build graphs, and ``backward`` fills ``.grad``.

    Write a parameter in place through ``set_data`` or item assignment (``param[...] = x``):
    both count in ``version``, which is how an optimizer keeping an fp32 master copy of an fp16
    parameter learns that it must re-read it. A write to ``param.data[...]`` itself goes unseen.
    The augmented assignments ``+=``, ``-=``, ``*=`` and ``/=`` also write in place through
    ``set_data`` (no graph is recorded; a result of another shape is a ValueError).
    """
    __slots__ = ("name", "_user_named", "version")

    def __init__(self, default_input, name=None, requires_grad=True):
        if not hasattr(default_input, "dtype"):  # Python data, checked under its own name
            check_operand("default_input", default_input, owner="Parameter")
        super().__init__(default_input)
        if name is not None:
            check_type("name", name, str, expected="a non-empty str or None")
            check_relation("name", name, bool(name), "a non-empty str or None")
        self.name = name
        self._user_named = name is not None
        self.requires_grad = check_bool("requires_grad", requires_grad)  # MindSpore: TypeError
        self.version = 0

    def set_data(self, data):
        """Replace the value in place (same shape); ``data`` is cast to this parameter's dtype.

        ``data`` is a Tensor, an array, or a Python/NumPy number (for a parameter of shape ()).

        Raises:
            ValueError: naming both shapes if they differ.
            TypeError: for data of another kind (a list, a str, ...), showing it.
        """
        if isinstance(data, Tensor):
            array = data.data
        elif isinstance(data, numbers.Number):
            array = data  # assigned as a scalar, which NumPy and CuPy arrays both take
        elif hasattr(data, "shape") and hasattr(data, "dtype"):
            array = data
        else:
            check_relation("data", data, False, "a Tensor, an array or a number",
                           error=TypeError, owner=f"set_data for parameter {self.name!r}")
        shape = tuple(getattr(array, "shape", ()))
        if shape != self.shape:
            check_relation(f"data of shape {shape}", data, False, f"of shape {self.shape}",
                           owner=f"set_data for parameter {self.name!r}")
        self.data[...] = array
        self.version += 1
        return self

    def __setitem__(self, index, value):
        super().__setitem__(index, value)
        self.version += 1

    # ``p += x``, ``p -= lr * g``, ``p *= x``, ``p /= x``: written in place (no graph), through
    # ``set_data`` (same shape, cast to this dtype, ``version`` + 1), as ``cell.w = cell.w - x``
    # does. Without them Python would fall back to the out-of-place operators, rebinding ``p``
    # to a new plain Tensor and leaving the Parameter, and the network holding it, unchanged.
    def _inplace(self, op, other):
        with no_grad():
            result = op(self, other)  # the Tensor operator the ops install
        return self.set_data(result)

    def __iadd__(self, other): return self._inplace(operator.add, other)
    def __isub__(self, other): return self._inplace(operator.sub, other)
    def __imul__(self, other): return self._inplace(operator.mul, other)
    def __itruediv__(self, other): return self._inplace(operator.truediv, other)

    def __repr__(self):
        return (f"Parameter(name={self.name!r}, shape={list(self.shape)}, dtype={self.dtype}, "
                f"requires_grad={self.requires_grad})")
