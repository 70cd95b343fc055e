"""The public view of the float-status kernels: their source, and how this process runs them."""
from helpers import REPO_ROOT, native_unavailable_reason
from minigrad.amp import float_status


def test_kernel_source_is_the_shipped_cuda_file():
    source = float_status.kernel_source()
    assert source == (REPO_ROOT / "kernels" / "float_status.cu").read_text()
    assert 'extern "C" __global__' in source and "status[0] = 1.0f;" in source


def test_host_implementation_says_which_path_checks_numpy_arrays():
    kind, reason = float_status.host_implementation()
    if native_unavailable_reason() is None:
        assert (kind, reason) == ("native", None)
    else:
        assert kind == "numpy" and isinstance(reason, str) and reason
