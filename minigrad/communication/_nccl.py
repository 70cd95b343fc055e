"""NCCL through CuPy (``init("nccl")``): all-reduce and broadcast of CuPy arrays on the GPU.

The NCCL communicator is made at the first collective on a CuPy array: rank 0 draws NCCL's
unique id and MPI broadcasts it, then every rank joins with its MPI rank. CuPy itself is the
module ``minigrad.backend`` imported; ``cupy.cuda.nccl`` is its binding of the NCCL library.
"""
import importlib

from minigrad import backend

_OPS = {"sum": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN", "prod": "NCCL_PROD"}
_TYPES = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
          "int32": "NCCL_INT32", "int64": "NCCL_INT64", "uint8": "NCCL_UINT8",
          "int8": "NCCL_INT8"}


def _module():
    if backend.cupy is None:
        return None
    try:
        nccl = importlib.import_module("cupy.cuda.nccl")
    except ImportError:
        return None
    return nccl if getattr(nccl, "available", False) else None


def check_available():
    """Raise RuntimeError (with the reason) unless CuPy, a GPU and CuPy's NCCL are present."""
    if backend.cupy is None:
        raise RuntimeError(f"init('nccl') needs CuPy and a CUDA GPU: {backend.CUPY_IMPORT_ERROR}")
    if _module() is None:
        raise RuntimeError("init('nccl') needs CuPy built with NCCL (cupy.cuda.nccl.available is "
                           "False); init('mpi') reduces CuPy arrays through host memory instead")


def _communicator(group):
    if group.nccl is None:
        nccl = _module()
        uid = nccl.get_unique_id() if group.rank == 0 else None
        uid = group.comm.bcast(uid, root=0)
        group.nccl = (nccl, nccl.NcclCommunicator(group.size, uid, group.rank))
    return group.nccl


def all_reduce_(group, array, op):
    """Reduce the contiguous CuPy ``array`` in place across the group with ``op``."""
    nccl, comm = _communicator(group)
    stream = backend.cupy.cuda.get_current_stream().ptr
    kind = getattr(nccl, _TYPES[array.dtype.name])
    reduce_op = getattr(nccl, _OPS[op])
    comm.allReduce(array.data.ptr, array.data.ptr, array.size, kind, reduce_op, stream)


def broadcast_(group, array, root):
    """Overwrite the contiguous CuPy ``array`` with rank ``root``'s, in place."""
    nccl, comm = _communicator(group)
    stream = backend.cupy.cuda.get_current_stream().ptr
    comm.bcast(array.data.ptr, array.size, getattr(nccl, _TYPES[array.dtype.name]), root, stream)


def supports(array):
    """Whether NCCL reduces this dtype."""
    return array.dtype.name in _TYPES
