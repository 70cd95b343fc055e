"""The checkpoint file: writing it atomically, reading and validating it, and the optimizer tree.

File format (version 1): one uncompressed NumPy ``.npz`` archive (a zip of ``.npy`` arrays, read
back with ``allow_pickle=False``, so loading a checkpoint never runs code). It holds

- ``param_<i>``: the parameter arrays, in the network's order;
- ``optim_<i>``: the array leaves of ``optimizer.state_dict()`` (when an optimizer is saved);
- ``append_<i>``: the ``append_dict`` values, as 0-d or n-d arrays;
- ``__minigrad_checkpoint__``: a UTF-8 JSON manifest (as a uint8 array) with the format name and
  version, the names behind every key, the shape and dtype of every array, the optimizer's class
  name and the structure of its state (nested dicts/lists with arrays referenced by key and
  plain numbers inline).

Writes are atomic: the archive goes to a temporary file in the target's directory
(``.<name>.<pid>.<random>.tmp``, never ending in ``.ckpt``), is flushed and fsync'ed, then
``os.replace``'d onto the target, and the directory is fsync'ed. A crash at any moment leaves
either the old file or the new one, never a mixture. A writer killed mid-save leaves its
temporary file behind; the next save into the directory removes the temporary files whose
writer process (the pid in the name) is gone (exited, or a zombie not yet reaped).

Reading checks the whole file (zip CRCs, the manifest's structure, every array's shape and
dtype) and closes it before it returns or raises; every problem is a ``ValueError`` naming the
file.
"""
import json
import os
import re
import secrets
import zipfile

import numpy

from minigrad import dtype as dtypes
from minigrad.tensor import Tensor

FORMAT = "minigrad-checkpoint"
VERSION = 1
MANIFEST = "__minigrad_checkpoint__"
_TEMP_NAME = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$")


