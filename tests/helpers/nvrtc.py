"""minigrad's CUDA sources compiled through NVRTC without a GPU, with the options CuPy's
``RawModule`` gives NVRTC on a GPU.

NVRTC comes from cuda-python's ``cuda.bindings.nvrtc`` and the NVRTC wheel, the CUDA headers from
the CUDA runtime wheel (``pip install minigrad[nvrtc]``); NVRTC needs no driver. Without them
the tests skip with the reason, or fail where ``MINIGRAD_REQUIRE_NVRTC=1`` (CI) asks for them.
"""
import os
import re
from dataclasses import dataclass

import pytest

from minigrad import _native

ARCHES = ("sm_75", "sm_80", "sm_90", "sm_100")
# What CuPy 14's RawModule adds to minigrad's options besides include paths
# (cupy/cuda/compiler.py: _compile_with_cache_cuda adds -ftz=true; _compile_using_nvrtc_no_warning
# the device's -arch=sm_XX and --device-as-default-execution-space).
CUPY_ADDED = ("-ftz=true", "-arch={arch}", "--device-as-default-execution-space")
# ptxas's report of one kernel (--ptxas-options=-v)
_PTXAS_ENTRY = re.compile(
    r"Function properties for (\w+)\s*\n.*?(\d+) bytes stack frame, (\d+) bytes spill stores, "
    r"(\d+) bytes spill loads\s*\n.*?Used (\d+) registers", re.S)


def nvrtc_bindings():
    """``cuda.bindings.nvrtc``; skips the test without it (fails it under
    ``MINIGRAD_REQUIRE_NVRTC=1``)."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as error:
        message = (f"NVRTC is not installed ({error}): pip install 'minigrad[nvrtc]' "
                   f"(cuda-bindings, nvidia-cuda-nvrtc, nvidia-cuda-runtime)")
        if os.environ.get("MINIGRAD_REQUIRE_NVRTC") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return nvrtc


def cuda_include_dirs():
    """The CUDA header folder, found the way CuPy finds it (``cuda.pathfinder``), as a list of
    at most one path."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return []
    found = find_nvidia_header_directory("cudart")
    return [found] if found else []


def cupy_options(arch):
    """The NVRTC options of CuPy's ``RawModule(code, options=_native.CUDA_OPTIONS)`` on a device
    of architecture ``arch`` (``"sm_90"``), with the CUDA headers as the only include path."""
    return [*_native.CUDA_OPTIONS, *(f"-I{path}" for path in cuda_include_dirs()),
            *(option.format(arch=arch) for option in CUPY_ADDED)]


@dataclass
class Compiled:
    ptx: str
    cubin: bytes
    log: str

    def entries(self):
        """The kernels the PTX exports."""
        return re.findall(r"\.entry (\w+)\(", self.ptx)

    def ptxas_report(self):
        """``{kernel: (registers, stack bytes, spill store bytes, spill load bytes)}`` from the
        log of a compile with ``--ptxas-options=-v``."""
        return {name: (int(regs), int(stack), int(stores), int(loads))
                for name, stack, stores, loads, regs in _PTXAS_ENTRY.findall(self.log)}


def _check(nvrtc, result, what):
    error = result[0] if isinstance(result, tuple) else result
    assert error == nvrtc.nvrtcResult.NVRTC_SUCCESS, f"{what}: {error}"
    return result[1:] if isinstance(result, tuple) else ()


def compile_source(name, options):
    """Compile ``kernels/<name>`` with NVRTC and ``options``; the assertion message of a failed
    compile holds NVRTC's log."""
    nvrtc = nvrtc_bindings()
    (program,) = _check(nvrtc, nvrtc.nvrtcCreateProgram(
        _native.read_source(name).encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        compiled = nvrtc.nvrtcCompileProgram(program, len(options),
                                             [option.encode() for option in options])
        (size,) = _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(program), "log size")
        log = bytearray(size)  # NVRTC writes into it: never into an (immutable, shared) bytes
        _check(nvrtc, nvrtc.nvrtcGetProgramLog(program, log), "log")
        log = bytes(log).rstrip(b"\0 ").decode(errors="replace")
        assert compiled[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS, (
            f"NVRTC could not compile {name} with {' '.join(options)}:\n{log}")
        (size,) = _check(nvrtc, nvrtc.nvrtcGetPTXSize(program), "PTX size")
        ptx = bytearray(size)
        _check(nvrtc, nvrtc.nvrtcGetPTX(program, ptx), "PTX")
        (size,) = _check(nvrtc, nvrtc.nvrtcGetCUBINSize(program), "CUBIN size")
        cubin = bytearray(size)
        _check(nvrtc, nvrtc.nvrtcGetCUBIN(program, cubin), "CUBIN")
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return Compiled(bytes(ptx).rstrip(b"\0").decode(), bytes(cubin), log)


def nvrtc_version():
    """NVRTC's ``(major, minor)``."""
    nvrtc = nvrtc_bindings()
    return tuple(_check(nvrtc, nvrtc.nvrtcVersion(), "nvrtcVersion"))
