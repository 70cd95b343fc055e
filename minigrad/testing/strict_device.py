"""A strict stand-in for CuPy on the CPU: device arrays that refuse every implicit host
conversion, as CuPy's do, and count every explicit read of the device from the host.

On a GPU each read of a device value from the host (``x.item()``, ``float(x)``, ``bool(x)``,
``x.get()``) waits for every kernel queued before it: a training step that reads the device in
its forward or backward pass stalls there. ``strict_device()`` makes those reads visible on any
machine::

    with strict_device() as reads:
        minigrad.set_context(device_target="GPU")
        ...                      # build and train as on a GPU
        print(reads.count, reads.sites)

Inside the block ``minigrad.backend`` reports a GPU whose arrays are ``StrictArray`` (NumPy
arrays underneath) and whose array module is a ``StrictCupy``: ``get_array_module`` returns it,
so every branch written for CuPy runs, not the NumPy shortcuts. It offers only the names CuPy 14
has (``minigrad.testing._cupy_names``) and behaves as CuPy where CuPy differs from NumPy:

* refused with TypeError: ``numpy.asarray(x)`` (CuPy's own error), and the conversions CuPy
  performs silently by waiting for the device: ``bool(x)``, ``float(x)``, ``int(x)``,
  ``operator.index(x)``, ``x.tolist()``, ``x.tobytes()``, ``format(x, spec)``; a NumPy array as
  an operand of a device operation (CuPy: "Unsupported type"); a NumPy function CuPy lacks;
* refused with ValueError: a non-scalar NumPy array assigned to a basic slice (CuPy's error);
* counted as host reads (``reads.count``, where from in ``reads.sites``): ``x.item()``,
  ``x.get()``, ``cupy.asnumpy(x)``, and what CuPy synchronises for: boolean-mask indexing,
  ``nonzero``, ``argwhere``, ``flatnonzero``, ``unique``, ``bincount``, one-argument ``where``;
* counted as uploads (``reads.uploads``): host arrays copied to the device (``cupy.asarray`` of
  a NumPy array, host index arrays);
* reductions and single-element indexing give 0-d device arrays, never host scalars;
* integer-array indexing wraps out-of-bounds indices around, where NumPy raises.

``RawModule``/``RawKernel`` run minigrad's float-status kernels (``kernels/float_status.cu``)
through the host build of the same source (``minigrad._native``), or, without one, through
``minigrad.amp._status_numpy`` on views of the memory the kernel's table names.
"""
import contextlib
import ctypes
import traceback

import numpy

from minigrad import backend
from minigrad.testing import _cupy_names

_SYNCING = frozenset(("nonzero", "argwhere", "flatnonzero", "unique", "bincount", "compress",
                      "extract"))
_HERE = __file__


class HostReads:
    """What a ``strict_device()`` block read from the device and copied to it.

    Attributes:
        sites: one ``"file:line function (what)"`` per host read, in order.
        upload_sites: the same for each host-to-device copy.
    """

    def __init__(self):
        self.sites = []
        self.upload_sites = []

    @property
    def count(self):
        """The number of host reads so far."""
        return len(self.sites)

    @property
    def uploads(self):
        """The number of host-to-device copies so far."""
        return len(self.upload_sites)

    def reset(self):
        """Forget the reads and uploads counted so far."""
        self.sites.clear()
        self.upload_sites.clear()

    def read(self, what):
        self.sites.append(f"{_caller()} ({what})")

    def upload(self, what):
        self.upload_sites.append(f"{_caller()} ({what})")


def _caller():
    """The innermost frame outside this module, NumPy and ``minigrad.backend`` (whose
    ``to_device``, ``as_numpy`` and ``read_scalar`` every read passes through), as
    ``file:line function``."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if frame.filename not in (_HERE, backend.__file__) and "numpy" not in frame.filename:
            return f"{frame.filename.rsplit('/minigrad/', 1)[-1]}:{frame.lineno} {frame.name}"
    return "?"


class _Memory:
    """``x.data`` of a ``StrictArray``: its address (``ptr``) and device, as CuPy's
    ``MemoryPointer``."""

    def __init__(self, array):
        self.ptr = array.__array_interface__["data"][0] if array.size else 0
        self.device = _DEVICE


class _Device:
    """``cupy.cuda.Device``: device 0, usable as a context manager."""

    def __init__(self, device=0):
        self.id = int(device)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


_DEVICE = _Device(0)


class _Flags:
    """CuPy's array flags: only these three (no ``aligned``, no ``writeable``)."""

    def __init__(self, array):
        self.c_contiguous = array.flags.c_contiguous
        self.f_contiguous = array.flags.f_contiguous
        self.owndata = array.flags.owndata

    def __getitem__(self, name):
        return getattr(self, name.lower())


