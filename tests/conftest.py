"""Shared fixtures and marks: devices, dtypes, the hypothesis profile, a clean global config per
test, and the ``requires_native`` mark.

Use the ``device`` fixture, or ``@pytest.mark.parametrize("device", DEVICES)`` (``from helpers
import DEVICES``): GPU cases carry the ``gpu`` mark and are skipped, with the reason, without CuPy.
``@pytest.mark.requires_native`` skips a test, with the reason, where the native host kernels are
not in use (``MINIGRAD_NATIVE=0``, or no compiler): a test that compares the native path with the
NumPy path would compare the NumPy path with itself there. ``one_blas_thread`` caps the BLAS
pool for tests that train whole networks of small products.
"""
import os

import numpy
import pytest
from hypothesis import settings

from helpers import DEVICES, FLOAT_DTYPES, native_unavailable_reason
from minigrad._config import config

settings.register_profile("ci", deadline=None, max_examples=25, derandomize=True)
settings.register_profile("thorough", deadline=None, max_examples=300)
# the widest run (tests/core/test_api_walk.py makes 160 calls per example: 160,000)
settings.register_profile("wide", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_runtest_setup(item):
    if item.get_closest_marker("requires_native") is not None:
        reason = native_unavailable_reason()
        if reason is not None:
            pytest.skip(reason)


@pytest.fixture(params=DEVICES)
def device(request):
    """``"CPU"`` or ``"GPU"``."""
    return request.param


@pytest.fixture(params=FLOAT_DTYPES)
def dtype(request):
    """``numpy.float16`` or ``numpy.float32``."""
    return numpy.dtype(request.param)


@pytest.fixture(autouse=True)
def _restore_config():
    """Undo any change a test makes to the global modes (device, grad recording, autocast, and
    any mode added later): the values set on ``config`` live in its instance dict."""
    saved = dict(vars(config))
    yield
    vars(config).clear()
    vars(config).update(saved)


@pytest.fixture
def one_blas_thread():
    """Run the test with one BLAS thread (``threadpoolctl``; as it is when that is missing): a
    training run of small products (LeNet's convolutions, a digits MLP) gains nothing from a
    second thread, and on a busy machine a thread waiting for a core makes the products tens of
    times slower."""
    try:
        import threadpoolctl
    except ImportError:
        yield
        return
    with threadpoolctl.threadpool_limits(limits=1):
        yield
