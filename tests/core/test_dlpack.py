"""DLPack in and out: with NumPy and PyTorch on the host (shared memory, either way), with
CuPy and PyTorch CUDA tensors on a GPU, and through the same code on the strict device."""
import numpy
import pytest

import minigrad
from helpers import NO_GPU
from minigrad import Tensor, backend
from minigrad.testing.strict_device import StrictArray, strict_device


def test_numpy_in_and_out_share_memory_whatever_the_context():
    source = numpy.arange(4, dtype=numpy.float32)
    with strict_device():
        minigrad.set_context(device_target="GPU")
        t = Tensor.from_dlpack(source)  # a host array stays on the host: no copy
        assert t.device == "CPU"
    source[0] = 9
    assert t.asnumpy()[0] == 9
    assert numpy.shares_memory(numpy.from_dlpack(t), source)


def test_pytorch_cpu_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    t = Tensor(numpy.arange(4, dtype=numpy.float16))
    out = torch.from_dlpack(t)
    assert out.dtype == torch.float16 and out.data_ptr() == t.data.ctypes.data
    source = torch.arange(3, dtype=torch.float32)
    back = minigrad.from_dlpack(source)
    source[1] = 7
    assert back.device == "CPU" and back.asnumpy().tolist() == [0.0, 7.0, 2.0]
    with pytest.raises(BufferError, match="require"):  # PyTorch's refusal, passed on
        minigrad.from_dlpack(torch.ones(2, requires_grad=True))


def test_what_is_not_dlpack_is_a_type_error():
    with pytest.raises(TypeError, match="from_dlpack: obj must be an array with DLPack"):
        minigrad.from_dlpack([1.0, 2.0])


def test_device_tensors_go_through_the_device_path():
    with strict_device():
        t = Tensor(numpy.ones(3, numpy.float32), device="GPU")
        assert t.__dlpack_device__() == (2, 0)  # kDLCUDA, as CuPy's
        back = minigrad.from_dlpack(t)
        assert back.device == "GPU" and isinstance(back.data, StrictArray)
        assert backend.cupy.from_dlpack(t).data.ptr == t.data.data.ptr  # shared, not copied


@pytest.mark.gpu
@NO_GPU
def test_cupy_and_torch_cuda_in_and_out():
    cupy = backend.cupy
    t = Tensor(numpy.arange(3, dtype=numpy.float32), device="GPU")
    c = cupy.from_dlpack(t)
    assert c.data.ptr == t.data.data.ptr
    assert minigrad.from_dlpack(c).device == "GPU"
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    cuda = torch.from_dlpack(t)
    assert cuda.is_cuda and cuda.data_ptr() == t.data.data.ptr
    back = minigrad.from_dlpack(torch.arange(3.0, device="cuda"))
    assert back.device == "GPU" and back.asnumpy().tolist() == [0.0, 1.0, 2.0]
