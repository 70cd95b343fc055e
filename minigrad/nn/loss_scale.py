"""MindSpore's loss-scaled training cell and update cells, on ``minigrad.amp``'s one core.

One call of ``TrainOneStepWithLossScaleCell(net_with_loss, optimizer, scale_sense)(*inputs)``:

1. ``loss = network(*inputs)`` (returned unscaled);
2. backprop seeded with the scale ``S`` (``GradOperation(sens_param=True)``): grads = S·dL/dw;
3. grads × 1/S, fused with the inf/NaN check into a sticky status (``start_overflow_check`` /
   ``get_overflow_status``; fp16 gradients come out float32, see ``minigrad.amp.float_status``);
4. ``process_loss_scale(overflow)``: the update cell adjusts S in place;
5. the optimizer runs only if there was no overflow; a skipped step also restores the running
   statistics its forward pass wrote (BatchNorm's: ``nn.layers.normalization.running_stats``).

When the optimizer says it takes scaled gradients (``Optimizer.takes_scaled_gradients``: SGD,
Momentum, Adam, AdamWeightDecay with their fused update on CPU), ``grad_reducer`` is the identity
and ``S >= 1``, step 3 only checks: the optimizer receives the scaled gradients with ``scale=S``
(``apply_gradients(grads, scale=S)``) and divides S out in the same pass as its update, with the
same result. An fp16 step then never writes fp32 copies of its gradients.

It returns ``(loss, overflow, scale)``: the loss, a bool Tensor of shape ``()``, and the scale
this step used. MindSpore returns its ``scale_sense`` Parameter there, which the update cell
has already changed in place: the scale of the next step. minigrad returns the scale that
produced this loss and this overflow flag, so that the three describe one step
(``LossScaleMonitor`` records them as pairs, and a skipped step shows the scale that
overflowed); the next step's scale is ``cell.scale_sense`` (or ``last_report.scale_after``).
``cell.last_report`` says what happened (``minigrad.amp.StepReport``).

The cell has ONE loss-scale state, ``cell.core`` (a ``minigrad.amp.ScaleCore``): the update
cell's, which a ``DynamicLossScaleManager`` shares with the cells it makes, so
``manager.get_loss_scale()`` and ``cell.set_sense_scale(...)`` always agree. The Parameters
``scale_sense``, ``current_iterator_step`` and ``last_overflow_iterator_step`` show it (and a
checkpoint saves and restores it through them).
"""
import numpy

from minigrad import backend
from minigrad.amp import float_status
from minigrad._checks import (check_bool, check_flag, check_float, check_items,
                              check_positive_int, check_relation, check_type, describe)
from minigrad.amp.core import GROWTH_RANGE, ScaleCore, float32_scale, make_report, underflow_stats
from minigrad.nn.layers.normalization import running_stats
from minigrad.nn.cell import Cell
from minigrad.ops import HyperMap
from minigrad.nn.wrap import TrainOneStepCell
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor, make


class _UpdateCell(Cell):
    """An update cell: a ``ScaleCore`` (``core``) and the MindSpore Parameters that show it.

    ``cell(loss_scale, overflow)`` reads back whatever was written into the Parameters from
    outside (``set_data``, a loaded checkpoint: their ``version`` moved), applies ``overflow``
    to the core and writes the core into ``loss_scale`` and the cell's own Parameters, all in
    ``write``. Returns ``overflow``.
    """
    _takes_policy = False  # not a layer: no Keras dtype policy

    def __init__(self, core):
        super().__init__()
        self.core = core
        self._versions = None  # versions of the Parameters as ``write`` left them

    def get_loss_scale(self):
        return float(self.core.scale)

    def views(self):
        """The Parameters showing the core's iteration count (none for a fixed scale)."""
        return ()

    def construct(self, loss_scale, overflow):
        if not isinstance(loss_scale, Parameter):  # the train cell's scale_sense, every step
            check_type("loss_scale", loss_scale, Parameter, expected="a Parameter (the train "
                       "cell's scale_sense)", owner=type(self).__name__)
        overflow = check_flag("overflow", overflow, owner=type(self).__name__)
        self.read(loss_scale)
        self.core.update(overflow)
        self.write(loss_scale)
        return overflow

    def read(self, loss_scale):
        """Take values written into ``loss_scale`` or the views from outside into the core."""
        versions = tuple((id(p), p.version) for p in (loss_scale, *self.views()))
        if self._versions != versions:
            self.core.scale = numpy.float32(loss_scale.data.reshape(()))
            self._read_views()
            self._versions = versions

    def _read_views(self):
        pass

    def write(self, loss_scale):
        """The one place the Parameters are written: the core's scale and iteration count."""
        loss_scale.data[...] = self.core.scale
        self._write_views()
        self._versions = tuple((id(p), p.version) for p in (loss_scale, *self.views()))

    def _write_views(self):
        pass


