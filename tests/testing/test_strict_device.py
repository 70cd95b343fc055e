"""The strict device refuses what CuPy refuses (or waits for silently), counts host reads, and
offers only CuPy's names; on a machine with CuPy its names are checked against the real one."""
import operator

import numpy
import pytest

from helpers import NO_GPU
from minigrad import Tensor, backend
from minigrad.testing import _cupy_names
from minigrad.testing.strict_device import StrictArray, strict_device


@pytest.fixture
def strict():
    with strict_device() as reads:
        yield backend.cupy, reads


def test_backend_reports_it_as_the_gpu_and_restores_itself():
    before = backend.cupy, backend.CUDA_AVAILABLE
    with strict_device():
        x = Tensor(numpy.ones(3, numpy.float32), device="GPU")
        assert isinstance(x.data, StrictArray) and x.device == "GPU"
        assert backend.get_array_module(x.data) is backend.cupy
    assert (backend.cupy, backend.CUDA_AVAILABLE) == before


@pytest.mark.parametrize("convert", [numpy.asarray, bool, float, int, operator.index,
                                     lambda a: a.tolist(), lambda a: a.tobytes(),
                                     lambda a: f"{a:.3f}"],
                         ids=["asarray", "bool", "float", "int", "index", "tolist", "tobytes",
                              "format"])
def test_implicit_host_conversions_are_type_errors(strict, convert):
    cupy, reads = strict
    a = cupy.asarray(numpy.array(3, numpy.int32))
    with pytest.raises(TypeError):
        convert(a)
    assert reads.count == 0


def test_explicit_reads_are_counted_with_their_site(strict):
    cupy, reads = strict
    a = cupy.arange(6, dtype=numpy.float32)
    assert a.sum().item() == 15.0
    assert cupy.asnumpy(a).tolist() == [0, 1, 2, 3, 4, 5]
    assert a.get().shape == (6,)
    assert backend.read_scalar(a[2]) == 2.0
    assert reads.count == 4
    assert "test_strict_device.py" in reads.sites[0] and "(item)" in reads.sites[0]


def test_what_cupy_synchronises_for_is_a_read(strict):
    cupy, reads = strict
    a = cupy.arange(6, dtype=numpy.float32)
    a[a > 2]
    cupy.nonzero(a)
    cupy.bincount(cupy.arange(3))
    assert reads.count == 3


def test_reductions_and_single_elements_stay_on_the_device(strict):
    cupy, reads = strict
    a = cupy.arange(6, dtype=numpy.float32)
    for value in (a.sum(), a[0], cupy.isfinite(a).all(), a.max(), cupy.vdot(a, a)):
        assert isinstance(value, StrictArray) and value.shape == ()
    assert reads.count == 0


def test_host_arrays_in_device_operations_are_refused(strict):
    cupy, reads = strict
    a = cupy.zeros(3, numpy.float32)
    host = numpy.ones(3, numpy.float32)
    with pytest.raises(TypeError, match="Unsupported type"):
        a + host
    with pytest.raises(TypeError, match="Unsupported type"):
        cupy.add(a, host)
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray"):
        a[...] = host
    a[...] = numpy.float32(2)  # a scalar fills, as in CuPy
    a[numpy.array([0, 1])] = host[:2]  # through advanced indexing CuPy uploads it
    assert reads.uploads == 2 and reads.count == 0


def test_names_cupy_lacks_are_missing(strict):
    cupy, _ = strict
    with pytest.raises(AttributeError):
        cupy.errstate
    with pytest.raises(AttributeError):
        cupy.asarray(numpy.ones(2)).ctypes
    assert not hasattr(cupy.asarray(numpy.ones(2)).flags, "aligned")


def test_numpy_functions_dispatch_to_the_device(strict):
    cupy, reads = strict
    a = cupy.arange(4, dtype=numpy.float32)
    assert isinstance(numpy.concatenate([a, a]), StrictArray)
    assert isinstance(numpy.exp(a), StrictArray)
    with pytest.raises(TypeError):
        numpy.concatenate([a, numpy.ones(2, numpy.float32)])


def test_the_float_status_kernels_run_on_the_host(strict):
    from minigrad.amp import float_status
    cupy, reads = strict
    grads = [cupy.asarray(numpy.array([1.0, 2.0], numpy.float32)),
             cupy.asarray(numpy.array([numpy.inf], numpy.float16))]
    status = float_status.alloc_status(grads[0])
    float_status.check_overflow(status, *grads)
    assert float_status.get_status(status) is True


@pytest.mark.gpu
@NO_GPU
def test_every_name_exists_in_the_installed_cupy():
    cupy = backend.cupy
    assert not [n for n in _cupy_names.TOP if not hasattr(cupy, n)]
    assert not [n for n in _cupy_names.LINALG if not hasattr(cupy.linalg, n)]
    assert not [n for n in _cupy_names.NDARRAY if not hasattr(cupy.ndarray, n)]
    assert not [n for n in _cupy_names.GENERATOR if not hasattr(cupy.random.Generator, n)]


def test_integer_array_indexing_wraps_around_as_cupy_does(strict):
    xp, reads = strict
    x = xp.asarray(numpy.arange(10.0).reshape(5, 2))
    assert x[xp.asarray(numpy.array([1, 7, -1]))].get().tolist() == [[2, 3], [4, 5], [8, 9]]
    assert x[xp.asarray(numpy.array([6])), 1].get().tolist() == [3.0]
