"""The host library's threads (minigrad/_host_threads.py, kernels/threads_host.cpp).

OpenBLAS's parallel products run on the host library's OpenMP team through the callback: the
callback runs every job exactly once and all of a product's jobs at once (they wait on each
other), products keep their bits, products from several Python threads stay correct, and a
forked child or ``MINIGRAD_BLAS_THREADS=openblas`` gets OpenBLAS's own threads back with the
host passes on one thread. The parallel host passes give the same bits on one thread as on
several.
"""
import ctypes
import os
import subprocess
import sys
import threading

import numpy
import pytest

from helpers import forks
from minigrad import _fp16_host, _host_threads, _native
from minigrad.ops import _image_host, _norm_host, _pool_host

pytestmark = pytest.mark.skipif(_native.host_library() is None,
                                reason="needs the native host library")
F32 = numpy.float32


def lib():
    return _native.host_library()


needs_callback = pytest.mark.skipif(
    _native.host_library() is None or not _host_threads.installed(),
    reason="no OpenBLAS with the threading callback (or no OpenMP) in this process")

DOJOB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, DOJOB, ctypes.c_int, ctypes.c_size_t,
                            ctypes.c_void_p, ctypes.c_int)


@pytest.mark.parametrize("numjobs", [1, 2, 3, 5])
def test_the_callback_runs_every_job_once_and_all_at_once(numjobs):
    """Each job waits at a barrier for all the others (as a level-3 product's jobs wait on each
    other's progress): the call returns only if they all ran at the same time."""
    if not lib().mg_openmp():
        pytest.skip("the host library has no OpenMP")
    barrier = threading.Barrier(numjobs, timeout=20)
    ran = []
    jobdata = (ctypes.c_int64 * numjobs)(*range(100, 100 + numjobs))
    size = ctypes.sizeof(ctypes.c_int64)

    def job(index, data, extra):
        ran.append((index, ctypes.c_int64.from_address(data).value, extra))
        barrier.wait()

    callback = CALLBACK(ctypes.cast(lib().mg_openblas_threads, ctypes.c_void_p).value)
    before = lib().mg_openblas_calls()
    callback(1, DOJOB(job), numjobs, size, ctypes.addressof(jobdata), 7)
    assert sorted(ran) == [(i, 100 + i, 7) for i in range(numjobs)]
    assert lib().mg_openblas_calls() == before + 1


