"""PyTorch's ``GradScaler`` on the shared ``ScaleCore``.

::

    scaler = GradScaler()
    for x, y in data:
        optimizer.zero_grad()
        with autocast():
            loss = loss_fn(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)        # True if the update ran, False if it was skipped
        scaler.update()
        print(scaler.last_report)     # skipped or not, why, scale before/after, inf/NaN names

Per optimizer the calls follow PyTorch's protocol (READY -> UNSCALED -> STEPPED, reset by
``update``) with PyTorch's errors. The update rule is PyTorch's: growth only if the grown
scale is finite, and only when the clean-step counter *equals* ``growth_interval``, so lowering
the interval below the counter with ``set_growth_interval`` stops growth until the next overflow
resets the counter, as in PyTorch. One deliberate difference: without a ``floor=`` the scale
backs off to float32's smallest normal value at least (PyTorch's reaches 0, where unscaling
divides by zero), still skipping every overflowing step as PyTorch does.

Gradients of fp16 parameters are unscaled into float32 gradients (PyTorch refuses them with
"Attempting to unscale FP16 gradients."): the optimizer's fp32 master weights take them as is.

In data-parallel mode ``unscale_`` also all-reduces the unscaled gradients
(``nn.DistributedGradReducer``, made at an optimizer's first ``unscale_``: it checks the model
and broadcasts rank 0's parameters) and the overflow flag, so every rank clips, steps or skips
with the same gradients and scale.
"""
import collections.abc
import enum

from minigrad import backend, communication
from minigrad.amp import float_status
from minigrad.amp.autocast import check_device
from minigrad._checks import (check_bool, check_float, check_non_negative_int, check_positive_int,
                              check_relation, check_type, is_int, StateValueError)
from minigrad.amp.core import (BACKOFF_RANGE, GROWTH_RANGE, ScaleCore, as_number, float32_scale,
                               make_report, underflow_stats)
from minigrad.nn.layers.normalization import running_stats
from minigrad.nn.distributed import DistributedGradReducer
from minigrad.tensor import Tensor


