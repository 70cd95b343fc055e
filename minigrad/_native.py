"""The one place that finds, compiles and loads minigrad's native kernels (``kernels/``).

The same CUDA source runs on two targets:

* GPU: compiled by CuPy's ``RawModule`` (NVRTC) on first use with ``CUDA_OPTIONS``, cached per
  process here and on disk by CuPy. Every source in ``CUDA_SOURCES`` also compiles through NVRTC
  in CI, without a GPU, for the architectures the tests name.
* CPU: compiled by a C++ compiler through ``kernels/host_shim.h`` into a shared library that
  ``ctypes`` calls. It is built once per source/flags/machine, cached under
  ``$MINIGRAD_CACHE_DIR`` (default ``$XDG_CACHE_HOME/minigrad`` or ``~/.cache/minigrad``) and
  moved into place atomically, so concurrent processes never load a half-written file. With no
  compiler (or ``MINIGRAD_NATIVE=0``) ``host_library()`` returns None and callers use NumPy.
  The same library also holds the host-only fp16<->fp32 and bf16<->fp32 conversions
  (``kernels/convert_host.cpp``, used by ``minigrad._fp16_host``, which also holds the fused fp16
  passes of the ops) and the fused optimizer steps (``kernels/optim_host.cpp``, used by
  ``minigrad.optim.slots``): every ``*.cpp`` of ``HOST_SOURCES`` is compiled into it.

The process loads it once, into one ``HostBuild`` record (``loaded()``) that every caller reads;
building it prints one line to stderr, and so does falling back to NumPy. Once loaded, the record
is also the module attribute ``host_build``: the ops and the training step read it as
``_native.host_build or _native.loaded()``, an attribute read where a call would cost more.

The sources ship as package data of ``minigrad.kernels`` (mapped from the top-level
``kernels/`` folder); a source checkout reads that folder directly.
"""
import contextlib
import ctypes
import hashlib
import importlib.resources
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy

from minigrad import _host_threads, backend
from minigrad import dtype as dtypes

STATUS_SOURCE = "float_status.cu"
BENCH_SOURCE = "bench.cu"
FP8_SOURCE = "fp8_cast.cu"
HOST_SOURCES = ("host_shim.h", "host_threads.h", "windows.h", "threads_host.cpp", STATUS_SOURCE,
                "float_status_host.cpp", "convert_host.cpp", "norm_host.cpp", "image_host.cpp",
                "pool_host.cpp", "conv_host.cpp", "optim_host.cpp", FP8_SOURCE, "fp8_cast_host.cpp")
STATUS_KERNELS = ("check_fp16", "check_fp32", "check_unscale_fp16", "check_unscale_fp32",
                  "check_unscale_fp16_to_fp32")
# Every CUDA source of kernels/ and the kernels it defines; tests/kernels/test_nvrtc.py compiles
# each source and checks this table against the kernels the PTX exports.
FP8_KERNELS = ("fp8_cast_e4m3", "fp8_cast_e5m2")
CUDA_SOURCES = {STATUS_SOURCE: STATUS_KERNELS, BENCH_SOURCE: ("mg_hold_stream", "mg_read_xor"),
                FP8_SOURCE: FP8_KERNELS}
# The options minigrad gives CuPy's RawModule (line info lets Nsight Compute map time to source
# lines; it does not change the machine code). CuPy 14 adds include paths (its CCCL and own
# headers, the CUDA headers), then -ftz=true, -arch=sm_XX of the device and
# --device-as-default-execution-space; CI compiles every source through NVRTC with all of these.
CUDA_OPTIONS = ("--std=c++17", "--generate-line-info")
# -ffp-contract=off: NumPy rounds every operation, so no `a * b + c` may become an FMA (GCC's
# default contracts across statements), or fused results would differ from NumPy's in the last bit.
HOST_FLAGS = ("-O3", "-std=c++17", "-ffp-contract=off", "-shared", "-fPIC", "-Wno-unknown-pragmas",
              "-Wno-psabi")
