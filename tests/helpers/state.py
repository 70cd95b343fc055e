"""``reachable_state(*objects)``: everything reachable from objects, as a value to compare.

A refused call must leave every object as it was ("nothing half-applied"): take
``before = reachable_state(net, opt)``, make the call that raises, and assert
``reachable_state(net, opt) == before``. The walk follows instance ``__dict__``s and
``__slots__`` (a Tensor's data, grad and flags), containers, arrays (dtype, shape and bytes),
Tensors and Parameters, so a changed attribute, a new hook, a cast parameter or a moved
optimizer state anywhere below the objects shows. (``helpers.faults``'s ``snapshot`` compares
only parameters and optimizer state, which a skipped step must keep while its counters and
report move on.) An object reached twice is recorded once and then by reference, so that
sharing (an optimizer holding the network's very Parameters) is part of the value too;
functions and modules are recorded by name.
"""
import types

import numpy

_ATOMS = (type(None), bool, int, float, complex, str, bytes, type, numpy.dtype)
_NAMED = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType)


def _slots(obj):
    """The values of ``obj``'s ``__slots__`` (a Tensor's data, grad and flags), by name."""
    values = {}
    for klass in type(obj).__mro__:
        names = getattr(klass, "__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name not in ("__weakref__", "__dict__") and hasattr(obj, name):
                values[name] = getattr(obj, name)
    return values


def reachable_state(*objects):
    """A nested tuple describing ``objects`` and all they reach (see the module docstring)."""
    seen = {}

    def walk(obj):
        if isinstance(obj, _ATOMS):
            return obj
        if isinstance(obj, numpy.ndarray):
            return ("array", obj.dtype.str, obj.shape, obj.tobytes())
        if isinstance(obj, numpy.generic):
            return ("scalar", obj.dtype.str, obj.tobytes())
        if isinstance(obj, _NAMED):
            return ("named", type(obj).__name__, getattr(obj, "__qualname__",
                                                         getattr(obj, "__name__", "")))
        if id(obj) in seen:
            return ("seen", seen[id(obj)])
        seen[id(obj)] = len(seen)
        if isinstance(obj, dict):
            return ("dict", type(obj).__name__, tuple((walk(k), walk(v)) for k, v in obj.items()))
        if isinstance(obj, (list, tuple)):
            return (type(obj).__name__, tuple(walk(v) for v in obj))
        if isinstance(obj, (set, frozenset)):
            return (type(obj).__name__, tuple(sorted(repr(walk(v)) for v in obj)))
        state = getattr(obj, "__dict__", None)
        slots = _slots(obj)
        if state is None and not slots:  # weak references, locks, ctypes buffers: their identity
            return ("opaque", type(obj).__qualname__)
        return ("object", type(obj).__qualname__, walk(state),
                tuple((name, walk(value)) for name, value in slots.items()))

    return walk(objects)