class OptState(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


# plain module names: an Enum member lookup (OptState.X) goes through the Enum metaclass
_UNSCALED, _STEPPED = OptState.UNSCALED, OptState.STEPPED


_DEFAULTS = {"init_scale": 2.0 ** 16, "growth_factor": 2.0, "backoff_factor": 0.5,
             "growth_interval": 2000, "enabled": True}


def _bind_positional(args, given, names):
    """Put the positional ``args`` into ``given`` under ``names`` in order; TypeError for too
    many of them or for one also given by keyword (a value other than its default)."""
    if len(args) > len(names):
        raise TypeError(f"GradScaler takes at most {len(names) + 1} positional arguments (device, "
                        f"{', '.join(names)}), but got {len(args)}")
    for name, value in zip(names, args):
        if given[name] is not _DEFAULTS[name]:
            raise TypeError(f"GradScaler: got '{name}' both positionally and by keyword")
        given[name] = value


class GradScaler:
    """Dynamic loss scaling for ``loss.backward()`` / ``optimizer.step()`` training loops.

    Spelled as PyTorch 2.x's ``torch.amp.GradScaler(device="cuda", init_scale=2.**16,
    growth_factor=2., backoff_factor=.5, growth_interval=2000, enabled=True)``:
    ``GradScaler("cpu")``, ``GradScaler(device="cpu", init_scale=1024.)``; without a device
    (``GradScaler()``, ``GradScaler(1024.)``) the positional order is ``torch.cuda.amp``'s,
    ``init_scale`` first.

    Args:
        device: ``"cpu"``/``"cuda"`` (or ``"CPU"``/``"GPU"``), checked against the context's
            ``device_target`` (minigrad creates tensors there); None (default): that device.
        init_scale: initial scale. Default 2**16.
        growth_factor: scale multiplier after ``growth_interval`` clean steps (> 1). Default 2.
        backoff_factor: scale multiplier after an overflowing step (in (0, 1)). Default 0.5.
        growth_interval: clean steps between growths (a positive int). Default 2000.
        enabled: False makes every method a pass-through (``scale`` returns its input,
            ``step`` just calls ``optimizer.step``).
        floor: the lowest scale (``ScaleCore``; default off). Without a floor the scale backs
            off to float32's smallest normal value at least and stays there (every step
            skipped, as PyTorch keeps skipping).
        cap: the highest scale (``ScaleCore``; default off).
        hysteresis: overflowing steps in a row tolerated before backing off (``ScaleCore``;
            default 1: at once).
        max_consecutive_skips: stop with an error after this many skipped steps in a row
            (``ScaleCore``; default off): the way to stop a run that keeps skipping.
        track_underflow: if True, ``last_report.underflow`` holds per-parameter fp16 underflow
            statistics of the scaled gradients (one extra pass over them).

    Raises:
        TypeError / ValueError: for a bad argument, naming it and its value.
    """

    _POSITIONAL = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")

    def __init__(self, *args, device=None, init_scale=_DEFAULTS["init_scale"],
                 growth_factor=_DEFAULTS["growth_factor"],
                 backoff_factor=_DEFAULTS["backoff_factor"],
                 growth_interval=_DEFAULTS["growth_interval"], enabled=_DEFAULTS["enabled"],
                 floor=None, cap=None,
                 hysteresis=1, max_consecutive_skips=None, track_underflow=False):
        given = {"init_scale": init_scale, "growth_factor": growth_factor,
                 "backoff_factor": backoff_factor, "growth_interval": growth_interval,
                 "enabled": enabled}
        args = list(args)
        if args and isinstance(args[0], str):  # PyTorch 2.x: the device comes first
            if device is not None:
                raise TypeError("GradScaler: got 'device' both positionally and by keyword")
            device = args.pop(0)
        _bind_positional(args, given, self._POSITIONAL)
        if device is not None:
            check_device("device", device, owner="GradScaler")
        enabled, growth_interval = given["enabled"], given["growth_interval"]
        check_bool("enabled", enabled, owner="GradScaler")
        check_bool("track_underflow", track_underflow, owner="GradScaler")
        # None would mean a fixed scale to ScaleCore; PyTorch's scaler always grows
        check_relation("growth_interval", growth_interval, is_int(growth_interval),
                       "a positive int", error=TypeError, owner="GradScaler")
        self._enabled = enabled
        self.core = ScaleCore(given["init_scale"], given["growth_factor"], given["backoff_factor"],
                              growth_interval, floor=floor, cap=cap, hysteresis=hysteresis,
                              max_consecutive_skips=max_consecutive_skips, owner="GradScaler",
                              names={"scale": "init_scale"}, exact_interval=True)
        self.track_underflow = track_underflow
        self.last_report = None
        self._per_optimizer = {}
        self._loss = None
        self._status = float_status.OverflowStatus()  # cleared for each unscale_, not reallocated
        self._reducers = {}  # data parallel: id(optimizer) -> (optimizer, DistributedGradReducer)

    # ---- the training-loop calls -------------------------------------------------------------
    def scale(self, outputs):
        """``outputs * scale`` for a Tensor, or for each Tensor of a (nested) list/tuple.

        Raises:
            ValueError: if ``outputs`` is neither a Tensor nor an iterable of Tensors (a str, a
                dict, a set or an array is not one), naming the value.
        """
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            self._loss = outputs
            return outputs * self.core.scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        # an iterable other than a str, a dict, a set or an array (which hold no Tensors)
        check_relation("outputs", outputs, hasattr(outputs, "__iter__") and not isinstance(
            outputs, (str, bytes, collections.abc.Mapping, collections.abc.Set)) and not hasattr(
            outputs, "shape"), "a Tensor or an iterable of Tensors", owner="GradScaler.scale")
        return map(self.scale, iter(outputs))

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale in place and record whether any is inf/NaN.

        Call it before gradient clipping. At most once per optimizer between ``update`` calls.

        Raises:
            RuntimeError: if called twice since the last ``update()``, or after ``step()``.
            TypeError: if ``optimizer`` has no ``parameters`` (not a minigrad optimizer).
        """
        if not self._enabled:
            return
        # The training step runs this with cold caches: each Python call or comprehension costs
        # microseconds there, so the common path is written out in few of them. An optimizer
        # without a state is READY; unscale_ stores a new one.
        state = self._per_optimizer.get(id(optimizer))
        if state is not None:
            if state["stage"] is _UNSCALED:
                raise RuntimeError("unscale_() has already been called on this optimizer since "
                                   "the last update().")
            raise RuntimeError("unscale_() is being called after step().")
        everything = getattr(optimizer, "parameters", None)
        if everything is None:
            check_relation("optimizer", optimizer, False, "a minigrad optimizer (with "
                           ".parameters)", error=TypeError, owner="GradScaler")
        params, scaled = [], []
        for p in everything() if callable(everything) else everything:
            g = p.grad
            if g is not None:
                params.append(p)
                scaled.append(g.data)
        if self.track_underflow:  # of the gradients as backprop made them, before the unscale
            underflow = underflow_stats([p.name for p in params], scaled)
        status = self._status  # float_status.unscale_and_check, on this scaler's status
        status.clear()
        arrays = status.unscale_and_check(scaled, self.core.scale)
        if communication.is_data_parallel():
            arrays = self._all_reduce(optimizer, everything, params, arrays)
        overflow = status.overflow()
        for p, g, a in zip(params, scaled, arrays):
            if a is not g:  # an fp16 gradient, unscaled into a new fp32 array
                p.grad = Tensor(a, device=backend.device_of(a))
        state = self._per_optimizer[id(optimizer)] = {
            "stage": _UNSCALED, "checked": bool(params), "found_inf": overflow, "params": params,
            "arrays": arrays}
        if self.track_underflow:
            state["underflow"] = underflow

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if ``unscale_`` was not called), then run ``optimizer.step(*args, **kwargs)``
        unless a gradient holds inf/NaN. Returns True if the step ran, False if it was skipped.

        Raises:
            RuntimeError: with a ``closure`` keyword, or if ``step`` already ran since ``update``.
            AssertionError: if none of the optimizer's parameters has a gradient.
            TypeError: as ``unscale_``, for an ``optimizer`` without ``parameters``.
        """
        if not self._enabled:
            optimizer.step(*args, **kwargs)
            return True
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._per_optimizer.get(id(optimizer))
        if state is None:
            self.unscale_(optimizer)
            state = self._per_optimizer[id(optimizer)]
        elif state["stage"] is _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if not state["checked"]:
            # forget this record: once the gradients exist, the next step() unscales afresh
            del self._per_optimizer[id(optimizer)]
            raise AssertionError("No inf checks were recorded for this optimizer: none of its "
                                 "parameters has a gradient. Call scaler.scale(loss).backward() "
                                 "before scaler.step(optimizer).")
        if not state["found_inf"]:
            optimizer.step(*args, **kwargs)
        else:  # this iteration's forward passes wrote BatchNorm statistics: take them back
            running_stats.rollback()
        state["stage"] = _STEPPED
        return not state["found_inf"]

    def update(self, new_scale=None):
        """Adjust the scale from this iteration's steps (or set it to ``new_scale``) and reset
        every optimizer to READY. Sets ``last_report``.

        Raises:
            AssertionError: if no optimizer recorded an inf check since the last update.
            TypeError / ValueError: for a ``new_scale`` that is not a positive number or a
                one-element Tensor, or that is inf or 0 in float32.
        """
        if not self._enabled:
            return
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.size != 1:
                    raise ValueError("new_scale must be a one-element Tensor, got shape "
                                     f"{new_scale.shape}")
                new_scale = new_scale.item()
            self.core.scale = float32_scale(new_scale, "new_scale", "GradScaler.update")
        else:
            checked, overflow = [], False
            for s in self._per_optimizer.values():
                if s["checked"]:
                    checked.append(s)
                    overflow = overflow or s["found_inf"]
            if not checked:
                self._per_optimizer.clear()  # the next iteration starts clean
                raise AssertionError("No inf checks were recorded prior to update: call "
                                     "scaler.step(optimizer) after scaler.scale(loss).backward() "
                                     "and before scaler.update().")
            before = self.core.scale
            self.core.update(overflow)
            names = arrays = ()  # the report names the inf/NaN gradients: only read on overflow
            if overflow:
                names = [p.name for s in checked for p in s["params"]]
                arrays = [a for s in checked for a in s["arrays"]]
            underflow = ({k: v for s in checked for k, v in s.get("underflow", {}).items()}
                         if self.track_underflow else None)
            # owner=self: the step that trips max_consecutive_skips still leaves its own report
            make_report(self.core, before, overflow, self._loss, names, arrays,
                                 underflow=underflow, owner=self)
        self._per_optimizer.clear()
        self._loss = None
        running_stats.commit()  # the iteration is over: its statistics stay

    def _all_reduce(self, optimizer, everything, params, arrays):
        # the unscaled gradients of ``params`` reduced across the ranks by the optimizer's reducer
        # (over all its parameters: a parameter without a gradient here counts as zeros)
        entry = self._reducers.get(id(optimizer))
        if entry is None or entry[0] is not optimizer:
            entry = self._reducers[id(optimizer)] = (optimizer, DistributedGradReducer(
                everything() if callable(everything) else everything))
        reducer = entry[1]
        mine = {id(p): a for p, a in zip(params, arrays)}
        reduced = reducer.reduce_arrays([mine.get(id(p)) for p in reducer.weights])
        at = {id(p): i for i, p in enumerate(reducer.weights)}
        return [reduced[at[id(p)]] for p in params]

    # ---- copy and pickle
    # ---------------------------------------------------------------------------
    def __getstate__(self):
        """What ``pickle`` and ``copy.deepcopy`` keep: everything but the scaled loss of the
        iteration in flight (the float status copies itself into a buffer of its own).

        Raises:
            RuntimeError: between ``unscale_``/``step`` and ``update`` (as PyTorch): the
                per-optimizer records name optimizers by ``id``, meaningless in a copy.
        """
        if self._per_optimizer:
            raise RuntimeError("A GradScaler can only be pickled or deep-copied at the start of an "
                               "iteration or after update(), not between unscale_()/step() and "
                               "update().")
        return dict(self.__dict__, _loss=None, _reducers={})  # a copy makes its own reducers

    def __repr__(self):
        if not self._enabled:
            return "GradScaler(enabled=False)"
        return (f"GradScaler(scale={self.get_scale()}, growth_factor={self.core.growth_factor}, "
                f"backoff_factor={self.core.backoff_factor}, "
                f"growth_interval={self.core.growth_interval}, "
                f"growth_tracker={self.core.counter})")

    # ---- getters, setters, serialization --------------------------------------------------------
    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        return float(self.core.scale) if self._enabled else 1.0

    def get_growth_factor(self):
        return self.core.growth_factor

    def set_growth_factor(self, new_factor):
        self.core.growth_factor = check_float("new_factor", new_factor, **GROWTH_RANGE,
                                              owner="GradScaler.set_growth_factor")

    def get_backoff_factor(self):
        return self.core.backoff_factor

    def set_backoff_factor(self, new_factor):
        self.core.backoff_factor = check_float("new_factor", new_factor, **BACKOFF_RANGE,
                                               owner="GradScaler.set_backoff_factor")

    def get_growth_interval(self):
        return self.core.growth_interval

    def set_growth_interval(self, new_interval):
        self.core.growth_interval = check_positive_int("new_interval", new_interval,
                                                       owner="GradScaler.set_growth_interval")

    def _get_growth_tracker(self):
        return self.core.counter if self._enabled else 0

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """PyTorch's five keys (empty when disabled); call it after ``update()``."""
        if not self._enabled:
            return {}
        return {"scale": float(self.core.scale), "growth_factor": self.core.growth_factor,
                "backoff_factor": self.core.backoff_factor,
                "growth_interval": self.core.growth_interval,
                "_growth_tracker": self.core.counter}

    def load_state_dict(self, state_dict):
        """Restore a ``state_dict()``. Every value is checked as the constructor checks it
        (``_growth_tracker``: an int >= 0) and nothing changes unless all of them pass.

        Values may be numbers or one-element Tensors/arrays (a Parameter as ``load_checkpoint``
        returns the ``append_dict`` of ``save_checkpoint(..., append_dict=scaler.state_dict())``);
        keys other than the five are ignored, as PyTorch does, so the whole dict that
        ``load_checkpoint`` returns can be passed.

        Raises:
            TypeError: ``state_dict`` is not a dict, or a value of the wrong type.
            RuntimeError: for an empty dict (saved from a disabled scaler); a
                ``_checks.StateValueError``, so ``except ValueError`` takes it too.
            KeyError: naming the missing keys.
            ValueError: a value out of range, naming its key.
        """
        if not self._enabled:
            return
        owner = "GradScaler.load_state_dict"
        check_type("state_dict", state_dict, dict, owner=owner)
        check_relation("state_dict", state_dict, len(state_dict) > 0,
                       "a non-empty dict (the source state dict is empty, possibly because it "
                       "was saved from a disabled instance of GradScaler)",
                       error=StateValueError, owner=owner)
        missing = sorted(set(self.state_dict()) - set(state_dict))
        check_relation("state_dict keys", sorted(state_dict), not missing,
                       f"a superset of {sorted(self.state_dict())} (missing {missing})",
                       error=KeyError, owner=owner)
        value = {key: as_number(state_dict[key]) for key in self.state_dict()}
        scale = float32_scale(value["scale"], "scale", owner)
        growth = check_float("growth_factor", value["growth_factor"], **GROWTH_RANGE, owner=owner)
        backoff = check_float("backoff_factor", value["backoff_factor"], **BACKOFF_RANGE,
                              owner=owner)
        interval = check_positive_int("growth_interval", value["growth_interval"], owner=owner)
        tracker = check_non_negative_int("_growth_tracker", value["_growth_tracker"], owner=owner)
        core = self.core
        core.scale, core.growth_factor, core.backoff_factor = scale, growth, backoff
        core.growth_interval, core.counter = interval, tracker
