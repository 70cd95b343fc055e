"""``ProgressBar``: one bar per epoch with the running mean loss (tqdm when installed)."""
import sys

from minigrad._checks import check_bool, check_positive_int, check_relation
from minigrad.train.callback.hooks import Callback, check_run_context, loss_value, optimizer_note


class ProgressBar(Callback):
    """A progress bar per epoch with the running mean loss: tqdm when installed, else plain lines.

    With an optimizer that reports its steps (THOR's ``last_report``) the bar's postfix (or the
    line) also shows the refreshes so far in the epoch and the last refresh's note, e.g.
    ``refreshes=2, last="refresh 2/2 layers, factors 0.21 ms, inverses 0.80 ms"``; the postfix
    is updated at once on a refresh step.

    Args:
        use_tqdm: True/False to force; None (default) uses tqdm if it can be imported
            (``pip install minigrad[progress]``).
        lines_per_epoch: without tqdm, how many progress lines to print per epoch.
        file: the stream written to; default ``sys.stderr``.

    Raises:
        TypeError: for a ``use_tqdm`` that is neither a bool nor None, a ``lines_per_epoch``
            that is not an int, or a ``file`` that is not a stream; ValueError for a
            ``lines_per_epoch`` below 1; ImportError for ``use_tqdm=True`` without tqdm.
    """
    rank_zero_only = True  # one log for a data-parallel job (see Callback)

    def __init__(self, use_tqdm=None, lines_per_epoch=4, file=None):
        if use_tqdm is not None:
            check_bool("use_tqdm", use_tqdm, owner="ProgressBar")
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
        self.lines_per_epoch = check_positive_int("lines_per_epoch", lines_per_epoch)
        check_relation("file", file, file is None or callable(getattr(file, "write", None)),
                       "a stream with a write method (sys.stdout, an open text file) or None",
                       error=TypeError, owner="ProgressBar")
        self.file = file
        self._bar = None
        self._sum, self._count = 0.0, 0
        self._refreshes, self._note = 0, None

    def on_train_epoch_begin(self, run_context):
        check_run_context(run_context, "ProgressBar.on_train_epoch_begin")
        cb_params = run_context.original_args()
        self._sum, self._count = 0.0, 0
        self._refreshes, self._note = 0, None
        self._desc = f"epoch {cb_params.cur_epoch_num}/{cb_params.epoch_num}"
        if self._tqdm is not None:
            self._bar = self._tqdm(total=cb_params.batch_num, desc=self._desc, leave=True,
                                   file=self.file or sys.stderr, dynamic_ncols=True)

    def on_train_step_end(self, run_context):
        check_run_context(run_context, "ProgressBar.on_train_step_end")
        cb_params = run_context.original_args()
        self._sum += loss_value(cb_params)
        self._count += 1
        mean = self._sum / self._count
        note = optimizer_note(cb_params)
        refreshed = note is not None and note.startswith("refresh")
        if refreshed:
            self._refreshes, self._note = self._refreshes + 1, note
        if self._bar is not None:
            self._bar.update(1)
            if refreshed or self._count % 10 == 0 or self._count == cb_params.batch_num:
                self._bar.set_postfix(self._postfix(mean), refresh=False)  # costly: not always
            return
        batch_num = cb_params.batch_num
        period = max(1, (batch_num or 50) // self.lines_per_epoch)
        if self._count % period == 0 and self._count != batch_num:
            extra = "".join(f", {k} {v}" for k, v in self._postfix(mean).items() if k != "loss")
            self._print(f"{self._desc} [{self._count}/{batch_num or '?'}] loss {mean:.4f}{extra}")

    def _postfix(self, mean):
        postfix = {"loss": f"{mean:.4f}"}
        if self._note is not None:
            postfix.update(refreshes=self._refreshes, last=self._note)
        return postfix

    def on_train_epoch_end(self, run_context):
        check_run_context(run_context, "ProgressBar.on_train_epoch_end")
        mean = self._sum / self._count if self._count else float("nan")
        if self._bar is not None:
            self._bar.set_postfix(self._postfix(mean))
            self._bar.close()
            self._bar = None
        else:
            extra = f", {self._refreshes} refreshes" if self._note is not None else ""
            self._print(f"{self._desc} done: {self._count} steps, mean loss {mean:.4f}{extra}")

    def _print(self, line):
        print(line, file=self.file or sys.stderr, flush=True)