def _overflow_status(status):
    """``status`` as a ``float_status.OverflowStatus``: itself; a float32 buffer of shape (8,)
    wrapped (checks set it); or, for MindSpore 2.x's int32 ``Tensor([0] * 8, mstype.int32)``, a
    fresh status, flagged when an entry is non-zero (an overflow seen already)."""
    if isinstance(status, float_status.OverflowStatus):
        return status
    if isinstance(status, Tensor) and status.dtype == numpy.int32 and status.shape == (8,):
        buffer = float_status.alloc_status(status)
        if bool(backend.as_numpy(status.data).any()):
            buffer.data[0] = 1.0
        status = buffer
    return float_status.OverflowStatus.wrap(status)


class DynamicLossScaleUpdateCell(_UpdateCell):
    """Dynamic loss scale update: ``cell(loss_scale_parameter, overflow)`` changes the scale in
    place.

    On overflow ``scale = max(scale / scale_factor, 1)`` and the clean-step count restarts; after
    ``scale_window`` clean steps in a row ``scale *= scale_factor``, unless that would be inf
    (MindSpore's cell has no such guard; minigrad keeps the scale finite). Returns ``overflow``.

    Args:
        loss_scale_value: the initial scale (> 0).
        scale_factor: growth factor and backoff divisor (> 1).
        scale_window: clean steps between growths (positive int).
        core: a ``ScaleCore`` to share instead of a new one (``DynamicLossScaleManager``'s, so
            that the manager and the cell show one scale); the other arguments must then be the
            core's.

    The state is the ``ScaleCore`` ``core``; the Parameters ``current_iterator_step`` (updates
    + 1) and ``last_overflow_iterator_step`` (where the clean-step count restarted) show its
    iteration count as MindSpore's do, so it is saved with a checkpoint and read back from one.

    Raises:
        TypeError / ValueError: naming the argument and the value received.
    """

    def __init__(self, loss_scale_value, scale_factor, scale_window, *, core=None):
        owner = "DynamicLossScaleUpdateCell"
        factor = check_float("scale_factor", scale_factor, **GROWTH_RANGE, owner=owner)
        float32_scale(loss_scale_value, "loss_scale_value", owner)  # positive, and float32 holds it
        window = check_positive_int("scale_window", scale_window, owner=owner)
        _check_core(core, dynamic=True, owner=owner)
        if core is None:
            core = ScaleCore(float(loss_scale_value), factor, 1.0 / factor, window, floor=1.0,
                             owner=owner)
        super().__init__(core)
        self.loss_scale_value = float(loss_scale_value)
        self.scale_factor = factor
        self.scale_window = window
        self.cur_iter = Parameter(Tensor(numpy.int32(core.updates + 1)),
                                  name="current_iterator_step", requires_grad=False)
        self.last_overflow_iter = Parameter(Tensor(numpy.int32(core.updates - core.counter)),
                                            name="last_overflow_iterator_step", requires_grad=False)

    def views(self):
        return self.cur_iter, self.last_overflow_iter

    def _read_views(self):
        cur = int(self.cur_iter.data)
        self.core.updates = cur - 1
        self.core.counter = cur - int(self.last_overflow_iter.data) - 1

    def _write_views(self):
        cur = self.core.updates + 1
        self.cur_iter.data[...] = cur
        self.last_overflow_iter.data[...] = cur - self.core.counter - 1


