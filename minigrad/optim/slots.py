"""What an optimizer keeps per parameter: its state arrays (momenta, moments), the fp32 master
copy of an fp16 parameter, and whether that master still matches the parameter.

``Optimizer`` and its fused native step (``optim._fused``) both go through ``ParameterSlots``:
this is the one owner of masters, state and their synchronisation with the parameters.

A master is re-read from its parameter when someone else wrote the parameter since the last
update: through ``Parameter.set_data`` or item assignment (``Parameter.version``), or by giving
it a new array; it is kept if it still rounds to the parameter (a checkpoint loaded after
``load_state_dict``). Writes straight into ``param.data[...]`` are not seen.
"""
import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._fp16_host import convert
from minigrad.tensor import Tensor


class ParameterSlots:
    """Per-parameter state, masters and sync records of one optimizer.

    Args:
        parameters: the optimizer's parameters (a tuple).
        init_state: ``fn(weight) -> dict`` making a parameter's state at its first update.
    """

    def __init__(self, parameters, init_state):
        self.parameters = parameters
        self.init_state = init_state
        self.states = [None] * len(parameters)   # dict of arrays per parameter, made lazily
        self.masters = [None] * len(parameters)  # fp32 copy per fp16 parameter, made lazily
        self._synced = [None] * len(parameters)  # (data, version) each master matches

    def weight(self, i):
        """The array an update of parameter ``i`` writes: its own data (fp32, fp64), or its fp32
        master (fp16), re-read from the parameter if someone else wrote it."""
        param = self.parameters[i]
        data = param.data
        if data.dtype != dtypes.float16:
            return data
        master, synced = self.masters[i], self._synced[i]
        if synced is None or synced[0] is not data or synced[1] != param.version:
            stale = master is None or master.shape != data.shape or bool(
                (convert(master, data.dtype) != data).any())
            if stale:
                master = self.masters[i] = convert(data, dtypes.float32)
            self._synced[i] = (data, param.version)
        return master

    def state(self, i, weight):
        """The state dict of parameter ``i``, made by ``init_state(weight)`` at first use."""
        state = self.states[i]
        if state is None:
            state = self.states[i] = self.init_state(weight)
        return state

    def write_back(self, i, weight):
        """After an update of an fp16 parameter's master ``weight``: round it into the
        parameter (in place) and record that the two match."""
        param = self.parameters[i]
        convert(weight, dtypes.float16, out=param.data)
        self.written(i)

    def written(self, i):
        """Record that parameter ``i`` holds its master's rounding (the native step wrote it)."""
        param = self.parameters[i]
        self._synced[i] = (param.data, param.version)

    def items(self, keys):
        """``(key, array)`` copies of every state array (``"<state>.<key>"``) and fp16 master
        (``"master.<key>"``), ``keys`` naming the parameters."""
        for key, param, state, master in zip(keys, self.parameters, self.states, self.masters):
            for name, array in (state or {}).items():
                yield f"{name}.{key}", numpy.array(backend.as_numpy(array))
            if master is not None and param.dtype == dtypes.float16:
                yield f"master.{key}", numpy.array(backend.as_numpy(master))

    def checked(self, entries, keys, state_names, owner):
        """Validate ``{(slot, key): value}`` entries for ``load``; return ``(states, masters)``.

        Raises:
            ValueError: an array whose shape or dtype does not fit its parameter (naming the
                key and both), a master of a parameter that is not fp16, a parameter with only
                part of its state.
        """
        index = {key: i for i, key in enumerate(keys)}
        states = [dict() for _ in self.parameters]
        masters = [None] * len(self.parameters)
        for (slot, name), value in entries.items():
            key = f"{slot}.{name}"
            param = self.parameters[index[name]]
            array = numpy.asarray(value.asnumpy() if isinstance(value, Tensor) else value)
            expected = dtypes.float32 if param.dtype == dtypes.float16 else param.dtype
            if slot == "master" and param.dtype != dtypes.float16:
                raise ValueError(f"For '{owner}.load_state_dict', {key!r}: parameter {name!r} is "
                                 f"{param.dtype}, only float16 parameters have a master copy")
            if array.shape != param.shape or array.dtype != expected:
                raise ValueError(f"For '{owner}.load_state_dict', {key!r} has shape {array.shape} "
                                 f"and dtype {array.dtype}, expected shape {param.shape} and "
                                 f"dtype {expected}")
            if slot == "master":
                masters[index[name]] = array
            else:
                states[index[name]][slot] = array
        for key, state in zip(keys, states):
            if state and set(state) != set(state_names):
                missing = sorted(set(state_names) - set(state))
                raise ValueError(f"For '{owner}.load_state_dict', parameter {key!r} has only part "
                                 f"of its state: missing {[f'{m}.{key}' for m in missing]}")
        return states, masters

    def load(self, states, masters):
        """Take ``checked``'s result: copies on each parameter's device; masters re-checked
        against their parameters at the next update."""
        for i, param in enumerate(self.parameters):
            device = param.device
            self.states[i] = {k: backend.to_device(a.copy(), device)
                              for k, a in states[i].items()} or None
            self.masters[i] = (None if masters[i] is None
                               else backend.to_device(masters[i].copy(), device))
            self._synced[i] = None