# Tried in order: the first set the compiler accepts wins (no OpenMP, or no -march=native on
# compilers that reject it, still gives a correct, slower library).
HOST_FLAG_SETS = (("-march=native", "-fopenmp"), ("-march=native",), ())
_LAUNCH_ARGTYPES = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64,
                    ctypes.c_uint64, ctypes.c_float, ctypes.c_void_p]

_lock = threading.Lock()
_cuda_modules = {}
_cuda_functions = {}


def read_source(name):
    """Text of the kernel source file ``name`` (e.g. ``"float_status.cu"``): from the source
    checkout's ``kernels/`` beside this ``minigrad/`` when there is one (so a checkout compiles
    its own sources, also where an editable install maps ``minigrad.kernels`` elsewhere), else
    from the installed package data."""
    checkout = pathlib.Path(__file__).resolve().parents[1] / "kernels" / name
    if checkout.is_file():
        return checkout.read_text()
    return importlib.resources.files("minigrad.kernels").joinpath(name).read_text()


def cuda_module(source=STATUS_SOURCE):
    """CuPy's ``RawModule`` of the CUDA source ``source`` (a name in ``CUDA_SOURCES``), made
    once per process with ``CUDA_OPTIONS`` (needs a GPU). CuPy compiles it (NVRTC) at the first
    ``get_function`` or ``compile()``, and caches the binary on disk."""
    module = _cuda_modules.get(source)
    if module is None:
        with _lock:
            module = _cuda_modules.get(source)
            if module is None:
                module = backend.cupy.RawModule(code=read_source(source), options=CUDA_OPTIONS)
                _cuda_modules[source] = module
    return module


def cuda_function(name, source=STATUS_SOURCE):
    """The ``RawKernel`` ``name`` from ``source``, compiled and looked up once per process
    (needs a GPU)."""
    function = _cuda_functions.get((source, name))
    if function is None:
        module = cuda_module(source)
        with _lock:
            function = _cuda_functions[(source, name)] = module.get_function(name)
    return function


class HostBuild:
    """What the host build gives this process, loaded once (``loaded()``).

    Attributes:
        lib: the ``ctypes.CDLL``, or None (no compiler, every compile failed, or
            ``MINIGRAD_NATIVE=0``).
        error: why ``lib`` is None (a string), or None.
        pid: the process that loaded it (OpenMP's pool does not survive a fork).
        conversions: ``{(from, to): C function}`` of ``minigrad._fp16_host.convert``: float16
            <-> float32 (only with the vector conversion: not on a CPU without F16C) and bfloat16
            <-> float32 (only with ml_dtypes, which defines bfloat16), or None when there is
            neither (also whenever there is no library).
        fp16_passes: the library for the fused fp16 passes of ``minigrad._fp16_host``, or None
            (no library, or no vector conversion).
        optimizer_step: the fused optimizer update ``mg_fused_update``, or None.
    """
    __slots__ = ("lib", "error", "pid", "conversions", "fp16_passes", "optimizer_step")

    def __init__(self, lib, error):
        self.lib, self.error, self.pid = lib, error, os.getpid()
        vector = lib is not None and bool(lib.mg_convert_vectorized())
        conversions = {(_F16, _F32): lib.mg_half_to_float,
                       (_F32, _F16): lib.mg_float_to_half} if vector else {}
        if lib is not None and dtypes.HAS_LOWP:
            conversions.update({(dtypes.bfloat16, _F32): lib.mg_bf16_to_float,
                                (_F32, dtypes.bfloat16): lib.mg_float_to_bf16})
        self.conversions = conversions or None
        self.fp16_passes = lib if vector else None
        self.optimizer_step = None if lib is None else lib.mg_fused_update


_F16, _F32 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)
host_build = None  # the process's HostBuild once loaded (``loaded()``), else None


def loaded():
    """The process's ``HostBuild``, loading (and if needed compiling) it on the first call.

    The first call prints one line to stderr when it compiles the library (about 3 s, once per
    source, flags and machine) or when the NumPy fallback is in use, saying why.
    """
    return host_build or _load_once()  # the lock only for the first call


