"""The Cell boundary: what ``Cell.__call__`` does to its inputs before ``construct``, the check
layers and losses make of theirs, and the PyTorch names a Cell answers with a hint."""
from minigrad import dtype as dtypes, ops
from minigrad.tensor import Tensor


def narrow_float64(inputs, parameters):
    """Float64 inputs cast to the compute dtype: the widest floating dtype of ``parameters`` (a
    cell's), when that is narrower (float32 for an fp32 network). Without floating parameters,
    or with float64 ones, the inputs are returned as they are."""
    kinds = {p.dtype for p in parameters if p.dtype.kind == "f"}
    if not kinds or dtypes.float64 in kinds:
        return inputs
    return cast_floats(inputs, max(kinds, key=lambda d: d.itemsize))


TORCH_NAMES = {
    "parameters": "get_parameters() (a generator) or trainable_params() (the list an optimizer "
                  "takes)",
    "named_parameters": "parameters_and_names()",
    "train": "set_train(True)",
    "eval": "set_train(False)",
    "forward": "construct: define construct(self, ...) in place of forward",
    "modules": "cells_and_names() (the cells with their paths)",
    "named_modules": "cells_and_names()",
    "children": "cells()",
    "named_children": "name_cells()",
    "state_dict": "parameters_dict(), or minigrad.save_checkpoint(net, path)",
    "load_state_dict": "minigrad.load_param_into_net(net, parameter_dict)",
    "zero_grad": "the optimizer's zero_grad()",
    "register_parameter": "insert_param_to_cell(name, param) or plain attribute assignment",
    "add_module": "insert_child_to_cell(name, cell) or plain attribute assignment",
}


def check_tensor(owner, name, value):
    """``value`` if it is a Tensor, else a TypeError naming the loss and the argument.

    The one rule at the boundary of layers and losses: a NumPy array is converted to a Tensor
    when the cell is called (``Cell.__call__``); anything else that is not a Tensor (a list, a
    number, None) is refused, as PyTorch's losses and MindSpore's cells refuse it.
    """
    if isinstance(value, Tensor):
        return value
    raise TypeError(f"For '{owner}', '{name}' must be a Tensor (or a NumPy array), got "
                    f"{type(value).__name__}")


def cast_floats(inputs, dtype):
    return tuple(ops.cast(x, dtype)
                 if isinstance(x, Tensor) and x.dtype.kind == "f" and x.dtype != dtype else x
                 for x in inputs)