def _refuse(what):
    raise TypeError(f"{what} reads a device array on the host implicitly (CuPy waits for the "
                    f"device there): read it explicitly with .item() or backend.as_numpy()")


class StrictArray:
    """A device array of the strict device: a NumPy array inside, CuPy's behaviour outside."""

    __slots__ = ("_a", "_reads")
    __array_priority__ = 10000

    def __init__(self, array, reads):
        self._a = array
        self._reads = reads

    # ---- attributes CuPy has ---------------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: _Flags(self._a))
    data = property(lambda self: _Memory(self._a))
    device = property(lambda self: _DEVICE)
    T = property(lambda self: self._wrap(self._a.T))
    mT = property(lambda self: self._wrap(self._a.mT))

    @property
    def base(self):
        return None if self._a.base is None else self._wrap(self._a.base)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data.ptr, False),
                "version": 3, "strides": None if self._a.flags.c_contiguous else self.strides}

    def _wrap(self, result):
        return _wrap(result, self._reads)

    # ---- explicit host reads ---------------------------------------------------------------------
    def item(self):
        if self.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        self._reads.read("item")
        return self._a.item()

    def get(self, stream=None, order="C", out=None, blocking=True):
        self._reads.read("get")
        if out is not None:
            out[...] = self._a
            return out
        return numpy.array(self._a, order=order)

    def set(self, array, stream=None):
        self._reads.upload("set")
        self._a[...] = array

    # ---- implicit conversions: refused -----------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` "
                        "to construct a NumPy array explicitly.")

    def __bool__(self):
        _refuse("bool(x)")

    def __float__(self):
        _refuse("float(x)")

    def __int__(self):
        _refuse("int(x)")

    def __complex__(self):
        _refuse("complex(x)")

    def __index__(self):
        _refuse("operator.index(x)")

    def tolist(self):
        _refuse("x.tolist()")

    def tobytes(self, order="C"):
        _refuse("x.tobytes()")

    def __format__(self, spec):
        _refuse("format(x)")

    def __repr__(self):  # no values: printing one is a read, and pytest prints failing operands
        return f"StrictArray(shape={self.shape}, dtype={self.dtype})"

    __str__ = __repr__

    def __reduce__(self):
        _refuse("pickling x")

    def __copy__(self):  # CuPy copies on the device: no read
        return self._wrap(self._a.copy())

    def __deepcopy__(self, memo):
        return self._wrap(self._a.copy())

    # ---- containers ------------------------------------------------------------------------------
    def __len__(self):
        return len(self._a)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._a)))

    def __getitem__(self, index):
        return self._wrap(self._a[_wrap_around(_index(index, self._reads), self._a.shape)])

    def __setitem__(self, index, value):
        index = _index(index, self._reads)
        if isinstance(value, numpy.ndarray) and value.ndim and not _advanced(index):
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        if isinstance(value, numpy.ndarray) and value.ndim:
            self._reads.upload("assigned array")
        elif not isinstance(value, numpy.ndarray):
            value = _unwrap(value, self._reads)
        self._a[index] = value

    # ---- NumPy's protocols: what CuPy's ndarray does with them -----------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if not hasattr(StrictCupy, ufunc.__name__) and ufunc.__name__ not in _cupy_names.TOP:
            return NotImplemented
        call = ufunc if method == "__call__" else getattr(ufunc, method)
        if "out" in kwargs:
            kwargs["out"] = tuple(_unwrap(o, self._reads) for o in kwargs["out"])
        return self._wrap(call(*_unwrap(inputs, self._reads), **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        if func.__module__ == "numpy.linalg":
            names = _cupy_names.LINALG
        elif func.__module__ in ("numpy", "numpy.lib.stride_tricks") or \
                func.__module__.startswith("numpy._core"):
            names = _cupy_names.TOP
        else:
            return NotImplemented
        if func.__name__ not in names:
            return NotImplemented
        return _call(func, self._reads, args, kwargs)

    # ---- DLPack: a CUDA device, as CuPy's arrays say ---------------------------------------------
    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__()

    # ---- every other ndarray method CuPy has -----------------------------------------------------
    def __getattr__(self, name):
        if name not in _cupy_names.NDARRAY:
            raise AttributeError(f"cupy.ndarray has no attribute {name!r}")
        method = getattr(self._a, name)
        reads = self._reads

        def call(*args, **kwargs):
            if name in _SYNCING:
                reads.read(name)
            return _wrap(method(*_unwrap(args, reads), **_unwrap(kwargs, reads)), reads)
        return call


def _binary(ufunc, reflected=False, inplace=False):
    def op(self, other):
        if not isinstance(other, (StrictArray, numpy.ndarray, numpy.generic, int, float, complex,
                                  bool)):
            return NotImplemented
        a, b = self._a, _unwrap(other, self._reads)
        if inplace:
            ufunc(a, b, out=a)
            return self
        return self._wrap(ufunc(b, a) if reflected else ufunc(a, b))
    return op


for _name, _ufunc in (("add", numpy.add), ("sub", numpy.subtract), ("mul", numpy.multiply),
                      ("truediv", numpy.true_divide), ("floordiv", numpy.floor_divide),
                      ("mod", numpy.remainder), ("pow", numpy.power), ("matmul", numpy.matmul),
                      ("and", numpy.bitwise_and), ("or", numpy.bitwise_or),
                      ("xor", numpy.bitwise_xor), ("lshift", numpy.left_shift),
                      ("rshift", numpy.right_shift)):
    setattr(StrictArray, f"__{_name}__", _binary(_ufunc))
    setattr(StrictArray, f"__r{_name}__", _binary(_ufunc, reflected=True))
    setattr(StrictArray, f"__i{_name}__", _binary(_ufunc, inplace=True))
for _name, _ufunc in (("eq", numpy.equal), ("ne", numpy.not_equal), ("lt", numpy.less),
                      ("le", numpy.less_equal), ("gt", numpy.greater),
                      ("ge", numpy.greater_equal)):
    setattr(StrictArray, f"__{_name}__", _binary(_ufunc))
for _name, _ufunc in (("neg", numpy.negative), ("pos", numpy.positive), ("abs", numpy.absolute),
                      ("invert", numpy.invert)):
    setattr(StrictArray, f"__{_name}__", lambda self, _f=_ufunc: self._wrap(_f(self._a)))
StrictArray.__hash__ = None


def _wrap(result, reads):
    """NumPy results as device arrays: arrays and scalars (CuPy gives 0-d arrays), in tuples and
    lists too."""
    if isinstance(result, numpy.ndarray):
        return StrictArray(result, reads)
    if isinstance(result, numpy.generic):
        return StrictArray(numpy.asarray(result), reads)
    if isinstance(result, (tuple, list)):
        return type(result)(_wrap(r, reads) for r in result)
    return result


def _unwrap(value, reads):
    """Device arrays as their NumPy arrays, inside tuples, lists and dicts too; a NumPy array is
    a TypeError, as it is in a CuPy operation."""
    if isinstance(value, StrictArray):
        return value._a
    if isinstance(value, numpy.ndarray):
        raise TypeError(f"Unsupported type {type(value)}: a host array in a device operation "
                        f"(move it with cupy.asarray first)")
    if isinstance(value, (tuple, list)):
        return type(value)(_unwrap(v, reads) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v, reads) for k, v in value.items()}
    return value


def _advanced(index):
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, (numpy.ndarray, list)) for p in parts)


