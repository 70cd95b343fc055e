"""THOR's second-order state in ``state_dict`` form, and its checked restore.

``state_dict()["thor"]`` is ``{layer name: {...}}`` with the factors ``A``, ``G`` and the block
inverses ``A_inv``, ``G_inv`` (float32 NumPy arrays, or None before the first refresh) and the
refresh rule's scalars (``trace_ref``, ``damping_a``, ``damping_g``, ``frozen``, ``due``,
``refreshes``). Everything a step reads is there, so a run resumed from a
checkpoint continues bit-identically.
"""
import numpy

from minigrad import backend

ARRAYS = ("A", "G", "A_inv", "G_inv")
FLOATS = ("trace_ref", "damping_a", "damping_g")
FLAGS = ("frozen", "due")


def thor_state(blocks):
    """``{name: fields}`` for the blocks (arrays copied to the host)."""
    state = {}
    for block in blocks:
        entry = {k: None if getattr(block, k) is None
                 else numpy.array(backend.as_numpy(getattr(block, k))) for k in ARRAYS}
        entry["trace_ref"] = block.trace_ref
        entry["damping_a"], entry["damping_g"] = block.damping_used
        entry["frozen"], entry["due"] = block.frozen, block.due
        entry["refreshes"] = block.refreshes
        state[block.name] = entry
    return state


def load_thor_state(blocks, state):
    """Check ``state`` against ``blocks``; return a function that assigns it (nothing changes
    before the call, so a refused state leaves the optimizer as it was).

    Raises:
        TypeError: ``state`` or a layer's entry not a dict, a flag not a bool.
        ValueError: a layer missing or unknown, a field missing, an array of the wrong shape
            or dtype, or a scalar of the wrong kind (naming the layer and the field).
    """
    if not isinstance(state, dict):
        raise TypeError(f"THOR.load_state_dict: 'thor' must be a dict of layers, got "
                         f"{type(state).__name__}")
    names = [b.name for b in blocks]
    if set(state) != set(names):
        raise ValueError(f"THOR.load_state_dict: the saved layers {sorted(state)} do not match "
                         f"the optimizer's {sorted(names)}")
    plans = []
    for block in blocks:
        plans.append((block, _check_entry(block, state[block.name])))

    def apply():
        for block, values in plans:
            device = backend.device_of(block.weight.data)
            for key in ARRAYS:
                value = values[key]
                setattr(block, key, None if value is None else backend.to_device(value.copy(),
                                                                                  device))
            block.trace_ref = values["trace_ref"]
            block.damping_used = (values["damping_a"], values["damping_g"])
            block.frozen, block.due = values["frozen"], values["due"]
            block.refreshes = values["refreshes"]
    return apply


def _check_entry(block, entry):
    where = f"THOR.load_state_dict: layer {block.name!r}"
    if not isinstance(entry, dict):
        raise TypeError(f"{where} must map fields to values, got {type(entry).__name__}")
    missing = [k for k in ARRAYS + FLOATS + FLAGS + ("refreshes",) if k not in entry]
    if missing:
        raise ValueError(f"{where} is missing {missing}")
    values = {}
    for key in ARRAYS:
        value = entry[key]
        if value is not None:
            value = numpy.asarray(value.asnumpy() if hasattr(value, "asnumpy") else value)
            expected = _expected_shape(block, key)
            if value.dtype != numpy.float32 or (expected is not None and
                                                value.shape[-len(expected):] != expected):
                raise ValueError(f"{where}: {key} has shape {value.shape} and dtype "
                                 f"{value.dtype}, expected float32 of shape (..., {expected})")
        values[key] = value
    for key in FLOATS:
        value = entry[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"{where}: {key} must be a float or None, got {value!r}")
        values[key] = None if value is None else float(value)
    for key in FLAGS:
        if not isinstance(entry[key], bool):
            raise TypeError(f"{where}: {key} must be a bool, got {entry[key]!r}")
        values[key] = entry[key]
    refreshes = entry["refreshes"]
    if isinstance(refreshes, bool) or not isinstance(refreshes, int) or refreshes < 0:
        raise ValueError(f"{where}: refreshes must be an int >= 0, got {refreshes!r}")
    values["refreshes"] = refreshes
    return values


def _expected_shape(block, key):
    """The trailing shape a saved array must have (None: only the dtype is checked)."""
    if key == "A":
        return (block.a_dim,) if block.kind == "embedding" else (block.a_dim, block.a_dim)
    if key == "G":
        return (block.g_dim, block.g_dim)
    if key == "A_inv" and block.kind == "embedding":
        return (block.a_dim,)
    return None
