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
stay valid. Masters, state and their synchronisation with the parameters live in ``slots``
(``optim.slots.ParameterSlots``), which the NumPy path and the fused native step
(``optim.slots.fused_step``) share.

Subclasses implement ``update`` (and list ``state_names``: zero-initialised fp32 state). A subclass
that changes what happens to a gradient before the update overrides
``_prepare_gradient(i, grad, weight)``; one that has a native equivalent of its ``update``
returns it from ``_fused_rule()`` (built once per optimizer, ``fused_rule``).

The parameter groups are parsed in ``optim.param_groups``, the learning-rate objects live in
``optim.lr_schedule`` and ``state_dict``/``load_state_dict`` in ``optim.optimizer_state``.
"""
import math
import warnings

import numpy

from minigrad import backend, communication
from minigrad import dtype as dtypes
from minigrad._config import enable_grad
from minigrad._fp16_host import convert
from minigrad.optim import optimizer_state
from minigrad._checks import (check_callable, check_non_negative, check_positive, check_relation,
                              check_type)
from minigrad.optim.lr_schedule import FixedLR, LearningRate
from minigrad.optim.param_groups import default_decay_filter, label, parse_parameters
from minigrad.optim.slots import ParameterSlots, fused_covers, fused_step
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor

__all__ = ["Optimizer", "default_decay_filter"]


class Optimizer:
    """Base class: holds the parameters, learning rates, weight decay and per-parameter state.

    Args:
        learning_rate: a finite float/int >= 0; a 0-d Tensor or NumPy array; a 1-D Tensor or NumPy
            array, or any other Iterable (list, tuple, range, generator: MindSpore's ``Iterable``)
            of per-step values (step ``global_step`` takes entry ``global_step``; the last entry
            repeats after the end); or a ``LearningRateSchedule`` (called with ``global_step``).
        parameters: an iterable of ``Parameter``, or a list of group dicts with keys ``'params'``
            (required), ``'lr'``, ``'weight_decay'``, ``'grad_centralization'`` (a bool; accepted
            and not applied) and one optional ``{'order_params': params}`` dict fixing the order.
        weight_decay: L2 coefficient >= 0, added to the gradient as ``wd * w``. Default 0.0.
        loss_scale: > 0; gradients are divided by it before anything else. Default 1.0.
        decay_filter: ``fn(param) -> bool``, which parameters get weight decay. Default: all in
            a group with ``weight_decay > 0`` when grouped, else names without 'beta'/'gamma'.

    Attributes:
        parameters (tuple): the parameters, in update order.
        global_step (int): the number of updates applied.
        last_step_fused (bool): whether the last update ran as one native call (the fused host
            step of ``optim.slots``) rather than the NumPy path; False before the first.
        learning_rate: the learning-rate object (a 0-d ``Parameter`` for a fixed rate, which
            may be changed in place with ``set_data``; a 1-D Tensor; or the schedule); with
            per-group learning rates, a tuple with one per parameter.

    Raises:
        TypeError: ``learning_rate``, ``weight_decay``, ``loss_scale`` or ``decay_filter`` of the
            wrong type; an element of ``parameters`` that is neither a Parameter nor a dict, or
            a list mixing the two.
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

    def __init__(self, learning_rate, parameters, weight_decay=0.0, loss_scale=1.0,
                 decay_filter=None):
        owner = type(self).__name__
        self.loss_scale = check_positive("loss_scale", loss_scale, owner=owner)
        self.weight_decay = check_non_negative("weight_decay", weight_decay, owner=owner)
        if decay_filter is not None:
            check_callable("decay_filter", decay_filter, owner=owner)
        default_lr = LearningRate.build(learning_rate, "learning_rate", owner)
        # MindSpore's subclasses call the argument params, the base class parameters
        argument = "parameters" if type(self).__init__ is Optimizer.__init__ else "params"
        params, lrs, decays, self.is_group = parse_parameters(parameters, default_lr,
                                                              self.weight_decay, owner,
                                                              name=argument)
        if decay_filter is None and not self.is_group:
            decay_filter = default_decay_filter
        self.parameters = tuple(params)
        self.decay_flags = tuple(wd > 0 and (decay_filter is None or bool(decay_filter(p)))
                                 for p, wd in zip(params, decays))
        self.weight_decays = tuple(wd if f else 0.0 for wd, f in zip(decays, self.decay_flags))
        self._inv_scale = 1.0 / self.loss_scale

        # one entry per distinct learning-rate object, evaluated once per step
        self._lr_sources = list({id(lr): lr for lr in lrs}.values())
        self._lr_index = tuple(self._lr_sources.index(lr) for lr in lrs)
        self.is_group_lr = len(self._lr_sources) > 1 or self._lr_sources[0] is not default_lr
        self.dynamic_lr = any(not isinstance(lr, FixedLR) for lr in self._lr_sources)
        self.learning_rate = (tuple(lr.learning_rate for lr in lrs) if self.is_group_lr
                              else default_lr.learning_rate)

        self.global_step = 0
        self.last_step_fused = False
        self.slots = ParameterSlots(self.parameters, self.init_state)
        self._rule, self._rule_built = None, False  # _fused_rule()'s Rule (or None), at first use
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
        lrs = self._rates()
        rule = self.fused_rule
        fused = rule is not None and fused_step(self, rule, arrays,
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

        Raises:
            TypeError: for ``grads`` that are not a tuple or a list.
        """
        if not isinstance(grads, (tuple, list)):
            check_type("grads", grads, (tuple, list), expected="a tuple or list with one "
                       "gradient per parameter", owner=f"{type(self).__name__}."
                       "takes_scaled_gradients")
        cls = type(self)
        if (cls.__call__ is not Optimizer.__call__
                or cls.apply_gradients is not Optimizer.apply_gradients):
            return False  # an override may expect unscaled gradients
        return self.fused_rule is not None and fused_covers(self, grads)

    @property
    def fused_rule(self):
        """The ``optim.slots.Rule`` of this optimizer's native step (or None: the NumPy path),
        built once, at first use, by ``_fused_rule()``."""
        if not self._rule_built:
            self._rule, self._rule_built = self._fused_rule(), True
        return self._rule

    def __call__(self, gradients):
        """MindSpore style: ``optimizer(grads)`` applies ``grads`` and returns True."""
        return self.apply_gradients(gradients)

    construct = apply_gradients

    def step(self, closure=None):
        """Torch style: apply each parameter's ``.grad`` (parameters without one are skipped;
        when none has one, a UserWarning says so: no parameter moves, the step still counts).

        ``closure``, if given, is called first (with gradient recording on) and its loss returned.

        Raises:
            TypeError: for a ``closure`` that is not callable (nothing changes), and
                ``apply_gradients``'s errors.
        """
        loss = None
        if closure is not None:
            check_callable("closure", closure, owner=f"{type(self).__name__}.step")
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

    def zero_grad(self, set_to_none=True):
        """Torch style: set every parameter's ``.grad`` to None (PyTorch 2.x's default), or to
        zeros with ``set_to_none=False``.

        Raises:
            TypeError: if ``set_to_none`` is not a bool.
        """
        set_to_none = check_type("set_to_none", set_to_none, bool,
                                 owner=f"{type(self).__name__}.zero_grad")
        for p in self.parameters:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = Tensor(backend.get_array_module(p.data).zeros_like(p.grad.data),
                                device=p.grad.device)

    # ---- the per-parameter pipeline --------------------------------------------------------------
    def _apply_one(self, i, grad, lr):
        slots = self.slots
        weight = slots.weight(i)
        state = slots.state(i, weight)
        grad = self._prepare_gradient(i, grad, weight)
        decay = self.weight_decays[i]
        if self.decoupled_weight_decay and decay:
            weight *= 1.0 - lr * decay
        self.update(state, weight, grad, lr)
        if weight is not self.parameters[i].data:
            slots.write_back(i, weight)

    def _prepare_gradient(self, i, grad, weight):
        """The gradient the update sees: ``grad / loss_scale + wd_i * weight`` in ``weight``'s dtype
        (no ``wd_i * weight`` term for decoupled weight decay).

        May return ``grad`` itself (never modify it in place: it can be the caller's array).
        THOR overrides this to precondition between the unscaling and the weight decay.
        """
        return self._add_weight_decay(i, self._unscale(grad, weight.dtype), weight)

    def _add_weight_decay(self, i, grad, weight):
        wd = self.weight_decays[i]
        return grad + wd * weight if wd and not self.decoupled_weight_decay else grad

    def _unscale(self, grad, dtype):
        """``grad / loss_scale`` in ``dtype`` (``grad`` itself when nothing is to be done)."""
        if grad.dtype != dtype:
            grad = convert(grad, dtype)  # a fresh array: safe to scale in place
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
        """Apply the rule in place to ``weight`` and ``state`` (fp32 arrays); ``grad`` is
        read-only."""
        raise NotImplementedError(f"{type(self).__name__} must implement update(state, weight, "
                                  "grad, lr)")

    def _fused_rule(self):
        """The ``optim.slots.Rule`` that does what ``update`` does, natively, or None (the
        default: the NumPy path). SGD, Momentum, Adam and AdamWeightDecay return theirs through
        ``slots.rule_for``."""
        return None

    def _master(self, i, data):
        """The weight an update of fp16 parameter ``i`` writes: ``slots.weight(i)``."""
        return self.slots.weight(i)

    def _check_gradients(self, grads):
        owner = type(self).__name__  # the checks run only on bad input: this is the hot path
        if not isinstance(grads, (tuple, list)):
            check_type("grads", grads, (tuple, list),
                       expected="a tuple or list with one gradient per parameter", owner=owner)
        n = len(self.parameters)
        if len(grads) != n:
            check_relation("grads", grads, False, f"{n} gradients, one per parameter (not "
                           f"{len(grads)})", owner=owner)
        arrays = []
        for i, (param, grad) in enumerate(zip(self.parameters, grads)):
            if grad is not None:
                grad = grad.data if isinstance(grad, Tensor) else grad
                data = param.data
                if not dtypes.is_float(getattr(grad, "dtype", None)):
                    check_relation(_grad_name(param, i), grad, False, "a float Tensor or array",
                                   error=TypeError, owner=owner)
                if grad.shape != data.shape:
                    check_relation(f"the shape of {_grad_name(param, i)}", tuple(grad.shape),
                                   False, f"the parameter's {data.shape}", owner=owner)
                if type(data) is numpy.ndarray and not data.flags.writeable:  # before any update
                    check_relation(f"data.flags.writeable of parameter {label(param, i)}", False,
                                   False, "True (the update writes it in place)", owner=owner)
            arrays.append(grad)
        return arrays

    # ---- learning rate ---------------------------------------------------------------------------
    def get_lr(self):
        """The learning rate of the current step: a float, or a tuple with one per parameter when
        groups have their own learning rates. (Unlike MindSpore, reading it changes nothing.)"""
        values = self._rates()
        if self.is_group_lr:
            return tuple(values[k] for k in self._lr_index)
        return values[0]

    def _rates(self):
        """The learning rate of each of ``_lr_sources`` at ``global_step``."""
        return [lr(self.global_step) for lr in self._lr_sources]

    def get_lr_parameter(self, param):
        """The learning-rate object of ``param`` (a Parameter), or a list for a list of parameters.

        Raises:
            TypeError: ``param`` is neither a Parameter nor a list of them.
            ValueError: a parameter this optimizer does not update.
        """
        owner = f"{type(self).__name__}.get_lr_parameter"
        params = param if isinstance(param, list) else [param]
        result = []
        for p in params:
            check_type("param", p, Parameter, expected="a Parameter or a list of Parameters",
                       owner=owner)
            index = next((i for i, q in enumerate(self.parameters) if q is p), None)
            check_relation("param", p, index is not None, "a parameter this optimizer updates",
                           owner=owner)
            result.append(self._lr_sources[self._lr_index[index]].learning_rate)
        return result if isinstance(param, list) else result[0]

    # ---- checkpointing ---------------------------------------------------------------------------
    def state_dict(self):
        """A plain dict of the optimizer's state: NumPy arrays and Python numbers (copies); see
        ``optim.optimizer_state.state_dict`` for the keys."""
        return optimizer_state.state_dict(self)

    def load_state_dict(self, state_dict):
        """Restore what ``state_dict()`` returned; everything is checked before anything changes
        (``optim.optimizer_state.load_state_dict`` says how and what it raises)."""
        optimizer_state.load_state_dict(self, state_dict)

    def _fixed_rates(self):
        """The Parameters of the fixed learning rates (one per distinct rate)."""
        return [lr.learning_rate for lr in self._lr_sources if isinstance(lr, FixedLR)]

    def _parameter_keys(self):
        keys = [p.name or f"param{i}" for i, p in enumerate(self.parameters)]
        if len(set(keys)) != len(keys):
            seen = set()
            j = next(j for j, k in enumerate(keys) if k in seen or seen.add(k))
            check_relation(f"the name of parameter #{j}", keys[j], False,
                           "unique (state_dict keys the state by parameter name)",
                           owner=type(self).__name__)
        return keys

    def __repr__(self):
        return (f"{type(self).__name__}({len(self.parameters)} parameters, lr={self.get_lr()}, "
                f"weight_decay={self.weight_decay}, loss_scale={self.loss_scale}, "
                f"global_step={self.global_step})")


def _inverse_scale(scale, owner):
    """``float(fp32(1 / scale))``, 1/scale in float64 as in ``amp.float_status.inverse``."""
    if isinstance(scale, Tensor):
        scale = scale.item()
    if not (isinstance(scale, (float, numpy.floating)) and 0.0 < scale < math.inf):
        scale = check_positive("scale", scale, owner=owner)  # a step's usual scale skips the call
    return float(numpy.float32(1.0 / float(scale)))


def _grad_name(param, i):
    return f"grads[{i}] (of parameter {label(param, i)})"


def _divide(grad, inv_scale):
    """``grad`` with a loss scale divided out: fp16 (bf16) widened to fp32 first (a new array)."""
    if inv_scale == 1.0:
        return grad
    if dtypes.is_low_precision(grad.dtype):
        grad = convert(grad, dtypes.float32)
        grad *= numpy.float32(inv_scale)
        return grad
    return grad * grad.dtype.type(inv_scale)
