"""One pool of host threads: OpenBLAS's parallel products run on the host library's OpenMP team,
the team minigrad's parallel host passes use (``kernels/threads_host.cpp``).

OpenBLAS's own threads spin for about 0.1 s after each product, waiting for the next one, and a
training step alternates products with host passes (batch norm, ReLU, the direct convolution,
the patch matrix): with as many cores as BLAS threads, a pass run on two threads right after a
product finds one core taken by a spinning BLAS thread. OpenBLAS (0.3.27 and later) lets the
caller run a product's jobs instead (``openblas_set_threads_callback_function``);
``install`` hands it ``mg_openblas_threads``, which runs them on the OpenMP team. The products
then compute the same jobs with the same partition, so their bits do not change; the team's
idle threads wait briefly and then sleep.

``install`` looks for the OpenBLAS libraries loaded in the process (numpy's bundled
``scipy_openblas``, ILP64, and scipy's, LP64, under their prefixed names; a system OpenBLAS
under the plain name) and installs the callback into each that exports the setter. Other BLAS
libraries (MKL, Accelerate, an OpenBLAS older than 0.3.27), and an OpenBLAS loaded after the
host library (SciPy's, imported later), keep their threads. It does nothing
when ``MINIGRAD_BLAS_THREADS=openblas`` (leave OpenBLAS's threads alone) or when the host
library has no OpenMP. A process forked afterwards gets OpenBLAS's own threads back and runs
the host passes on one thread: GNU OpenMP's team does not survive a fork.
"""
import ctypes
import os
import pathlib

import numpy

_SETTERS = ("scipy_openblas_set_threads_callback_function64_",
            "scipy_openblas_set_threads_callback_function",
            "openblas_set_threads_callback_function")
ENV = "MINIGRAD_BLAS_THREADS"

_installed = []  # (library path, setter) with the callback in place
_lib = []  # the host library whose pass threads follow the callback
_fork_registered = []  # one entry once a forked child's reset is registered


def _loaded_openblas_paths():
    """Paths of the OpenBLAS shared libraries this process has loaded (Linux: from
    /proc/self/maps), else the scipy_openblas copies bundled beside numpy."""
    try:
        with open("/proc/self/maps") as maps:
            fields = [line.split(None, 5) for line in maps]
        paths = {f[5].strip() for f in fields if len(f) == 6}
        return sorted(p for p in paths if "openblas" in os.path.basename(p).lower())
    except OSError:
        root = pathlib.Path(numpy.__file__).parent
        return sorted(str(p) for folder in (root.parent / "numpy.libs", root / ".dylibs")
                      if folder.is_dir() for p in folder.glob("*openblas*"))


def _setter(path):
    try:
        blas = ctypes.CDLL(path)  # already loaded: the same handle
    except OSError:
        return None
    for name in _SETTERS:
        fn = getattr(blas, name, None)
        if fn is not None:
            fn.argtypes, fn.restype = [ctypes.c_void_p], None
            return fn
    return None


def install(lib):
    """Hand the parallel products of every loaded OpenBLAS with the callback setter to the host
    library ``lib``'s OpenMP team, and let the host passes use that team's threads. Returns the
    paths of those libraries; where there are none (``MINIGRAD_BLAS_THREADS=openblas``, no
    OpenMP, no such OpenBLAS) the host passes run on one thread, since another BLAS's spinning
    threads would take the second core from them. A library other than the one installed
    takes the products and the passes over from it."""
    if _lib and _lib[0] is not lib:
        uninstall()
    _lib[:] = [lib]
    lib.mg_set_pass_threads(1)
    if os.environ.get(ENV, "").strip().lower() == "openblas" or not lib.mg_openmp():
        return installed()
    callback = ctypes.cast(lib.mg_openblas_threads, ctypes.c_void_p).value
    done = set(installed())
    for path in _loaded_openblas_paths():
        setter = None if path in done else _setter(path)
        if setter is not None:
            setter(callback)
            _installed.append((path, setter))
    if _installed:
        lib.mg_set_pass_threads(0)  # OpenMP's count
    if not _fork_registered and hasattr(os, "register_at_fork"):
        _fork_registered.append(True)
        os.register_at_fork(after_in_child=uninstall)
    return installed()


def uninstall():
    """Give every OpenBLAS that ``install`` changed its own threads back, and run the host
    passes on one thread."""
    while _installed:
        _installed.pop()[1](None)
    for lib in _lib:
        lib.mg_set_pass_threads(1)


def installed():
    """Paths of the OpenBLAS libraries whose products run on the host library's team."""
    return [path for path, _ in _installed]