def _load_once():
    global host_build
    with _lock:
        if host_build is None:
            lib, error = _load_host_library()
            if lib is None:
                print(f"minigrad: native host kernels unavailable ({error}); using the NumPy "
                      f"fallback", file=sys.stderr)
            host_build = HostBuild(lib, error)
            if lib is not None:
                _host_threads.install(lib)
    return host_build


def host_library():
    """The kernels compiled for this CPU (a ``ctypes.CDLL``), or None.

    None means no compiler was found, every compile failed, or ``MINIGRAD_NATIVE=0``;
    ``host_library_error()`` says which. The library exports ``launch_<kernel>`` for each name
    in ``STATUS_KERNELS`` (arguments: the number of blocks, then those of the CUDA kernel) and
    ``host_threads()``, the number of host threads a launch can use; and the conversions
    ``mg_half_to_float``, ``mg_float_to_half``, ``mg_convert_vectorized``, ``mg_bf16_to_float``
    and ``mg_float_to_bf16`` (see ``kernels/convert_host.cpp``), the fp16 passes and
    ``mg_fused_update`` (``kernels/optim_host.cpp``), the FP8 casts with their saturation counter
    (``launch_fp8_cast_e4m3``/``_e5m2``, ``kernels/fp8_cast_host.cpp``): the C functions of
    ``_HOST_FUNCTIONS``.
    """
    return loaded().lib


def host_threads():
    """How many host threads a launch of ``host_library()`` may use: the host passes' count
    (``minigrad._host_threads``: the OpenMP thread count while OpenBLAS's products run on the
    same team, else 1).

    1 in a process forked after the library was loaded: GNU OpenMP's thread pool does not
    survive a fork, and a parallel region in the child can hang.
    """
    host = loaded()
    if host.lib is None or os.getpid() != host.pid:
        return 1
    return host.lib.host_threads()


def host_library_error():
    """Why ``host_library()`` is None (a string), or None when it loaded."""
    return loaded().error


@contextlib.contextmanager
def numpy_fallback():
    """Run the block as if there were no host library (every caller takes its NumPy path);
    for comparing the two paths in one process."""
    global host_build
    saved = loaded()
    host_build = HostBuild(None, "switched off by minigrad._native.numpy_fallback()")
    try:
        yield
    finally:
        host_build = saved


