"""Shared fixtures: devices, dtypes, the hypothesis profile, and a clean global config per test.

Use the ``device`` fixture, or ``@pytest.mark.parametrize("device", DEVICES)`` (``from conftest
import DEVICES``): GPU cases carry the ``gpu`` mark and are skipped, with the reason, without CuPy.
"""
import os

import numpy
import pytest
from hypothesis import settings

from minigrad import backend
from minigrad._config import config

settings.register_profile("ci", deadline=None, max_examples=25, derandomize=True)
settings.register_profile("thorough", deadline=None, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_NO_GPU = pytest.mark.skipif(not backend.CUDA_AVAILABLE,
                             reason=f"needs CuPy and a CUDA GPU ({backend.CUPY_IMPORT_ERROR})")
DEVICES = [pytest.param("CPU", id="CPU"),
           pytest.param("GPU", id="GPU", marks=[pytest.mark.gpu, _NO_GPU])]
FLOAT_DTYPES = [pytest.param(numpy.float16, id="float16"), pytest.param(numpy.float32, id="float32")]


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
