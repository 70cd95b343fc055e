"""Every CUDA source of ``kernels/`` compiles through NVRTC, as CuPy compiles it on a GPU, here
on a machine without one.

* For sm_75, sm_80, sm_90 and sm_100, with the options CuPy's ``RawModule`` passes
  (``_native.CUDA_OPTIONS`` plus ``helpers.nvrtc.CUPY_ADDED`` and the CUDA header path): no error,
  no warning, a cubin, exactly the kernels ``_native.CUDA_SOURCES`` lists, and no kernel with a
  stack frame or spills (ptxas's report).
* A source that includes nothing compiles with no include path at all.
* On a GPU: the options CuPy really hands NVRTC are these (include paths aside), so the CI
  compile and the GPU's are the same compile.
"""
import uuid

import pytest

from helpers import NO_GPU, REPO_ROOT
from helpers.nvrtc import ARCHES, CUPY_ADDED, compile_source, cupy_options, nvrtc_version
from minigrad import _native, backend

SOURCES = sorted(_native.CUDA_SOURCES)


def test_every_cu_file_is_listed_with_its_kernels():
    assert sorted(p.name for p in (REPO_ROOT / "kernels").glob("*.cu")) == SOURCES


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("source", SOURCES)
def test_compiles_through_nvrtc_with_cupys_options(source, arch):
    compiled = compile_source(source, [*cupy_options(arch), "--ptxas-options=-v"])
    kernels = sorted(_native.CUDA_SOURCES[source])
    assert sorted(compiled.entries()) == kernels
    assert compiled.cubin.startswith(b"\x7fELF")
    assert "warning" not in compiled.log.lower(), compiled.log
    report = compiled.ptxas_report()
    assert sorted(report) == kernels, compiled.log
    for kernel, (registers, stack, spill_stores, spill_loads) in report.items():
        assert 0 < registers <= 64, (kernel, registers)  # >= 4 blocks of 256 threads per SM
        assert stack == spill_stores == spill_loads == 0, (kernel, compiled.log)


@pytest.mark.parametrize("source", SOURCES)
def test_a_source_without_includes_needs_no_include_path(source):
    if "#include" in _native.read_source(source):
        pytest.skip(f"{source} includes headers: the test above compiles it with their path")
    options = [*_native.CUDA_OPTIONS, *(option.format(arch="sm_90") for option in CUPY_ADDED)]
    assert sorted(compile_source(source, options).entries()) == sorted(
        _native.CUDA_SOURCES[source])


def test_nvrtc_knows_every_architecture_tested():
    assert nvrtc_version() >= (12, 8)  # sm_100 needs NVRTC 12.8 or newer


@pytest.mark.gpu
@NO_GPU
def test_cupy_hands_nvrtc_the_options_ci_compiles_with(monkeypatch):
    from cupy.cuda import compiler  # CuPy's private compile path: what it passes NVRTC

    seen = []
    compile_program = compiler._NVRTCProgram.compile

    def spy(program, options=(), log_stream=None):
        seen.append(tuple(options))
        return compile_program(program, options, log_stream)

    monkeypatch.setattr(compiler._NVRTCProgram, "compile", spy)
    monkeypatch.setenv("CUPY_CACHE_IN_MEMORY", "1")  # compile, whatever CuPy's disk cache holds
    source = _native.read_source(_native.STATUS_SOURCE) + f"\n// {uuid.uuid4()}\n"
    backend.cupy.RawModule(code=source, options=_native.CUDA_OPTIONS).compile()
    assert len(seen) == 1
    arch = next(option for option in seen[0] if option.startswith("-arch="))[len("-arch="):]
    expected = [option for option in cupy_options(arch) if not option.startswith("-I")]
    assert sorted(option for option in seen[0] if not option.startswith("-I")) == sorted(expected)
