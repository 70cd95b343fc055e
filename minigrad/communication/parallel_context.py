"""The auto-parallel context (MindSpore's ``set_auto_parallel_context``): whether training is
data parallel, and how its gradients are reduced.

::

    from minigrad import communication
    communication.init()
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)

In ``"data_parallel"`` mode the training steps (``TrainOneStepCell``,
``TrainOneStepWithLossScaleCell``, ``Model.train``, ``GradScaler``, ``LossScaleOptimizer``)
all-reduce their gradients through ``nn.DistributedGradReducer`` and every overflow decision
through ``any_rank``, and ``NumpySlicesDataset`` gives each rank its shard.
"""
from minigrad import _checks
from minigrad.communication import management

STAND_ALONE, DATA_PARALLEL = "stand_alone", "data_parallel"
MB = 2 ** 20


class ParallelMode:
    """MindSpore's parallel mode names; minigrad runs ``STAND_ALONE`` and ``DATA_PARALLEL``."""
    STAND_ALONE = STAND_ALONE
    DATA_PARALLEL = DATA_PARALLEL
    HYBRID_PARALLEL = "hybrid_parallel"
    SEMI_AUTO_PARALLEL = "semi_auto_parallel"
    AUTO_PARALLEL = "auto_parallel"
    MODE_LIST = (STAND_ALONE, DATA_PARALLEL, HYBRID_PARALLEL, SEMI_AUTO_PARALLEL, AUTO_PARALLEL)


# parallel_mode, gradients_mean, device_num (0: the group size), global_rank, parameter_broadcast
# (minigrad's default is True, MindSpore's False: ranks start identical whatever their seeds),
# gradient_fp32_sync (fp16 gradients are always reduced in fp32: True is the only value), and
# comm_fusion's all-reduce bucket size in MB (MindSpore's "size" fusion mode), and minigrad's
# distributed_inversion (THOR's factor inversions shared out across the ranks, as KAISA does)
# and all_reduce_shared_memory (gradient buckets reduced in memory the ranks share, when they
# all run on one machine)
_DEFAULTS = {"parallel_mode": STAND_ALONE, "gradients_mean": False, "device_num": 0,
             "global_rank": 0, "parameter_broadcast": True, "gradient_fp32_sync": True,
             "comm_fusion": {"allreduce": {"mode": "size", "config": 25}},
             "distributed_inversion": False, "all_reduce_shared_memory": True}
_context = dict(_DEFAULTS)
# parallel_mode == "data_parallel", kept beside the context for the checks in every training
# step (``amp.float_status._reduce_overflow``), which read it without a call
data_parallel = False
_OWNER = "set_auto_parallel_context"


def _checked(key, value):
    if key == "parallel_mode":
        if value not in ParallelMode.MODE_LIST:
            raise ValueError(f"set_auto_parallel_context: 'parallel_mode' must be one of "
                             f"{ParallelMode.MODE_LIST}, got {value!r}")
        if value not in (STAND_ALONE, DATA_PARALLEL):
            raise ValueError(f"set_auto_parallel_context: parallel_mode {value!r} is not "
                             f"implemented; minigrad runs {STAND_ALONE!r} and {DATA_PARALLEL!r}")
    elif key in ("gradients_mean", "parameter_broadcast", "gradient_fp32_sync",
                 "distributed_inversion", "all_reduce_shared_memory"):
        value = _checks.check_bool(key, value, owner=_OWNER)
        if key == "gradient_fp32_sync" and not value:
            raise ValueError("set_auto_parallel_context: 'gradient_fp32_sync' must be True: "
                             "minigrad reduces fp16 gradients in fp32, so the sum cannot overflow")
    elif key in ("device_num", "global_rank"):
        value = _checks.check_non_negative_int(key, value, owner=_OWNER)
    elif key == "comm_fusion":
        value = _checked_fusion(value)
    else:
        raise ValueError(f"set_auto_parallel_context: {key!r} is not a key minigrad uses; "
                         f"expected one of {sorted(_DEFAULTS)}")
    return value


def _checked_fusion(value):
    config = value.get("allreduce") if isinstance(value, dict) else None
    size = config.get("config") if isinstance(config, dict) else None
    if (not isinstance(config, dict) or config.get("mode") != "size"
            or not _checks.is_real(size) or not size > 0):
        raise ValueError(f"set_auto_parallel_context: 'comm_fusion' must be "
                         f"{{'allreduce': {{'mode': 'size', 'config': MB > 0}}}} (buckets of that "
                         f"many megabytes), got {value!r}")
    return {"allreduce": {"mode": "size", "config": size}}


def set_auto_parallel_context(**kwargs):
    """Set keys of the parallel context; nothing changes unless every key and value is valid.

    Keys: ``parallel_mode`` (``"stand_alone"``, default, or ``"data_parallel"``),
    ``gradients_mean`` (True: gradients are averaged over the ranks; False, default: summed),
    ``device_num`` (0, default: the group size; otherwise it must equal it),
    ``global_rank`` (accepted, informational), ``parameter_broadcast`` (default True: the
    gradient reducer broadcasts rank 0's parameters when it is made), ``gradient_fp32_sync``
    (True only), ``comm_fusion={"allreduce": {"mode": "size", "config": MB}}`` (the size of
    one fused all-reduce bucket, default 25 MB) and minigrad's ``distributed_inversion``
    (default False: every rank inverts every THOR factor; True: each rank inverts a share of
    the layers, balanced by cost, and every rank receives the others' inverses, as KAISA
    distributes them; see ``shares_inversions``) and ``all_reduce_shared_memory`` (default
    True: when every rank runs on one machine, the gradient buckets are rows of an MPI shared
    window and are reduced in that memory, without MPI messages, ranks x bucket bytes of
    ``/dev/shm``; False: MPI's ``Allreduce``; read when a ``DistributedGradReducer`` is made,
    and the same on every rank).

    Raises:
        ValueError: for an unknown key, an unknown or unimplemented mode, or a value out of
            range.
        TypeError: for a value of the wrong type (a non-bool flag, a non-int count).
    """
    global data_parallel
    checked = {key: _checked(key, value) for key, value in kwargs.items()}
    _context.update(checked)
    data_parallel = _context["parallel_mode"] == DATA_PARALLEL


def get_auto_parallel_context(key):
    """The value of one context key (see ``set_auto_parallel_context``).

    Raises:
        TypeError: for a key that is not a str.
        ValueError: for an unknown key.
    """
    _checks.check_type("key", key, str, owner="get_auto_parallel_context")
    if key not in _DEFAULTS:
        raise ValueError(f"get_auto_parallel_context: unknown key {key!r}; expected one of "
                         f"{sorted(_DEFAULTS)}")
    return _context[key]


def reset_auto_parallel_context():
    """Back to the defaults: stand-alone training."""
    global data_parallel
    _context.clear()
    _context.update(_DEFAULTS)
    data_parallel = False


def is_data_parallel():
    """True in ``"data_parallel"`` mode."""
    return data_parallel


def shares_inversions():
    """True when THOR's inversions are shared out across the ranks: data-parallel mode, the
    context's ``distributed_inversion``, and a group of more than one."""
    return (is_data_parallel() and _context["distributed_inversion"]
            and management.get_group_size() > 1)


def bucket_bytes():
    """The fused all-reduce bucket size of ``comm_fusion``, in bytes."""
    return int(_context["comm_fusion"]["allreduce"]["config"] * MB)
