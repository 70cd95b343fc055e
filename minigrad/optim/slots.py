"""What an optimizer keeps per parameter, and the fused native step that updates it.

``ParameterSlots`` holds each parameter's state arrays (momenta, moments), the fp32 master copy
of an fp16 parameter, and whether that master still matches the parameter. ``Optimizer``'s NumPy
path and the fused step (``fused_step``) both go through it: this module is the one owner of
masters, state and their synchronisation with the parameters.

A master is re-read from its parameter when someone else wrote the parameter since the last
update: through ``Parameter.set_data`` or item assignment (``Parameter.version``), or by giving
it a new array; it is kept if it still rounds to the parameter (a checkpoint loaded after
``load_state_dict``). Writes straight into ``param.data[...]`` are not seen.

The fused step, on the CPU: one native call (``kernels/optim_host.cpp``) updates all parameters
of an SGD, Momentum, Adam or AdamWeightDecay step, reading each gradient, weight and state once.
An fp16 parameter's step in NumPy is a chain of passes: unscale into a new fp32 array, weight
decay, the rule's ``*=``/``-=`` with their temporaries, rounding the fp32 master back into the
fp16 parameter. The fused call does all of them on one block at a time, and unscales an fp16
gradient itself, so a loss-scaled step never materialises fp32 gradients
(``Optimizer.apply_gradients(grads, scale=...)``). The results are bit for bit those of the NumPy
code (``tests/optim/test_slots.py``), with one exception: when two NaNs meet in one addition (say
a NaN gradient and a NaN weight in ``g + wd * w``), which NaN's payload and sign the result carries
is not defined. NumPy's own loops pick by array length and position (SIMD body or tail), so no
kernel can match them; the result is a NaN in both paths (``tests/optim/test_slots.py``
compares with NaNs canonicalised).

``fused_step(optimizer, rule, arrays, lrs, inv_scale)`` returns False, having changed nothing,
whenever the step is not covered: no host library, a gradient or parameter that is not a dense
NumPy float16 or float32 array, ``numpy.seterr`` / ``errstate`` asking to raise (or call, print,
log) on divide, over or invalid: only the NumPy path can stop mid-step; or asking anything but
"ignore" (the default) for underflow, which the kernel does not report. The optimizer then takes
its NumPy path, as it does for a subclass that overrides one of the steps the kernel replaces
(``rule_for``). Under the default "warn", the kernel reports the IEEE exceptions its arithmetic
raised and ``fused_step`` gives NumPy's RuntimeWarning for each kind, pointing at the first
caller outside ``minigrad.optim`` (the user's ``optimizer(grads)``,
``step()`` or ``apply_gradients``).
"""
import os
import sys
import warnings

import numpy

from minigrad import _native, backend
from minigrad import dtype as dtypes
from minigrad._checks import check_relation
from minigrad._fp16_host import convert
from minigrad.backend import data_address
from minigrad.tensor import Tensor

SGD, MOMENTUM, ADAM, ADAM_WEIGHT_DECAY = 0, 1, 2, 3  # MG_RULE_* in kernels/optim_host.cpp
GRAD_HALF, STATE_FROM_GRAD = 1, 2
# One row per parameter: struct MgUpdateRow in kernels/optim_host.cpp.
ROW = numpy.dtype([("weight", numpy.uint64), ("grad", numpy.uint64), ("half", numpy.uint64),
                   ("state", numpy.uint64), ("state2", numpy.uint64), ("n", numpy.int64),
                   ("flags", numpy.int64), ("lr", numpy.float64), ("weight_decay", numpy.float64)])
_F16, _F32 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)
# the IEEE exceptions the kernel reports: (its bit, numpy.geterr() key, NumPy's wording)
_EXCEPTIONS = ((1, "divide", "divide by zero"), (2, "over", "overflow"), (4, "invalid",
                                                                          "invalid value"))

_OPTIM_DIR = os.path.dirname(__file__) + os.sep