def _check_core(core, dynamic, owner):
    """``core``: None, or a ``ScaleCore`` that grows (``dynamic``) or keeps its scale."""
    if core is None:
        return
    kind = "a dynamic ScaleCore (growth_interval set)" if dynamic else (
        "a fixed ScaleCore (growth_interval None)")
    check_type("core", core, ScaleCore, expected=f"{kind} or None", owner=owner)
    check_relation("core", core, (core.growth_interval is not None) == dynamic, f"{kind} or None",
                   owner=owner)


class FixedLossScaleUpdateCell(_UpdateCell):
    """A constant loss scale; used by ``TrainOneStepWithLossScaleCell`` it still skips the
    optimizer on overflow. ``cell(loss_scale, overflow)`` returns ``overflow``.

    Args:
        loss_scale_value: the scale.
        core: a fixed ``ScaleCore`` to share (``FixedLossScaleManager``'s), or None.

    Raises:
        TypeError / ValueError: for a ``loss_scale_value`` that is not a positive number, or is
            inf or 0 in float32 (the scale the cell multiplies by).
    """

    def __init__(self, loss_scale_value, *, core=None):
        float32_scale(loss_scale_value, "loss_scale_value", "FixedLossScaleUpdateCell")
        _check_core(core, dynamic=False, owner="FixedLossScaleUpdateCell")
        if core is None:
            core = ScaleCore(float(loss_scale_value), growth_interval=None,
                             owner="FixedLossScaleUpdateCell")
        super().__init__(core)
        self.loss_scale_value = float(loss_scale_value)


