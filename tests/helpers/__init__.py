"""Shared test helpers, importable from every test folder as ``from helpers import ...``.

``setup.cfg`` puts ``tests/`` on pytest's ``pythonpath`` (and uses ``--import-mode=importlib``,
so test files in different folders may share a basename): this package is the one place for
what several test files need.

* ``DEVICES``, ``FLOAT_DTYPES``: parametrize lists; GPU cases carry the ``gpu`` mark and skip,
  with the reason, without CuPy.
* ``REPO_ROOT``: the checkout's root (for the README, examples/ and benchmarks/).
* ``native_unavailable_reason()``: why the native host kernels cannot run (None when they can);
  the ``requires_native`` mark (``tests/conftest.py``) skips with this reason.
* ``helpers.bits``: bit-exact comparisons and the fp16/fp32 reference unscale.
* ``helpers.kernel_builds``: host builds of the float-status kernels and adversarial arrays.
* ``helpers.mpi``: ``launch(script, ...)`` on 2 MPI ranks (skips without mpi4py/mpirun).
* ``helpers.doubles``: small stand-ins (an optimizer that only counts steps, a one-matmul net).
* ``helpers.layouts``: an image batch stored NCHW, channels-last and strided.
"""
import contextlib
import os
import pathlib

import numpy
import pytest

from minigrad import backend

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

NO_GPU = pytest.mark.skipif(not backend.CUDA_AVAILABLE,
                            reason=f"needs CuPy and a CUDA GPU ({backend.CUPY_IMPORT_ERROR})")
DEVICES = [pytest.param("CPU", id="CPU"),
           pytest.param("GPU", id="GPU", marks=[pytest.mark.gpu, NO_GPU])]
FLOAT_DTYPES = [pytest.param(numpy.float16, id="float16"),
                pytest.param(numpy.float32, id="float32")]


def native_unavailable_reason():
    """Why the native host kernels are not in use (a sentence), or None when they are.

    ``MINIGRAD_NATIVE=0`` turns them off (CI's second run); without a C++ compiler, or when
    every build fails, the host library is missing and minigrad runs its NumPy code.
    """
    if os.environ.get("MINIGRAD_NATIVE", "1") == "0":
        return "the native host kernels are off (MINIGRAD_NATIVE=0)"
    from minigrad import _native
    if _native.host_library() is None:
        return f"no native host kernels: {_native.host_library_error()}"
    return None


# The GPU cases of a device test: the strict device on every machine (minigrad.testing
# .strict_device: CuPy's code paths on the CPU), and the real GPU where there is one.
GPU_KINDS = [pytest.param("strict", id="strict"),
             pytest.param("GPU", id="GPU", marks=[pytest.mark.gpu, NO_GPU])]


@contextlib.contextmanager
def gpu_of(kind):
    """Run the block on the GPU of ``kind`` (``GPU_KINDS``): yields the strict device's
    ``HostReads`` for "strict", None for the real GPU. The context's device is "GPU" inside and
    restored after."""
    from minigrad._config import using_config
    from minigrad.testing.strict_device import strict_device
    with (strict_device() if kind == "strict" else contextlib.nullcontext()) as reads:
        with using_config(device_target="GPU"):
            yield reads