# ---- writing ------------------------------------------------------------------------------------
def temp_name(path):
    """The temporary file a save of ``path`` writes first: ``.<name>.<pid>.<8 hex>.tmp``."""
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def atomic_savez(path, arrays):
    """Write the archive to a temp file beside ``path``, fsync, rename over ``path``, fsync dir."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    remove_stale_temp_files(directory)
    tmp = temp_name(os.path.join(directory, os.path.basename(path)))
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


def remove_stale_temp_files(directory):
    """Delete the temporary files of saves into ``directory`` whose writer process is gone.

    A file is stale when the pid in its name (``.<name>.<pid>.<hex>.tmp``) is not a running
    process: no process has that pid, or the process is a zombie (it exited or was killed and its
    parent has not reaped it yet). Files of live processes (this one included: another thread may
    be saving) are kept. ``save_checkpoint``, and so ``ModelCheckpoint``, calls this before each
    write.

    Returns:
        The paths removed.
    """
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = _TEMP_NAME.match(name)
        if match is None:
            continue
        path = os.path.join(directory, name)
        try:
            if _writer_alive(int(match.group(1))):
                continue
            os.unlink(path)
        except FileNotFoundError:  # another saver removed it first
            continue
        removed.append(path)
    return removed


def _writer_alive(pid):
    """Whether process ``pid`` may still be writing a temp file.

    ``kill(pid, 0)`` says whether the pid is taken; where ``/proc`` exists (Linux) a zombie (a
    process that has exited and not been reaped by its parent yet) counts as dead.
    """
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process (or a pid this OS cannot test): keep its file
    return _proc_state(pid) not in ("Z", "X")


def _proc_state(pid):
    """The state letter of ``pid`` in ``/proc/<pid>/stat`` (``R``, ``S``, ``Z``...), or None where
    it cannot be read (no ``/proc``, or the process has just gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces and ')'
    return fields[0] if fields else None


# ---- dtypes the .npy format cannot name --------------------------------------------------------
# The .npy header records bfloat16 and the FP8 formats as raw bytes ("|V2", "<f1"), which do not
# read back as those dtypes. Such an array is stored as its bits (an unsigned int of its width),
# and the manifest names its dtype ("bfloat16"); reading views the bits as that dtype again, so
# the round trip is bit-exact.
def dtype_text(dtype):
    """The manifest's name for ``dtype``: its ``dtype.str`` (``"<f4"``), or its name for the
    ml_dtypes formats (``"bfloat16"``, ``"float8_e4m3fn"``, ``"float8_e5m2"``)."""
    return dtype.name if dtype.name in dtypes.LOWP_NAMES else dtype.str


def storable(array):
    """``array`` as the archive holds it: the bits of an ml_dtypes array, others as they are."""
    if array.dtype.name in dtypes.LOWP_NAMES:
        return array.view(f"u{array.dtype.itemsize}")
    return array


def _stored_dtype(text):
    """The dtype of the archive's array for the manifest's dtype ``text``."""
    if text in dtypes.LOWP_NAMES:
        return numpy.dtype({"bfloat16": "u2"}.get(text, "u1"))
    return numpy.dtype(text)


def restore(arrays, manifest):
    """Replace the stored bits of every ml_dtypes array in ``arrays`` by a view in its dtype.

    Raises:
        ImportError: for a checkpoint holding bfloat16 or FP8 arrays when ml_dtypes is missing.
    """
    for key, spec in manifest["arrays"].items():
        if spec["dtype"] in dtypes.LOWP_NAMES:
            arrays[key] = arrays[key].view(dtypes.as_dtype(spec["dtype"], "checkpoint dtype"))
    return arrays


# ---- reading ------------------------------------------------------------------------------------
class CorruptCheckpoint(Exception):
    """A problem found while reading; ``read`` turns it into a ValueError naming the file."""


def read(path):
    """Return (manifest, {key: array}) of a checkpoint, or raise ValueError naming the problem.

    The file is closed before this returns or raises, and the ValueError chains no exception (a
    kept error holds no file open through a traceback).
    """
    if os.path.isdir(path):
        raise ValueError(f"checkpoint file {path!r} is a directory, expected a .ckpt file "
                         f"(ModelCheckpoint.latest_ckpt_file_name names the newest one)")
    if not os.path.isfile(path):
        raise ValueError(f"checkpoint file {path!r} does not exist")
    problem = None
    try:
        with open(path, "rb") as f, zipfile.ZipFile(f) as archive:
            manifest = _read_manifest(archive)
            arrays = {key: _read_array(archive, key) for key in manifest["arrays"]}
    except CorruptCheckpoint as error:
        problem = str(error)
    except Exception as error:  # zipfile, npy-header and OS errors alike
        problem = f"is truncated or corrupt: {type(error).__name__}: {error}"
    if problem is None:
        problem = _array_mismatch(manifest, arrays)
    if problem is not None:
        raise ValueError(f"checkpoint file {path!r} {problem}") from None
    return manifest, restore(arrays, manifest)


def _read_array(archive, key):
    with archive.open(key + ".npy") as member:
        return numpy.lib.format.read_array(member, allow_pickle=False)


def _read_manifest(archive):
    if MANIFEST + ".npy" not in archive.namelist():
        raise CorruptCheckpoint("is not a minigrad checkpoint (it has no manifest)")
    raw = _read_array(archive, MANIFEST)
    try:
        manifest = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise CorruptCheckpoint(f"is corrupt: its manifest is not JSON ({error})") from None
    if not isinstance(manifest, dict):
        raise CorruptCheckpoint(f"is corrupt: its manifest is a {type(manifest).__name__}, "
                                f"expected a JSON object")
    if manifest.get("format") != FORMAT:
        raise CorruptCheckpoint(f"has the unknown format {manifest.get('format')!r}")
    if manifest.get("version") != VERSION:
        raise CorruptCheckpoint(f"has format version {manifest.get('version')!r}; this minigrad "
                                f"reads version {VERSION}")
    check_manifest(manifest, set(archive.namelist()))
    return manifest


def check_manifest(manifest, members):
    """Raise CorruptCheckpoint unless ``manifest`` has the structure ``save_checkpoint`` writes
    and every array it names is a member (``members``: the archive's file names)."""
    specs = _field(manifest, "arrays", dict)
    for key, spec in specs.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("shape"), list) or not all(
                type(n) is int and n >= 0 for n in spec["shape"]):
            raise CorruptCheckpoint(f"is corrupt: the manifest's entry for array {key!r} is "
                                    f"{spec!r}, expected {{'shape': [ints >= 0], 'dtype': str}}")
        if not isinstance(spec.get("dtype"), str) or not _is_plain_dtype(spec["dtype"]):
            raise CorruptCheckpoint(f"is corrupt: array {key!r} has the dtype "
                                    f"{spec.get('dtype')!r}, expected a NumPy number or bool dtype")
        if key + ".npy" not in members:
            raise CorruptCheckpoint(f"is truncated or corrupt: the manifest names array {key!r}, "
                                    f"which the archive lacks")
    names = []
    for field in ("parameters", "append"):
        for entry in _field(manifest, field, list):
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                    and entry[1] in specs):
                raise CorruptCheckpoint(f"is corrupt: a {field!r} entry of the manifest is "
                                        f"{entry!r}, expected [name, key of a listed array]")
            names.append(entry[0])
    if len(set(names)) != len(names):
        raise CorruptCheckpoint("is corrupt: the manifest names an entry twice")
    if "optimizer" in manifest:
        if not isinstance(manifest.get("optimizer_class", ""), str):
            raise CorruptCheckpoint(f"is corrupt: optimizer_class is "
                                    f"{manifest['optimizer_class']!r}, expected a str")
        _check_tree(manifest["optimizer"], specs)