def two_blas_threads():
    """Two OpenBLAS threads for the test (another test or fixture may have left one, and
    OpenBLAS runs a product on one thread without calling the callback)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    return threadpoolctl.threadpool_limits(limits=2, user_api="blas")


@needs_callback
def test_products_run_on_the_callback_with_the_same_bits():
    rng = numpy.random.default_rng(0)
    a, b = rng.standard_normal((700, 600)).astype(F32), rng.standard_normal((600, 500)).astype(F32)
    with two_blas_threads():
        before = lib().mg_openblas_calls()
        through_callback = a @ b
        assert lib().mg_openblas_calls() > before
        paths = _host_threads.installed()
        _host_threads.uninstall()
        try:
            assert lib().mg_pass_threads() == 1
            own_threads = a @ b
        finally:  # an OpenBLAS loaded since (SciPy's) is found too
            assert set(paths) <= set(_host_threads.install(lib()))
    assert (through_callback.view(numpy.uint32) == own_threads.view(numpy.uint32)).all()


@needs_callback
def test_products_from_several_python_threads_stay_correct():
    rng = numpy.random.default_rng(1)
    q = numpy.linalg.qr(rng.standard_normal((400, 400)))[0]
    errors = []

    def work():
        for _ in range(5):
            errors.append(numpy.abs(q @ q.T - numpy.eye(400)).max())

    threads = [threading.Thread(target=work) for _ in range(4)]
    with two_blas_threads():
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert len(errors) == 20 and max(errors) < 1e-12


def with_pass_threads(count, fn):
    """fn() with the host passes on ``count`` threads."""
    before = lib().mg_pass_threads()
    lib().mg_set_pass_threads(count)
    try:
        return fn()
    finally:
        lib().mg_set_pass_threads(0 if _host_threads.installed() else before)


def pass_results(rng):
    """Results of every parallel host pass, on inputs that each pass splits among 2 or 3
    threads (a batch norm, ReLU or conversion pass at 64K values or more per thread, a conv
    at 4M multiply-adds per thread, a max pooling at 32K values per thread)."""
    x = rng.standard_normal((8, 20, 20, 32)).astype(F32)
    g = rng.standard_normal((8, 18, 18, 32)).astype(F32)
    w = rng.standard_normal((3, 3, 32, 32)).astype(F32)
    batch = rng.standard_normal((32, 32, 32, 16)).astype(F32).transpose(0, 3, 1, 2)
    v = rng.standard_normal((1, 16, 1, 1)).astype(F32)
    geometry = ((1, 1), (1, 1, 1, 1), (1, 1), (3, 3))
    patches = numpy.empty((8 * 20 * 20, 9 * 32), F32)
    pooled, argmax = _pool_host.max_pool(batch, (3, 3), (2, 2), (1, 1, 1, 1), (16, 16))
    return [_image_host.direct_conv(x, w, (1, 1)),
            _image_host.direct_weight_grad(x, g, (3, 3), (1, 1)),
            *_norm_host.moments(batch), *_norm_host.grad_sums(batch, batch, v),
            _norm_host.normalize(batch, v, v, v, numpy.empty_like(batch)),
            _norm_host.dx(batch, batch, v, v, v, v, numpy.empty_like(batch)),
            _image_host.patch_matrix(x.transpose(0, 3, 1, 2), geometry, (20, 20), patches).copy(),
            *(_fp16_host.relu_pass(batch) or ()), _fp16_host.convert(batch, numpy.float16),
            pooled, argmax, _pool_host.max_pool_grad(pooled, argmax, batch.shape, (3, 3), (2, 2),
                                                     (1, 1, 1, 1), False)]


def test_parallel_passes_give_the_same_bits_on_any_number_of_threads():
    if not lib().mg_openmp():
        pytest.skip("the host library has no OpenMP")
    one = with_pass_threads(1, lambda: pass_results(numpy.random.default_rng(2)))
    for count in (2, 3):
        many = with_pass_threads(count, lambda: pass_results(numpy.random.default_rng(2)))
        for a, b in zip(one, many, strict=True):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@needs_callback
def test_a_forked_child_gets_openblas_threads_back():
    rng = numpy.random.default_rng(3)
    a = rng.standard_normal((600, 600)).astype(F32)
    with two_blas_threads():
        want = a @ a  # the parent's team is running
        pid = os.fork()
    if pid == 0:  # child: must neither hang nor go through the callback
        calls = lib().mg_openblas_calls()
        x = rng.standard_normal((64, 16, 32, 32)).astype(F32)
        checks = [numpy.allclose(a @ a, want, rtol=1e-5, atol=1e-4),
                  lib().mg_openblas_calls() == calls, lib().mg_pass_threads() == 1,
                  not _host_threads.installed(),
                  _norm_host.moments(x.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2))
                  is not None]
        os._exit(next((i + 1 for i, ok in enumerate(checks) if not ok), 0))
    # 1: a wrong product, 2: the callback ran, 3: passes not on one thread, 4: still
    # installed, 5: the batch-norm pass refused
    assert forks.exit_code(pid, "after a fork from a process using the host threads") == 0


def test_minigrad_blas_threads_openblas_leaves_openblas_alone():
    code = ("import numpy; from minigrad import _native, _host_threads;"
            "lib = _native.host_library(); a = numpy.ones((500, 500), numpy.float32); a @ a;"
            "print(_host_threads.installed(), lib.mg_openblas_calls(), lib.mg_pass_threads())")
    env = dict(os.environ, **{_host_threads.ENV: "openblas"})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out == ["[]", "0", "1"]
