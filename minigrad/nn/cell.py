"""``Cell``: the building block of networks (MindSpore's name for a module).

A Cell owns Parameters and sub-Cells through plain attribute assignment::

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(4, 2)        # a sub-cell, registered in order
            self.scale = Parameter(...)     # a parameter, registered in order

        def construct(self, x):
            return self.fc(x) * self.scale

Naming. A parameter assigned to ``self.weight`` without a name is named ``"weight"``; when a cell
is assigned to ``self.fc`` of a parent, the parent prefixes ``"fc."`` to the names of the unnamed
parameters inside it, so names follow attribute paths (``"features.0.weight"``). Cells built with
``auto_prefix=False`` (the wrappers ``WithLossCell``, ``TrainOneStepCell``) add no prefix, so a
wrapped network keeps its names. A name given by the user (``Parameter(x, name="w")``) is kept.
``parameters_and_names`` yields attribute paths (a cell's own parameters first, then each
sub-cell's, in definition order); ``param.name`` is the identity checkpoints use, and two
different Parameters with one name in a network raise ValueError there.

Modes: ``training`` starts False as in MindSpore; ``set_train()`` switches the whole tree.

Keras dtype policies: a cell created while ``mixed_precision.set_global_policy`` has set a
policy (``"mixed_float16"``, ``"float16"``) computes in its compute dtype, as ``to_float`` makes
it (this cell only: its sub-cells were created under the policy too, or not), and keeps the
Parameters assigned to it in its variable dtype. Losses and the training wrappers are not
layers and take no policy (``_takes_policy = False``).
"""
from collections import OrderedDict

import numpy

from minigrad import dtype as dtypes, ops
from minigrad._checks import (KeyValueError, check_bool, check_callable, check_relation,
                              check_type)
from minigrad._fp16_host import convert
from minigrad._config import config, using_config
from minigrad.nn.cell_tree import CellTree
from minigrad.nn.parameter_tuple import ParameterTuple
from minigrad.nn.torch_names import TORCH_NAMES
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor

__all__ = ["Cell", "ParameterTuple", "check_tensor"]


def narrow_float64(inputs, parameters):
    """Float64 inputs cast to the compute dtype: the widest floating dtype of ``parameters`` (a
    cell's), when that is narrower (float32 for an fp32 network). Without floating parameters,
    or with float64 ones, the inputs are returned as they are."""
    kinds = {p.dtype for p in parameters if dtypes.is_float(p.dtype)}
    if not kinds or dtypes.float64 in kinds:
        return inputs
    return cast_floats(inputs, max(kinds, key=lambda d: d.itemsize))


def check_tensor(owner, name, value):
    """``value`` if it is a Tensor, else a TypeError naming the loss and the argument.

    The one rule at the boundary of layers and losses: a NumPy array is converted to a Tensor
    when the cell is called (``Cell.__call__``); anything else that is not a Tensor (a list, a
    number, None) is refused, as PyTorch's losses and MindSpore's cells refuse it.
    """
    if isinstance(value, Tensor):  # a loss's every call: no call into the checker
        return value
    return check_type(name, value, Tensor, expected="a Tensor (or a NumPy array)", owner=owner)


def cast_floats(inputs, dtype):
    """``inputs`` with each floating Tensor of another dtype cast to ``dtype`` (``to_float``)."""
    return tuple(ops.cast(x, dtype)
                 if isinstance(x, Tensor) and dtypes.is_float(x.dtype) and x.dtype != dtype else x
                 for x in inputs)


def cast_own_parameters(cell, dtype):
    """Point the attributes of ``cell``'s own floating Parameters of another dtype at casts of
    them to ``dtype`` (``to_float``: ``construct`` reads ``self.weight`` in the compute dtype);
    return ``{name: Parameter}`` for ``restore_parameters``. The cast is a differentiable node,
    so the gradient reaches the Parameter in its own dtype. The Parameters listed in
    ``_fp32_params`` (BatchNorm's moving statistics, written in place) are left as they are."""
    attributes = cell.__dict__
    swapped = {}
    for name, param in cell._params.items():
        if (param.dtype != dtype and dtypes.is_float(param.dtype) and name not in cell._fp32_params
                and attributes.get(name) is param):  # not already cast by an enclosing call
            swapped[name] = param
            attributes[name] = ops.cast(param, dtype)
    return swapped


def restore_parameters(cell, swapped):
    """Undo ``cast_own_parameters``: the attributes hold the Parameters again."""
    cell.__dict__.update(swapped)


def _float_dtype(dtype, method):
    """``dtype`` as a floating ``numpy.dtype``, else TypeError naming the method."""
    dtype = dtypes.as_dtype(dtype)
    if dtype not in dtypes.FLOATS:
        raise TypeError(f"{method}(dtype) needs float16, bfloat16, float32 or float64, got "
                        f"{dtype}")
    return dtype