class TrainOneStepWithLossScaleCell(TrainOneStepCell):
    """One loss-scaled training step (see the module docstring for the sequence).

    Args:
        network: the network with its loss (one output).
        optimizer: a minigrad optimizer.
        scale_sense: an update Cell (``DynamicLossScaleUpdateCell``, ``FixedLossScaleUpdateCell``
            or any Cell with ``get_loss_scale()`` and ``cell(scale_param, overflow)``), or a
            Tensor of shape ``()`` or ``(1,)`` that only ``set_sense_scale`` changes.
        max_consecutive_skips: optional guard: raise RuntimeError (with the cause) after that
            many skipped steps in a row. Default None: the update cell's core decides (a
            ``DynamicLossScaleManager``'s stops after 1000 overflows in a row, as MindSpore's).
        track_underflow: put per-parameter fp16 underflow statistics of the scaled gradients in
            ``last_report.underflow`` (one extra pass over the gradients). Default False.

    Attributes:
        core: the one ``ScaleCore`` of this cell: the update cell's (shared with the manager
            that made it), or the cell's own fixed one for a Tensor ``scale_sense`` or an update
            cell without a core. ``scale_sense`` (and the update cell's iteration Parameters)
            show it; ``set_sense_scale`` and a loaded checkpoint write through to it.

    Raises:
        TypeError: if ``scale_sense`` is neither a Cell nor a Tensor, or ``track_underflow`` is
            not a bool.
        ValueError: if the ``scale_sense`` Tensor's shape is neither ``(1,)`` nor ``()``.
    """

    def __init__(self, network, optimizer, scale_sense, max_consecutive_skips=None,
                 track_underflow=False):
        # every argument is checked before anything is bound or changed (the base class binds a
        # THOR optimizer to the network, a skip guard is set on a shared core)
        owner = "TrainOneStepWithLossScaleCell"
        check_bool("track_underflow", track_underflow, owner=owner)
        if isinstance(scale_sense, Cell):
            value = numpy.float32(scale_sense.get_loss_scale())
            shape = ()
        elif isinstance(scale_sense, Tensor):
            if scale_sense.shape not in ((1,), ()):
                raise ValueError(f"For '{owner}', the shape of 'scale_sense' must be (1,) or (), "
                                 f"but got {scale_sense.shape}.")
            value = float32_scale(backend.as_numpy(scale_sense.data).reshape(()).item(),
                                  "scale_sense", owner)
            shape = scale_sense.shape
        else:
            # MindSpore's words, then the value
            raise TypeError(f"For '{owner}', the 'scale_sense' must be Cell or Tensor, but got "
                            f"'scale_sense' type: {type(scale_sense).__name__} "
                            f"({describe(scale_sense)}).")
        if max_consecutive_skips is not None:
            max_consecutive_skips = ScaleCore(
                1.0, max_consecutive_skips=max_consecutive_skips, owner=owner).max_consecutive_skips
        super().__init__(network, optimizer)
        self.loss_scaling_manager = scale_sense if isinstance(scale_sense, Cell) else None
        core = getattr(scale_sense, "core", None)
        if not isinstance(core, ScaleCore):
            core = ScaleCore(float(value), growth_interval=None, owner=owner)
        if max_consecutive_skips is not None:
            core.max_consecutive_skips = max_consecutive_skips
        self.core = core
        # kept on the host like every scale (amp.core): the skip decision reads it each step
        self.scale_sense = Parameter(Tensor(numpy.full(shape, core.scale, numpy.float32)),
                                     name="scale_sense", requires_grad=False)
        if hasattr(scale_sense, "write"):
            scale_sense.write(self.scale_sense)  # the views start as the core's values
        self._scale_version = self.scale_sense.version
        self.track_underflow = track_underflow
        self.last_report = None
        # MindSpore's attribute, which subclasses that write their own construct use to unscale
        # the gradients: self.hyper_map(ops.partial(grad_scale, scale), grads)
        self.hyper_map = HyperMap()

    def construct(self, *inputs):
        weights, core = self.weights, self.core
        scale_before = self._current_scale()
        running_stats.commit()  # what earlier forward passes wrote is not this step's to undo
        # one forward, backprop seeded with the scale (cast to the loss dtype, as MindSpore does);
        # a host scalar seed lands on the loss's device
        with numpy.errstate(over="ignore", invalid="ignore"):  # overflow is detected, not warned
            loss, grads = self.loss_and_grads(inputs, scale_before)
        status, grads = self.start_overflow_check(loss, grads)
        underflow = None
        if self.track_underflow:
            underflow = underflow_stats([p.name for p in weights],
                                                   [g.data for g in grads])
        unscale_in_optimizer = self._optimizer_unscales(grads, scale_before)
        if not unscale_in_optimizer:
            grads = self.grad_reducer(self._unscale(status, grads, scale_before))
        cond = self.get_overflow_status(status, grads)
        overflow = self.process_loss_scale(cond)
        if not overflow:
            if unscale_in_optimizer:
                self.optimizer.apply_gradients(grads, scale=scale_before)
            else:
                self.optimizer(grads)
            running_stats.commit()
        else:  # BatchNorm's moving statistics as they were before this step's forward pass
            running_stats.rollback()
        # the parameters' names and gradients only matter to a report of an overflow
        names, arrays = ([p.name for p in weights], [g.data for g in grads]) if overflow else ((),
                                                                                               ())
        make_report(core, scale_before, bool(overflow), loss, names, arrays,
                             scale_after=float(core.scale), underflow=underflow,
                             owner=self)  # sets last_report, even when the skip guard raises
        # the scale this step used, beside this step's loss and flag (see the module docstring)
        return (loss, make(numpy.array(bool(cond)), None, 0),
                make(numpy.full(self.scale_sense.shape, scale_before, numpy.float32), None, 0))

    def _current_scale(self):
        """The core's scale, after taking in a value written into ``scale_sense`` from outside
        (``set_data``, a loaded checkpoint)."""
        if self.scale_sense.version != self._scale_version:
            if self.loss_scaling_manager is not None and hasattr(self.loss_scaling_manager, "read"):
                self.loss_scaling_manager.read(self.scale_sense)
            else:
                self.core.scale = numpy.float32(self.scale_sense.data.reshape(()))
            self._scale_version = self.scale_sense.version
        return self.core.scale

    def _optimizer_unscales(self, grads, scale):
        # the optimizer takes the scaled gradients when it says its update divides the scale
        # out in the same pass (``Optimizer.takes_scaled_gradients``), no grad_reducer (data
        # parallel) needs them unscaled first, and the scale is >= 1: below 1, 1/scale can turn
        # a finite gradient into inf, and only the cell's unscale checks the unscaled values
        # (MindSpore checks after unscaling)
        takes = getattr(self.optimizer, "takes_scaled_gradients", None)
        return (scale >= 1.0 and takes is not None
                and getattr(self.grad_reducer, "__func__", None) is TrainOneStepCell.grad_reducer
                and takes([None if g is None else g.data for g in grads]))

    def _unscale(self, status, grads, scale):
        # a subclass's start_overflow_check may return a plain buffer or MindSpore 2.x's int32
        # status; get_overflow_status is then handed that same object (a subclass's own
        # get_overflow_status reads it) and checks the unscaled gradients again
        arrays = _overflow_status(status).unscale_and_check([g.data for g in grads], scale)
        return tuple(g if a is g.data else make(a, None, 0) for g, a in zip(grads, arrays))

    def set_sense_scale(self, sens):
        """Set the scale (a Tensor holding one positive value) used from the next step on: the
        cell's core takes it, so the manager that made the update cell reports it too.

        Raises:
            TypeError: if ``sens`` is not a Tensor.
            ValueError: if ``sens`` holds more than one value, or one that is not a positive
                float32 value.
        """
        owner = "TrainOneStepWithLossScaleCell"
        if not isinstance(sens, Tensor):
            raise TypeError(f"For '{owner}', the type of 'sens' must be Tensor, but got "
                            f"{type(sens).__name__}")
        if sens.size != 1:
            raise ValueError(f"For '{owner}', 'sens' of shape {sens.shape} must hold one value, "
                             f"as 'scale_sense' of shape {self.scale_sense.shape} does")
        value = float32_scale(backend.as_numpy(sens.data).reshape(()).item(), "sens", owner)
        self.core.scale = value
        if self.loss_scaling_manager is not None and hasattr(self.loss_scaling_manager, "write"):
            self.loss_scaling_manager.write(self.scale_sense)
        else:
            self.scale_sense.data[...] = value
        self._scale_version = self.scale_sense.version

    def start_overflow_check(self, pre_cond, compute_input):
        """Create a cleared overflow status before a checked computation.

        Args:
            pre_cond: what must be computed before the status is cleared (the loss). Eager
                execution already orders it; kept for MindSpore compatibility.
            compute_input: the input of the checked computation, returned unchanged.

        Returns:
            ``(status, compute_input)``; pass ``status`` to ``get_overflow_status``.
        """
        return float_status.OverflowStatus(), compute_input

    def get_overflow_status(self, status, compute_output):
        """Whether the checked computation overflowed: a Python bool.

        Args:
            status: what ``start_overflow_check`` returned; a plain status buffer (a float32
                Tensor of shape (8,), e.g. ``ops.NPUAllocFloatStatus()()``), which the checks
                set; or MindSpore 2.x's ``Tensor([0] * 8, mstype.int32)``, which only stands for
                a fresh status (any non-zero entry counts as an overflow seen already, as
                MindSpore reads an int32 status; the checks go to a status of their own).
            compute_output: a Tensor or a tuple/list of Tensors (e.g. the gradients); every one
                the status has not seen yet is checked into it.

        The flag passes through ``_reduce_overflow`` (all ranks agree).

        Raises:
            TypeError / ValueError: a ``status`` that is none of these (``amp.float_status``'s
                checks).
        """
        outputs = compute_output if isinstance(compute_output, (tuple, list)) else (compute_output,)
        status = _overflow_status(status)
        try:
            status.check([None if g is None else g.data for g in outputs])
        except (AttributeError, TypeError):  # the step's every gradient: looked at on failure only
            check_items("compute_output", outputs, (Tensor, type(None)),
                        expected="a Tensor or a tuple or list of Tensors",
                        owner="get_overflow_status")
            raise
        return status.overflow()

    def process_loss_scale(self, overflow):
        """Let the update cell adjust the scale from ``overflow``; return ``overflow``.

        An update cell without a core writes ``scale_sense`` itself; the cell's core takes the
        value from there.

        Raises:
            TypeError: for an ``overflow`` that is not a bool or a one-element bool Tensor.
        """
        check_flag("overflow", overflow, owner="process_loss_scale")
        manager = self.loss_scaling_manager
        if manager is None:
            self.core.update(bool(overflow))  # a fixed core: counts the update
            return overflow
        result = manager(self.scale_sense, overflow)
        if getattr(manager, "core", None) is not self.core:
            self.core.scale = numpy.float32(self.scale_sense.data.reshape(()))
            self.core.update(bool(overflow))  # fixed: only counts
        self._scale_version = self.scale_sense.version
        return result
