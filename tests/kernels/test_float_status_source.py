"""The CUDA source of the float-status kernels, exercised without a GPU.

* Compile check: ``nvcc -ptx`` of every CUDA source for sm_75, sm_80, sm_90 and sm_100 where
  nvcc exists (skipped, with a message, where it does not); the PTX must export the source's
  kernels and use 16-byte read-only vector loads; the float-status kernels use no atomics and
  the widening one 16-byte stores. ``test_nvrtc.py`` compiles the same sources through NVRTC.
* Kernel logic: the same source built for the CPU through ``kernels/host_shim.h`` in four
  builds (the runtime one; AVX2+F16C; portable C++ with no OpenMP; blocks of 64 threads run in
  turn, as on a GPU), called directly with many arrays, misaligned starts and tiny chunk sizes,
  against a NumPy reference.
* The build cache and the fallback when no compiler is present.
"""
import os
import shutil
import subprocess

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import forks
from helpers.bits import UINT, assert_same_values, ref_unscale
from helpers.kernel_builds import SPECIALS, make_array
from helpers.nvrtc import ARCHES
from minigrad import _host_threads, _native
from minigrad.amp import _status_launch
from minigrad.amp import float_status as fs

DTYPES = [numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)]
TAGS = {numpy.dtype(numpy.float16): "fp16", numpy.dtype(numpy.float32): "fp32"}


