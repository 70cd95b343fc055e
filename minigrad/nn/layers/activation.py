"""Activation cells (ReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax) and ``get_activation``."""
from minigrad import ops
from minigrad._checks import check_bool, check_in, check_int
from minigrad.nn.cell import Cell


class ReLU(Cell):
    """max(x, 0)."""

    def construct(self, x):
        return ops.relu(x)


class Sigmoid(Cell):
    """1 / (1 + exp(-x))."""

    def construct(self, x):
        return ops.sigmoid(x)


class Tanh(Cell):
    """tanh(x)."""

    def construct(self, x):
        return ops.tanh(x)


class GELU(Cell):
    """x · Φ(x); ``approximate=True`` (default, as MindSpore) uses the tanh formula."""

    def __init__(self, approximate=True):
        super().__init__()
        self.approximate = check_bool("approximate", approximate, owner="GELU")

    def construct(self, x):
        return ops.gelu(x, approximate=self.approximate)

    def extend_repr(self):
        return f"approximate={self.approximate}"


class _AlongAxis(Cell):
    """An activation normalised along ``axis`` (default -1): ``op(x, axis)``.

    Raises:
        TypeError: if ``axis`` is not an int, checked when the cell is built; an axis out of
            range for the input is refused at the call (the input's rank is known only then).
    """
    op = None

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = check_int("axis", axis, owner=type(self).__name__)

    def construct(self, x):
        return self.op(x, self.axis)

    def extend_repr(self):
        return f"axis={self.axis}"


class Softmax(_AlongAxis):
    """exp(x) / Σ exp(x) along ``axis`` (an int, default -1)."""
    op = staticmethod(ops.softmax)


class LogSoftmax(_AlongAxis):
    """x - log Σ exp(x) along ``axis`` (an int, default -1)."""
    op = staticmethod(ops.log_softmax)


_ACTIVATIONS = {"relu": ReLU, "sigmoid": Sigmoid, "tanh": Tanh, "gelu": GELU, "softmax": Softmax,
                "logsoftmax": LogSoftmax}


def get_activation(name):
    """A new activation cell by name ("relu", "sigmoid", "tanh", "gelu", "softmax", "logsoftmax").

    Raises:
        TypeError: for a name that is not a str.
        ValueError: for an unknown name, listing the known ones.
    """
    return activation_by_name("name", name)


def activation_by_name(argument, name):
    """``get_activation(name)`` with messages naming ``argument`` (a layer's ``activation``)."""
    return _ACTIVATIONS[check_in(argument, name, sorted(_ACTIVATIONS), fold=str.lower)]()
