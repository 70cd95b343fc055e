"""MindSpore's loss-scaled training cell and update cells, on ``minigrad.amp``'s one core.

One call of ``TrainOneStepWithLossScaleCell(net_with_loss, optimizer, scale_sense)(*inputs)``:

1. ``loss = network(*inputs)`` (returned unscaled);
2. backprop seeded with the scale ``S`` (``GradOperation(sens_param=True)``): grads = S·dL/dw;
3. grads × 1/S, fused with the inf/NaN check into a sticky status (``start_overflow_check`` /
   ``get_overflow_status``; fp16 gradients come out float32, see ``minigrad.amp.step``);
4. ``process_loss_scale(overflow)``: the update cell adjusts S in place;
5. the optimizer runs only if there was no overflow.

When the optimizer has a fused update (SGD, Momentum, Adam, AdamWeightDecay on CPU: see
``minigrad.optim._fused``) and keeps ``Optimizer.__call__`` and ``apply_gradients``,
``grad_reducer`` is the identity and ``S >= 1``, step 3 only checks: the optimizer receives the
scaled gradients with ``scale=S`` and divides S out in the same pass as its update, with the same
result. An fp16 step then never writes fp32 copies of its gradients.

It returns ``(loss, overflow, scale)``: the loss, a bool Tensor of shape ``()``, and the scale
used for this step. ``cell.last_report`` says what happened (``minigrad.amp.StepReport``).
"""
import numpy

from minigrad import backend
from minigrad.amp import step as amp_step
from minigrad.amp.core import ScaleCore, check_positive, float32_scale
from minigrad.nn.cell import Cell
from minigrad.nn.wrap import TrainOneStepCell
from minigrad.optim.optimizer import Optimizer
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor, make


class DynamicLossScaleUpdateCell(Cell):
    """Dynamic loss scale update: ``cell(loss_scale_parameter, overflow)`` changes the scale in place.

    On overflow ``scale = max(scale / scale_factor, 1)`` and the clean-step count restarts; after
    ``scale_window`` clean steps in a row ``scale *= scale_factor`` — unless that would be inf
    (MindSpore's cell has no such guard; minigrad keeps the scale finite). Returns ``overflow``.

    Args:
        loss_scale_value: the initial scale (> 0).
        scale_factor: growth factor and backoff divisor (> 1).
        scale_window: clean steps between growths (positive int).

    The clean-step count lives in the Parameters ``current_iterator_step`` and
    ``last_overflow_iterator_step`` as in MindSpore, so it is saved with a checkpoint.

    Raises:
        TypeError / ValueError: naming the argument and the value received.
    """

    def __init__(self, loss_scale_value, scale_factor, scale_window):
        super().__init__()
        owner = "DynamicLossScaleUpdateCell"
        factor = check_positive("scale_factor", scale_factor, owner, 1.0)
        float32_scale(loss_scale_value, "loss_scale_value", owner)  # positive, and float32 holds it
        self.loss_scale_value = float(loss_scale_value)
        self.scale_factor = factor
        self.scale_window = int(check_positive("scale_window", scale_window, owner, kinds=(int,)))
        self.core = ScaleCore(self.loss_scale_value, factor, 1.0 / factor, self.scale_window,
                              floor=1.0, owner=owner)
        self.cur_iter = Parameter(Tensor(numpy.int32(1)), name="current_iterator_step",
                                  requires_grad=False)
        self.last_overflow_iter = Parameter(Tensor(numpy.int32(0)), name="last_overflow_iterator_step",
                                            requires_grad=False)

    def get_loss_scale(self):
        return self.loss_scale_value

    def construct(self, loss_scale, overflow):
        core = self.core
        cur = int(self.cur_iter.data)
        core.scale = numpy.float32(loss_scale.data.reshape(()))
        core.counter = cur - int(self.last_overflow_iter.data) - 1
        core.update(bool(overflow))
        loss_scale.data[...] = core.scale
        self.last_overflow_iter.data[...] = cur - core.counter
        self.cur_iter.data[...] = cur + 1
        return overflow


