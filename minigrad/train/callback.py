"""MindSpore's import location ``mindspore.train.callback``; the callbacks live in ``callbacks.py``."""
from minigrad.train.callbacks import (Callback, RunContext, LossMonitor, TimeMonitor, History,  # noqa: F401
                                      LossScaleMonitor, ProgressBar, CheckpointConfig, ModelCheckpoint)
