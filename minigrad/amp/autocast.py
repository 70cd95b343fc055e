"""``autocast``: run matmul-like ops in fp16 and range-sensitive ops in fp32, whatever the inputs.

::

    with minigrad.amp.autocast():          # or @autocast() on a function
        logits = net(x)                    # Dense/Conv matmuls in fp16 (fp32 accumulation)
        loss = loss_fn(logits, y)          # softmax, log, sums, norms, losses in fp32

The mode is ``minigrad._config.config.autocast_dtype``. There is ONE hook point:
``Function.apply`` asks ``cast_inputs`` to cast the inputs of an op whose class carries an
``autocast`` label, and this module sets those labels from the two lists below. Unlisted ops run
in the dtype of their inputs (fp16 + fp32 promotes to fp32 as usual). As in PyTorch, float64
inputs are not eligible: they stay float64 whether or not autocast is on. Casts are ordinary
differentiable ``ops.cast`` nodes, so gradients return to fp32 parameters in fp32.
"""
import functools
import importlib

from minigrad import dtype as dtypes
from minigrad._config import config, using_config

# (module, Function class) pairs; classes not present in this build are skipped
LOW_PRECISION_OPS = (
    ("minigrad.ops.linalg", "MatMul"),          # matmul, bmm
    ("minigrad.ops.linalg", "Dense"),           # nn.Dense
    ("minigrad.ops.conv", "Conv2d"),
)
FP32_OPS = (
    ("minigrad.ops.activation", "Softmax"),
    ("minigrad.ops.activation", "LogSoftmax"),
    ("minigrad.ops.math", "Exp"),
    ("minigrad.ops.math", "Log"),
    ("minigrad.ops.arithmetic", "Pow"),
    ("minigrad.ops.reduction", "Sum"),
    ("minigrad.ops.reduction", "Mean"),
    ("minigrad.ops.normalization", "Normalize"),   # batch_norm, layer_norm
    ("minigrad.nn.loss", "SoftmaxCrossEntropy"),
    ("minigrad.nn.loss", "CrossEntropy"),
    ("minigrad.nn.loss", "BCEWithLogits"),
)


def _label(table, kind):
    labelled = []
    for module_name, class_name in table:
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            continue
        cls.autocast = kind
        labelled.append(cls)
    return tuple(labelled)


@functools.lru_cache(maxsize=None)
def labelled_ops():
    """``(low_precision_classes, fp32_classes)`` that autocast acts on in this build."""
    return _label(LOW_PRECISION_OPS, "low"), _label(FP32_OPS, "fp32")


def cast_inputs(kind, inputs):
    """The hook ``Function.apply`` calls while autocast is on: cast the float32 inputs of an op
    labelled ``"low"`` to the autocast dtype, and fp16 inputs of an op labelled ``"fp32"`` to fp32
    (float64 inputs are left alone, as PyTorch's autocast leaves them)."""
    from minigrad.ops import cast
    low = config.autocast_dtype
    source, target = (dtypes.float32, low) if kind == "low" else (low, dtypes.float32)
    return tuple(cast(t, target) if t.data.dtype == source else t for t in inputs)


class autocast:
    """Context manager and decorator turning autocast on (or off with ``enabled=False``).

    Args:
        dtype: the low-precision dtype (float16). Default float16.
        enabled: False runs the block with autocast off (e.g. a region that must stay fp32).

    Raises:
        TypeError: if ``dtype`` is not float16, or ``enabled`` not a bool.
    """

    def __init__(self, dtype=dtypes.float16, enabled=True):
        dtype = dtypes.as_dtype(dtype)
        if dtype != dtypes.float16:
            raise TypeError(f"autocast: 'dtype' must be float16, but got {dtype}")
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: 'enabled' must be a bool, but got {enabled!r}")
        self.dtype, self.enabled = dtype, enabled
        self._contexts = []

    def __enter__(self):
        if self.enabled:
            labelled_ops()
        context = using_config(autocast_dtype=self.dtype if self.enabled else None)
        self._contexts.append(context)
        return context.__enter__()

    def __exit__(self, *exc):
        return self._contexts.pop().__exit__(*exc)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.dtype, self.enabled):
                return fn(*args, **kwargs)
        return wrapped
