"""Host builds of the float-status kernels (``kernels/float_status.cu`` through
``kernels/host_shim.h``) and the adversarial arrays the kernel tests feed them."""
import ctypes
import platform
import shutil

import numpy
import pytest

from helpers.bits import UINT
from minigrad import _native

SPECIALS = {numpy.dtype(numpy.float16): [0x7C00, 0xFC00, 0x7E01, 0xFFFF, 0x7BFF, 0x8000, 0x0001],
            numpy.dtype(numpy.float32): [0x7F800000, 0xFF800000, 0x7FC00001, 0xFFFFFFFF,
                                         0x7F7FFFFF, 0x80000000, 0x00000001]}


def host_builds():
    """Parameters for ``build_host_library``: the runtime build, AVX2+F16C (x86), portable C++
    without OpenMP, and blocks of 64 threads run in turn."""
    builds = [pytest.param(None, id="runtime")]
    if platform.machine() in ("x86_64", "AMD64"):
        builds.append(pytest.param(("-mavx2", "-mf16c", "-fopenmp"), id="avx2-f16c"))
    builds.append(pytest.param((), id="portable"))
    # 64 threads per block run in turn: the GPU's thread-strided loops and warp vote, on the CPU
    builds.append(pytest.param(("-O1", "-DMG_EMULATE_THREADS=64"), id="64-threads-per-block"))
    return builds


def build_host_library(flags, tmp_path_factory):
    """The runtime host library (``flags`` None) or the kernels compiled with ``flags``; skips,
    with the reason, where there is no library or no compiler."""
    if flags is None:
        lib = _native.host_library()
        if lib is None:
            pytest.skip(f"no host build of the kernels: {_native.host_library_error()}")
        return lib
    compiler = shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler: host builds skipped")
    path = tmp_path_factory.mktemp("build") / "float_status.so"
    sources = {name: _native.read_source(name) for name in _native.HOST_SOURCES}
    _native._compile(compiler, _native.HOST_FLAGS + flags, sources, path)
    return _native._bind(ctypes.CDLL(str(path)))


def make_array(dtype, n, offset, seed, injected=()):
    """``n`` values starting ``offset`` elements into a fresh buffer (misaligned for offset % 8)."""
    x = (numpy.random.default_rng(seed).standard_normal(n + offset) * 50).astype(dtype)[offset:]
    for position, bits in injected:
        x[position] = numpy.array(bits, UINT[dtype.itemsize]).view(dtype)
    return x
