"""MindSpore-style global context: ``set_context(device_target="CPU"|"GPU", num_threads=N)``."""
from minigrad import backend
from minigrad._checks import check_positive_int, check_type
from minigrad._config import config

# MindSpore's other context keys: accepted by set_context and ignored, so scripts run unchanged.
MINDSPORE_KEYS = frozenset((
    "mode", "device_id", "deterministic", "max_call_depth", "variable_memory_max_size",
    "mempool_block_size", "op_timeout", "save_graphs", "save_graphs_path", "enable_dump",
    "save_dump_path", "print_file_path", "env_config_path", "precompile_only",
    "reserve_class_name_in_scope", "pynative_synchronize", "check_bprop",
    "enable_reduce_precision", "aoe_tune_mode", "aoe_config", "runtime_num_threads",
    "inter_op_parallel_num", "enable_graph_kernel", "graph_kernel_flags",
    "enable_auto_mixed_precision", "auto_tune_mode", "grad_for_scalar", "enable_compile_cache",
    "compile_cache_path", "load_compile_cache", "save_compile_cache", "disable_format_transform",
    "memory_optimize_level", "memory_offload", "ascend_config", "jit_syntax_level", "gpu_config",
    "jit_config", "max_device_memory", "support_binary", "debug_level", "exec_order",
    "enable_sparse", "enable_profiling", "profiling_options", "device_memory_capacity",
))


GRAPH_MODE, PYNATIVE_MODE = 0, 1  # MindSpore's mode values; minigrad always runs eagerly
# what get_context gives for MindSpore keys never set (the values minigrad behaves as)
_DEFAULTS = {"mode": PYNATIVE_MODE, "device_id": 0}
_ignored = {}  # MindSpore keys given to set_context: kept for get_context, otherwise unused
# the last num_threads given, and threadpoolctl's handle on the limits it set
_threads = {"num_threads": None, "limiter": None}


def set_context(device_target=None, num_threads=None, **kwargs):
    """Set where new tensors are created, ``"CPU"`` (NumPy) or ``"GPU"`` (CuPy), and how many
    threads the host's thread pools use.

    ``num_threads`` (a positive int) caps every BLAS and OpenMP thread pool of the process
    (OpenBLAS/MKL under NumPy's matmuls, the native kernels' OpenMP) through ``threadpoolctl``,
    the optional extra ``minigrad[threads]``: on a machine shared with other busy processes,
    BLAS threads that spin waiting for a core make training many times slower, and
    ``num_threads=1`` avoids it.

    MindSpore's other context keys (``mode``, ``device_id``, ...; see ``MINDSPORE_KEYS``) are
    accepted and ignored, so MindSpore scripts run unchanged.

    Raises:
        ValueError: for a key that is not a context key (as MindSpore; a misspelt key is not
            ignored silently), an unknown device or ``num_threads`` < 1; nothing is changed then.
        TypeError: for a ``num_threads`` that is not an int, or a ``device_target`` that is not
            a str.
        ImportError: for ``num_threads`` without threadpoolctl (naming the extra to install).
        RuntimeError: for ``"GPU"`` without CuPy or a GPU.
    """
    unknown = sorted(key for key in kwargs if key not in MINDSPORE_KEYS)
    if unknown:
        raise ValueError(f"set_context: {', '.join(repr(k) for k in unknown)} is not a context "
                         f"key; "
                         f"minigrad uses 'device_target' and 'num_threads' and accepts (and "
                         f"ignores) MindSpore's other keys: {sorted(MINDSPORE_KEYS)}")
    if num_threads is not None:
        num_threads = check_positive_int("num_threads", num_threads)
        limits = _threadpool_limits()
    if device_target is not None:
        config.device_target = backend.check_device(device_target, "device_target")
    if num_threads is not None:
        _threads["limiter"] = limits(limits=num_threads)
        _threads["num_threads"] = num_threads
    _ignored.update(kwargs)


def _threadpool_limits():
    try:
        from threadpoolctl import threadpool_limits  # an optional extra, loaded only when asked
    except ImportError:
        raise ImportError("set_context(num_threads=...) needs threadpoolctl: pip install "
                          "'minigrad[threads]' (or pip install threadpoolctl)") from None
    return threadpool_limits


def get_context(key):
    """Read a context value: ``"device_target"``; ``"num_threads"`` (None until set); a
    MindSpore key given to ``set_context``
    (its value, unused); ``"mode"`` (default ``PYNATIVE_MODE``: minigrad runs eagerly) and
    ``"device_id"`` (default 0) also when never set.

    Raises:
        TypeError: for a key that is not a str.
        ValueError: for a key that is not a context key, or a MindSpore key with no value.
    """
    check_type("key", key, str, owner="get_context")
    if key == "device_target":
        return config.device_target
    if key == "num_threads":
        return _threads["num_threads"]
    if key not in MINDSPORE_KEYS:
        raise ValueError(f"unknown context key {key!r}; minigrad has 'device_target', "
                         f"'num_threads' and MindSpore's "
                         f"other keys")
    if key in _ignored:
        return _ignored[key]
    if key in _DEFAULTS:
        return _DEFAULTS[key]
    raise ValueError(f"context key {key!r} has no value: set_context accepts it, and minigrad "
                     f"ignores it")
