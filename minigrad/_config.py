"""The one place for global modes: gradient recording, default device, autocast, the Keras
dtype policy of the cells created from now on.

Each mode is changed through a context manager so that it is always restored::

    with minigrad.no_grad():
        y = net(x)
"""
import contextlib
import threading


class _Config(threading.local):
    grad_enabled = True      # record the graph for backward
    grad_depth = 0           # grad/value_and_grad calls running their function (nesting)
    device_target = "CPU"    # where new tensors are created
    autocast_dtype = None    # None, or the low-precision dtype of minigrad.amp.autocast
    dtype_policy = None      # None, or mixed_precision.set_global_policy's Policy (read by Cell)


config = _Config()


@contextlib.contextmanager
def using_config(**settings):
    """Temporarily set config attributes, restoring the previous values on exit."""
    old = {key: getattr(config, key) for key in settings}
    for key, value in settings.items():
        setattr(config, key, value)
    try:
        yield config
    finally:
        for key, value in old.items():
            setattr(config, key, value)


def no_grad():
    """Context manager: ops inside record no graph (``Tensor.requires_grad`` is False on
    outputs)."""
    return using_config(grad_enabled=False)


def enable_grad():
    """Context manager: re-enable graph recording inside a ``no_grad`` block."""
    return using_config(grad_enabled=True)


def is_grad_enabled():
    return config.grad_enabled