class Rule:
    """What the native kernel needs to know of an optimizer's ``update``.

    Args:
        kind: ``SGD``, ``MOMENTUM``, ``ADAM`` or ``ADAM_WEIGHT_DECAY``.
        states: the names of the state buffers the rule uses, in the kernel's order (SGD's or
            Momentum's buffer; Adam's first and second moments). SGD's buffer, when the
            optimizer's ``init_state`` did not make it, starts as the first gradient; any other
            missing one leaves the step to NumPy.
        momentum: the name of the optimizer's attribute holding this hyper-parameter (None:
            0), read at every step, so that a rule built once follows an attribute changed
            later (the kernel rounds it to fp32 where NumPy would). So are the five below.
        dampening: as ``momentum``, for the dampening.
        beta1: as ``momentum``, for Adam's beta1.
        beta2: as ``momentum``, for Adam's beta2.
        eps: as ``momentum``, for Adam's epsilon.
        nesterov: as ``momentum``, for the Nesterov flag.
        step_size: ``fn(lr) -> lr`` for this step (Adam's bias correction), or None.
    """

    _HYPER = ("momentum", "dampening", "beta1", "beta2", "eps", "nesterov")  # struct MgHyper

    def __init__(self, kind, states=(), momentum=None, dampening=None, beta1=None, beta2=None,
                 eps=None, nesterov=None, step_size=None):
        self.kind, self.states, self.step_size = kind, states, step_size
        self._names = (momentum, dampening, beta1, beta2, eps, nesterov)
        self._hyper = numpy.zeros(len(self._HYPER), numpy.float64)
        self._hyper_address = data_address(self._hyper)
        self._raised = numpy.zeros(1, numpy.int32)  # the kernel's IEEE exception bits, per step
        self._raised_address = data_address(self._raised)

    def hyper_address(self, optimizer):
        """The address of the kernel's hyper-parameter block, filled for this step (one array,
        rewritten each call)."""
        hyper = self._hyper
        for k, name in enumerate(self._names):
            hyper[k] = 0.0 if name is None else float(getattr(optimizer, name))
        return self._hyper_address


# What the kernel does in place of ``owner``'s code: a subclass that overrides one is not fused.
_REPLACED = ("update", "_apply_one", "_prepare_gradient", "_unscale", "_add_weight_decay",
             "decoupled_weight_decay")


