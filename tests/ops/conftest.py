"""The ``path`` fixture of the fp16 op tests: each test runs with the native host conversions
(``minigrad._native``) as found and with the host library gone, what ``MINIGRAD_NATIVE=0``
gives."""
import pytest

from minigrad import _native


@pytest.fixture(params=["native", "numpy"])
def path(request):
    """The host library as found, or gone (what MINIGRAD_NATIVE=0 gives)."""
    if request.param == "numpy":
        with _native.numpy_fallback():
            assert _native.loaded().conversions is None
            yield request.param
        return
    if _native.loaded().fp16_passes is None:
        pytest.skip("no host library with vector fp16 conversion here")
    yield request.param
