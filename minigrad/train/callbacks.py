"""Training callbacks, MindSpore style: ``Callback``, ``RunContext``, and the stock monitors.

``Model.train`` calls, on every callback in the list and in list order::

    on_train_begin
      on_train_epoch_begin
        on_train_step_begin, on_train_step_end     (once per batch)
      on_train_epoch_end
    on_train_end

(``Model.eval`` calls the matching ``on_eval_*`` hooks.) Each hook gets a ``RunContext``;
``run_context.original_args()`` is the ``cb_params`` namespace: ``cur_epoch_num`` (1-based),
``cur_step_num`` (1-based, counted over all epochs), ``batch_num`` (steps per epoch),
``epoch_num``, ``net_outputs`` (what the train network returned at the last step),
``train_network``, ``network``, ``optimizer``, ``loss_fn``, ``train_dataset``, ``mode``.
``run_context.request_stop()`` ends training after the current step.

The older MindSpore hook names (``begin``, ``epoch_begin``, ``step_begin``, ``step_end``,
``epoch_end``, ``end``) work too: by default each ``on_train_*`` hook calls its older twin.

A loss-scaling train cell returns ``(loss, overflow, loss_scale)``; the monitors take the first
element as the loss, and ``LossScaleMonitor`` records the other two.
"""
import math
import os
import sys
import time

import numpy

from minigrad import backend
from minigrad.train.checkpoint import save_checkpoint


class CallbackParam(dict):
    """The ``cb_params`` namespace: a dict whose keys are also attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"cb_params has no {name!r}; it has {sorted(self)}") from None

    def __setattr__(self, name, value):
        self[name] = value


class RunContext:
    """What a callback hook receives: ``original_args()`` (the ``cb_params``) and ``request_stop()``."""

    def __init__(self, original_args):
        self._original_args = original_args
        self._stop_requested = False

    def original_args(self):
        return self._original_args

    def request_stop(self):
        """Stop training after the current step (its ``on_train_epoch_end``/``on_train_end`` still run)."""
        self._stop_requested = True

    def get_stop_requested(self):
        return self._stop_requested


class Callback:
    """Base class of callbacks: override the hooks you need (all do nothing by default)."""

    # the older names, which the on_train_* hooks call by default
    def begin(self, run_context): pass
    def epoch_begin(self, run_context): pass
    def step_begin(self, run_context): pass
    def step_end(self, run_context): pass
    def epoch_end(self, run_context): pass
    def end(self, run_context): pass

    def on_train_begin(self, run_context): self.begin(run_context)
    def on_train_epoch_begin(self, run_context): self.epoch_begin(run_context)
    def on_train_step_begin(self, run_context): self.step_begin(run_context)
    def on_train_step_end(self, run_context): self.step_end(run_context)
    def on_train_epoch_end(self, run_context): self.epoch_end(run_context)
    def on_train_end(self, run_context): self.end(run_context)

    def on_eval_begin(self, run_context): pass
    def on_eval_epoch_begin(self, run_context): pass
    def on_eval_step_begin(self, run_context): pass
    def on_eval_step_end(self, run_context): pass
    def on_eval_epoch_end(self, run_context): pass
    def on_eval_end(self, run_context): pass


class CallbackList:
    """Calls a hook on each callback in order; ``Model`` uses it for the user's list."""

    def __init__(self, callbacks):
        if callbacks is None:
            callbacks = []
        elif isinstance(callbacks, Callback):
            callbacks = [callbacks]
        callbacks = list(callbacks)
        for cb in callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks must be Callback instances, got {type(cb).__name__}")
        self.callbacks = callbacks

    def __call__(self, hook, run_context):
        for cb in self.callbacks:
            getattr(cb, hook)(run_context)


# ---- helpers shared by the monitors ------------------------------------------------------------
def loss_value(net_outputs):
    """The loss as a Python float: the first element of a tuple (loss, overflow, scale) or the output."""
    if isinstance(net_outputs, (tuple, list)):
        net_outputs = net_outputs[0]
    return float(numpy.mean(backend.as_numpy(net_outputs)))


def _step_in_epoch(cb_params):
    batch_num = cb_params.batch_num
    return (cb_params.cur_step_num - 1) % batch_num + 1 if batch_num else cb_params.cur_step_num


def _check_int(value, name, minimum):
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


