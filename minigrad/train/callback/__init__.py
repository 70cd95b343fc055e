"""Training callbacks, MindSpore style (``mindspore.train.callback``).

- ``hooks``: ``Callback`` (the hooks ``Model`` calls, in which order), ``RunContext``;
- ``monitors``: ``LossMonitor``, ``TimeMonitor``, ``History``, ``LossScaleMonitor``;
- ``progress_bar``: ``ProgressBar``;
- ``model_checkpoint``: ``CheckpointConfig``, ``ModelCheckpoint``.
"""
from minigrad.train.callback.hooks import Callback, RunContext
from minigrad.train.callback.monitors import LossMonitor, TimeMonitor, History, LossScaleMonitor
from minigrad.train.callback.progress_bar import ProgressBar
from minigrad.train.callback.model_checkpoint import CheckpointConfig, ModelCheckpoint

__all__ = ["Callback", "RunContext", "LossMonitor", "TimeMonitor", "History", "LossScaleMonitor",
           "ProgressBar", "CheckpointConfig", "ModelCheckpoint"]