# ---- nvcc ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("source", sorted(_native.CUDA_SOURCES))
def test_nvcc_compiles_every_cuda_source(source, arch, tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: CUDA compile check skipped (install the CUDA toolkit)")
    path = tmp_path / source
    path.write_text(_native.read_source(source))
    ptx = tmp_path / "out.ptx"
    result = subprocess.run(
        [nvcc, "-ptx", f"-arch={arch}", *_native.CUDA_OPTIONS, "-ftz=true", str(path), "-o",
         str(ptx)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    text = ptx.read_text()
    for name in _native.CUDA_SOURCES[source]:
        assert f".entry {name}(" in text
    assert "ld.global.nc.v4.u32" in text  # wide read-only loads
    if source == _native.STATUS_SOURCE:
        assert "atom." not in text and "red." not in text  # the flag is a plain store
        assert "st.global.wb.v4.u32" in text  # 16-byte stores (unscale, widening)


# ---- host builds of the same source --------------------------------------------------------------


def launch(lib, arrays, chunk, inv_scale=None, status=None):
    """Run the kernel for ``arrays`` (one dtype) directly, with a given chunk size.

    Two blocks (one per thread if the build has OpenMP) take the chunks in turn.
    """
    status = numpy.zeros(8, numpy.float32) if status is None else status
    arrays = [a for a in arrays if a.size]
    if arrays:
        table, n_chunks = _status_launch.chunk_table(arrays, chunk)
        name = ("check_unscale_" if inv_scale is not None else "check_") + TAGS[arrays[0].dtype]
        getattr(lib, "launch_" + name)(
            min(2, n_chunks),
            table.ctypes.data,
            len(arrays),
            n_chunks,
            chunk,
            1.0 if inv_scale is None else inv_scale,
            status.ctypes.data,
        )
    return status


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("chunk", [1, 3, 8, 100, 65536])
def test_host_kernels_match_numpy(host_lib, dtype, chunk):
    lengths = [0, 1, 2, 7, 8, 9, 31, 33, 64, 65, 257, 1000]
    specials = SPECIALS[dtype]
    for k, n in enumerate(lengths):  # the special value goes into array k, at 5/7 of its length
        arrays = [make_array(dtype, m, offset=(m + k) % 9, seed=m) for m in lengths]
        if n:
            bits = specials[k % len(specials)]
            arrays[k][(n * 5) // 7] = numpy.array(bits, UINT[dtype.itemsize]).view(dtype)
        finite = all(numpy.isfinite(a).all() for a in arrays)
        status = numpy.zeros(8, numpy.float32)
        status[1:] = 7.0  # checks write element 0 only
        launch(host_lib, arrays, chunk, status=status)
        assert status[0] == (0.0 if finite else 1.0) and (status[1:] == 7.0).all()
        expected = [ref_unscale(a, 0.125) for a in arrays]
        assert launch(host_lib, arrays, chunk, inv_scale=0.125)[0] == (not finite)
        for got, want in zip(arrays, expected):
            assert_same_values(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_host_kernels_never_clear_the_flag(host_lib, dtype):
    status = numpy.zeros(8, numpy.float32)
    status[0] = 1.0
    clean = numpy.ones(1000, dtype)
    launch(host_lib, [clean], 64, status=status)
    launch(host_lib, [clean], 64, inv_scale=1.0, status=status)
    assert status[0] == 1.0


@given(dtype=st.sampled_from(DTYPES), chunk=st.integers(1, 300), data=st.data())
def test_property_host_kernels(host_lib, dtype, chunk, data):
    specs = data.draw(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 9)), max_size=5))
    arrays = []
    for i, (n, offset) in enumerate(specs):
        injected = data.draw(
            st.lists(
                st.tuples(st.integers(0, max(n - 1, 0)), st.sampled_from(SPECIALS[dtype])),
                max_size=2 if n else 0,
            )
        )
        arrays.append(make_array(dtype, n, offset, seed=i, injected=injected))
    finite = all(numpy.isfinite(a).all() for a in arrays)
    assert launch(host_lib, arrays, chunk)[0] == (not finite)
    expected = [ref_unscale(a, 0.5) for a in arrays]
    assert launch(host_lib, arrays, chunk, inv_scale=0.5)[0] == (not finite)
    for got, want in zip(arrays, expected):
        assert_same_values(got, want)


# ---- build cache and fallback --------------------------------------------------------------------


def test_sources_are_found():
    assert "check_unscale_fp16" in _native.read_source(_native.STATUS_SOURCE)
    assert "mg_launch" in _native.read_source("host_shim.h")


@pytest.fixture
def threads_back():
    """Hand OpenBLAS's products and the host passes back to the process's own library after a
    test that loads a second copy (loading one installs it)."""
    own = _native.host_library()
    yield
    if own is not None:
        _host_threads.install(own)


def test_host_library_is_built_once_and_moved_into_place(tmp_path, monkeypatch, capsys,
                                                         threads_back):
    if shutil.which("g++") is None and shutil.which("clang++") is None:
        pytest.skip("no C++ compiler")
    monkeypatch.setenv("MINIGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MINIGRAD_NATIVE", raising=False)  # the suite also runs with it set to 0
    monkeypatch.setattr(_native, "host_build", None)
    capsys.readouterr()
    assert _native.host_library() is not None, _native.host_library_error()
    built = list(tmp_path.iterdir())
    assert len(built) == 1 and built[0].suffix == ".so"  # no staging files left behind
    # the build (seconds, once per machine) says so in one line; loading the cached file is silent
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("minigrad: built the native host kernels in ")
    assert str(tmp_path) in lines[0]
    stamp = built[0].stat().st_mtime_ns
    monkeypatch.setattr(_native, "host_build", None)
    assert _native.host_library() is not None
    assert list(tmp_path.iterdir()) == built and built[0].stat().st_mtime_ns == stamp
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("setting", [("CXX", "/nonexistent/c++"), ("MINIGRAD_NATIVE", "0")])
def test_without_host_build_numpy_takes_over(tmp_path, monkeypatch, setting, capsys):
    monkeypatch.setenv("MINIGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(*setting)
    monkeypatch.setattr(_native, "host_build", None)
    capsys.readouterr()
    assert _native.host_library() is None
    assert _native.host_library_error()
    # said once, with the reason: later calls are silent
    _native.host_library(), _native.host_library_error(), _native.host_threads()
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"minigrad: native host kernels unavailable "
        f"({_native.host_library_error()}); using the NumPy fallback"
    ]
    x = numpy.array([1, 2, numpy.inf], numpy.float16)
    assert not fs.all_finite([x]) and fs.all_finite([x[:2]])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_checks_on_one_thread():
    if _native.host_library() is None:
        pytest.skip(f"no host build of the kernels: {_native.host_library_error()}")
    x = numpy.ones(_status_launch.HOST_PARALLEL_MIN, numpy.float32)  # a parallel launch
    fs.check_overflow(fs.alloc_status(), x)  # the parent's OpenMP pool is now running
    pid = os.fork()
    if pid == 0:  # child: must neither hang nor give a wrong answer
        x[-1] = numpy.nan
        ok = _native.host_threads() == 1 and not fs.all_finite([x])
        os._exit(0 if ok else 1)
    assert forks.exit_code(pid, "in a host launch") == 0
