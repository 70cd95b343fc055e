"""The ``path`` fixture of the fp16 op tests: each test runs with the native host conversions
(``minigrad._fastcast``) as found and with the host library gone, what ``MINIGRAD_NATIVE=0``
gives."""
import pytest

from minigrad import _fastcast
from minigrad.amp import kernels


@pytest.fixture(params=["native", "numpy"])
def path(request, monkeypatch):
    """The host library as found, or gone (what MINIGRAD_NATIVE=0 gives)."""
    _fastcast._native.clear()
    if request.param == "numpy":
        monkeypatch.setattr(kernels, "host_library", lambda: None)
        assert _fastcast._functions() is None
    elif _fastcast._functions() is None:
        pytest.skip("no host library with vector fp16 conversion here")
    yield request.param
    _fastcast._native.clear()
