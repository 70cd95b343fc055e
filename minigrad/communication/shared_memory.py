"""All-reduce through memory the ranks share, when every rank of the group runs on one machine.

``all_reduce_buffer(size, dtype)`` gives this rank its row of an MPI-3 shared window
(``MPI_Win_allocate_shared``): one ``(ranks, size)`` block that every rank of the machine maps.
``all_reduce_`` of such a row reduces it without sending a message::

    1. every rank has written its row                        (barrier)
    2. rank r owns chunk r of the columns: it combines the rows there in rank order,
       row 0 (op) row 1 (op) ... (op) row n-1, and writes the result into every row
    3. every row holds the whole result                      (barrier)

Each rank reads its chunk of every row and writes its chunk of every row: ``2 * size`` values
per rank and no copy through a message buffer. Open MPI's shared-memory transport copies each
message twice (into a bounce buffer and out of it), so its ``Allreduce`` of the 2.7 MB gradient
bucket of ``benchmarks/parallel.py`` costs about twice as long on 2 ranks. The result is
the same array on every rank bit for bit (every rank reads the values that one rank wrote), in
a fixed summation order.

Memory: ``MPI_Win_sync`` around each barrier orders the stores (the window is locked for
passive access once, when it is made). Open MPI backs a window with a file in its shared-memory
directory (``/dev/shm``): a bucket of B bytes takes ``ranks * B`` there. A window stays mapped
until the process exits, ``release()`` included: freeing one is collective, and the gradients a
reducer returned are views of it. Where no window can be mapped (``/dev/shm`` full or missing)
the rank that makes it raises a RuntimeError that names the way out (the context's
``all_reduce_shared_memory=False``), and the job ends: the other ranks wait inside the
collective allocation, so no rank can go on without it. Elsewhere (ranks on several machines,
CuPy arrays, other dtypes, or the context's ``all_reduce_shared_memory`` False)
``all_reduce_buffer`` returns a plain array, and ``all_reduce_`` sends it through MPI.
"""
import numpy

from minigrad import _checks
from minigrad.communication import management, parallel_context

DTYPES = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64))
# what all_reduce_buffer makes: NumPy's bool, int, uint and float dtypes
NUMERIC = tuple(dict.fromkeys(numpy.dtype(c) for c in "?bhilqBHILQefd"))
_UFUNCS = {"sum": numpy.add, "mean": numpy.add, "max": numpy.maximum, "min": numpy.minimum,
           "prod": numpy.multiply}
_ALIGN = 64  # bytes: chunk boundaries on cache lines, so no two ranks write one line


class SharedRows:
    """One window: ``rows`` (``(ranks, size)``, every rank's view of the same memory), this
    rank's ``row``, and ``chunk``, the columns this rank combines; made by every rank of
    ``group`` together."""

    def __init__(self, group, size, dtype):
        self.comm = comm = group.shared_comm
        line = max(1, _ALIGN // dtype.itemsize)        # values per cache line
        stride = -(-size // line) * line               # each row starts on a line of its own
        nbytes = stride * dtype.itemsize * group.size
        try:
            self.window = group.MPI.Win.Allocate_shared(nbytes if group.rank == 0 else 0,
                                                        dtype.itemsize, comm=comm)
        except group.MPI.Exception as error:  # the other ranks wait in the collective: stop
            raise RuntimeError(
                f"all_reduce_buffer: no shared window of {nbytes} bytes could be mapped "
                f"({error}); make room in Open MPI's shared-memory directory (/dev/shm), or "
                f"call set_auto_parallel_context(all_reduce_shared_memory=False) on every rank "
                f"to reduce through MPI's Allreduce") from error
        memory, _ = self.window.Shared_query(0)
        self.rows = numpy.ndarray((group.size, stride), dtype, buffer=memory)[:, :size]
        self.row = self.rows[group.rank]
        per = -(-size // group.size)                   # ceil(size / ranks) columns a rank,
        per = -(-per // line) * line                   # rounded up to whole cache lines
        self.chunk = slice(min(size, group.rank * per), min(size, (group.rank + 1) * per))
        self.window.Lock_all(group.MPI.MODE_NOCHECK)

    def synchronize(self):
        """Every rank's stores to the window are visible to every rank."""
        self.window.Sync()
        self.comm.Barrier()
        self.window.Sync()

    def reduce(self, op, divisor):
        """Steps 1-3 of the module docstring; ``divisor`` != 1 divides the result (a mean)."""
        self.synchronize()
        rows, chunk = self.rows, self.chunk
        if chunk.start < chunk.stop:
            out = rows[0, chunk]
            combine = _UFUNCS[op]
            with numpy.errstate(all="ignore"):  # inf + -inf on an overflowed step, as MPI: quiet
                for k in range(1, len(rows)):
                    combine(out, rows[k, chunk], out=out)
                if divisor != 1:
                    out /= divisor
            for k in range(1, len(rows)):
                rows[k, chunk] = out
        self.synchronize()


def _usable(group, shared):
    """Whether ``group`` (``management.current()``) can share memory: more than one rank, all on
    this machine, and ``shared`` (None: the context's ``all_reduce_shared_memory``)."""
    if shared is None:
        shared = parallel_context.get_auto_parallel_context("all_reduce_shared_memory")
    return group is not None and group.size > 1 and group.shared_comm is not None and shared


def all_reduce_buffer(size, dtype, shared=None):
    """A flat host array of ``size`` values of ``dtype`` (contents undefined) that
    ``all_reduce_`` reduces fastest: a row of a shared window when every rank runs on this
    machine, ``dtype`` is float32 or float64 and ``shared`` allows it (None, default: the
    context's ``all_reduce_shared_memory``), otherwise ``numpy.empty``. Collective when it makes
    a window: every rank calls it, in the same order, with the same arguments.

    Raises:
        TypeError: a ``size`` that is not an int, a ``dtype`` that is not a dtype, a scalar
            type or a dtype's name (``check_dtype``), a ``shared`` that is not None or a bool.
        ValueError: a negative ``size``; a ``dtype`` that is not NumPy's bool, int, uint or
            float; ranks that ask for different sizes or dtypes (a
            mismatched model).
        RuntimeError: no window could be mapped (``/dev/shm`` full or missing): the message
            says what to do; ``init``'s exception hook then ends the whole job.
    """
    owner = "all_reduce_buffer"
    size = _checks.check_non_negative_int("size", size, owner=owner)
    if shared is not None:
        shared = _checks.check_bool("shared", shared, owner=owner)
    kind = _checks.check_dtype("dtype", dtype, NUMERIC, owner=owner)
    group = management.current()
    if kind not in DTYPES or size < 1 or not _usable(group, shared):
        return numpy.empty(size, kind)
    asked = group.shared_comm.allgather((size, kind.str))
    if len(set(asked)) != 1:
        raise ValueError(f"all_reduce_buffer: the ranks ask for different buffers "
                         f"(size, dtype) {asked}: every rank must have the same model")
    rows = SharedRows(group, size, kind)
    group.shared_rows[rows.row.ctypes.data] = rows
    return rows.row


def rows_of(group, array):
    """The ``SharedRows`` whose row ``array`` is (the whole row, not a slice), or None."""
    shared = group.shared_rows.get(array.ctypes.data) if group.shared_rows else None
    if shared is None or array.shape != shared.row.shape or array.dtype != shared.row.dtype:
        return None
    return shared