def _index(index, reads):
    """An index for the NumPy array inside: device index arrays unwrapped, host ones counted as
    uploads, boolean masks counted as reads (CuPy counts the mask's True values on the host)."""
    parts = index if isinstance(index, tuple) else (index,)
    out = []
    for p in parts:
        if isinstance(p, StrictArray):
            p = p._a
        elif isinstance(p, (numpy.ndarray, list)):
            reads.upload("index array")
            p = numpy.asarray(p)
        if isinstance(p, numpy.ndarray) and p.dtype == numpy.bool_:
            reads.read("boolean mask")
        out.append(p)
    return tuple(out) if isinstance(index, tuple) else out[0]


def _wrap_around(index, shape):
    """CuPy's integer-array indexing wraps out-of-bounds indices around (NumPy raises): the
    same for an index whose parts are integer arrays, integers and slices, each on its own
    axis."""
    parts = index if isinstance(index, tuple) else (index,)
    if len(parts) > len(shape) or not any(
            isinstance(p, numpy.ndarray) and p.dtype.kind in "iu" for p in parts) or \
            not all(isinstance(p, (numpy.ndarray, slice, int, numpy.integer)) for p in parts):
        return index
    out = tuple(numpy.mod(p, n) if isinstance(p, numpy.ndarray) and p.dtype.kind in "iu" and n
                else p for p, n in zip(parts, shape))
    return out if isinstance(index, tuple) else out[0]


