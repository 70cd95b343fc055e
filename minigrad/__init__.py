"""minigrad: a small, readable mixed-precision deep-learning framework on NumPy and CuPy.

The package is layered; a module imports only modules of its own layer or below (no import
cycles, checked by the test suite). From the bottom up:

1. ``backend``, ``dtype``, ``_config``, ``_checks``, ``_native``, ``_host_threads``,
   ``_fp16_host``, ``context``, ``random``: array dispatch, dtypes and the fp16 compute rule,
   global modes, argument checks, the native kernel loader and its threads (shared with
   OpenBLAS), fp16 on the host, the seeded RNG; ``communication`` (MPI group,
   collectives over arrays, parallel context: it needs nothing above this layer, so the amp
   core, the optimizers and the network cells can reduce across ranks).
2. ``tensor``, ``parameter``: the user handle; ``linalg`` (batched SPD inverse).
3. ``autograd``: Function nodes, the reverse pass (higher-order too), PyTorch's ``grad``/
   ``backward``, MindSpore's ``grad``/``value_and_grad``/``GradOperation``.
4. ``ops``: the differentiable ops; they install the Tensor's operators and op methods;
   ``autograd.functional`` (Jacobians, Hessians and their products, stacked by the ops).
5. amp core, on arrays only: ``amp.core`` (the loss-scale rule, the step report),
   ``amp.float_status`` with ``amp._status_buffer``, ``amp._status_launch`` and
   ``amp._status_numpy`` (the overflow status), ``amp.npu_ops`` (MindSpore's ops over it);
   ``fp8`` (the FP8 casts, scaling recipes and FP8 GEMMs).
6. ``optim``; ``thor`` (the THOR optimizer's modules).
7. ``nn``; ``thor.layers`` and ``thor.convert_network`` (the layers that record THOR's factors,
   and the network converter).
8. amp faces: ``amp`` (the package and its other modules: managers, build, grad_scaler,
   autocast, functional, plots); ``mixed_precision``.
9. ``train``, ``dataset``, ``testing``; ``thor.convert_model`` (the ``Model`` converter);
   ``bench`` (the benchmark tools, ``python -m minigrad.bench``).

``import minigrad`` loads layers 1-4 (``communication`` and ``linalg`` on first use). The
subpackages above them (``minigrad.nn``, ``minigrad.amp``, ``minigrad.mixed_precision``, ...)
and the names taken from them (``minigrad.Model``, ``minigrad.DynamicLossScaleManager``, ...)
are loaded on first access (PEP 562), so ``import minigrad.amp`` does not load the training
loop.
"""
import importlib

from minigrad import dtype, ops
from minigrad._config import enable_grad, is_grad_enabled, no_grad
from minigrad.autograd.api import GradOperation, grad, value_and_grad
from minigrad.context import GRAPH_MODE, PYNATIVE_MODE, get_context, set_context
from minigrad.dtype import (
    bool_,
    double,
    float16,
    float32,
    float64,
    float_,
    half,
    int8,
    int32,
    int64,
    uint8,
)
from minigrad.ops.composite import jit
from minigrad.parameter import Parameter
from minigrad.random import get_seed, set_seed
from minigrad.tensor import Tensor, from_dlpack

__version__ = "0.1.0"

# The layers of the list above, bottom up, as module paths inside the package; a path stands for
# the module or package and everything under it (the longest matching path places a module), and
# "" is the package's own __init__. tests/core/test_import_layers.py checks every import against
# this table, and the list above and the README's Layout against it.
_LAYERS = (
    ("backend", "dtype", "_config", "_checks", "_native", "_host_threads", "_fp16_host",
     "context", "random", "communication"),
    ("tensor", "parameter", "linalg"),
    ("autograd",),
    ("ops", "", "autograd.functional"),
    ("amp.core", "amp.float_status", "amp._status_buffer", "amp._status_launch",
     "amp._status_numpy", "amp.npu_ops", "fp8"),
    ("optim", "thor"),
    ("nn", "thor.layers", "thor.convert_network"),
    ("amp", "mixed_precision"),
    ("train", "dataset", "testing", "thor.convert_model", "bench"),
)

# subpackages loaded on first access, and the names the package takes from them
_SUBPACKAGES = ("amp", "communication", "dataset", "fp8", "mixed_precision", "nn", "optim",
                "testing", "train")
_FROM = {
    "LossScaleManager": "minigrad.amp", "FixedLossScaleManager": "minigrad.amp",
    "DynamicLossScaleManager": "minigrad.amp",
    "Model": "minigrad.train", "save_checkpoint": "minigrad.train",
    "load_checkpoint": "minigrad.train", "load_param_into_net": "minigrad.train",
    "LossMonitor": "minigrad.train", "TimeMonitor": "minigrad.train", "Accuracy": "minigrad.train",
    "set_auto_parallel_context": "minigrad.communication",
    "get_auto_parallel_context": "minigrad.communication",
    "reset_auto_parallel_context": "minigrad.communication",
    "ParallelMode": "minigrad.communication",
}


def __getattr__(name):
    if name in dtype.LOWP_NAMES:  # bfloat16 and the FP8 formats: an ImportError without ml_dtypes
        value = getattr(dtype, name)
    elif name in _FROM:
        value = getattr(importlib.import_module(_FROM[name]), name)
    elif name in _SUBPACKAGES:
        try:
            value = importlib.import_module(f"minigrad.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"minigrad.{name}":
                raise
            raise AttributeError(f"module 'minigrad' has no attribute {name!r} (the subpackage "
                                 f"minigrad.{name} is not in this build)") from None
    else:
        raise AttributeError(f"module 'minigrad' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_SUBPACKAGES) | set(_FROM) | set(dtype.LOWP_NAMES))
