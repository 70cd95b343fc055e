"""Checkpoints: ``save_checkpoint``, ``load_checkpoint``, ``load_param_into_net`` (MindSpore names).

The file format and its atomic write are in ``checkpoint_file``. Loading validates the whole
file before it returns, and ``load_param_into_net`` checks every parameter before it assigns any,
so a bad file or a mismatched network raises a ``ValueError`` and changes nothing. Every name is
accounted for: ``load_param_into_net`` returns ``(param_not_load, ckpt_not_load)`` as MindSpore
does, warns (``CheckpointMismatchWarning``) when either is non-empty, and raises when no parameter
of the network matches the checkpoint, or, with ``strict_load=True``, on any mismatch.

Resuming a loss-scaled run: the train cell (``Model.train_network``) holds the loss scale and its
counters as the Parameters ``scale_sense``, ``current_iterator_step`` and
``last_overflow_iterator_step``; ``ModelCheckpoint`` saves them with the network, and
``load_checkpoint(path, net=model.train_network, optimizer=opt)`` restores them, so the resumed
run continues on the same scale trajectory. Loading into the backbone alone leaves them out (the
warning lists them).
"""
import json
import os
import warnings

import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import (check_bool, check_path, check_relation, check_str_tuple,
                              check_type)
from minigrad.optim.optimizer import Optimizer
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor
from minigrad.train import checkpoint_file
from minigrad.train.checkpoint_file import FORMAT, MANIFEST, VERSION

_SUFFIX = ".ckpt"


class CheckpointMismatchWarning(UserWarning):
    """Some network parameters or checkpoint entries were not loaded (the message lists them)."""


