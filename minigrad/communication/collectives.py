"""Collectives over the group of ``init()``: all-reduce, broadcast, all-gather, barrier.

Each one takes a NumPy or CuPy array and is called by every rank in the same order (MPI's rule:
a rank that skips a collective leaves the others waiting in it). Without ``init()`` (a group of
one) each returns its input's values.

On the host the arrays go to MPI as they are (float16 and bfloat16, which MPI has no type for,
are reduced in float32), except a row of a shared window (``all_reduce_buffer``), which the
ranks of one machine reduce in the memory they share (``shared_memory``). CuPy arrays are
reduced by NCCL after ``init("nccl")``, otherwise staged through host memory (copied to the
host, reduced by MPI, copied back).

``all_reduce_start`` begins an all-reduce without waiting for it (MPI's ``Iallreduce``); its
``wait()`` ends it. Every rank must start and wait in the same order, and a started all-reduce
matches only a started one on the other ranks (MPI does not match nonblocking collectives with
blocking ones).
"""
import numpy

from minigrad import _checks, backend
from minigrad import dtype as dtypes
from minigrad.communication import _nccl, management, shared_memory

REDUCE_OPS = ("sum", "mean", "max", "min", "prod")


def _check_op(op, caller):
    _checks.check_in("op", op, REDUCE_OPS, owner=caller)


def _check_array(array, caller):
    """``array`` is a NumPy or CuPy array (a 0-d one included); a NumPy scalar, a Tensor or a
    list is not (the in-place collectives could not write it)."""
    if not isinstance(array, numpy.ndarray) and not (
            backend.cupy is not None and isinstance(array, backend.cupy.ndarray)):
        _checks.check_type("array", array, (), expected="a NumPy or CuPy array", owner=caller)


def _check_in_place(array, caller):
    writable = array.flags.c_contiguous and (not isinstance(array, numpy.ndarray)
                                             or array.flags.writeable)
    _checks.check_relation("array", array, writable, f"C-contiguous and writeable ("
                           f"{caller.rstrip('_')}(array) works on a copy)", owner=caller)


def _mpi_op(group, op):
    return {"sum": group.MPI.SUM, "mean": group.MPI.SUM, "max": group.MPI.MAX,
            "min": group.MPI.MIN, "prod": group.MPI.PROD}[op]


def all_reduce_(array, op="sum"):
    """Reduce ``array`` across the group in place: every rank ends with the same result.

    ``op``: ``"sum"``, ``"mean"`` (the sum divided by the group size), ``"max"``, ``"min"`` or
    ``"prod"``. ``array`` must be C-contiguous and writeable (the fused gradient buckets are).
    An array from ``all_reduce_buffer`` is reduced through shared memory, without MPI messages.

    Raises:
        TypeError: if ``array`` is not an array, ``op`` not a str, or ``"mean"`` of an array
            that is not of a float dtype (float16, bfloat16, float32, float64).
        ValueError: for another ``op``, or an array that is not contiguous and writeable.
    """
    _check_op(op, "all_reduce_")
    _check_array(array, "all_reduce_")
    _check_in_place(array, "all_reduce_")
    if op == "mean" and not dtypes.is_float(array.dtype):
        _checks.check_relation("array", array, False, f"of a float dtype for op='mean', not "
                               f"{array.dtype}", error=TypeError, owner="all_reduce_")
    group = management.current()
    if group is None or group.size == 1 or array.size == 0:
        return array
    if backend.device_of(array) == "GPU":
        if group.backend == "nccl" and _nccl.supports(array):
            _nccl.all_reduce_(group, array, "sum" if op == "mean" else op)
        else:
            host = backend.as_numpy(array)
            array[...] = backend.cupy.asarray(_host_all_reduce(group, host, op))
    else:
        shared = shared_memory.rows_of(group, array)
        if shared is not None:
            shared.reduce(op, group.size if op == "mean" else 1)
            return array
        _host_all_reduce(group, array, op)
    if op == "mean":
        array /= group.size
    return array


class PendingAllReduce:
    """An all-reduce in flight (``all_reduce_start``). ``test()`` lets MPI progress it and says
    whether it is done; ``wait()`` ends it and returns the reduced array."""

    def __init__(self, array, request, divisor):
        self.array, self.request, self.divisor = array, request, divisor

    def test(self):
        """True once the all-reduce is complete (then ``wait()`` returns at once)."""
        return self.request is None or bool(self.request.Test())

    def wait(self):
        """Block until the all-reduce is complete; the reduced array (in place)."""
        if self.request is not None:
            self.request.Wait()
            self.request = None
            if self.divisor != 1:
                self.array /= self.divisor
        return self.array


def all_reduce_start(array, op="sum"):
    """Begin reducing ``array`` in place across the group without waiting: a
    ``PendingAllReduce`` whose ``wait()`` returns it reduced as ``all_reduce_`` would. The
    array must not be read or written until then. On the host a float32 or float64 array is
    reduced by MPI's ``Iallreduce``; any other array (float16, bool, CuPy) is reduced at once,
    and ``wait()`` returns it.

    Raises:
        TypeError: as ``all_reduce_``.
        ValueError: as ``all_reduce_``.
    """
    _check_op(op, "all_reduce_start")
    _check_array(array, "all_reduce_start")
    group = management.current()
    if (group is None or group.size == 1 or array.size == 0
            or not isinstance(array, numpy.ndarray)
            or array.dtype not in (numpy.float32, numpy.float64)):
        return PendingAllReduce(all_reduce_(array, op), None, 1)
    _check_in_place(array, "all_reduce_start")
    request = group.comm.Iallreduce(group.MPI.IN_PLACE, array, op=_mpi_op(group, op))
    return PendingAllReduce(array, request, group.size if op == "mean" else 1)


