"""``CheckpointConfig`` and ``ModelCheckpoint``: checkpoints saved during training, rotated."""
import os
import time

from minigrad._checks import (check_bool, check_non_negative, check_non_negative_int, check_path,
                              check_relation, check_type, describe)
from minigrad.nn.cell import Cell
from minigrad.train.callback.hooks import Callback, check_run_context, step_in_epoch
from minigrad.train.checkpoint import save_checkpoint


_OWNER = "CheckpointConfig"


class CheckpointConfig:
    """When and what ``ModelCheckpoint`` saves.

    Args:
        save_checkpoint_steps: save every this many steps (counted over all epochs). Default 1.
        save_checkpoint_seconds: save when this many seconds passed since the last save; used
            only when ``save_checkpoint_steps`` is None or 0. Any number >= 0 (MindSpore takes
            an int); None or 0 turns it off.
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
        integrated_save: accepted for MindSpore compatibility.
        async_save: accepted for MindSpore compatibility (saving is synchronous).

    Raises:
        TypeError: for a count that is not an int, a time that is not a number, a flag that
            is not a bool, a ``saved_network`` that is not a Cell, or an ``append_info`` that is
            not a list of strs and dicts.
        ValueError: for negative values, when neither steps nor seconds is set, or for an
            ``append_info`` str other than ``"epoch_num"`` and ``"step_num"``.
    """

    def __init__(self, save_checkpoint_steps=1, save_checkpoint_seconds=0, keep_checkpoint_max=5,
                 keep_checkpoint_per_n_minutes=0, integrated_save=True, async_save=False,
                 saved_network=None, append_info=None, save_optimizer=True):
        steps = check_non_negative_int("save_checkpoint_steps", save_checkpoint_steps,
                                       allow_none=True, owner=_OWNER)
        seconds = check_non_negative("save_checkpoint_seconds", save_checkpoint_seconds,
                                     allow_none=True, owner=_OWNER)
        check_relation("save_checkpoint_steps", save_checkpoint_steps, bool(steps or seconds),
                       f"a positive int when save_checkpoint_seconds is "
                       f"{describe(save_checkpoint_seconds)} (set save_checkpoint_steps or "
                       f"save_checkpoint_seconds)", owner=_OWNER)
        self.save_checkpoint_steps = steps or None
        self.save_checkpoint_seconds = None if steps else seconds
        keep_max = check_non_negative_int("keep_checkpoint_max", keep_checkpoint_max,
                                          allow_none=True, owner=_OWNER)
        per_minutes = check_non_negative("keep_checkpoint_per_n_minutes",
                                         keep_checkpoint_per_n_minutes, allow_none=True,
                                         owner=_OWNER)
        if keep_max or not per_minutes:  # MindSpore: the count wins; with neither, keep one file
            self.keep_checkpoint_max, self.keep_checkpoint_per_n_minutes = keep_max or 1, None
        else:
            self.keep_checkpoint_max, self.keep_checkpoint_per_n_minutes = None, per_minutes
        self.integrated_save = check_bool("integrated_save", integrated_save, owner=_OWNER)
        self.async_save = check_bool("async_save", async_save, owner=_OWNER)
        self.saved_network = check_type("saved_network", saved_network, (Cell, type(None)),
                                        expected="a Cell or None", owner=_OWNER)
        self.append_info = _check_append_info(append_info)
        self.save_optimizer = check_bool("save_optimizer", save_optimizer, owner=_OWNER)


def _check_append_info(append_info):
    """``append_info`` (None, or a list of ``"epoch_num"``, ``"step_num"`` and dicts) as a
    list."""
    if append_info is None:
        return []
    expected = "a list of 'epoch_num', 'step_num' and dicts, or None"
    check_type("append_info", append_info, (list, tuple), expected=expected, owner=_OWNER)
    for item in append_info:
        check_relation("append_info", append_info, isinstance(item, (str, dict)), expected,
                       error=TypeError, owner=_OWNER)
        check_relation("append_info", append_info,
                       isinstance(item, dict) or item in ("epoch_num", "step_num"), expected,
                       owner=_OWNER)
    return list(append_info)


class ModelCheckpoint(Callback):
    """Save checkpoints during training: ``<directory>/<prefix>-<epoch>_<step in epoch>.ckpt``.

    Each file holds the parameters of the train network (or ``config.saved_network``), the
    optimizer state (unless ``config.save_optimizer`` is False) and the ``append_info`` values;
    files are written atomically (see ``save_checkpoint``), and each save first removes the
    temporary files that killed writers left in ``directory``. As in MindSpore, when ``directory``
    already holds checkpoints of an earlier run with this prefix (``CKP-*.ckpt``,
    ``CKP_1-*.ckpt``, ...), the prefix becomes ``CKP_<n>`` with the next free ``n``, so a new run
    never overwrites, nor rotates away, the files of an earlier one. A final checkpoint is written
    at the end of training unless the last step was just saved. Restore with
    ``load_checkpoint(path, net=network, optimizer=optimizer)``.

    Args:
        prefix: file name prefix. Default ``"CKP"``.
        directory: folder (created if needed); default the current directory.
        config: a ``CheckpointConfig``; default ``CheckpointConfig()``.

    Raises:
        TypeError: for a ``prefix`` that is not a str, a ``directory`` that is not a str or
            ``os.PathLike`` path, or a ``config`` that is not a ``CheckpointConfig``.
        ValueError: for an empty ``prefix`` or one holding a path separator, or an empty
            ``directory``.

    Attributes:
        prefix: the prefix the files get (``prefix``, or ``prefix_<n>`` as above).
        latest_ckpt_file_name: path of the last file written (None before the first save).
    """
    rank_zero_only = True  # one set of files for a data-parallel job (see Callback)

    def __init__(self, prefix="CKP", directory=None, config=None):
        check_type("prefix", prefix, str, owner="ModelCheckpoint")
        if not prefix or os.sep in prefix:
            raise ValueError(f"ModelCheckpoint: prefix must be a non-empty file name prefix, got "
                             f"{prefix!r}")
        if config is not None and not isinstance(config, CheckpointConfig):
            check_type("config", config, CheckpointConfig, expected="a CheckpointConfig or None",
                       owner="ModelCheckpoint")
        directory = check_path("directory", directory, allow_none=True, owner="ModelCheckpoint")
        self.directory = os.path.abspath(directory if directory is not None else os.getcwd())
        self.prefix = _unused_prefix(self.directory, prefix)
        self.config = config or CheckpointConfig()
        self.latest_ckpt_file_name = None
        self._saved = []  # (path, _clock()) of the files this callback wrote, oldest first
        self._last_saved_step = None
        self._last_time = _clock()

    def on_train_begin(self, run_context):
        check_run_context(run_context, "ModelCheckpoint.on_train_begin")
        # a new train() counts its steps afresh: forget the last run's saved step number, or the
        # final save of a run whose last step number equals it would be skipped
        self._last_saved_step = None
        super().on_train_begin(run_context)

    def on_train_step_end(self, run_context):
        check_run_context(run_context, "ModelCheckpoint.on_train_step_end")
        cb_params = run_context.original_args()
        config = self.config
        if config.save_checkpoint_steps:
            due = cb_params.cur_step_num % config.save_checkpoint_steps == 0
        else:
            due = _clock() - self._last_time >= config.save_checkpoint_seconds
        if due:
            self._save(cb_params)

    def on_train_end(self, run_context):
        check_run_context(run_context, "ModelCheckpoint.on_train_end")
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
        name = f"{self.prefix}-{cb_params.cur_epoch_num}_{step_in_epoch(cb_params)}.ckpt"
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
