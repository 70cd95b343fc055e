"""The ``host_lib`` fixture: each host build of the float-status kernels, once per module."""
import pytest

from helpers.kernel_builds import build_host_library, host_builds


@pytest.fixture(scope="module", params=host_builds())
def host_lib(request, tmp_path_factory):
    return build_host_library(request.param, tmp_path_factory)