class _HookHandle:
    """Returned by ``register_forward_hook``; ``remove()`` unregisters the hook."""
    _next_id = 0

    def __init__(self, hooks):
        self._hooks = hooks
        self.id = _HookHandle._next_id
        _HookHandle._next_id += 1

    def remove(self):
        self._hooks.pop(self.id, None)


class Cell(CellTree):
    """Base class of layers and networks: subclass it and define ``construct``.

    Args:
        auto_prefix: prefix the names of a sub-cell's parameters with its attribute name.
            Default True; wrappers pass False.

    Calling a cell first applies the input rule at the Cell boundary:

    - a NumPy array input becomes a Tensor (layers and losses refuse other non-Tensors, such as
      lists, with a TypeError naming the cell and the argument);
    - with ``to_float(dtype)``, floating inputs are cast to ``dtype`` (and ``construct`` sees
      the cell's own floating Parameters cast to it too);
    - otherwise a float64 input is cast to the cell's compute dtype, the widest floating dtype
      of its parameters, when that is narrower: a float64 batch (scikit-learn's loaders return
      float64) runs an fp32 network in fp32, as the dtype policy has it, rather than silently
      promoting the whole network to float64. A cell with float64 parameters (e.g. for a
      float64 gradient check) or without floating parameters computes in float64.

    It then runs the forward pre-hooks, ``construct`` and the forward hooks. A network that AMP
    level O1 was applied to (``amp.build_train_network(..., level="O1")``) runs ``construct``
    under ``amp.autocast``.

    PyTorch ``nn.Module`` names (``parameters()``, ``train()``, ``eval()``, ``forward``, ...)
    raise an AttributeError naming the minigrad equivalent.
    """
    # parameters the parameter-casting helper leaves in float32 (BatchNorm's moving statistics)
    _fp32_params = ()
    # False for cells that are not layers (losses, training wrappers): no Keras dtype policy
    _takes_policy = True

    def __init__(self, auto_prefix=True):
        auto_prefix = check_bool("auto_prefix", auto_prefix, owner=type(self).__name__)
        d = self.__dict__
        d["_params"] = OrderedDict()        # attribute name -> Parameter
        d["_param_tuples"] = OrderedDict()  # attribute name -> ParameterTuple
        d["_cells"] = OrderedDict()         # attribute name -> Cell
        d["_auto_prefix"] = auto_prefix
        d["_scope"] = ""                    # prefix of this cell's auto names ("fc." below a cell)
        d["_forward_hooks"] = {}
        d["_forward_pre_hooks"] = {}
        d["_cast_dtype"] = None
        d["_autocast_dtype"] = None         # set by amp level O1: construct runs under autocast
        d["training"] = False
        policy = config.dtype_policy if self._takes_policy else None
        d["_dtype_policy"] = policy         # the Keras policy this cell was created under
        if policy is not None:
            d["_cast_dtype"] = dtypes.as_dtype(policy.compute_dtype)

    def construct(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define construct()")

    def __call__(self, *inputs, **kwargs):
        if any(isinstance(x, numpy.ndarray) for x in inputs):
            inputs = tuple(Tensor(x) if isinstance(x, numpy.ndarray) else x for x in inputs)
        if self._cast_dtype is not None:
            inputs = cast_floats(inputs, self._cast_dtype)
        elif any(isinstance(x, Tensor) and x.dtype == dtypes.float64 for x in inputs):
            inputs = narrow_float64(inputs, self.get_parameters())
        if self._forward_pre_hooks:
            for hook in tuple(self._forward_pre_hooks.values()):
                result = hook(self, inputs)
                if result is not None:
                    inputs = result if isinstance(result, tuple) else (result,)
        cast_dtype = self._cast_dtype
        swapped = None if cast_dtype is None else cast_own_parameters(self, cast_dtype)
        try:
            if self._autocast_dtype is not None:  # amp level O1 (amp.build_train_network)
                with using_config(autocast_dtype=self._autocast_dtype):
                    output = self.construct(*inputs, **kwargs)
            else:
                output = self.construct(*inputs, **kwargs)
        finally:
            if swapped:
                restore_parameters(self, swapped)
        if self._forward_hooks:
            for hook in tuple(self._forward_hooks.values()):
                result = hook(self, inputs, output)
                if result is not None:
                    output = result
        return output

    def __getattr__(self, name):
        # reached only when normal lookup fails: say what a PyTorch name is called here
        hint = TORCH_NAMES.get(name)
        if hint is not None:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (a PyTorch "
                                 f"nn.Module name); in minigrad use {hint}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---- registration -------------------------------------------------------------------------
    def __setattr__(self, name, value):
        d = self.__dict__
        if "_params" not in d and isinstance(value, (Parameter, Cell, ParameterTuple)):
            raise AttributeError(f"cannot assign {type(value).__name__} {name!r} before "
                                 f"{type(self).__name__}.__init__ calls super().__init__()")
        if isinstance(value, Parameter):
            self._forget(name, keep="_params")  # a replaced parameter keeps its place in the order
            if value.name is None:
                value.name = d["_scope"] + name  # the path, also when this cell is attached already
            policy = d["_dtype_policy"]
            if (policy is not None and dtypes.is_float(value.dtype)
                    and value.dtype != policy.variable_dtype):  # Keras's variable dtype
                value.data = value.data.astype(policy.variable_dtype)
            d["_params"][name] = value
        elif isinstance(value, Cell):
            self._forget(name, keep="_cells")
            if self._auto_prefix:
                value._prefix_names(d["_scope"] + name + ".")
            d["_cells"][name] = value
        elif isinstance(value, ParameterTuple):
            self._forget(name, keep="_param_tuples")
            d["_param_tuples"][name] = value
        elif "_params" in d and name in d["_params"] and isinstance(value, Tensor):
            # MindSpore: a Tensor assigned to a parameter sets its value
            d["_params"][name].set_data(value)
            return
        elif "_params" in d and (name in d["_params"] or name in d["_cells"]) and value is not None:
            kind = "Parameter" if name in d["_params"] else "Cell"
            raise TypeError(f"cannot assign a {type(value).__name__} to {name!r}: it holds a "
                            f"{kind} (assign a {kind}, a Tensor for a Parameter's value, or None)")
        elif "_params" in d:
            self._forget(name)
        d[name] = value

    def __delattr__(self, name):
        self._forget(name)
        del self.__dict__[name]

    def _forget(self, name, keep=None):
        for registry in ("_params", "_cells", "_param_tuples"):
            if registry != keep:
                self.__dict__[registry].pop(name, None)

    def _prefix_names(self, prefix):
        """Prepend ``prefix`` to the unnamed-by-user parameters of this subtree (not tuple members)
        and to the scope of each of its cells (so a container filled later knows its path)."""
        for _, cell in self.cells_and_names():
            cell.__dict__["_scope"] = prefix + cell._scope
            for param in cell._params.values():
                if not param._user_named:
                    param.name = prefix + param.name

    def insert_param_to_cell(self, param_name, param, check_name_contain_dot=True):
        """Register ``param`` as attribute ``param_name``; a parameter without a name is named by
        its path (``param_name``, prefixed with this cell's attribute path when it is a sub-cell).

        Raises:
            KeyError: if ``param_name`` is empty, contains "." (when checked) or is a
                non-parameter attribute (or method) already (a ``_checks.KeyValueError``, so
                ``except ValueError`` takes it too).
            TypeError: if ``param_name`` is not a str, ``param`` not a Parameter or
                ``check_name_contain_dot`` not a bool.
        """
        owner = "Cell.insert_param_to_cell"
        check_type("param_name", param_name, str, owner=owner)
        dotted = check_bool("check_name_contain_dot", check_name_contain_dot, owner=owner)
        check_relation("param_name", param_name, bool(param_name) and not (
            dotted and "." in param_name), "a non-empty str" + (" without '.'" if dotted else ""),
            error=KeyValueError, owner=owner)
        check_relation("param_name", param_name, not hasattr(self, param_name)
                       or param_name in self._params,  # methods included
                       f"a name that is not an attribute of {type(self).__name__} already",
                       error=KeyValueError, owner=owner)
        check_type("param", param, Parameter, owner=owner)
        setattr(self, param_name, param)

    def insert_child_to_cell(self, child_name, child_cell):
        """Register ``child_cell`` as attribute ``child_name`` (as ``setattr`` does).

        Raises:
            KeyError: for an empty name, one containing ".", or the name of an attribute (or
                method) of this cell that is not a child cell (MindSpore: a duplicated name); a
                ``_checks.KeyValueError``, so ``except ValueError`` takes it too.
            TypeError: if ``child_name`` is not a str or ``child_cell`` not a Cell.
        """
        owner = "Cell.insert_child_to_cell"
        check_type("child_name", child_name, str, owner=owner)
        check_relation("child_name", child_name, bool(child_name) and "." not in child_name,
                       "a non-empty str without '.'", error=KeyValueError, owner=owner)
        check_relation("child_name", child_name, not hasattr(self, child_name)
                       or child_name in self._cells,
                       f"a name that is not an attribute of {type(self).__name__} already",
                       error=KeyValueError, owner=owner)
        check_type("child_cell", child_cell, Cell, owner=owner)
        setattr(self, child_name, child_cell)

    # ---- modes and dtypes ---------------------------------------------------------------------
    def set_train(self, mode=True):
        """Set ``training`` on this cell and all sub-cells (Dropout and BatchNorm read it).

        Raises:
            TypeError: if ``mode`` is not a bool.
        """
        mode = check_bool("mode", mode, owner="Cell.set_train")
        for _, cell in self.cells_and_names():
            cell.__dict__["training"] = mode
        return self

    def set_grad(self, requires_grad=True):
        """Accepted for MindSpore compatibility; minigrad records gradients whenever needed.

        Raises:
            TypeError: if ``requires_grad`` is not a bool.
        """
        check_bool("requires_grad", requires_grad, owner="Cell.set_grad")
        return self

    @property
    def dtype_policy(self):
        """The Keras ``mixed_precision.Policy`` this cell was created under, or None (created
        with no policy set, or a loss or training wrapper)."""
        return self._dtype_policy

    @property
    def cls_name(self):
        """The class name (MindSpore's ``Cell.cls_name``)."""
        return type(self).__name__

    @property
    def auto_prefix(self):
        """Whether sub-cells' parameter names get this cell's attribute name as a prefix."""
        return self._auto_prefix

    def to_float(self, dtype):
        """Compute this cell and its sub-cells in ``dtype`` (MindSpore's ``Cell.to_float``).

        On each call the floating inputs are cast to ``dtype``, and ``construct`` reads each of
        the cell's own floating Parameters as a cast to ``dtype`` (a differentiable node: the
        Parameters keep their dtype, and their gradients arrive in it). So
        ``nn.Dense(4, 2).to_float(float16)`` multiplies in fp16 and returns float16 while its
        weight stays float32, as in MindSpore. BatchNorm's moving statistics are not cast (they
        are written in place; the statistics are computed in float32 anyway). A sub-cell can be
        set back, e.g. ``net.to_float(float16); net.bn.to_float(float32)``. Returns ``self``.

        ``cast_parameters`` casts the stored Parameters instead (AMP level O2 does both: an fp16
        network with fp32 master weights in the optimizer).

        Raises:
            TypeError: if ``dtype`` is not float16, bfloat16, float32 or float64.
        """
        dtype = _float_dtype(dtype, "to_float")
        for _, cell in self.cells_and_names():
            cell.__dict__["_cast_dtype"] = dtype
        return self

    def cast_parameters(self, dtype):
        """Cast the floating parameters of this subtree to ``dtype`` in place (same objects).

        Parameters listed in a cell's ``_fp32_params`` (BatchNorm's moving statistics) stay
        float32. Gradients already stored in ``.grad`` are dropped.

        Raises:
            TypeError: if ``dtype`` is not float16, bfloat16, float32 or float64 (nothing is cast
                then).
        """
        dtype = _float_dtype(dtype, "cast_parameters")
        for _, cell in self.cells_and_names():
            for name, param in cell._params.items():
                if (name in cell._fp32_params or not dtypes.is_float(param.dtype)
                        or param.dtype == dtype):
                    continue
                param.data = convert(param.data, dtype)  # astype's bits, native where fast
                param.grad = None
        return self

    # ---- hooks --------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook):
        """Call ``hook(cell, inputs)`` before ``construct``; a non-None result replaces the inputs.

        Returns a handle whose ``remove()`` unregisters the hook.

        Raises:
            TypeError: if ``hook`` is not callable.
        """
        return self._add_hook(self._forward_pre_hooks, hook, "Cell.register_forward_pre_hook")

    def register_forward_hook(self, hook):
        """Call ``hook(cell, inputs, output)`` after ``construct``; a non-None result replaces it.

        Returns a handle whose ``remove()`` unregisters the hook.

        Raises:
            TypeError: if ``hook`` is not callable.
        """
        return self._add_hook(self._forward_hooks, hook, "Cell.register_forward_hook")

    @staticmethod
    def _add_hook(hooks, hook, owner):
        check_callable("hook", hook, owner=owner)
        handle = _HookHandle(hooks)
        hooks[handle.id] = hook
        return handle

    # ---- printing -----------------------------------------------------------------------------
    def extend_repr(self):
        """The text inside ``Name<...>``; layers override it to show their settings."""
        return ""

    def __repr__(self):
        extra = self.extend_repr()
        children = self.name_cells()
        if not children:
            return f"{type(self).__name__}<{extra}>"
        lines = [extra] if extra else []
        lines += [f"({name}): {child!r}" for name, child in children.items()]
        body = "\n".join(lines).replace("\n", "\n  ")
        return f"{type(self).__name__}<\n  {body}\n  >"
