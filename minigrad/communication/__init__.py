"""Data-parallel training over MPI (``mpi4py``), with MindSpore's names.

::

    # mpirun -np 2 python train.py
    import minigrad
    from minigrad import communication
    communication.init()                       # join the MPI job
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    rank, size = communication.get_rank(), communication.get_group_size()

Then ``TrainOneStepCell``, ``TrainOneStepWithLossScaleCell``, ``Model.train``, ``GradScaler`` and
``LossScaleOptimizer`` all-reduce the gradients (``nn.DistributedGradReducer``: fused buckets,
one all-reduce each) and the overflow flag (``reduce_flag``), so every rank takes the same
step; an ``Optimizer`` made in that mode checks that every rank has the same model and takes
rank 0's parameter values (``synchronize_parameters``); ``NumpySlicesDataset`` reads one shard
per rank.

Layer 1 (see ``minigrad``'s docstring): the package imports nothing of minigrad but ``backend``,
``dtype`` and ``_checks`` (parameters are used through their attributes), so that the single
places where training reduces (``amp.float_status._reduce_overflow``, ``Optimizer``,
``nn.DistributedGradReducer``, THOR's factor reduction) can call it from their own layers.
"""
from minigrad.communication.management import (GlobalComm, WORLD_COMM_GROUP, init, release,
                                               is_initialized, get_rank, get_group_size,
                                               get_local_rank, get_local_rank_size)
from minigrad.communication import collectives
from minigrad.communication.collectives import (REDUCE_OPS, all_reduce, all_reduce_, broadcast,
                                                broadcast_, all_gather, all_gather_object,
                                                broadcast_object, any_rank, barrier,
                                                all_reduce_start, PendingAllReduce)
from minigrad.communication.parallel_context import (ParallelMode, set_auto_parallel_context,
                                                     get_auto_parallel_context,
                                                     reset_auto_parallel_context,
                                                     is_data_parallel, bucket_bytes,
                                                     shares_inversions)
from minigrad.communication.shared_memory import all_reduce_buffer
from minigrad.communication.parameters import (check_same_model, broadcast_parameters,
                                               synchronize_parameters)
from minigrad.communication.work import plan_shares, share_work


def reduce_flag(flag):
    """An overflow flag as every rank must decide on it: in data-parallel mode True when any
    rank's ``flag`` is true (one all-reduce of one byte), otherwise ``bool(flag)``.

    Raises:
        TypeError: for a ``flag`` that is not a bool (or the int 0 or 1).
    """
    flag = collectives.check_flag(flag, "reduce_flag")
    return any_rank(flag) if is_data_parallel() else flag


__all__ = ["GlobalComm", "WORLD_COMM_GROUP", "init", "release", "is_initialized", "get_rank",
           "get_group_size", "get_local_rank", "get_local_rank_size", "REDUCE_OPS", "all_reduce",
           "all_reduce_", "all_reduce_start", "PendingAllReduce", "broadcast", "broadcast_",
           "all_gather", "all_gather_object", "broadcast_object", "any_rank", "barrier",
           "ParallelMode", "set_auto_parallel_context", "get_auto_parallel_context",
           "reset_auto_parallel_context", "is_data_parallel", "bucket_bytes", "check_same_model",
           "broadcast_parameters", "synchronize_parameters", "reduce_flag", "shares_inversions",
           "plan_shares", "share_work", "all_reduce_buffer"]