# ---- monitors -----------------------------------------------------------------------------------
class LossMonitor(Callback):
    """Print ``epoch: E step: S, loss is L`` every ``per_print_times`` steps.

    As in MindSpore the period counts steps over all epochs (a line is printed once
    ``cur_step_num`` is ``per_print_times`` past the last printed step), while ``S`` is the step
    within the epoch: with 5 steps per epoch and a period of 2, epoch 1 prints steps 2 and 4,
    epoch 2 steps 1, 3 and 5.

    Args:
        per_print_times: print period in steps (0: never print).

    Raises:
        ValueError: for a negative ``per_print_times``; during training, for a NaN or infinite
            loss ("Invalid loss, terminating training."), as MindSpore does.
    """

    def __init__(self, per_print_times=1):
        self.per_print_times = _check_int(per_print_times, "per_print_times", 0)
        self._last_print_step = 0

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        loss = loss_value(cb_params.net_outputs)
        step = _step_in_epoch(cb_params)
        if not math.isfinite(loss):
            raise ValueError(f"epoch: {cb_params.cur_epoch_num} step: {step}. Invalid loss {loss}, "
                             f"terminating training.")
        n = self.per_print_times
        while n and cb_params.cur_step_num <= self._last_print_step:  # a new train() from step 1
            self._last_print_step -= n
        if n and cb_params.cur_step_num - self._last_print_step >= n:
            self._last_print_step = cb_params.cur_step_num
            print(f"epoch: {cb_params.cur_epoch_num} step: {step}, loss is {loss:.6g}", flush=True)


class TimeMonitor(Callback):
    """Print the epoch time and the mean time per step at the end of each epoch.

    Args:
        data_size: steps per epoch to divide by; default the dataset's ``batch_num``.
    """

    def __init__(self, data_size=None):
        self.data_size = None if data_size is None else _check_int(data_size, "data_size", 1)
        self._start = None

    def on_train_epoch_begin(self, run_context):
        self._start = time.perf_counter()

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        epoch_ms = (time.perf_counter() - self._start) * 1000
        steps = self.data_size or cb_params.batch_num or 1
        print(f"epoch time: {epoch_ms:.3f} ms, per step time: {epoch_ms / steps:.3f} ms", flush=True)


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
        self._epoch_start = len(self.step_losses)

    def on_train_step_end(self, run_context):
        self.step_losses.append(loss_value(run_context.original_args().net_outputs))

    def on_train_epoch_end(self, run_context):
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

    def __init__(self, per_print_times=0):
        self.per_print_times = _check_int(per_print_times, "per_print_times", 0)
        self.steps, self.scales, self.overflows = [], [], []

    def on_train_step_end(self, run_context):
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
            print(f"step {cb_params.cur_step_num}: loss scale {scale:g}, overflow: {overflow}", flush=True)


