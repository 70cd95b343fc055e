"""Training on top of cells and optimizers: ``Model``, callbacks, metrics and checkpoints."""
from minigrad.train.checkpoint import save_checkpoint, load_checkpoint, load_param_into_net
from minigrad.train.metrics import (Metric, Accuracy, Top1CategoricalAccuracy,
                                    TopKCategoricalAccuracy, Top5CategoricalAccuracy, Loss,
                                    get_metric_fn)
from minigrad.train.callback import (Callback, RunContext, LossMonitor, TimeMonitor, History,
                                     LossScaleMonitor, ProgressBar, CheckpointConfig,
                                     ModelCheckpoint)
from minigrad.train.model import Model
from minigrad.thor.convert_model import ConvertModelUtils
