"""``Optimizer``: the base class of every minigrad optimizer (MindSpore semantics).

Gradients enter in exactly one place, ``apply_gradients(grads)``; both call styles use it
(MindSpore ``optimizer(grads)``, Torch ``optimizer.step()`` on each parameter's ``.grad``).
For each parameter ``w`` (index ``i``) with gradient ``g`` one step is::

    g = g / loss_scale                           # _unscale: undo a fixed loss scale
    g = g + weight_decay_i * w                   # _add_weight_decay: L2 decay (decay_filter)
    update(state_i, w, g, lr_i)                  # the subclass's rule, in place on w and state_i

then ``global_step += 1``. (``AdamWeightDecay`` decays the weight itself instead of the gradient:
``decoupled_weight_decay``.) ``w`` is the parameter's own ``.data`` for an fp32 (or fp64)
parameter, and the optimizer's fp32 *master copy* for an fp16 one, written back to the fp16
parameter after the update. State (momenta, moments) has ``w``'s dtype: fp32 for fp16 and fp32
parameters. Parameter arrays are only written in place, so views and hooks on ``param.data``
stay valid. A master is re-read from its parameter when someone else wrote the parameter since
the last update: through ``Parameter.set_data`` or item assignment (``Parameter.version``), or
by giving it a new array; it is kept if it still rounds to the parameter (a checkpoint loaded
after ``load_state_dict``). Writes straight into ``param.data[...]`` are not seen.

Subclasses implement ``update`` (and list ``state_names``: zero-initialised fp32 state). A subclass
that changes what happens to a gradient before the update overrides
``_prepare_gradient(i, grad, weight)``; THOR, for one, preconditions between the two steps::

    return self._add_weight_decay(i, self.precondition(i, self._unscale(grad, weight.dtype)), weight)
"""
import numbers
import warnings
from collections.abc import Iterable

import numpy

from minigrad import backend, communication, dtype as dtypes
from minigrad._config import enable_grad
from minigrad._fastcast import convert
from minigrad.optim import _fused
from minigrad.optim._checks import check_bool, check_non_negative_float, check_positive_float
from minigrad.optim.lr_schedule import LearningRateSchedule
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor

_GROUP_KEYS = ("params", "lr", "weight_decay", "grad_centralization", "order_params")


def default_decay_filter(param):
    """MindSpore's default for ungrouped parameters: decay unless the name has 'beta' or 'gamma'."""
    name = param.name or ""
    return "beta" not in name and "gamma" not in name