class ProgressBar(Callback):
    """A progress bar per epoch with the running mean loss: tqdm when installed, else plain lines.

    Args:
        use_tqdm: True/False to force; None (default) uses tqdm if it can be imported
            (``pip install minigrad[progress]``).
        lines_per_epoch: without tqdm, how many progress lines to print per epoch.
        file: the stream written to; default ``sys.stderr``.
    """

    def __init__(self, use_tqdm=None, lines_per_epoch=4, file=None):
        if use_tqdm is None or use_tqdm:
            try:
                import tqdm
                self._tqdm = tqdm.tqdm
            except ImportError:
                if use_tqdm:
                    raise ImportError("ProgressBar(use_tqdm=True) needs tqdm: "
                                      "pip install minigrad[progress]") from None
                self._tqdm = None
        else:
            self._tqdm = None
        self.lines_per_epoch = _check_int(lines_per_epoch, "lines_per_epoch", 1)
        self.file = file
        self._bar = None
        self._sum, self._count = 0.0, 0

    def on_train_epoch_begin(self, run_context):
        cb_params = run_context.original_args()
        self._sum, self._count = 0.0, 0
        self._desc = f"epoch {cb_params.cur_epoch_num}/{cb_params.epoch_num}"
        if self._tqdm is not None:
            self._bar = self._tqdm(total=cb_params.batch_num, desc=self._desc, leave=True,
                                   file=self.file or sys.stderr, dynamic_ncols=True)

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        self._sum += loss_value(cb_params.net_outputs)
        self._count += 1
        mean = self._sum / self._count
        if self._bar is not None:
            self._bar.update(1)
            if self._count % 10 == 0 or self._count == cb_params.batch_num:  # postfix is costly
                self._bar.set_postfix(loss=f"{mean:.4f}", refresh=False)
            return
        batch_num = cb_params.batch_num
        period = max(1, (batch_num or 50) // self.lines_per_epoch)
        if self._count % period == 0 and self._count != batch_num:
            self._print(f"{self._desc} [{self._count}/{batch_num or '?'}] loss {mean:.4f}")

    def on_train_epoch_end(self, run_context):
        mean = self._sum / self._count if self._count else float("nan")
        if self._bar is not None:
            self._bar.set_postfix(loss=f"{mean:.4f}")
            self._bar.close()
            self._bar = None
        else:
            self._print(f"{self._desc} done: {self._count} steps, mean loss {mean:.4f}")

    def _print(self, line):
        print(line, file=self.file or sys.stderr, flush=True)


# ---- checkpoints --------------------------------------------------------------------------------
class CheckpointConfig:
    """When and what ``ModelCheckpoint`` saves.

    Args:
        save_checkpoint_steps: save every this many steps (counted over all epochs). Default 1.
        save_checkpoint_seconds: save when this many seconds passed since the last save; used
            only when ``save_checkpoint_steps`` is None or 0.
        keep_checkpoint_max: keep at most this many of the files this callback wrote (the oldest
            are deleted). Default 5. 0 or None turns it off.
        keep_checkpoint_per_n_minutes: when ``keep_checkpoint_max`` is off: keep the newest file
            and, of the older ones, the first written in each interval of this many minutes
            (counted from the callback's first save). Ignored when ``keep_checkpoint_max`` is set,
            as in MindSpore; with both off the newest file alone is kept. Default 0.
        saved_network: a Cell to save instead of the train network.
        append_info: extra entries: the strings ``"epoch_num"`` / ``"step_num"`` and/or a dict of
            values, saved with ``save_checkpoint(append_dict=...)``.
        save_optimizer: also save the optimizer state (minigrad addition). Default True.
        integrated_save, async_save: accepted for MindSpore compatibility (saving is synchronous).

    Raises:
        ValueError: for non-positive values, or when neither steps nor seconds is set.
    """

    def __init__(self, save_checkpoint_steps=1, save_checkpoint_seconds=0, keep_checkpoint_max=5,
                 keep_checkpoint_per_n_minutes=0, integrated_save=True, async_save=False,
                 saved_network=None, append_info=None, save_optimizer=True):
        if save_checkpoint_steps:
            _check_int(save_checkpoint_steps, "save_checkpoint_steps", 1)
        if save_checkpoint_seconds and (not isinstance(save_checkpoint_seconds, (int, float))
                                        or save_checkpoint_seconds < 0):
            raise ValueError(f"save_checkpoint_seconds must be >= 0, got {save_checkpoint_seconds!r}")
        if not save_checkpoint_steps and not save_checkpoint_seconds:
            raise ValueError("set save_checkpoint_steps or save_checkpoint_seconds (both are empty)")
        self.save_checkpoint_steps = save_checkpoint_steps or None
        self.save_checkpoint_seconds = None if save_checkpoint_steps else save_checkpoint_seconds
        keep_max = keep_checkpoint_max and _check_int(keep_checkpoint_max, "keep_checkpoint_max", 0)
        per_minutes = keep_checkpoint_per_n_minutes
        if per_minutes and (isinstance(per_minutes, bool) or not isinstance(per_minutes, (int, float))
                            or not 0 < per_minutes < math.inf):
            raise ValueError(f"keep_checkpoint_per_n_minutes must be a finite number >= 0, got "
                             f"{keep_checkpoint_per_n_minutes!r}")
        if keep_max or not per_minutes:  # MindSpore: the count wins; with neither, keep one file
            self.keep_checkpoint_max, self.keep_checkpoint_per_n_minutes = keep_max or 1, None
        else:
            self.keep_checkpoint_max, self.keep_checkpoint_per_n_minutes = None, per_minutes
        self.saved_network = saved_network
        self.append_info = list(append_info or [])
        for item in self.append_info:
            if not (isinstance(item, dict) or item in ("epoch_num", "step_num")):
                raise ValueError(f"append_info entries must be 'epoch_num', 'step_num' or a dict, "
                                 f"got {item!r}")
        self.save_optimizer = bool(save_optimizer)


class ModelCheckpoint(Callback):
    """Save checkpoints during training: ``<directory>/<prefix>-<epoch>_<step in epoch>.ckpt``.

    Each file holds the parameters of the train network (or ``config.saved_network``), the
    optimizer state (unless ``config.save_optimizer`` is False) and the ``append_info`` values;
    files are written atomically (see ``save_checkpoint``). As in MindSpore, when ``directory``
    already holds checkpoints of an earlier run with this prefix (``CKP-*.ckpt``,
    ``CKP_1-*.ckpt``, ...), the prefix becomes ``CKP_<n>`` with the next free ``n``, so a new run
    never overwrites, nor rotates away, the files of an earlier one. A final checkpoint is written at the
    end of training unless the last step was just saved. Restore with
    ``load_checkpoint(path, net=network, optimizer=optimizer)``.

    Args:
        prefix: file name prefix. Default ``"CKP"``.
        directory: folder (created if needed); default the current directory.
        config: a ``CheckpointConfig``; default ``CheckpointConfig()``.

    Attributes:
        prefix: the prefix the files get (``prefix``, or ``prefix_<n>`` as above).
        latest_ckpt_file_name: path of the last file written (None before the first save).
    """

    def __init__(self, prefix="CKP", directory=None, config=None):
        if not isinstance(prefix, str) or not prefix or os.sep in prefix:
            raise ValueError(f"prefix must be a non-empty file name prefix, got {prefix!r}")
        if config is not None and not isinstance(config, CheckpointConfig):
            raise TypeError(f"config must be a CheckpointConfig, got {type(config).__name__}")
        self.directory = os.path.abspath(directory if directory is not None else os.getcwd())
        self.prefix = _unused_prefix(self.directory, prefix)
        self.config = config or CheckpointConfig()
        self.latest_ckpt_file_name = None
        self._saved = []  # (path, _clock()) of the files this callback wrote, oldest first
        self._last_saved_step = None
        self._last_time = _clock()

    def on_train_begin(self, run_context):
        # a new train() counts its steps afresh: forget the last run's saved step number, or the
        # final save of a run whose last step number equals it would be skipped
        self._last_saved_step = None
        super().on_train_begin(run_context)

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        config = self.config
        if config.save_checkpoint_steps:
            due = cb_params.cur_step_num % config.save_checkpoint_steps == 0
        else:
            due = _clock() - self._last_time >= config.save_checkpoint_seconds
        if due:
            self._save(cb_params)

    def on_train_end(self, run_context):
        cb_params = run_context.original_args()
        if cb_params.cur_step_num != self._last_saved_step:
            self._save(cb_params)

    def _save(self, cb_params):
        config = self.config
        append = {}
        for item in config.append_info:
            if item == "epoch_num":
                append["epoch_num"] = cb_params.cur_epoch_num
            elif item == "step_num":
                append["step_num"] = cb_params.cur_step_num
            else:
                append.update(item)
        optimizer = cb_params.get("optimizer") if config.save_optimizer else None
        if optimizer is not None and not hasattr(optimizer, "state_dict"):
            optimizer = None
        name = f"{self.prefix}-{cb_params.cur_epoch_num}_{_step_in_epoch(cb_params)}.ckpt"
        path = save_checkpoint(config.saved_network or cb_params.train_network,
                               os.path.join(self.directory, name), append_dict=append or None,
                               optimizer=optimizer)
        now = _clock()
        self._saved = [entry for entry in self._saved if entry[0] != path] + [(path, now)]
        if config.keep_checkpoint_max:
            keep = self._saved[-config.keep_checkpoint_max:]
        else:
            keep = _one_per_interval(self._saved, config.keep_checkpoint_per_n_minutes * 60.0)
        for entry in self._saved:
            if entry not in keep:
                try:
                    os.remove(entry[0])
                except FileNotFoundError:
                    pass
        self._saved = keep
        self.latest_ckpt_file_name = path
        self._last_saved_step = cb_params.cur_step_num
        self._last_time = now


_clock = time.monotonic  # ModelCheckpoint's clock (seconds); tests replace it


def _one_per_interval(saved, seconds):
    """Of ``saved`` ((path, time) pairs, oldest first): the first of each ``seconds``-long
    interval counted from the first one's time, and the newest."""
    keep, intervals = [], set()
    for k, (path, when) in enumerate(saved):
        interval = (when - saved[0][1]) // seconds
        if interval not in intervals or k == len(saved) - 1:
            intervals.add(interval)
            keep.append((path, when))
    return keep


def _unused_prefix(directory, prefix):
    """``prefix``, or ``prefix_<n>`` if ``directory`` holds ``.ckpt`` files named ``prefix-...`` or
    ``prefix_<k>-...``: ``n`` is 1, or one more than the largest such ``k`` (MindSpore's rule)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return prefix
    taken = 0
    for name in names:
        if not name.endswith(".ckpt") or not name.startswith(prefix):
            continue
        rest = name[len(prefix):]
        if rest.startswith("-"):
            taken = max(taken, 1)
        elif rest.startswith("_") and "-" in rest:
            number = rest[1:rest.index("-")]
            if number.isdigit():
                taken = max(taken, int(number) + 1)
    return f"{prefix}_{taken}" if taken else prefix