# ---- saving -------------------------------------------------------------------------------------
def save_checkpoint(save_obj, ckpt_file_name, append_dict=None, optimizer=None):
    """Save parameters (and optionally optimizer state and extra values) to ``ckpt_file_name``.

    Args:
        save_obj: a Cell (all its parameters, by ``Parameter.name``), a list of
            ``{"name": str, "data": Tensor or array}`` dicts (MindSpore style), or a dict
            ``{name: Tensor or array}``.
        ckpt_file_name: target path; ``.ckpt`` is appended when missing (as MindSpore does).
        append_dict: extra values ``{name: int | float | bool | Tensor | array}`` (e.g. the
            epoch, or ``GradScaler.state_dict()``); ``load_checkpoint`` returns them as
            Parameters beside the network's.
        optimizer: an optimizer whose ``state_dict()`` (and class name) is saved with the
            parameters; restore it with ``load_checkpoint(file, optimizer=opt)``.

    Returns:
        The path written.

    Raises:
        TypeError: for a ``ckpt_file_name`` that is not a str or ``os.PathLike`` path, an
            unsupported ``save_obj``, a name that is not a str, an ``append_dict``
            that is not a dict, an unsupported ``append_dict`` value, or an ``optimizer`` that
            is not an ``Optimizer``.
        ValueError: for duplicate names, or an empty ``save_obj`` list or dict.
    """
    if append_dict is not None:
        check_type("append_dict", append_dict, dict, expected="a dict {name: value} or None",
                   owner="save_checkpoint")
    if optimizer is not None:
        _check_optimizer(optimizer, "save_checkpoint")
    path = _with_suffix(check_path("ckpt_file_name", ckpt_file_name, owner="save_checkpoint"))
    archive = _Archive()
    for name, value in _named_values(save_obj):
        archive.add("parameters", "param", name, value)
    for name, value in (append_dict or {}).items():
        if not isinstance(value, (bool, int, float, numpy.number, numpy.ndarray, Tensor)):
            raise TypeError(f"append_dict[{name!r}] must be an int, float, bool, Tensor or array, "
                            f"got {type(value).__name__}")
        archive.add("append", "append", name, value)
    duplicates = sorted({n for n in archive.names if archive.names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate names in the checkpoint: {duplicates}")
    if optimizer is not None:
        archive.manifest["optimizer_class"] = type(optimizer).__name__
        archive.manifest["optimizer"] = checkpoint_file.flatten(
            optimizer.state_dict(), lambda v: archive.put("optim", v))
    checkpoint_file.atomic_savez(path, archive.arrays())
    return path


class _Archive:
    """The arrays and the manifest of one checkpoint being built."""

    def __init__(self):
        self.manifest = {"format": FORMAT, "version": VERSION, "arrays": {}, "parameters": [],
                         "append": []}
        self.names = []
        self._arrays = {}
        self._counts = {}

    def put(self, prefix, value):
        """Store one array under the next ``<prefix>_<i>`` key; return the key."""
        key = f"{prefix}_{self._counts.setdefault(prefix, 0)}"
        self._counts[prefix] += 1
        array = numpy.asarray(backend.as_numpy(value), order="C")
        self._arrays[key] = checkpoint_file.storable(array)
        self.manifest["arrays"][key] = {"shape": list(array.shape),
                                        "dtype": checkpoint_file.dtype_text(array.dtype)}
        return key

    def add(self, field, prefix, name, value):
        if not isinstance(name, str):
            raise TypeError(f"checkpoint names must be str, got {name!r} ({type(name).__name__})")
        self.names.append(name)
        self.manifest[field].append([name, self.put(prefix, value)])

    def arrays(self):
        text = json.dumps(self.manifest).encode("utf-8")
        return {**self._arrays, MANIFEST: numpy.frombuffer(text, dtype=numpy.uint8)}


def _named_values(save_obj):
    if hasattr(save_obj, "parameters_and_names"):
        return [(name, p) for name, p in named_parameters(save_obj)]
    if isinstance(save_obj, (dict, list, tuple)):  # nothing to save is a mistaken argument
        check_relation("save_obj", save_obj, len(save_obj) > 0,
                       "a Cell, a non-empty list of {'name', 'data'} dicts or a non-empty dict",
                       owner="save_checkpoint")
    if isinstance(save_obj, dict):
        return list(save_obj.items())
    if isinstance(save_obj, (list, tuple)):
        out = []
        for i, item in enumerate(save_obj):
            if not isinstance(item, dict) or set(item) != {"name", "data"}:
                raise TypeError(f"save_obj[{i}] must be a dict with keys 'name' and 'data', "
                                f"got {item!r}")
            out.append((item["name"], item["data"]))
        return out
    check_type("save_obj", save_obj, (), expected="a Cell, a list of {'name', 'data'} dicts "
               "or a dict")


def named_parameters(net):
    """``[(name, Parameter)]`` of a Cell, each parameter once, named by ``Parameter.name``."""
    seen, out = set(), []
    for attr_name, param in net.parameters_and_names():
        if id(param) not in seen:
            seen.add(id(param))
            out.append((param.name or attr_name, param))
    return out


def _with_suffix(path):
    return path if path.endswith(_SUFFIX) else path + _SUFFIX


# ---- loading ------------------------------------------------------------------------------------
class CheckpointParams(dict):
    """What ``load_checkpoint`` returns: ``{name: Parameter}``, with the attributes
    ``param_not_load`` and ``ckpt_not_load`` (``load_param_into_net``'s result when a ``net`` was
    given, else two empty lists)."""

    param_not_load = ()
    ckpt_not_load = ()


def load_checkpoint(ckpt_file_name, net=None, strict_load=False, filter_prefix=None,
                    optimizer=None):
    """Read a checkpoint; optionally load it into ``net`` and ``optimizer``.

    Args:
        ckpt_file_name: path of a file written by ``save_checkpoint``.
        net: a Cell to load the parameters into (``load_param_into_net``; the ``append_dict``
            values are not network parameters and are not loaded into it).
        strict_load: passed to ``load_param_into_net``.
        filter_prefix: a str or list of str; parameters whose names start with one of them are
            left out of the result (and not loaded).
        optimizer: an optimizer to restore with ``optimizer.load_state_dict`` from the saved state
            (``save_checkpoint(..., optimizer=opt)``), which must be of the same class (or a
            subclass of it).

    Returns:
        A ``CheckpointParams``: ``{name: Parameter}`` with the saved parameters and the
        ``append_dict`` values; its ``param_not_load`` / ``ckpt_not_load`` list the names that
        were not loaded into ``net``.

    Raises:
        ValueError: naming the file, if it is missing, truncated, corrupt or not a minigrad
            checkpoint; if ``optimizer`` is given but the file has no optimizer state or the
            state of another optimizer class; or (from ``load_param_into_net``) if the network
            does not match. Nothing is loaded then: the network is checked first, the optimizer
            restored next, the parameters assigned last.
            Also for a ``ckpt_file_name`` that does not exist, and an empty ``filter_prefix``
            (``""`` or ``[]``, as MindSpore) or one naming a prefix twice.
        TypeError: if ``ckpt_file_name`` is not a str or ``os.PathLike`` path, ``net`` is not a
            Cell, ``strict_load`` is not a bool, ``filter_prefix`` is not a str or a list of
            str, or ``optimizer`` is not an ``Optimizer``.
    """
    prefixes = _check_prefixes(filter_prefix)
    check_bool("strict_load", strict_load, owner="load_checkpoint")
    if net is not None:
        _check_cell(net)
    if optimizer is not None:
        _check_optimizer(optimizer, "load_checkpoint")
    path = check_path("ckpt_file_name", ckpt_file_name, owner="load_checkpoint")
    check_relation("ckpt_file_name", path, os.path.exists(path),
                   "the path of a checkpoint file that exists", owner="load_checkpoint")
    manifest, arrays = checkpoint_file.read(path)
    params = CheckpointParams()
    for name, key in manifest["parameters"] + manifest["append"]:
        if not any(name.startswith(p) for p in prefixes):
            array = arrays[key]
            params[name] = Parameter(array, name=name, requires_grad=dtypes.is_float(array.dtype))
    if optimizer is not None:
        _check_optimizer_state(path, manifest, optimizer)
    if net is not None:
        network_entries = {name: params[name] for name, _ in manifest["parameters"]
                           if name in params}
        plan = _plan_load(net, network_entries, strict_load)  # raises before anything changes
    if optimizer is not None:
        optimizer.load_state_dict(checkpoint_file.unflatten(manifest["optimizer"], arrays))
    if net is not None:
        params.param_not_load, params.ckpt_not_load = _apply(plan, stacklevel=3)
    return params


def _check_prefixes(filter_prefix):
    """``filter_prefix`` (None, a str or a list/tuple of strs) as a tuple of prefixes."""
    if filter_prefix is None:
        return ()
    prefixes = check_str_tuple("filter_prefix", filter_prefix, owner="load_checkpoint")
    check_relation("filter_prefix", filter_prefix, len(prefixes) > 0,
                   "a str or a non-empty tuple or list of non-empty strs", owner="load_checkpoint")
    return prefixes


def _check_optimizer(optimizer, owner):
    check_type("optimizer", optimizer, Optimizer, expected="an Optimizer or None", owner=owner)


def _check_optimizer_state(path, manifest, optimizer):
    if "optimizer" not in manifest:
        raise ValueError(f"checkpoint {path!r} holds no optimizer state (save it with "
                         f"save_checkpoint(..., optimizer=opt))")
    saved = manifest.get("optimizer_class")
    classes = [cls.__name__ for cls in type(optimizer).__mro__]
    if saved is not None and saved not in classes:
        raise ValueError(f"checkpoint {path!r} holds the state of a {saved} optimizer; it cannot "
                         f"be loaded into {type(optimizer).__name__} (another class's state "
                         f"would overwrite its learning rate and slots): pass a {saved}")


def load_param_into_net(net, parameter_dict, strict_load=False):
    """Copy ``parameter_dict`` values into the parameters of ``net``, all or nothing.

    Every parameter is checked first (shape equal; dtype equal, or both floating point (then the
    value is cast to the parameter's dtype) unless ``strict_load``; a cast to float16 must not
    turn a finite value into inf) and only when all pass are they assigned in place
    (``Parameter.set_data``).

    Args:
        net: a Cell.
        parameter_dict: ``{name: Parameter | Tensor | array}``, e.g. from ``load_checkpoint``.
        strict_load: require every network parameter in ``parameter_dict`` under its exact name,
            with its exact dtype, and every entry of ``parameter_dict`` to be loaded. Otherwise
            a missing name may match a unique entry by dotted suffix (``"network.fc.weight"`` ↔
            ``"fc.weight"``), an entry that no other parameter has by name or by suffix, and
            names on either side that match nothing are returned and warned about.

    Returns:
        ``(param_not_load, ckpt_not_load)``, as MindSpore: the names of the network parameters
        that were not loaded, and the entries of ``parameter_dict`` that went into no parameter.
        When either is non-empty a ``CheckpointMismatchWarning`` lists them.

    Raises:
        ValueError: listing every mismatch (parameter name, both shapes or dtypes, values
            float16 cannot hold); when no network parameter matches any entry (naming both
            sides); with ``strict_load``, for any name not loaded. The network is then unchanged.
            Also for an empty ``parameter_dict`` when the network has parameters.
        TypeError: if ``net`` is not a Cell, ``parameter_dict`` is not a dict or ``strict_load``
            is not a bool.
    """
    _check_cell(net)
    check_type("parameter_dict", parameter_dict, dict, owner="load_param_into_net")
    check_bool("strict_load", strict_load, owner="load_param_into_net")
    check_relation("parameter_dict", parameter_dict,
                   len(parameter_dict) > 0 or not named_parameters(net),
                   "a non-empty dict {name: value}", owner="load_param_into_net")
    return _apply(_plan_load(net, parameter_dict, strict_load), stacklevel=3)


class _Plan:
    """The checked outcome of a load: ``assign`` [(param, array)] and the names not loaded."""

    def __init__(self, assign, param_not_load, ckpt_not_load):
        self.assign, self.param_not_load, self.ckpt_not_load = assign, param_not_load, ckpt_not_load


def _apply(plan, stacklevel):
    for param, array in plan.assign:
        param.set_data(backend.to_device(array.astype(param.dtype, copy=False), param.device))
    if plan.param_not_load or plan.ckpt_not_load:
        warnings.warn(f"load_param_into_net: {len(plan.assign)} parameters loaded; network "
                      f"parameters not loaded: {plan.param_not_load}; checkpoint entries not "
                      f"loaded: {plan.ckpt_not_load}", CheckpointMismatchWarning,
                      stacklevel=stacklevel)
    return list(plan.param_not_load), list(plan.ckpt_not_load)


def _plan_load(net, parameter_dict, strict_load):
    """Check ``parameter_dict`` against ``net``: a ``_Plan``, or a ValueError listing every
    problem."""
    params = named_parameters(net)
    keys = _match_names([name for name, _ in params], parameter_dict, strict_load)
    assign, not_loaded, errors = [], [], []
    for name, param in params:
        key = keys[name]
        if key is None:
            not_loaded.append(name)
            continue
        array = backend.as_numpy(parameter_dict[key])
        error = _mismatch(name, array, param, strict_load)
        if error:
            errors.append(error)
        else:
            assign.append((param, array))
    used = set(keys.values())
    unused = [key for key in parameter_dict if key not in used]
    if strict_load and (not_loaded or unused):
        errors.append(f"strict_load=True: network parameters missing from the checkpoint: "
                      f"{not_loaded}; checkpoint entries matching no parameter: {unused}")
    if not errors and params and not assign:
        errors.append(f"no parameter of the network matches the checkpoint: the network has "
                      f"{_some(not_loaded)}, the checkpoint has {_some(unused)}")
    if errors:
        raise ValueError("load_param_into_net: the checkpoint does not match the network, which "
                         "was left unchanged:\n  " + "\n  ".join(errors))
    return _Plan(assign, not_loaded, unused)


def _match_names(names, parameter_dict, strict_load):
    """``{network name: key of parameter_dict or None}``: exact names first, then (unless strict)
    a unique dotted-suffix match; an entry goes into at most one parameter."""
    keys = {name: name if name in parameter_dict else None for name in names}
    if strict_load:
        return keys
    exact = {name for name, key in keys.items() if key is not None}
    free = [k for k in parameter_dict if k not in exact]
    guesses = {name: _suffix_match(name, free) for name, key in keys.items() if key is None}
    claims = [key for key in guesses.values() if key is not None]
    keys.update({name: key if key is not None and claims.count(key) == 1 else None
                 for name, key in guesses.items()})
    return keys


def _mismatch(name, array, param, strict_load):
    """Why ``array`` cannot load into ``param`` (a message), or None."""
    if tuple(array.shape) != tuple(param.shape):
        return (f"{name!r}: checkpoint shape {tuple(array.shape)} != network shape "
                f"{tuple(param.shape)}")
    if array.dtype != param.dtype and (strict_load or not dtypes.is_float(array.dtype)
                                       or not dtypes.is_float(param.dtype)):
        return f"{name!r}: checkpoint dtype {array.dtype} != network dtype {param.dtype}"
    if dtypes.is_low_precision(param.dtype) and array.dtype.itemsize > 2:
        finite = numpy.isfinite(array)
        with numpy.errstate(over="ignore"):
            too_big = finite & numpy.isinf(array.astype(param.dtype))
        if too_big.any():
            return (f"{name!r}: {int(too_big.sum())} {array.dtype} values (largest magnitude "
                    f"{float(numpy.abs(array[finite]).max()):g}) exceed {param.dtype}'s largest "
                    f"finite value {float(dtypes.finfo(param.dtype).max):g}; loading would "
                    f"make them inf")
    return None


def _some(names, limit=8):
    shown = list(names[:limit])
    return f"{shown} and {len(names) - limit} more" if len(names) > limit else f"{shown}"


def _check_cell(net):
    if not hasattr(net, "parameters_and_names"):
        raise TypeError(f"the argument 'net' must be a Cell, got {type(net).__name__} {net!r}")


def _suffix_match(name, keys):
    """The unique key equal to ``name`` up to a dotted prefix on either side, else None."""
    matches = [k for k in keys if k.endswith("." + name) or name.endswith("." + k)]
    return matches[0] if len(matches) == 1 else None