class Optimizer:
    """Base class: holds the parameters, learning rates, weight decay and per-parameter state.

    Args:
        learning_rate: a finite float/int >= 0; a 0-d Tensor or NumPy array; a 1-D Tensor or NumPy
            array, or any other Iterable (list, tuple, range, generator: MindSpore's ``Iterable``) of
            per-step values (step ``global_step`` takes entry ``global_step``; the last entry
            repeats after the end); or a ``LearningRateSchedule`` (called with ``global_step``).
        parameters: an iterable of ``Parameter``, or a list of group dicts with keys ``'params'``
            (required), ``'lr'``, ``'weight_decay'``, ``'grad_centralization'`` (a bool; accepted
            and not applied) and one optional ``{'order_params': params}`` dict that fixes the order.
        weight_decay: L2 coefficient >= 0, added to the gradient as ``wd * w``. Default 0.0.
        loss_scale: > 0; gradients are divided by it before anything else. Default 1.0.
        decay_filter: ``fn(param) -> bool``, which parameters get weight decay. Default: all in
            a group with ``weight_decay > 0`` when grouped, else names without 'beta'/'gamma'.

    Attributes:
        parameters (tuple): the parameters, in update order.
        global_step (int): the number of updates applied.
        last_step_fused (bool): whether the last update ran as one native call (the fused host
            step of ``optim._fused``) rather than the NumPy path; False before the first.
        learning_rate: the learning-rate object (a 0-d ``Parameter`` for a fixed rate, which
            may be changed in place with ``set_data``; a 1-D Tensor; or the schedule); with
            per-group learning rates, a tuple with one per parameter.

    Raises:
        TypeError: ``learning_rate``, ``weight_decay``, ``loss_scale`` or ``decay_filter`` of the
            wrong type; an element of ``parameters`` that is neither a Parameter nor a dict.
        ValueError: ``parameters`` None or empty, a parameter given twice, a negative, inf or NaN
            learning rate (also inside a list, Tensor or array) or ``weight_decay``, a
            ``loss_scale`` that is <= 0, inf or NaN, a learning-rate Tensor or array with ndim > 1.
        KeyError: an unknown key in a group dict.

    In data-parallel mode (``minigrad.set_auto_parallel_context(parallel_mode="data_parallel")``)
    making an optimizer is a collective step of every rank: it checks that every rank has the
    same parameters (ValueError naming the first difference) and copies rank 0's values to all
    (``communication.synchronize_parameters``), so the ranks start identical.
    """
    # Names of the per-parameter state arrays (the keys ``update`` stores in ``state``).
    state_names = ()
    # False: weight decay is L2, added to the gradient. True (AdamWeightDecay): decoupled, applied
    # to the weight as w <- w * (1 - lr * wd) before an update that does not read w.
    decoupled_weight_decay = False

    def __new__(cls, *args, **kwargs):
        if "lr" in kwargs:  # PyTorch's spelling, refused before the subclass's signature is
            raise TypeError(f"{cls.__name__} has no argument 'lr' (a PyTorch name); minigrad "
                            f"optimizers take learning_rate=..., as MindSpore's do")
        return super().__new__(cls)

    def __init__(self, learning_rate, parameters, weight_decay=0.0, loss_scale=1.0, decay_filter=None):
        owner = type(self).__name__
        self.loss_scale = check_positive_float(loss_scale, "loss_scale", owner)
        self.weight_decay = check_non_negative_float(weight_decay, "weight_decay", owner)
        if decay_filter is not None and not callable(decay_filter):
            raise TypeError(f"For '{owner}', the argument 'decay_filter' must be callable, "
                            f"but got {type(decay_filter).__name__}")
        default_lr = _LearningRate.build(learning_rate, "learning_rate", owner)
        params, lrs, decays, self.is_group = _parse_parameters(parameters, default_lr, self.weight_decay,
                                                               owner)
        if decay_filter is None and not self.is_group:
            decay_filter = default_decay_filter
        self.parameters = tuple(params)
        self.decay_flags = tuple(wd > 0 and (decay_filter is None or bool(decay_filter(p)))
                                 for p, wd in zip(params, decays))
        self._decays = tuple(wd if flag else 0.0 for wd, flag in zip(decays, self.decay_flags))
        self._inv_scale = 1.0 / self.loss_scale

        # one entry per distinct learning-rate object, evaluated once per step
        self._lr_sources = list({id(lr): lr for lr in lrs}.values())
        self._lr_index = tuple(self._lr_sources.index(lr) for lr in lrs)
        self.is_group_lr = len(self._lr_sources) > 1 or self._lr_sources[0] is not default_lr
        self.dynamic_lr = any(not isinstance(lr, _FixedLR) for lr in self._lr_sources)
        self.learning_rate = (tuple(lr.learning_rate for lr in lrs) if self.is_group_lr
                              else default_lr.learning_rate)

        self.global_step = 0
        self.last_step_fused = False
        self._states = [None] * len(params)   # dict of fp32 arrays per parameter, made lazily
        self._masters = [None] * len(params)  # fp32 copy per fp16 parameter, made lazily
        self._synced = [None] * len(params)   # (data, version) of each parameter its master matches
        if communication.is_data_parallel():  # every rank: the same model, from rank 0's values
            communication.synchronize_parameters(self.parameters)

    # ---- the one entry point -------------------------------------------------------------------
    def apply_gradients(self, grads, scale=None):
        """Apply one update from ``grads`` (Tensors or arrays, one per parameter; None skips one).

        Every gradient is checked before any parameter changes.

        Args:
            grads: the gradients.
            scale: a loss scale still in ``grads`` (a positive finite number), or None. Each
                gradient is then first divided by it, as ``g * fp32(1 / scale)`` in ``g``'s
                dtype, an fp16 ``g`` widened to fp32 first (what
                ``amp.float_status.check_and_unscale_to_fp32`` gives), before the fixed
                ``loss_scale``. Lets a loss-scaled step hand over its fp16 gradients as they are:
                SGD, Momentum, Adam and AdamWeightDecay unscale them inside their fused update.

        Returns:
            True.

        Raises:
            TypeError: ``grads`` not a tuple/list, an entry that is not a float array/Tensor, or a
                ``scale`` that is not a real number.
            ValueError: a different number of gradients than parameters, a gradient whose shape
                differs from its parameter's (naming the parameter and both shapes), a read-only
                parameter, or a ``scale`` that is not positive and finite.
        """
        arrays = self._check_gradients(grads)
        inv_scale = 1.0 if scale is None else _inverse_scale(scale, type(self).__name__)
        lrs = [lr(self.global_step) for lr in self._lr_sources]
        rule = self._fused_rule()
        fused = rule is not None and _fused.apply(self, rule, arrays,
                                                  [lrs[k] for k in self._lr_index], inv_scale)
        if not fused:
            for i, grad in enumerate(arrays):
                if grad is not None:
                    self._apply_one(i, _divide(grad, inv_scale), lrs[self._lr_index[i]])
        self.last_step_fused = fused
        self.global_step += 1
        return True

    def takes_scaled_gradients(self, grads):
        """Whether ``apply_gradients(grads, scale=S)`` divides ``S`` out inside this optimizer's
        fused native update, in the same pass (no extra pass over the gradients).

        True for SGD, Momentum, Adam and AdamWeightDecay (and subclasses that keep their update
        and ``__call__``/``apply_gradients``) on dense host float16/float32 arrays, with the
        native library. A loss-scaled train cell then checks the scaled gradients and hands
        them over as they are, instead of unscaling them first. Every optimizer accepts
        ``scale=``; False only means that unscaling first costs no more.

        Args:
            grads: one array (or None) per parameter.
        """
        cls = type(self)
        if cls.__call__ is not Optimizer.__call__ or cls.apply_gradients is not Optimizer.apply_gradients:
            return False  # an override may expect unscaled gradients
        rule = self._fused_rule()
        return rule is not None and _fused.covers(self, grads)

    def __call__(self, gradients):
        """MindSpore style: ``optimizer(grads)`` applies ``grads`` and returns True."""
        return self.apply_gradients(gradients)

    construct = apply_gradients

    def step(self, closure=None):
        """Torch style: apply each parameter's ``.grad`` (parameters without one are skipped;
        when none has one, a UserWarning says so: no parameter moves, the step still counts).

        ``closure``, if given, is called first (with gradient recording on) and its loss returned.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        grads = tuple(p.grad for p in self.parameters)
        if all(g is None for g in grads):  # say so rather than silently do nothing
            warnings.warn(f"{type(self).__name__}.step(): none of its {len(grads)} parameters has "
                          f"a gradient (.grad is None), so no parameter was updated (the step "
                          f"still counts); call loss.backward() before step()", UserWarning,
                          stacklevel=2)
        self.apply_gradients(grads)
        return loss

    def zero_grad(self):
        """Torch style: set every parameter's ``.grad`` to None."""
        for p in self.parameters:
            p.grad = None

    # ---- the per-parameter pipeline --------------------------------------------------------------
    def _apply_one(self, i, grad, lr):
        param = self.parameters[i]
        data = param.data
        weight = self._master(i, data) if data.dtype == dtypes.float16 else data
        state = self._states[i]
        if state is None:
            state = self._states[i] = self.init_state(weight)
        grad = self._prepare_gradient(i, grad, weight)
        if self.decoupled_weight_decay and self._decays[i]:
            weight *= 1.0 - lr * self._decays[i]
        self.update(state, weight, grad, lr)
        if weight is not data:
            convert(weight, dtypes.float16, out=data)
            self._synced[i] = (data, param.version)

    def _prepare_gradient(self, i, grad, weight):
        """The gradient the update sees: ``grad / loss_scale + wd_i * weight`` in ``weight``'s dtype
        (no ``wd_i * weight`` term for decoupled weight decay).

        May return ``grad`` itself (never modify it in place: it can be the caller's array).
        THOR overrides this to precondition between the unscaling and the weight decay.
        """
        return self._add_weight_decay(i, self._unscale(grad, weight.dtype), weight)

    def _add_weight_decay(self, i, grad, weight):
        wd = self._decays[i]
        return grad + wd * weight if wd and not self.decoupled_weight_decay else grad

    def _unscale(self, grad, dtype):
        """``grad / loss_scale`` in ``dtype`` (``grad`` itself when nothing is to be done)."""
        if grad.dtype != dtype:
            grad = grad.astype(dtype)  # a fresh array: safe to scale in place
            if self._inv_scale != 1.0:
                grad *= self._inv_scale
            return grad
        return grad * self._inv_scale if self._inv_scale != 1.0 else grad

    def init_state(self, weight):
        """The new state of a parameter whose weight (fp32 for fp16 parameters) is ``weight``:
        zeros for each of ``state_names``."""
        xp = backend.get_array_module(weight)
        return {name: xp.zeros_like(weight) for name in self.state_names}

    def update(self, state, weight, grad, lr):
        """Apply the rule in place to ``weight`` and ``state`` (fp32 arrays); ``grad`` is read-only."""
        raise NotImplementedError(f"{type(self).__name__} must implement update(state, weight, grad, lr)")

    def _fused_rule(self):
        """The ``optim._fused.Rule`` that does what ``update`` does, natively, or None (the
        default: the NumPy path). SGD, Momentum, Adam and AdamWeightDecay return theirs through
        ``_fused.rule_for``."""
        return None

    def _master(self, i, data):
        """The fp32 master of fp16 parameter ``i``, re-read from the parameter if someone else wrote it."""
        master, synced, version = self._masters[i], self._synced[i], self.parameters[i].version
        if synced is None or synced[0] is not data or synced[1] != version:
            if master is None or master.shape != data.shape or bool((convert(master, data.dtype) != data).any()):
                master = self._masters[i] = convert(data, dtypes.float32)
            self._synced[i] = (data, version)
        return master

    def _check_gradients(self, grads):
        owner = type(self).__name__
        if not isinstance(grads, (tuple, list)):
            raise TypeError(f"For '{owner}', the gradients must be a tuple or list with one entry per "
                            f"parameter, but got {type(grads).__name__}")
        if len(grads) != len(self.parameters):
            raise ValueError(f"For '{owner}', got {len(grads)} gradients for {len(self.parameters)} parameters")
        arrays = []
        for i, (param, grad) in enumerate(zip(self.parameters, grads)):
            if grad is not None:
                grad = grad.data if isinstance(grad, Tensor) else grad
                if getattr(getattr(grad, "dtype", None), "kind", None) != "f":
                    raise TypeError(f"For '{owner}', the gradient of parameter {_label(param, i)} must be a "
                                    f"float Tensor or array, but got {_describe(grad)}")
                if grad.shape != param.shape:
                    raise ValueError(f"For '{owner}', the gradient of parameter {_label(param, i)} has shape "
                                     f"{tuple(grad.shape)}, but the parameter has shape {param.shape}")
                data = param.data
                if type(data) is numpy.ndarray and not data.flags.writeable:  # fail before any update
                    raise ValueError(f"For '{owner}', parameter {_label(param, i)} is read-only (its array "
                                     f"has writeable=False); the update writes it in place")
            arrays.append(grad)
        return arrays

    # ---- learning rate ---------------------------------------------------------------------------
    def get_lr(self):
        """The learning rate of the current step: a float, or a tuple with one per parameter when
        groups have their own learning rates. (Unlike MindSpore, reading it changes nothing.)"""
        values = [lr(self.global_step) for lr in self._lr_sources]
        if self.is_group_lr:
            return tuple(values[k] for k in self._lr_index)
        return values[0]

    def get_lr_parameter(self, param):
        """The learning-rate object of ``param`` (a Parameter), or a list for a list of parameters.

        Raises:
            TypeError: ``param`` is neither a Parameter nor a list of them.
            ValueError: a parameter this optimizer does not update.
        """
        params = param if isinstance(param, list) else [param]
        result = []
        for p in params:
            if not isinstance(p, Parameter):
                raise TypeError(f"For 'get_lr_parameter', the argument 'param' must be a Parameter or a "
                                f"list of Parameters, but got {type(p).__name__}")
            index = next((i for i, q in enumerate(self.parameters) if q is p), None)
            if index is None:
                raise ValueError(f"For 'get_lr_parameter', parameter {p.name!r} is not updated by this optimizer")
            result.append(self._lr_sources[self._lr_index[index]].learning_rate)
        return result if isinstance(param, list) else result[0]

    # ---- checkpointing ---------------------------------------------------------------------------
    def state_dict(self):
        """A plain dict of the optimizer's state: NumPy arrays and Python numbers (copies).

        Keys: ``"global_step"``; the name of each fixed learning rate's Parameter
        (``"learning_rate"``, ``"learning_rate_group_<k>"``), a 0-d float32 array, so that a rate
        changed with ``set_data`` survives a checkpoint as in MindSpore (and PyTorch's
        ``param_groups``); ``"<state name>.<parameter name>"`` for each state array (e.g.
        ``"moments.fc1.weight"``); ``"master.<parameter name>"`` for each fp16 master weight.
        Unnamed parameters are called ``param<i>``. (Per-step lists and schedules follow
        ``global_step``.)
        """
        result = {"global_step": self.global_step}
        for rate in self._fixed_rates():
            result[rate.name] = numpy.array(backend.as_numpy(rate.data))
        for key, param, state, master in zip(self._parameter_keys(), self.parameters, self._states,
                                             self._masters):
            for name, array in (state or {}).items():
                result[f"{name}.{key}"] = numpy.array(backend.as_numpy(array))
            if master is not None and param.dtype == dtypes.float16:
                result[f"master.{key}"] = numpy.array(backend.as_numpy(master))
        return result

    def load_state_dict(self, state_dict):
        """Restore what ``state_dict()`` returned; everything is checked before anything changes.

        Parameters with no state in ``state_dict`` start afresh (their state is made at their next
        update, their master from the parameter); a fixed learning rate absent from it keeps its
        value (dicts saved before rates were recorded).

        Raises:
            TypeError: ``state_dict`` is not a dict, or ``global_step`` is not an int.
            ValueError: a missing ``global_step``, an unknown key, a parameter with only part of its
                state, or an array whose shape or dtype does not fit (naming key, both shapes/dtypes).
        """
        owner = type(self).__name__
        if not isinstance(state_dict, dict):
            raise TypeError(f"For '{owner}.load_state_dict', expected a dict, got {type(state_dict).__name__}")
        if "global_step" not in state_dict:
            raise ValueError(f"For '{owner}.load_state_dict', the key 'global_step' is missing")
        step = state_dict["global_step"]
        step = step.item() if isinstance(step, numpy.ndarray) and step.size == 1 else step
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError(f"For '{owner}.load_state_dict', 'global_step' must be an int, got {step!r}")
        if step < 0:
            raise ValueError(f"For '{owner}.load_state_dict', 'global_step' must be >= 0, got {step}")

        keys = self._parameter_keys()
        index = {key: i for i, key in enumerate(keys)}
        slots = set(self.state_names) | {"master"}
        states = [dict() for _ in self.parameters]
        masters = [None] * len(self.parameters)
        rates = {rate.name: rate for rate in self._fixed_rates()}
        new_rates = {}
        for key, value in state_dict.items():
            if key == "global_step":
                continue
            if key in rates:
                rate = numpy.asarray(value.asnumpy() if isinstance(value, Tensor) else value)
                if rate.shape != () or rate.dtype.kind != "f" or not rate >= 0 or not numpy.isfinite(rate):
                    raise ValueError(f"For '{owner}.load_state_dict', {key!r} must be a finite float >= 0 "
                                     f"of shape (), got {rate!r}")
                new_rates[key] = numpy.float32(rate)
                continue
            slot, _, name = key.partition(".")
            if slot not in slots or name not in index:
                raise ValueError(f"For '{owner}.load_state_dict', unknown key {key!r}: expected 'global_step', "
                                 f"a learning rate in {sorted(rates)}, or '<slot>.<parameter name>' with "
                                 f"slot in {sorted(slots)} and a name in {_preview(keys)}")
            i = index[name]
            param = self.parameters[i]
            array = numpy.asarray(value.asnumpy() if isinstance(value, Tensor) else value)
            expected = dtypes.float32 if param.dtype == dtypes.float16 else param.dtype
            if slot == "master" and param.dtype != dtypes.float16:
                raise ValueError(f"For '{owner}.load_state_dict', {key!r}: parameter {name!r} is "
                                 f"{param.dtype}, only float16 parameters have a master copy")
            if array.shape != param.shape or array.dtype != expected:
                raise ValueError(f"For '{owner}.load_state_dict', {key!r} has shape {array.shape} and dtype "
                                 f"{array.dtype}, expected shape {param.shape} and dtype {expected}")
            if slot == "master":
                masters[i] = array
            else:
                states[i][slot] = array
        for key, state in zip(keys, states):
            if state and set(state) != set(self.state_names):
                missing = sorted(set(self.state_names) - set(state))
                raise ValueError(f"For '{owner}.load_state_dict', parameter {key!r} has only part of its "
                                 f"state: missing {['%s.%s' % (m, key) for m in missing]}")

        # all checked: assign (copies, on each parameter's device)
        for i, param in enumerate(self.parameters):
            device = param.device
            self._states[i] = {k: backend.to_device(a.copy(), device) for k, a in states[i].items()} or None
            self._masters[i] = None if masters[i] is None else backend.to_device(masters[i].copy(), device)
            self._synced[i] = None
        for key, rate in new_rates.items():
            rates[key].set_data(rate)
        self.global_step = int(step)

    def _fixed_rates(self):
        """The Parameters of the fixed learning rates (one per distinct rate)."""
        return [lr.learning_rate for lr in self._lr_sources if isinstance(lr, _FixedLR)]

    def _parameter_keys(self):
        keys = [p.name or f"param{i}" for i, p in enumerate(self.parameters)]
        if len(set(keys)) != len(keys):
            seen = set()
            duplicate = next(k for k in keys if k in seen or seen.add(k))
            raise ValueError(f"For '{type(self).__name__}', two parameters share the name {duplicate!r}: "
                             f"state_dict needs unique names")
        return keys

    def __repr__(self):
        return (f"{type(self).__name__}({len(self.parameters)} parameters, lr={self.get_lr()}, "
                f"weight_decay={self.weight_decay}, loss_scale={self.loss_scale}, global_step={self.global_step})")


