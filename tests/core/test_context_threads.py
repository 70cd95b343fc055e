"""set_context(num_threads=N) caps the BLAS/OpenMP thread pools through threadpoolctl."""
import sys

import numpy
import pytest

import minigrad
from minigrad import context

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.fixture
def restore_threads():
    before = threadpoolctl.threadpool_info()
    saved = dict(context._threads)
    yield
    threadpoolctl.threadpool_limits(limits={m["prefix"]: m["num_threads"] for m in before})
    context._threads.update(saved)


def test_num_threads_caps_the_blas_pool(restore_threads):
    numpy.ones((64, 64)) @ numpy.ones((64, 64))  # BLAS loaded
    minigrad.set_context(num_threads=1)
    blas = [m for m in threadpoolctl.threadpool_info() if m["user_api"] == "blas"]
    assert blas and all(m["num_threads"] == 1 for m in blas)
    assert minigrad.get_context("num_threads") == 1


@pytest.mark.parametrize("value, error", [(0, ValueError), (-2, ValueError), (1.0, TypeError),
                                          (True, TypeError), ("2", TypeError)])
def test_num_threads_must_be_a_positive_int(value, error, restore_threads):
    device = minigrad.get_context("device_target")
    with pytest.raises(error, match="^num_threads must be a positive int, got "):
        minigrad.set_context(device_target="CPU", num_threads=value)
    assert minigrad.get_context("device_target") == device


def test_without_threadpoolctl_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    with pytest.raises(ImportError, match=r"pip install 'minigrad\[threads\]'"):
        minigrad.set_context(num_threads=1)
    assert minigrad.get_context("num_threads") == context._threads["num_threads"]
