"""The stock monitors: ``LossMonitor``, ``TimeMonitor``, ``History``, ``LossScaleMonitor``.

A loss-scaling train cell returns ``(loss, overflow, loss_scale)``; the monitors take the first
element as the loss, and ``LossScaleMonitor`` records the other two.
"""
import math
import time

import numpy

from minigrad import backend
from minigrad._checks import check_non_negative_int, check_positive_int
from minigrad.train.callback.hooks import (Callback, check_run_context, loss_value, optimizer_note,
                                           step_in_epoch)



class LossMonitor(Callback):
    """Print ``epoch: E step: S, loss is L`` every ``per_print_times`` steps; with an optimizer
    that reports its step (THOR's ``last_report``) the line ends with its note, e.g.
    ``; refresh 2/2 layers, factors 0.21 ms, inverses 0.80 ms`` or ``; reuse``.

    As in MindSpore the period counts steps over all epochs (a line is printed once
    ``cur_step_num`` is ``per_print_times`` past the last printed step), while ``S`` is the step
    within the epoch: with 5 steps per epoch and a period of 2, epoch 1 prints steps 2 and 4,
    epoch 2 steps 1, 3 and 5.

    Args:
        per_print_times: print period in steps (0: never print).

    Raises:
        TypeError: for a ``per_print_times`` that is not an int.
        ValueError: for a negative ``per_print_times``; during training, for a NaN or infinite
            loss ("Invalid loss, terminating training."), as MindSpore does.
    """
    rank_zero_only = True  # one log for a data-parallel job (see Callback)

    def __init__(self, per_print_times=1):
        self.per_print_times = check_non_negative_int("per_print_times", per_print_times)
        self._last_print_step = 0

    def on_train_step_end(self, run_context):
        check_run_context(run_context, "LossMonitor.on_train_step_end")
        cb_params = run_context.original_args()
        loss = loss_value(cb_params)
        step = step_in_epoch(cb_params)
        if not math.isfinite(loss):
            raise ValueError(f"epoch: {cb_params.cur_epoch_num} step: {step}. Invalid loss {loss}, "
                             f"terminating training.")
        n = self.per_print_times
        while n and cb_params.cur_step_num <= self._last_print_step:  # a new train() from step 1
            self._last_print_step -= n
        if n and cb_params.cur_step_num - self._last_print_step >= n:
            self._last_print_step = cb_params.cur_step_num
            note = optimizer_note(cb_params)  # THOR: "; refresh 2/2 layers, factors ... ms, ..."
            print(f"epoch: {cb_params.cur_epoch_num} step: {step}, loss is {loss:.6g}"
                  + (f"; {note}" if note else ""), flush=True)


class TimeMonitor(Callback):
    """Print the epoch time and the mean time per step at the end of each epoch.

    Args:
        data_size: steps per epoch to divide by; default the dataset's ``batch_num``.

    Raises:
        TypeError / ValueError: for a ``data_size`` that is not a positive int (or None).
    """
    rank_zero_only = True  # one log for a data-parallel job (see Callback)

    def __init__(self, data_size=None):
        self.data_size = check_positive_int("data_size", data_size, allow_none=True)
        self._start = None

    def on_train_epoch_begin(self, run_context):
        check_run_context(run_context, "TimeMonitor.on_train_epoch_begin")
        self._start = time.perf_counter()

    def on_train_epoch_end(self, run_context):
        check_run_context(run_context, "TimeMonitor.on_train_epoch_end")
        cb_params = run_context.original_args()
        epoch_ms = (time.perf_counter() - self._start) * 1000
        steps = self.data_size or cb_params.batch_num or 1
        print(f"epoch time: {epoch_ms:.3f} ms, per step time: {epoch_ms / steps:.3f} ms",
              flush=True)


class History(Callback):
    """Records losses: ``epoch`` (epoch numbers), ``history["net_output"]`` (the last loss of each
    epoch, as MindSpore's ``History``), and ``step_losses`` / ``epoch_losses`` (every step's loss
    and each epoch's mean)."""

    def __init__(self):
        self.epoch = []
        self.history = {"net_output": []}
        self.step_losses = []
        self.epoch_losses = []
        self._epoch_start = 0

    def on_train_epoch_begin(self, run_context):
        check_run_context(run_context, "History.on_train_epoch_begin")
        self._epoch_start = len(self.step_losses)

    def on_train_step_end(self, run_context):
        check_run_context(run_context, "History.on_train_step_end")
        self.step_losses.append(loss_value(run_context.original_args()))

    def on_train_epoch_end(self, run_context):
        check_run_context(run_context, "History.on_train_epoch_end")
        cb_params = run_context.original_args()
        losses = self.step_losses[self._epoch_start:]
        self.epoch.append(cb_params.cur_epoch_num)
        self.history["net_output"].append(losses[-1] if losses else float("nan"))
        self.epoch_losses.append(float(numpy.mean(losses)) if losses else float("nan"))


class LossScaleMonitor(Callback):
    """Record (and optionally print) the loss scale and overflow flag of a loss-scaling train cell.

    Works with train networks returning ``(loss, overflow, loss_scale)``; records nothing for
    others. Attributes: ``steps``, ``scales``, ``overflows`` (one entry per step).

    Args:
        per_print_times: print ``step S: loss scale X, overflow: B`` every this many steps
            (0: never; overflowed steps are always printed when > 0).
    """
    rank_zero_only = True  # one log for a data-parallel job (see Callback)

    def __init__(self, per_print_times=0):
        self.per_print_times = check_non_negative_int("per_print_times", per_print_times)
        self.steps, self.scales, self.overflows = [], [], []

    def on_train_step_end(self, run_context):
        check_run_context(run_context, "LossScaleMonitor.on_train_step_end")
        cb_params = run_context.original_args()
        outputs = cb_params.net_outputs
        if not isinstance(outputs, (tuple, list)) or len(outputs) < 3:
            return
        overflow = bool(numpy.all(backend.as_numpy(outputs[1])))
        scale = float(numpy.mean(backend.as_numpy(outputs[2])))
        self.steps.append(cb_params.cur_step_num)
        self.scales.append(scale)
        self.overflows.append(overflow)
        n = self.per_print_times
        if n and (overflow or cb_params.cur_step_num % n == 0):
            print(f"step {cb_params.cur_step_num}: loss scale {scale:g}, overflow: {overflow}",
                  flush=True)