def _inverse_scale(scale, owner):
    """``float(fp32(1 / scale))``, 1/scale computed in float64 as ``amp.step.inverse`` does."""
    if isinstance(scale, Tensor):
        scale = scale.item()
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"For '{owner}', the argument 'scale' must be a real number, but got "
                        f"{type(scale).__name__}")
    scale = float(scale)
    if not (0.0 < scale < float("inf")):
        raise ValueError(f"For '{owner}', the argument 'scale' must be positive and finite, but got {scale}")
    return float(numpy.float32(1.0 / scale))


def _divide(grad, inv_scale):
    """``grad`` with a loss scale divided out: fp16 widened to fp32 first (a new array)."""
    if inv_scale == 1.0:
        return grad
    if grad.dtype == dtypes.float16:
        grad = convert(grad, dtypes.float32)
        grad *= numpy.float32(inv_scale)
        return grad
    return grad * grad.dtype.type(inv_scale)


# ---- learning-rate objects: ``lr(step) -> float``; ``.learning_rate`` is what users see --------------
class _LearningRate:
    @staticmethod
    def build(value, name, owner, parameter_name="learning_rate"):
        """A ``_FixedLR``, ``_ListLR`` or ``_ScheduleLR`` for ``value`` (checked; errors say ``name``)."""
        if isinstance(value, LearningRateSchedule):
            return _ScheduleLR(value)
        if isinstance(value, bool):
            raise TypeError(f"For '{owner}', the argument '{name}' must be a float, Tensor, Iterable or "
                            f"LearningRateSchedule, but got {value!r}")
        if isinstance(value, numbers.Real):
            return _FixedLR(check_non_negative_float(value, name, owner), parameter_name)
        array = value.asnumpy() if isinstance(value, Tensor) else value
        if isinstance(array, numpy.ndarray):  # a Tensor, or a NumPy array (an Iterable to MindSpore)
            if array.ndim > 1:
                raise ValueError(f"For '{owner}', a Tensor or array '{name}' must be 0-d or 1-D, "
                                 f"but got shape {array.shape}")
            if array.dtype.kind not in "fiu":
                raise TypeError(f"For '{owner}', the argument '{name}' must hold numbers, "
                                f"but got an array of dtype {array.dtype}")
            values = array.astype(numpy.float64).reshape(-1).tolist()
            bad = next((v for v in values if not 0 <= v < float("inf")), None)  # NaN and inf too
            if bad is not None:
                raise ValueError(f"For '{owner}', the argument '{name}' must be finite and >= 0, "
                                 f"but contains {bad}")
        elif isinstance(value, Iterable) and not isinstance(value, (str, bytes, dict)):
            # MindSpore: any Iterable (list, tuple, range, generator, ...) gives one rate per step
            values = [check_non_negative_float(v, f"{name}[{k}]", owner) for k, v in enumerate(value)]
        else:
            raise TypeError(f"For '{owner}', the argument '{name}' must be a float, Tensor, Iterable or "
                            f"LearningRateSchedule, but got {type(value).__name__}")
        if not values:
            raise ValueError(f"For '{owner}', the argument '{name}' is empty")
        if isinstance(array, numpy.ndarray) and array.ndim == 0:
            return _FixedLR(values[0], parameter_name)
        return _ListLR(values)