def _field(manifest, name, kind):
    value = manifest.get(name)
    if not isinstance(value, kind):
        raise CorruptCheckpoint(f"is corrupt: the manifest's {name!r} is {value!r}, expected a "
                                f"{kind.__name__}")
    return value


def _is_plain_dtype(text):
    if text in dtypes.LOWP_NAMES:
        return True
    try:
        return numpy.dtype(text).kind in "biufc"
    except (TypeError, ValueError):
        return False


_LEAF_KINDS = ("tensor", "array", "scalar")
_MAX_DEPTH = 64  # an optimizer's state is a few levels deep; unflatten recurses this far at most


def _check_tree(root, specs):
    """Check an optimizer-state tree (see ``flatten``) without recursing."""
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise CorruptCheckpoint(f"is corrupt: its optimizer state nests deeper than "
                                    f"{_MAX_DEPTH} levels")
        if not (isinstance(node, dict) and len(node) == 1):
            raise CorruptCheckpoint(f"is corrupt: an optimizer-state node is {node!r}, expected "
                                    f"a one-entry object")
        (kind, value), = node.items()
        if kind == "dict" and isinstance(value, list) and all(
                isinstance(item, list) and len(item) == 2 and isinstance(item[0], (int, str))
                for item in value):
            stack.extend((item[1], depth + 1) for item in value)
        elif kind in ("list", "tuple") and isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif kind in _LEAF_KINDS and isinstance(value, str) and value in specs:
            continue
        elif kind == "value" and (value is None or isinstance(value, (bool, int, float, str))):
            continue
        else:
            raise CorruptCheckpoint(f"is corrupt: the optimizer-state node {{{kind!r}: "
                                    f"{value!r}}} is not one save_checkpoint writes")


def _array_mismatch(manifest, arrays):
    for key, spec in manifest["arrays"].items():
        array = arrays[key]
        stored = _stored_dtype(spec["dtype"])
        if list(array.shape) != spec["shape"] or array.dtype != stored:
            return (f"is corrupt: array {key} has shape {array.shape} and dtype {array.dtype}, "
                    f"the manifest says {tuple(spec['shape'])} and {stored}")
    return None


# ---- the optimizer-state tree -------------------------------------------------------------------
def flatten(state, put):
    """JSON-able tree of ``state``; arrays and tensors are stored with ``put`` and referenced by
    key."""
    if isinstance(state, dict):
        return {"dict": [[k if isinstance(k, (int, str)) else str(k), flatten(v, put)]
                         for k, v in state.items()]}
    if isinstance(state, (list, tuple)):
        return {"tuple" if isinstance(state, tuple) else "list": [flatten(v, put) for v in state]}
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


def unflatten(node, arrays):
    """The state ``flatten`` stored: ``node`` (checked by ``read``) with its arrays filled in."""
    (kind, value), = node.items()
    if kind == "dict":
        return {k: unflatten(v, arrays) for k, v in value}
    if kind in ("list", "tuple"):
        items = [unflatten(v, arrays) for v in value]
        return items if kind == "list" else tuple(items)
    if kind == "tensor":
        return Tensor(arrays[value])
    if kind == "array":
        return arrays[value]
    if kind == "scalar":
        return arrays[value][()]
    return value