def _call(func, reads, args, kwargs):
    if func.__name__ in _SYNCING or (func.__name__ == "where" and len(args) + len(kwargs) == 1):
        reads.read(func.__name__)
    return _wrap(func(*_unwrap(args, reads), **_unwrap(kwargs, reads)), reads)


class _Namespace:
    """A CuPy (sub)module: ``numpy_module``'s functions named in ``names``, on device arrays."""

    def __init__(self, reads, numpy_module, names, label):
        self._reads, self._numpy, self._names, self.__name__ = reads, numpy_module, names, label

    def __getattr__(self, name):
        if name not in self._names:
            raise AttributeError(f"{self.__name__} has no attribute {name!r} (CuPy 14 has none)")
        value = getattr(self._numpy, name)
        if isinstance(value, numpy.ufunc):
            return _Ufunc(value, self._reads)
        if callable(value) and not isinstance(value, type):
            reads = self._reads
            return lambda *args, **kwargs: _call(value, reads, args, kwargs)
        return value


class _Ufunc:
    """A ufunc on device arrays, with its ``at``, ``reduce`` and ``outer`` methods."""

    def __init__(self, ufunc, reads):
        self._ufunc, self._reads = ufunc, reads
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        return _call(self._ufunc, self._reads, args, kwargs)

    def __getattr__(self, method):
        bound = getattr(self._ufunc, method)
        if not callable(bound):
            return bound
        return lambda *args, **kwargs: _call(bound, self._reads, args, kwargs)


class _Generator:
    """``cupy.random.Generator`` over NumPy's: its methods give device arrays."""

    def __init__(self, seed, reads):
        self._gen, self._reads = numpy.random.default_rng(seed), reads

    def __getattr__(self, name):
        if name not in _cupy_names.GENERATOR:
            raise AttributeError(f"cupy.random.Generator has no attribute {name!r}")
        method = getattr(self._gen, name)
        return lambda *args, **kwargs: _wrap(numpy.asarray(method(*args, **kwargs)), self._reads)


class _Event:
    def record(self, stream=None):
        pass

    def synchronize(self):
        pass

    done = True


class _Stream:
    ptr = 0

    def synchronize(self):
        pass


class _Cuda:
    """``cupy.cuda``: device 0, the null stream, events, pinned host memory."""

    Device = _Device
    Event = _Event
    Stream = _Stream

    class runtime:
        @staticmethod
        def getDeviceCount():
            return 1

    @staticmethod
    def get_current_stream():
        return _Stream()

    @staticmethod
    def alloc_pinned_memory(size):
        return bytearray(size)  # a buffer numpy.frombuffer reads, as CuPy's PinnedMemoryPointer


class _Kernel:
    """A float-status kernel of ``kernels/float_status.cu`` run on the host: ``kernel(grid,
    block, args)`` with CuPy's ``RawKernel`` arguments."""

    def __init__(self, name):
        self.name = name

    def __call__(self, grid, block, args, **kwargs):
        from minigrad import _native  # the kernel loader, only where a kernel runs
        table, n_arrays, n_chunks, chunk, inv, status = args
        lib = _native.host_library()
        if lib is not None:
            getattr(lib, "launch_" + self.name)(int(grid[0]), table.data.ptr, int(n_arrays),
                                                int(n_chunks), int(chunk), float(inv),
                                                status.data.ptr)
        else:
            _emulate(self.name, table._a, int(n_arrays), float(inv), status._a)


def _emulate(name, table, n_arrays, inv, status):
    from minigrad.amp import _status_numpy
    dtype = numpy.float16 if "fp16" in name else numpy.float32
    rows = [(int(table[3 * i]), int(table[3 * i + 1])) for i in range(n_arrays)]
    arrays = [_at(address, n, dtype) for address, n in rows]
    if name.endswith("_to_fp32"):
        outputs = [_at(int(table[3 * n_arrays + i]), n, numpy.float32)
                   for i, (_, n) in enumerate(rows)]
        for x, out in zip(arrays, outputs):
            out[...] = x
        arrays = outputs
    _status_numpy.check(status, arrays, inv if "unscale" in name else None)