def cache_dir():
    """Directory for compiled host libraries (created on demand)."""
    root = os.environ.get("MINIGRAD_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "minigrad")
    return pathlib.Path(root)


def _load_host_library():
    if os.environ.get("MINIGRAD_NATIVE", "1") == "0":
        return None, "disabled by MINIGRAD_NATIVE=0"
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++") \
        or shutil.which("c++")
    if not compiler:
        return None, "no C++ compiler found (set CXX to use one)"
    sources = {name: read_source(name) for name in HOST_SOURCES}
    errors = []
    for extra in HOST_FLAG_SETS:
        flags = HOST_FLAGS + extra
        path = cache_dir() / f"float_status-{_build_key(compiler, flags, sources)}.so"
        try:
            if not path.exists():
                started = time.perf_counter()
                _compile(compiler, flags, sources, path)
                print(f"minigrad: built the native host kernels in "
                      f"{time.perf_counter() - started:.1f} s (cached in {path.parent})",
                      file=sys.stderr)
            return _bind(ctypes.CDLL(str(path))), None
        except (OSError, subprocess.SubprocessError) as error:
            errors.append(f"{' '.join(extra) or 'plain'}: {error}")
    return None, "host build failed: " + " | ".join(errors)


def _build_key(compiler, flags, sources):
    digest = hashlib.sha256()
    for part in (compiler, " ".join(flags), platform.machine(), _cpu_flags(),
                 *(sources[name] for name in HOST_SOURCES)):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def _cpu_flags():
    # -march=native code is only valid on CPUs with the same features: key the cache on them.
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    return platform.processor()


def _compile(compiler, flags, sources, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        with tempfile.TemporaryDirectory() as build:
            for name, text in sources.items():
                pathlib.Path(build, name).write_text(text)
            units = [name for name in sources if name.endswith(".cpp")]
            result = subprocess.run([compiler, *flags, *units, "-o", staged],
                                    cwd=build, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise subprocess.SubprocessError(result.stderr.strip()[-2000:])
        os.replace(staged, path)
    finally:
        if os.path.exists(staged):
            os.unlink(staged)


# ctypes signatures of the host library's plain C functions: name -> (argument types, result type)
_HOST_FUNCTIONS = {
    "host_threads": ([], ctypes.c_int),
    # kernels/threads_host.cpp
    "mg_pass_threads": ([], ctypes.c_int),
    "mg_set_pass_threads": ([ctypes.c_int], None),
    "mg_openmp": ([], ctypes.c_int),
    "mg_openblas_calls": ([], ctypes.c_longlong),
    "mg_half_to_float": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None),
    "mg_float_to_half": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], ctypes.c_int64),
    "mg_convert_vectorized": ([], ctypes.c_int),
    "mg_bf16_to_float": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None),
    "mg_float_to_bf16": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], ctypes.c_int64),
    "mg_relu_half": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None),
    "mg_relu_half_backward": ([ctypes.c_void_p] * 3 + [ctypes.c_int64], None),
    "mg_add_halves": ([ctypes.c_void_p] * 3 + [ctypes.c_int64], ctypes.c_int64),
    "mg_relu_float": ([ctypes.c_void_p] * 3 + [ctypes.c_int64], None),
    "mg_relu_float_backward": ([ctypes.c_void_p] * 3 + [ctypes.c_int64], None),
    # kernels/norm_host.cpp: (arrays and vectors..., rows, channels)
    "mg_bn_moments": ([ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2, None),
    "mg_bn_normalize": ([ctypes.c_void_p] * 5 + [ctypes.c_int64] * 2, None),
    "mg_bn_grad_sums": ([ctypes.c_void_p] * 5 + [ctypes.c_int64] * 2, None),
    "mg_bn_dx": ([ctypes.c_void_p] * 7 + [ctypes.c_int64] * 2, None),
    # kernels/image_host.cpp: (src, dst, geometry (int64[18]))
    "mg_im2col_float": ([ctypes.c_void_p] * 3, None),
    "mg_col2im_float": ([ctypes.c_void_p] * 3, None),
    # kernels/pool_host.cpp: (x, out, argmax, geometry (int64[15])); (g, argmax, dx, geometry, mode)
    "mg_maxpool_float": ([ctypes.c_void_p] * 4, None),
    "mg_maxpool_grad": ([ctypes.c_void_p] * 4 + [ctypes.c_int], None),
    # kernels/conv_host.cpp: (x, w or g, out or w, geometry (int64[9]))
    "mg_conv_direct_float": ([ctypes.c_void_p] * 4, None),
    "mg_conv_wgrad_float": ([ctypes.c_void_p] * 4, None),
    "mg_add_bias_to_half": ([ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2, ctypes.c_int64),
    "mg_half_to_float_colsum": ([ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2, ctypes.c_int64),
    "mg_fused_update": ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float,
                         ctypes.c_float,
                         ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int64),
    # kernels/fp8_cast_host.cpp: (grid, x, out, n, scale, saturated counter)
    "launch_fp8_cast_e4m3": ([ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                              ctypes.c_float, ctypes.c_void_p], None),
    "launch_fp8_cast_e5m2": ([ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                              ctypes.c_float, ctypes.c_void_p], None),
}


def _bind(lib):
    for name in STATUS_KERNELS:
        fn = getattr(lib, "launch_" + name)
        fn.argtypes = _LAUNCH_ARGTYPES
        fn.restype = None
    for name, (argtypes, restype) in _HOST_FUNCTIONS.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype
    return lib