def rule_for(optimizer, owner, rule):
    """``rule`` if ``type(optimizer)`` still runs ``owner``'s per-parameter step (``update``, the
    gradient preparation: unscaling and weight decay, and ``owner``'s kind of weight decay; a
    subclass that changes any of them would not get what it asked for), else None."""
    cls = type(optimizer)
    for name in _REPLACED:
        if getattr(cls, name) is not getattr(owner, name):
            return None
    return rule


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
        self.masters = [None] * len(parameters)  # fp32 copy per fp16/bf16 parameter, lazily
        self._synced = [None] * len(parameters)  # (data, version) each master matches

    def weight(self, i):
        """The array an update of parameter ``i`` writes: its own data (fp32, fp64), or its fp32
        master (fp16, bf16: ``dtype.is_low_precision``), re-read from the parameter if someone
        else wrote it."""
        param = self.parameters[i]
        data = param.data
        if not dtypes.is_low_precision(data.dtype):
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
        """After an update of an fp16 (bf16) parameter's master ``weight``: round it into the
        parameter (in place) and record that the two match."""
        param = self.parameters[i]
        convert(weight, param.data.dtype, out=param.data)
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
            if master is not None and dtypes.is_low_precision(param.dtype):
                yield f"master.{key}", numpy.array(backend.as_numpy(master))

    def checked(self, entries, keys, state_names, owner):
        """Validate ``{(slot, key): value}`` entries for ``load``; return ``(states, masters)``.
        Messages begin ``"<owner>: "``.

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
            low = dtypes.is_low_precision(param.dtype)
            expected = dtypes.float32 if low else param.dtype
            check_relation("state_dict key", key, slot != "master" or low,
                           f"the master of a float16 (or bfloat16) parameter ({name!r} is "
                           f"{param.dtype})",
                           owner=owner)
            check_relation(f"the shape and dtype of state_dict[{key!r}]",
                           (array.shape, array.dtype.name),
                           array.shape == param.shape and array.dtype == expected,
                           f"{(param.shape, expected.name)} (for parameter {name!r})",
                           owner=owner)
            if slot == "master":
                masters[index[name]] = array
            else:
                states[index[name]][slot] = array
        for key, state in zip(keys, states):
            check_relation(f"the state entries of parameter {key!r}",
                           sorted(f"{m}.{key}" for m in state),
                           not state or set(state) == set(state_names),
                           f"none or all of {sorted(f'{m}.{key}' for m in state_names)}",
                           owner=owner)
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


def _function():
    # the loaded build without a call into _native (numpy_fallback() swaps host_build)
    return (_native.host_build or _native.loaded()).optimizer_step


def _dense_numpy(x, dtypes_allowed):
    return (type(x) is numpy.ndarray and x.dtype in dtypes_allowed and x.flags.c_contiguous
            and x.flags.aligned)


def fused_covers(optimizer, arrays):
    """Whether ``fused_step`` can run this step natively as far as the arrays tell: every present
    gradient and its parameter dense NumPy float16/float32, on the host, with the library."""
    params = optimizer.parameters
    if len(arrays) != len(params):
        return False
    if not all(g is None or (_dense_numpy(g, (_F16, _F32)) and _dense_numpy(p.data, (_F16, _F32)))
               for g, p in zip(arrays, params)):
        return False
    return _function() is not None


def fused_step(optimizer, rule, arrays, lrs, inv_scale):
    """Run one step of ``optimizer`` natively; return False when not covered (nothing changed but
    what the NumPy path would do first: a master re-read, a state made by ``init_state``).

    Args:
        optimizer: the ``Optimizer``; its ``slots`` (masters, states, sync records) are used and
            updated, and its ``weight_decays`` and ``loss_scale`` read.
        rule: its ``Rule``.
        arrays: one gradient array (or None) per parameter, already checked (by
            ``Optimizer._check_gradients``, which also refuses read-only parameters).
        lrs: the learning rate of each parameter for this step (one per parameter).
        inv_scale: ``float(fp32(1 / scale))`` for a loss scale still in the gradients, or 1.0.
    """
    present = [i for i, g in enumerate(arrays) if g is not None]
    params, slots = optimizer.parameters, optimizer.slots
    if not all(_dense_numpy(arrays[i], (_F16, _F32)) and _dense_numpy(params[i].data, (_F16, _F32))
               for i in present):
        return False
    errstate = numpy.geterr()
    if any(errstate[kind] not in ("ignore", "warn") for _, kind, _ in _EXCEPTIONS):
        return False  # "raise" and the others act mid-step, which only the NumPy path can do
    if errstate["under"] != "ignore":
        return False  # the kernel does not report underflow: NumPy warns or raises for it
    fn = _function()
    if fn is None:
        return False

    rows, halves, fresh = [], [], []
    for i in present:
        param, grad = params[i], arrays[i]
        data = param.data
        weight = slots.weight(i)
        flags = GRAD_HALF if grad.dtype == _F16 else 0
        state = slots.state(i, weight)  # made as the NumPy path would make it
        buffers = []
        for name in rule.states:
            buffer = state.get(name)
            # SGD's buffer starts as the first gradient; stored once all is covered
            if buffer is None:
                if rule.kind != SGD:
                    return False  # the NumPy path raises for the missing state
                buffer = numpy.empty_like(weight)
                fresh.append((state, name, buffer))
                flags |= STATE_FROM_GRAD
            elif not (_dense_numpy(buffer, (_F32,)) and buffer.flags.writeable
                      and buffer.size == weight.size):
                return False  # e.g. a float64 state kept across a dtype change: the NumPy path
            buffers.append(data_address(buffer))
        buffers += [0] * (2 - len(buffers))
        half = 0
        if weight is not data:
            half = data_address(data)
            halves.append((i, weight, data))
        lr = lrs[i] if rule.step_size is None else rule.step_size(lrs[i])
        rows.append((data_address(weight), data_address(grad), half, *buffers, weight.size, flags,
                     lr, optimizer.weight_decays[i]))
    for state, name, buffer in fresh:
        state[name] = buffer
    rows, raised = numpy.array(rows, ROW), rule._raised
    raised[0] = 0
    overflows = fn(data_address(rows), len(rows), rule.kind, inv_scale, 1.0 / optimizer.loss_scale,
                   rule.hyper_address(optimizer), rule._raised_address)
    for bit, kind, text in _EXCEPTIONS:  # NumPy's warnings, once per kind as a ufunc gives them
        if raised[0] & bit and errstate[kind] == "warn":
            warnings.warn(f"{text} encountered in the fused {type(optimizer).__name__} step",
                          RuntimeWarning, stacklevel=_caller_level())
    for i, weight, data in halves:
        if overflows:  # NumPy's cast again, for its overflow warning (or error, under errstate)
            data[...] = weight
        slots.written(i)
    return True


def _caller_level():
    """``warnings.warn``'s stacklevel, from ``fused_step``, of the first frame outside
    minigrad/optim: ``optimizer(grads)`` and ``step()`` add a frame that a direct
    ``apply_gradients`` does not."""
    frame, level = sys._getframe(2), 2  # 1 is fused_step
    while frame is not None and frame.f_code.co_filename.startswith(_OPTIM_DIR):
        frame, level = frame.f_back, level + 1
    return level
