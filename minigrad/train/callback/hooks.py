"""The callback protocol: ``Callback`` and its hooks, ``RunContext``, and the list ``Model`` calls.

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
"""

from minigrad import backend, communication
from minigrad._checks import check_items, check_type


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
    """What a callback hook receives: ``original_args()`` (the ``cb_params``) and
    ``request_stop()``."""

    def __init__(self, original_args):
        self._original_args = check_type("original_args", original_args, dict,
                                         expected="a dict (the cb_params)", owner="RunContext")
        self._stop_requested = False

    def original_args(self):
        return self._original_args

    def request_stop(self):
        """Stop training after the current step (its ``on_train_epoch_end`` and ``on_train_end``
        still run)."""
        self._stop_requested = True

    def get_stop_requested(self):
        return self._stop_requested


def check_run_context(run_context, owner):
    """``run_context`` if it is a ``RunContext`` (what ``Model`` passes every hook), else a
    TypeError naming it: the first line of each hook of minigrad's callbacks (one isinstance)."""
    if isinstance(run_context, RunContext):
        return run_context
    return check_type("run_context", run_context, RunContext, owner=owner)


class Callback:
    """Base class of callbacks: override the hooks you need (all do nothing by default).

    ``rank_zero_only``: when True, in a group of several processes (``communication.init()``)
    only rank 0 runs this callback. The callbacks that write (``LossMonitor``, ``TimeMonitor``,
    ``ProgressBar``, ``LossScaleMonitor``, ``ModelCheckpoint``) set it, so data-parallel ranks
    print one log and save one set of checkpoints; set it to False on an instance to run it on
    every rank (give each rank its own checkpoint directory then). Default False: a user's
    callback runs on every rank, as it may take part in collectives.
    """
    rank_zero_only = False

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
        callbacks = check_items("callbacks", callbacks, Callback,
                                expected="a Callback, a list of Callbacks or None")
        self.callbacks = callbacks
        # rank_zero_only callbacks are skipped on the other ranks (the rank is fixed for a run);
        # the rank is asked for only when such a callback is there
        self._other_rank = (any(cb.rank_zero_only for cb in callbacks)
                            and communication.get_rank() != 0)

    def __call__(self, hook, run_context):
        other_rank = self._other_rank
        for cb in self.callbacks:
            if not (other_rank and cb.rank_zero_only):
                getattr(cb, hook)(run_context)


# ---- reading cb_params ----------------------------------------------------------------------
def loss_value(cb_params):
    """The loss of the step that just ended (``cb_params.net_outputs``) as a Python float: the
    first element of a tuple (loss, overflow, scale), else the output itself (its mean).

    Read from the device once per step: every callback that asks gets the same value (on a GPU
    each read waits for the step's kernels)."""
    outputs = cb_params.net_outputs
    cached = cb_params.get("_host_loss")
    if cached is not None and cached[0] is outputs:
        return cached[1]
    loss = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
    data = getattr(loss, "data", loss)
    if getattr(data, "size", 1) != 1:
        data = backend.get_array_module(data).mean(data)
    value = float(backend.read_scalar(data))
    cb_params["_host_loss"] = (outputs, value)
    return value


def optimizer_note(cb_params):
    """The optimizer's note on its last step, or None: ``optimizer.last_report.progress_note()``
    where the report has one (THOR: refresh or reuse, and the time spent in factors and
    inverses). ``ProgressBar`` and ``LossMonitor`` show it."""
    optimizer = getattr(cb_params, "optimizer", None)
    if optimizer is None:  # a Model around a complete training cell
        optimizer = getattr(getattr(cb_params, "train_network", None), "optimizer", None)
    note = getattr(getattr(optimizer, "last_report", None), "progress_note", None)
    return note() if callable(note) else None


def step_in_epoch(cb_params):
    """The 1-based step number within the current epoch."""
    batch_num = cb_params.batch_num
    return (cb_params.cur_step_num - 1) % batch_num + 1 if batch_num else cb_params.cur_step_num

