"""Checkpoints: ``save_checkpoint``, ``load_checkpoint``, ``load_param_into_net`` (MindSpore names).

File format (version 1): one uncompressed NumPy ``.npz`` archive (a zip of ``.npy`` arrays, read
back with ``allow_pickle=False``, so loading a checkpoint never runs code). It holds

- ``param_<i>``: the parameter arrays, in the network's order;
- ``optim_<i>``: the array leaves of ``optimizer.state_dict()`` (when an optimizer is saved);
- ``append_<i>``: the ``append_dict`` values, as 0-d or n-d arrays;
- ``__minigrad_checkpoint__``: a UTF-8 JSON manifest (as a uint8 array) with the format name and
  version, the names behind every key, the shape and dtype of every array, and the structure of
  the optimizer state (nested dicts/lists with arrays referenced by key and plain numbers inline).

Writes are atomic: the archive goes to a temporary file in the target's directory
(``.<name>.<pid>.<random>.tmp`` — never ending in ``.ckpt``), is flushed and fsync'ed, then
``os.replace``'d onto the target, and the directory is fsync'ed. A crash at any moment leaves
either the old file or the new one, never a mixture.

Loading validates the whole file (zip CRCs, manifest, every array's shape and dtype) before it
returns, and ``load_param_into_net`` checks every parameter before it assigns any, so a bad file
or a mismatched network raises a ``ValueError`` and changes nothing.
"""
import json
import os
import secrets

import numpy

from minigrad import backend
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor

FORMAT = "minigrad-checkpoint"
VERSION = 1
_MANIFEST = "__minigrad_checkpoint__"
_SUFFIX = ".ckpt"


# ---- saving -------------------------------------------------------------------------------------
def save_checkpoint(save_obj, ckpt_file_name, append_dict=None, optimizer=None):
    """Save parameters (and optionally optimizer state and extra values) to ``ckpt_file_name``.

    Args:
        save_obj: a Cell (all its parameters, by ``Parameter.name``), a list of
            ``{"name": str, "data": Tensor or array}`` dicts (MindSpore style), or a dict
            ``{name: Tensor or array}``.
        ckpt_file_name: target path; ``.ckpt`` is appended when missing (as MindSpore does).
        append_dict: extra values ``{name: int | float | bool | Tensor | array}`` (e.g. the epoch);
            ``load_checkpoint`` returns them as Parameters beside the network's.
        optimizer: an optimizer whose ``state_dict()`` is saved with the parameters; restore it with
            ``load_checkpoint(file, optimizer=opt)``.

    Returns:
        The path written.

    Raises:
        TypeError: for an unsupported ``save_obj``, an ``append_dict`` that is not a dict, or an
            unsupported ``append_dict`` value.
        ValueError: for duplicate names.
    """
    if append_dict is not None and not isinstance(append_dict, dict):
        raise TypeError(f"append_dict must be a dict {{name: value}} or None, got "
                        f"{type(append_dict).__name__} {append_dict!r}")
    path = _with_suffix(os.fspath(ckpt_file_name))
    arrays, manifest = {}, {"format": FORMAT, "version": VERSION, "arrays": {}}
    counts = {"param": 0, "append": 0, "optim": 0}

    def put(prefix, value):
        key = f"{prefix}_{counts[prefix]}"
        counts[prefix] += 1
        array = numpy.asarray(backend.as_numpy(value), order="C")
        arrays[key] = array
        manifest["arrays"][key] = {"shape": list(array.shape), "dtype": array.dtype.str}
        return key

    names = []
    manifest["parameters"] = []
    for name, value in _named_values(save_obj):
        names.append(name)
        manifest["parameters"].append([name, put("param", value)])
    manifest["append"] = []
    for name, value in (append_dict or {}).items():
        if not isinstance(value, (bool, int, float, numpy.number, numpy.ndarray, Tensor)):
            raise TypeError(f"append_dict[{name!r}] must be an int, float, bool, Tensor or array, "
                            f"got {type(value).__name__}")
        names.append(name)
        manifest["append"].append([name, put("append", value)])
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate names in the checkpoint: {duplicates}")
    if optimizer is not None:
        manifest["optimizer"] = _flatten(optimizer.state_dict(), lambda v: put("optim", v))
    arrays[_MANIFEST] = numpy.frombuffer(json.dumps(manifest).encode("utf-8"), dtype=numpy.uint8)
    _atomic_savez(path, arrays)
    return path


def _named_values(save_obj):
    if hasattr(save_obj, "parameters_and_names"):
        return [(name, p) for name, p in named_parameters(save_obj)]
    if isinstance(save_obj, dict):
        return list(save_obj.items())
    if isinstance(save_obj, (list, tuple)):
        out = []
        for i, item in enumerate(save_obj):
            if not isinstance(item, dict) or set(item) != {"name", "data"}:
                raise TypeError(f"save_obj[{i}] must be a dict with keys 'name' and 'data', got {item!r}")
            out.append((item["name"], item["data"]))
        return out
    raise TypeError(f"save_obj must be a Cell, a list of {{'name', 'data'}} dicts or a dict, "
                    f"got {type(save_obj).__name__}")