class _FixedLR:
    def __init__(self, value, name):
        self.learning_rate = Parameter(numpy.array(value, numpy.float32), name=name, requires_grad=False)

    def __call__(self, step):
        return float(self.learning_rate.data)


class _ListLR:
    def __init__(self, values):
        self.values = values
        self.learning_rate = Tensor(numpy.array(values, numpy.float32))

    def __call__(self, step):
        return self.values[min(step, len(self.values) - 1)]


class _ScheduleLR:
    def __init__(self, schedule):
        self.learning_rate = schedule

    def __call__(self, step):
        return float(self.learning_rate(step))


# ---- parameters and groups -----------------------------------------------------------------------
def _parse_parameters(parameters, default_lr, default_wd, owner):
    """(params, lr object per param, weight decay per param, grouped?) from ``parameters``."""
    items = _as_list(parameters, "parameters", owner)
    if all(isinstance(p, Parameter) for p in items):
        _check_unique(items, owner)
        return items, [default_lr] * len(items), [default_wd] * len(items), False
    if not all(isinstance(g, dict) for g in items):
        k, bad = next((k, x) for k, x in enumerate(items) if not isinstance(x, (Parameter, dict)))
        raise TypeError(f"For '{owner}', every element of 'parameters' must be a Parameter (or every element "
                        f"a group dict), but element {k} is {type(bad).__name__}")

    params, lrs, decays, order = [], [], [], None
    for k, group in enumerate(items):
        unknown = [key for key in group if key not in _GROUP_KEYS]
        if unknown:
            raise KeyError(f"For '{owner}', group {k} has unknown keys {unknown}; allowed: {list(_GROUP_KEYS)}")
        if "order_params" in group:
            if len(group) > 1:
                raise ValueError(f"For '{owner}', the 'order_params' group (group {k}) must have no other keys")
            order = _as_list(group["order_params"], "order_params", owner)
            continue
        if "params" not in group:
            raise ValueError(f"For '{owner}', group {k} has no 'params'")
        group_params = _as_list(group["params"], f"group {k} 'params'", owner)
        bad = next((p for p in group_params if not isinstance(p, Parameter)), None)
        if bad is not None:
            raise TypeError(f"For '{owner}', group {k} 'params' must hold Parameters, got {type(bad).__name__}")
        lr = default_lr
        if "lr" in group:
            lr = _LearningRate.build(group["lr"], f"group {k} 'lr'", owner, f"learning_rate_group_{k}")
        wd = default_wd
        if "weight_decay" in group:
            wd = check_non_negative_float(group["weight_decay"], f"group {k} 'weight_decay'", owner)
        if "grad_centralization" in group:
            check_bool(group["grad_centralization"], f"group {k} 'grad_centralization'", owner)
        params += group_params
        lrs += [lr] * len(group_params)
        decays += [wd] * len(group_params)
    if not params:
        raise ValueError(f"For '{owner}', the parameter groups hold no parameters")
    _check_unique(params, owner)
    if order is not None:
        position = {id(p): i for i, p in enumerate(params)}
        if len(order) != len(params) or any(id(p) not in position for p in order):
            raise ValueError(f"For '{owner}', 'order_params' must hold exactly the parameters of the groups "
                             f"({len(params)}), got {len(order)} parameters")
        perm = [position[id(p)] for p in order]
        params, lrs, decays = ([xs[j] for j in perm] for xs in (params, lrs, decays))
    return params, lrs, decays, True


def _as_list(value, name, owner):
    if value is None:
        raise ValueError(f"For '{owner}', the argument '{name}' can not be None")
    if isinstance(value, (Tensor, dict, str)) or not hasattr(value, "__iter__"):
        raise TypeError(f"For '{owner}', the argument '{name}' must be an iterable of Parameters or group "
                        f"dicts, but got {type(value).__name__}")
    items = list(value)
    if not items:
        raise ValueError(f"For '{owner}', the argument '{name}' is empty")
    return items


def _check_unique(params, owner):
    seen = set()
    for i, p in enumerate(params):
        if id(p) in seen:
            raise ValueError(f"For '{owner}', parameter {_label(p, i)} is given more than once")
        seen.add(id(p))


def _label(param, i):
    return repr(param.name) if param.name else f"#{i}"


def _describe(value):
    dtype = getattr(value, "dtype", None)
    return f"{type(value).__name__} of dtype {dtype}" if dtype is not None else type(value).__name__


def _preview(names, limit=5):
    shown = ", ".join(repr(n) for n in names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}]"
