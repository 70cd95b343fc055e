"""minigrad: a small, readable mixed-precision deep-learning framework on NumPy and CuPy."""
from minigrad import dtype
from minigrad.dtype import (float16, float32, float64, int8, int32, int64, uint8, bool_, half,
                            float_, double)
from minigrad._config import no_grad, enable_grad, is_grad_enabled
from minigrad.context import set_context, get_context, GRAPH_MODE, PYNATIVE_MODE
from minigrad.tensor import Tensor, from_dlpack
from minigrad.parameter import Parameter
from minigrad.autograd import grad, value_and_grad, GradOperation
from minigrad import ops
from minigrad import optim
from minigrad import nn
from minigrad.amp import LossScaleManager, FixedLossScaleManager, DynamicLossScaleManager
from minigrad.random import set_seed, get_seed
from minigrad.train import Model, save_checkpoint, load_checkpoint, load_param_into_net
from minigrad import dataset
from minigrad import communication
from minigrad.communication import (set_auto_parallel_context, get_auto_parallel_context,
                                    reset_auto_parallel_context, ParallelMode)

__version__ = "0.1.0"