def _at(address, n, dtype):
    itemsize = numpy.dtype(dtype).itemsize
    buffer = (ctypes.c_char * (n * itemsize)).from_address(address)
    return numpy.frombuffer(buffer, dtype, n)


class _RawModule:
    def __init__(self, code=None, options=(), **kwargs):
        self.code = code

    def get_function(self, name):
        return _Kernel(name)


class StrictCupy(_Namespace):
    """The array module of the strict device (``get_array_module`` returns it)."""

    ndarray = StrictArray
    cuda = _Cuda

    def __init__(self, reads):
        super().__init__(reads, numpy, _cupy_names.TOP, "strict_cupy")
        self.linalg = _Namespace(reads, numpy.linalg, _cupy_names.LINALG, "strict_cupy.linalg")
        self.random = _Namespace(reads, numpy.random, frozenset(), "strict_cupy.random")
        self.random.default_rng = lambda seed=None: _Generator(seed, reads)
        self.lib = _Namespace(reads, numpy.lib, frozenset(("stride_tricks",)), "strict_cupy.lib")
        self.lib.stride_tricks = _Namespace(reads, numpy.lib.stride_tricks,
                                            frozenset(("as_strided", "sliding_window_view")),
                                            "strict_cupy.lib.stride_tricks")
        self.RawModule = _RawModule

    def asarray(self, a, dtype=None, order=None, *, blocking=False):
        if isinstance(a, StrictArray):
            return a if dtype is None else a.astype(dtype, copy=False)
        self._reads.upload("asarray")
        return StrictArray(numpy.array(a, dtype=dtype, order=order or "K", copy=True),
                           self._reads)

    def array(self, obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *,
              blocking=False):
        if isinstance(obj, StrictArray):
            return StrictArray(numpy.array(obj._a, dtype=dtype, copy=copy, order=order,
                                           ndmin=ndmin), self._reads)
        self._reads.upload("array")
        return StrictArray(numpy.array(obj, dtype=dtype, order=order, ndmin=ndmin), self._reads)

    def asnumpy(self, a, stream=None, order="C", out=None, *, blocking=True):
        if isinstance(a, StrictArray):
            return a.get(order=order, out=out)
        return numpy.asarray(a, order=order)

    def get_array_module(self, *args):
        return self if any(isinstance(a, StrictArray) for a in args) else numpy

    def from_dlpack(self, obj, *, device=None, copy=None):
        if isinstance(obj, StrictArray):
            return obj
        if obj.__dlpack_device__()[0] != 2:
            raise BufferError("cupy.from_dlpack takes a CUDA array (this one is on the host)")
        return StrictArray(numpy.from_dlpack(obj), self._reads)


@contextlib.contextmanager
def strict_device():
    """Make the strict device minigrad's GPU for the block; yield its ``HostReads``.

    ``minigrad.backend`` then reports a GPU (``CUDA_AVAILABLE``) whose array module is a
    ``StrictCupy``. Everything is restored on exit, a real CuPy included (the CUDA kernels that
    ``minigrad._native`` and ``minigrad.amp._status_launch`` cache for it are set aside meanwhile).
    """
    from minigrad import _native, random
    from minigrad.amp import _status_launch
    reads = HostReads()
    saved = (backend.cupy, backend.CUDA_AVAILABLE, backend.CUPY_IMPORT_ERROR)
    caches = (_native._cuda_modules, _native._cuda_functions, _status_launch._device_tables)
    random._generators.pop("strict_cupy", None)
    kept = [dict(cache) for cache in caches]
    for cache in caches:
        cache.clear()
    backend.cupy, backend.CUDA_AVAILABLE, backend.CUPY_IMPORT_ERROR = StrictCupy(reads), True, None
    try:
        yield reads
    finally:
        backend.clear_deferred_checks()  # they hold arrays of the stand-in
        backend.cupy, backend.CUDA_AVAILABLE, backend.CUPY_IMPORT_ERROR = saved
        for cache, old in zip(caches, kept):
            cache.clear()
            cache.update(old)
        random._generators.pop("strict_cupy", None)


def is_strict(array):
    """Whether ``array`` is a device array of the strict device."""
    return isinstance(array, StrictArray)