class FixedLossScaleUpdateCell(Cell):
    """A constant loss scale; used by ``TrainOneStepWithLossScaleCell`` it still skips the
    optimizer on overflow. ``cell(loss_scale, overflow)`` returns ``overflow``.

    Raises:
        TypeError / ValueError: for a ``loss_scale_value`` that is not a positive number, or is
            inf or 0 in float32 (the scale the cell multiplies by).
    """

    def __init__(self, loss_scale_value):
        super().__init__()
        float32_scale(loss_scale_value, "loss_scale_value", "FixedLossScaleUpdateCell")
        self.loss_scale_value = float(loss_scale_value)

    def get_loss_scale(self):
        return self.loss_scale_value

    def construct(self, _, overflow):
        return overflow


class TrainOneStepWithLossScaleCell(TrainOneStepCell):
    """One loss-scaled training step (see the module docstring for the sequence).

    Args:
        network: the network with its loss (one output).
        optimizer: a minigrad optimizer.
        scale_sense: an update Cell (``DynamicLossScaleUpdateCell``, ``FixedLossScaleUpdateCell``
            or any Cell with ``get_loss_scale()`` and ``cell(scale_param, overflow)``), or a
            Tensor of shape ``()`` or ``(1,)`` that only ``set_sense_scale`` changes.
        max_consecutive_skips: optional guard: raise RuntimeError (with the cause) after that
            many skipped steps in a row. Default None (off).
        track_underflow: put per-parameter fp16 underflow statistics of the scaled gradients in
            ``last_report.underflow`` (one extra pass over the gradients). Default False.

    Raises:
        TypeError: if ``scale_sense`` is neither a Cell nor a Tensor.
        ValueError: if the ``scale_sense`` Tensor's shape is neither ``(1,)`` nor ``()``.
    """

    def __init__(self, network, optimizer, scale_sense, max_consecutive_skips=None,
                 track_underflow=False):
        super().__init__(network, optimizer, sens=None)
        self.loss_scaling_manager = None
        if isinstance(scale_sense, Cell):
            self.loss_scaling_manager = scale_sense
            value = numpy.float32(scale_sense.get_loss_scale())
            self.scale_sense = Parameter(Tensor(value), name="scale_sense", requires_grad=False)
        elif isinstance(scale_sense, Tensor):
            if scale_sense.shape not in ((1,), ()):
                raise ValueError(f"For 'TrainOneStepWithLossScaleCell', the shape of 'scale_sense' must "
                                 f"be (1,) or (), but got {scale_sense.shape}.")
            # kept on the host like every scale (amp.core): the skip decision reads it each step
            self.scale_sense = Parameter(Tensor(backend.as_numpy(scale_sense.data).copy()),
                                         name="scale_sense", requires_grad=False)
        else:
            raise TypeError(f"For 'TrainOneStepWithLossScaleCell', the 'scale_sense' must be Cell or "
                            f"Tensor, but got 'scale_sense' type: {type(scale_sense).__name__}.")
        # counts steps and enforces the skip guard; the scale itself lives in scale_sense
        self._steps = ScaleCore(1.0, growth_interval=None, max_consecutive_skips=max_consecutive_skips,
                                owner="TrainOneStepWithLossScaleCell")
        self.track_underflow = track_underflow
        self.last_report = None

    def construct(self, *inputs):
        weights = self.weights
        scaling_sens = self.scale_sense
        scale_before = numpy.float32(scaling_sens.data.reshape(()))
        # one forward, backprop seeded with the scale (cast to the loss dtype, as MindSpore does);
        # a host scalar seed lands on the loss's device
        with numpy.errstate(over="ignore", invalid="ignore"):  # overflow is detected, not warned
            loss, grads = self.loss_and_grads(inputs, scale_before)
        status, grads = self.start_overflow_check(loss, grads)
        underflow = None
        if self.track_underflow:
            underflow = amp_step.underflow_stats([p.name for p in weights], [g.data for g in grads])
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
        # the parameters' names and gradients only matter to a report of an overflow
        names, arrays = ([p.name for p in weights], [g.data for g in grads]) if overflow else ((), ())
        amp_step.make_report(self._steps, scale_before, bool(overflow), loss, names, arrays,
                             scale_after=float(self.scale_sense.data.reshape(())), underflow=underflow,
                             owner=self)  # sets last_report, even when the skip guard raises
        return (loss, make(numpy.array(bool(cond)), None, 0),
                make(numpy.array(scale_before).reshape(scaling_sens.shape), None, 0))

    def _optimizer_unscales(self, grads, scale):
        # the optimizer may take scaled gradients when its fused (host) update divides the scale
        # out, no grad_reducer (data parallel) needs them unscaled first, no override of
        # ``__call__``/``apply_gradients`` expects unscaled ones (or lacks ``scale``), and the
        # scale is >= 1: below 1, 1/scale can turn a finite gradient into inf, and only the
        # cell's unscale checks the unscaled values (MindSpore checks after unscaling)
        cls = type(self.optimizer)
        return (scale >= 1.0 and isinstance(self.optimizer, Optimizer) and cls.__call__ is Optimizer.__call__
                and cls.apply_gradients is Optimizer.apply_gradients
                and self.optimizer._fused_rule() is not None
                and getattr(self.grad_reducer, "__func__", None) is TrainOneStepCell.grad_reducer
                and all(g is None or backend.device_of(g.data) == "CPU" for g in grads))

    def _unscale(self, status, grads, scale):
        arrays = status.unscale_and_check([g.data for g in grads], scale)
        return tuple(g if a is g.data else make(a, None, 0) for g, a in zip(grads, arrays))

    def set_sense_scale(self, sens):
        """Set the scale (a Tensor of the original shape and type) used from the next step on.

        Raises:
            TypeError: if ``sens`` is not a Tensor.
            ValueError: if ``sens`` holds more than one value.
        """
        if not isinstance(sens, Tensor):
            raise TypeError(f"For 'TrainOneStepWithLossScaleCell', the type of 'sens' must be Tensor, "
                            f"but got {type(sens).__name__}")
        if sens.size != 1:
            raise ValueError(f"For 'TrainOneStepWithLossScaleCell', 'sens' of shape {sens.shape} must "
                             f"hold one value, as 'scale_sense' of shape {self.scale_sense.shape} does")
        self.scale_sense.set_data(backend.as_numpy(sens.data).reshape(self.scale_sense.shape))

    def start_overflow_check(self, pre_cond, compute_input):
        """Create a cleared overflow status before a checked computation.

        Args:
            pre_cond: what must be computed before the status is cleared (the loss). Eager
                execution already orders it; kept for MindSpore compatibility.
            compute_input: the input of the checked computation, returned unchanged.

        Returns:
            ``(status, compute_input)``; pass ``status`` to ``get_overflow_status``.
        """
        return amp_step.OverflowStatus(), compute_input

    def get_overflow_status(self, status, compute_output):
        """Whether the checked computation overflowed: a Python bool.

        Every tensor of ``compute_output`` (e.g. the gradients) that the status has not seen yet
        is checked into it; the flag passes through ``_reduce_overflow`` (all ranks agree).
        """
        outputs = compute_output if isinstance(compute_output, (tuple, list)) else (compute_output,)
        status.check([None if g is None else g.data for g in outputs])
        return status.overflow()

    def process_loss_scale(self, overflow):
        """Let the update cell adjust the scale from ``overflow``; return ``overflow``."""
        if self.loss_scaling_manager is not None:
            return self.loss_scaling_manager(self.scale_sense, overflow)
        return overflow