def _host_all_reduce(group, array, op):
    """MPI all-reduce of a contiguous host array in place, without the mean's division
    (float16 and bfloat16, which MPI has no type for, through a float32 copy; bool: "sum"/"max"
    is a logical or, "min"/"prod" an and)."""
    if dtypes.is_low_precision(array.dtype):
        wide = array.astype(numpy.float32)
        _host_all_reduce(group, wide, op)
        array[...] = wide
    elif array.dtype == numpy.bool_:
        op = "min" if op in ("min", "prod") else "max"
        group.comm.Allreduce(group.MPI.IN_PLACE, array.view(numpy.uint8), op=_mpi_op(group, op))
    else:
        group.comm.Allreduce(group.MPI.IN_PLACE, array, op=_mpi_op(group, op))
    return array


def all_reduce(array, op="sum"):
    """A new array: ``array`` reduced across the group with ``op`` (see ``all_reduce_``); the
    input is not changed. Any layout is accepted.

    Raises:
        TypeError: as ``all_reduce_``.  ValueError: for another ``op``.
    """
    _check_op(op, "all_reduce")
    _check_array(array, "all_reduce")
    xp = backend.get_array_module(array)
    return all_reduce_(xp.array(array, order="C", copy=True), op)


def broadcast_(array, root=0):
    """Overwrite ``array`` (C-contiguous, writeable) with rank ``root``'s values, in place.

    Raises:
        TypeError: if ``array`` is not an array, or ``root`` not an int.
        ValueError: for a ``root`` outside the group, or a non-contiguous array.
    """
    _check_array(array, "broadcast_")
    group = management.current()
    size = 1 if group is None else group.size
    root = _checks.check_int("root", root, low=0, high=size - 1, owner="broadcast")
    _checks.check_relation("array", array, array.flags.c_contiguous,
                           "C-contiguous (broadcast(array) works on a copy)", owner="broadcast_")
    if size == 1 or array.size == 0:
        return array
    if backend.device_of(array) == "GPU":
        if group.backend == "nccl" and _nccl.supports(array):
            _nccl.broadcast_(group, array, root)
        else:
            host = backend.as_numpy(array).copy()
            group.comm.Bcast(host.view(numpy.uint8), root=root)
            array[...] = backend.cupy.asarray(host)
        return array
    group.comm.Bcast(array.reshape(-1).view(numpy.uint8), root=root)
    return array


def broadcast(array, root=0):
    """A new array holding rank ``root``'s ``array`` on every rank (shapes and dtypes must
    agree across ranks). Raises as ``broadcast_``."""
    _check_array(array, "broadcast")
    xp = backend.get_array_module(array)
    return broadcast_(xp.array(array, order="C", copy=True), root)


def all_gather(array):
    """Every rank's ``array`` stacked along a new first axis: shape ``(group size,) + shape``
    (same shape and dtype on every rank), e.g. each rank's flags. Host arrays (a CuPy array is
    staged through the host and the result returned on the GPU).

    Raises:
        TypeError: if ``array`` is not an array.
    """
    _check_array(array, "all_gather")
    group = management.current()
    host = numpy.ascontiguousarray(backend.as_numpy(array))
    if group is None or group.size == 1:
        out = host[None].copy()
    else:
        out = numpy.empty((group.size,) + host.shape, host.dtype)
        group.comm.Allgather(host.reshape(-1).view(numpy.uint8), out.reshape(-1).view(numpy.uint8))
    return backend.to_device(out, backend.device_of(array))


def all_gather_object(obj):
    """A list of every rank's ``obj`` (any picklable value), in rank order."""
    group = management.current()
    return [obj] if group is None or group.size == 1 else group.comm.allgather(obj)


def broadcast_object(obj, root=0):
    """Rank ``root``'s ``obj`` (any picklable value) on every rank.

    Raises:
        TypeError / ValueError: for a ``root`` that is not a rank of the group.
    """
    group = management.current()
    _checks.check_int("root", root, low=0, high=(1 if group is None else group.size) - 1,
                      owner="broadcast_object")
    return obj if group is None or group.size == 1 else group.comm.bcast(obj, root=root)


def check_flag(flag, owner):
    """``flag`` (a bool, a NumPy bool, or the int 0 or 1) as a Python bool."""
    if _checks.is_int(flag) and flag in (0, 1):
        return bool(flag)
    return _checks.check_bool("flag", flag, owner=owner)


def any_rank(flag):
    """True on every rank if ``flag`` is true on any rank: one all-reduce (MAX) of one byte.
    How data-parallel training makes every rank skip an overflowing step together.

    Raises:
        TypeError: for a ``flag`` that is not a bool (or the int 0 or 1).
    """
    flag = check_flag(flag, "any_rank")
    group = management.current()
    if group is None or group.size == 1:
        return bool(flag)
    buffer = numpy.array([bool(flag)], numpy.uint8)
    group.comm.Allreduce(group.MPI.IN_PLACE, buffer, op=group.MPI.MAX)
    return bool(buffer[0])


def barrier():
    """Wait until every rank of the group has called ``barrier()``."""
    group = management.current()
    if group is not None and group.size > 1:
        group.comm.Barrier()
