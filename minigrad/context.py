"""MindSpore-style global context: ``set_context(device_target="CPU"|"GPU")``."""
from minigrad import backend
from minigrad._config import config


def set_context(device_target=None, **ignored):
    """Set where new tensors are created: ``"CPU"`` (NumPy) or ``"GPU"`` (CuPy).

    Other MindSpore context keys (``mode``, ``device_id``, ...) are accepted and ignored, so
    MindSpore scripts run unchanged.

    Raises:
        ValueError: for an unknown device; RuntimeError for ``"GPU"`` without CuPy or a GPU.
    """
    if device_target is not None:
        config.device_target = backend.check_device(device_target)


def get_context(key):
    """Read a context value (``"device_target"``)."""
    if key != "device_target":
        raise ValueError(f"unknown context key {key!r}; minigrad has 'device_target'")
    return config.device_target