def named_parameters(net):
    """``[(name, Parameter)]`` of a Cell, each parameter once, named by ``Parameter.name``."""
    seen, out = set(), []
    for attr_name, param in net.parameters_and_names():
        if id(param) not in seen:
            seen.add(id(param))
            out.append((param.name or attr_name, param))
    return out


def _atomic_savez(path, arrays):
    """Write the archive to a temp file beside ``path``, fsync, rename over ``path``, fsync dir."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            numpy.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# ---- loading ------------------------------------------------------------------------------------
def load_checkpoint(ckpt_file_name, net=None, strict_load=False, filter_prefix=None, optimizer=None):
    """Read a checkpoint; optionally load it into ``net`` and ``optimizer``.

    Args:
        ckpt_file_name: path of a file written by ``save_checkpoint``.
        net: a Cell to load the parameters into (``load_param_into_net``).
        strict_load: passed to ``load_param_into_net``.
        filter_prefix: a str or list of str; parameters whose names start with one of them are
            left out of the result (and not loaded).
        optimizer: an optimizer to restore with ``optimizer.load_state_dict`` from the saved state
            (``save_checkpoint(..., optimizer=opt)``).

    Returns:
        ``{name: Parameter}`` with the saved parameters and the ``append_dict`` values.

    Raises:
        ValueError: naming the file, if it is missing, truncated, corrupt or not a minigrad
            checkpoint; if ``optimizer`` is given but the file has no optimizer state; or (from
            ``load_param_into_net``) if the network does not match. Nothing is loaded then: the
            network is checked first, the optimizer restored next, the parameters assigned last.
        TypeError: if ``net`` is not a Cell or ``filter_prefix`` is not a str or a list of str.
    """
    prefixes = [filter_prefix] if isinstance(filter_prefix, str) else filter_prefix
    if prefixes is None:
        prefixes = []
    elif not (isinstance(prefixes, (list, tuple)) and all(isinstance(p, str) for p in prefixes)):
        raise TypeError(f"filter_prefix must be a str or a list of str, got {filter_prefix!r}")
    if net is not None:
        _check_cell(net)
    path = os.fspath(ckpt_file_name)
    manifest, arrays = _read(path)
    params = {}
    for name, key in manifest["parameters"] + manifest["append"]:
        if not any(name.startswith(p) for p in prefixes):
            params[name] = Parameter(arrays[key], name=name, requires_grad=arrays[key].dtype.kind == "f")
    if optimizer is not None and "optimizer" not in manifest:
        raise ValueError(f"checkpoint {path!r} holds no optimizer state (save it with "
                         f"save_checkpoint(..., optimizer=opt))")
    if net is not None:
        _plan_load(net, params, strict_load)  # raises before anything changes
    if optimizer is not None:
        optimizer.load_state_dict(_unflatten(manifest["optimizer"], arrays))
    if net is not None:
        load_param_into_net(net, params, strict_load)
    return params


def _read(path):
    """Return (manifest, {key: array}) of a checkpoint, or raise ValueError naming the problem."""
    if os.path.isdir(path):
        raise ValueError(f"checkpoint file {path!r} is a directory, expected a .ckpt file "
                         f"(ModelCheckpoint.latest_ckpt_file_name names the newest one)")
    if not os.path.isfile(path):
        raise ValueError(f"checkpoint file {path!r} does not exist")
    try:
        with numpy.load(path, allow_pickle=False) as archive:
            if _MANIFEST not in archive.files:
                raise _Unsupported("is not a minigrad checkpoint (it has no manifest)")
            manifest = json.loads(archive[_MANIFEST].tobytes().decode("utf-8"))
            if manifest.get("format") != FORMAT:
                raise _Unsupported(f"has the unknown format {manifest.get('format')!r}")
            if manifest.get("version") != VERSION:
                raise _Unsupported(f"has format version {manifest.get('version')!r}; this minigrad "
                                   f"reads version {VERSION}")
            arrays = {key: archive[key] for key in manifest["arrays"]}  # reading checks CRCs
    except _Unsupported as error:
        raise ValueError(f"checkpoint file {path!r} {error}") from None
    except Exception as error:  # zipfile, npy-header, JSON and OS errors alike
        raise ValueError(f"checkpoint file {path!r} is truncated or corrupt: "
                         f"{type(error).__name__}: {error}") from None
    for key, spec in manifest["arrays"].items():
        array = arrays[key]
        if list(array.shape) != spec["shape"] or array.dtype.str != spec["dtype"]:
            raise ValueError(f"checkpoint file {path!r} is corrupt: array {key} has shape "
                             f"{array.shape} and dtype {array.dtype}, the manifest says "
                             f"{tuple(spec['shape'])} and {numpy.dtype(spec['dtype'])}")
    return manifest, arrays


class _Unsupported(Exception):
    """A readable file that is not a checkpoint this version understands."""


def load_param_into_net(net, parameter_dict, strict_load=False):
    """Copy ``parameter_dict`` values into the parameters of ``net``, all or nothing.

    Every parameter is checked first — shape equal; dtype equal, or both floating point (then the
    value is cast to the parameter's dtype) unless ``strict_load`` — and only when all pass are
    they assigned in place (``Parameter.set_data``).

    Args:
        net: a Cell.
        parameter_dict: ``{name: Parameter | Tensor | array}``, e.g. from ``load_checkpoint``.
        strict_load: require every network parameter in ``parameter_dict`` under its exact name,
            with its exact dtype. Otherwise a missing name may match a unique entry by dotted
            suffix (``"network.fc.weight"`` ↔ ``"fc.weight"``) — an entry that no other
            parameter has by name or by suffix — and parameters with no entry are skipped and
            reported.

    Returns:
        The names of the network parameters that were not loaded.

    Raises:
        ValueError: listing every mismatch (parameter name, both shapes or dtypes) or, with
            ``strict_load``, every missing name; the network is then unchanged.
        TypeError: if ``net`` is not a Cell or ``parameter_dict`` is not a dict.
    """
    _check_cell(net)
    plan, not_loaded = _plan_load(net, parameter_dict, strict_load)
    for param, array in plan:
        param.set_data(backend.to_device(array.astype(param.dtype, copy=False), param.device))
    return not_loaded


def _plan_load(net, parameter_dict, strict_load):
    """Check ``parameter_dict`` against ``net``; return ([(param, array)], names not loaded)."""
    if not isinstance(parameter_dict, dict):
        raise TypeError(f"parameter_dict must be a dict, got {type(parameter_dict).__name__}")
    plan, not_loaded, errors = [], [], []
    params = named_parameters(net)
    keys = {name: name if name in parameter_dict else None for name, _ in params}
    if not strict_load:  # dotted-suffix fallback: an entry goes into at most one parameter
        exact = {name for name, key in keys.items() if key is not None}
        free = {k: v for k, v in parameter_dict.items() if k not in exact}
        guesses = {name: _suffix_match(name, free) for name, key in keys.items() if key is None}
        claims = [key for key in guesses.values() if key is not None]
        keys.update({name: key if key is not None and claims.count(key) == 1 else None
                     for name, key in guesses.items()})
    for name, param in params:
        key = keys[name]
        if key is None:
            not_loaded.append(name)
            continue
        array = backend.as_numpy(parameter_dict[key])
        if tuple(array.shape) != tuple(param.shape):
            errors.append(f"{name!r}: checkpoint shape {tuple(array.shape)} != network shape "
                          f"{tuple(param.shape)}")
        elif array.dtype != param.dtype and (strict_load or array.dtype.kind != "f"
                                             or param.dtype.kind != "f"):
            errors.append(f"{name!r}: checkpoint dtype {array.dtype} != network dtype {param.dtype}")
        else:
            plan.append((param, array))
    if strict_load and not_loaded:
        errors.append(f"missing from the checkpoint (strict_load=True): {not_loaded}")
    if errors:
        raise ValueError("load_param_into_net: the checkpoint does not match the network, which "
                         "was left unchanged:\n  " + "\n  ".join(errors))
    return plan, not_loaded


def _check_cell(net):
    if not hasattr(net, "parameters_and_names"):
        raise TypeError(f"the argument 'net' must be a Cell, got {type(net).__name__} {net!r}")


def _suffix_match(name, parameter_dict):
    """The unique key equal to ``name`` up to a dotted prefix on either side, else None."""
    matches = [k for k in parameter_dict if k.endswith("." + name) or name.endswith("." + k)]
    return matches[0] if len(matches) == 1 else None


# ---- helpers ------------------------------------------------------------------------------------
def _with_suffix(path):
    return path if path.endswith(_SUFFIX) else path + _SUFFIX



def _flatten(state, put):
    """JSON-able tree of ``state``; arrays and tensors are stored with ``put`` and referenced by key."""
    if isinstance(state, dict):
        return {"dict": [[k if isinstance(k, (int, str)) else str(k), _flatten(v, put)]
                         for k, v in state.items()]}
    if isinstance(state, (list, tuple)):
        return {"tuple" if isinstance(state, tuple) else "list": [_flatten(v, put) for v in state]}
    if isinstance(state, Tensor):
        return {"tensor": put(state)}
    if isinstance(state, numpy.generic):
        return {"scalar": put(state)}
    if hasattr(state, "shape") and hasattr(state, "dtype"):  # NumPy or CuPy array
        return {"array": put(state)}
    if state is None or isinstance(state, (bool, int, float, str)):
        return {"value": state}
    raise TypeError(f"optimizer state value of type {type(state).__name__} cannot be saved "
                    f"(supported: dict, list, tuple, Tensor, array, int, float, bool, str, None)")


def _unflatten(node, arrays):
    (kind, value), = node.items()
    if kind == "dict":
        return {k: _unflatten(v, arrays) for k, v in value}
    if kind in ("list", "tuple"):
        items = [_unflatten(v, arrays) for v in value]
        return items if kind == "list" else tuple(items)
    if kind == "tensor":
        return Tensor(arrays[value])
    if kind == "array":
        return arrays[value]
    if kind == "scalar":
        return arrays[value][()]
    return value
