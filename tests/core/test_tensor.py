"""Tensor construction, conversion, devices, DLPack, context, repr, comparisons, setitem,
Parameter."""
import copy

import numpy
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, backend
from minigrad import dtype as mstype


@pytest.mark.parametrize("data,dtype", [
    (1.5, mstype.float32), (2, mstype.int64), (True, mstype.bool_),
    ([1.0, 2.0], mstype.float32), ([[1, 2], [3, 4]], mstype.int64), ([1, 2.5], mstype.float32),
    ([True, False], mstype.bool_), ((1, 2), mstype.int64), ([], mstype.float32),
    (numpy.array([1.0], numpy.float16), mstype.float16), (numpy.array([1.0]), mstype.float64),
    (numpy.array([1], numpy.int32), mstype.int32), (numpy.array([1], numpy.uint8), mstype.uint8),
    (numpy.float64(2.0), mstype.float64), (numpy.int32(3), mstype.int32),
])
def test_construction_dtype_rules(data, dtype):
    t = minigrad.Tensor(data)
    assert t.dtype == dtype
    numpy.testing.assert_array_equal(t.asnumpy(), numpy.asarray(data))


def test_mixed_python_numbers_are_not_truncated():
    numpy.testing.assert_array_equal(
        minigrad.Tensor([[1, 2], [3, 4.5]]).asnumpy(), [[1, 2], [3, 4.5]]
    )


@pytest.mark.parametrize("dtype", ["float16", numpy.float32, mstype.float64, mstype.int32, "bool"])
def test_dtype_argument_casts(dtype):
    t = minigrad.Tensor([0.0, 1.5, 2.0], dtype=dtype)
    assert t.dtype == numpy.dtype(dtype)
    numpy.testing.assert_array_equal(t.asnumpy(), numpy.array([0.0, 1.5, 2.0]).astype(dtype))


@pytest.mark.parametrize("bad", [numpy.complex64, "int16", "float128", numpy.uint16])
def test_unsupported_dtype_argument_raises(bad):
    with pytest.raises(ValueError, match="dtype must be one of"):
        minigrad.Tensor([1.0], dtype=bad)


@pytest.mark.parametrize(
    "data", [numpy.array([1 + 2j]), numpy.array(["a"]), numpy.array([1], numpy.int16)]
)
def test_unsupported_data_dtype_raises(data):
    with pytest.raises(ValueError, match=rf"data's dtype must be one of .*got"
        rf" dtype\('{data.dtype}'\)"):
        minigrad.Tensor(data)


def test_mindspore_dtype_names():
    assert mstype.float16 is minigrad.float16 and mstype.half == mstype.float16
    assert mstype.float_ == mstype.float32 and mstype.double == mstype.float64
    assert minigrad.Tensor([1.0], mstype.float16).dtype == numpy.float16


def test_construction_from_tensor_shares_data_and_numpy_is_not_copied():
    a = numpy.arange(3.0)
    t = minigrad.Tensor(a)
    assert numpy.shares_memory(t.asnumpy(), a)
    u = minigrad.Tensor(t)
    assert numpy.shares_memory(u.asnumpy(), a) and u.is_leaf and not u.requires_grad


def test_array_properties_and_conversions():
    t = minigrad.Tensor(numpy.arange(6, dtype=numpy.float32).reshape(2, 3))
    assert t.shape == (2, 3) and t.ndim == 2 and t.dim() == 2 and t.size == 6 and len(t) == 2
    assert t.is_leaf and t.device == "CPU"
    assert t.tolist() == [[0, 1, 2], [3, 4, 5]]
    s = minigrad.Tensor(2.5)
    assert s.item() == 2.5 and float(s) == 2.5 and int(s) == 2 and bool(s)
    assert isinstance(t.asnumpy(), numpy.ndarray) and isinstance(t.numpy(), numpy.ndarray)


def test_array_protocol():
    t = minigrad.Tensor([1.0, 2.0], dtype=mstype.float16)
    a = numpy.asarray(t)
    assert a.dtype == numpy.float16
    assert numpy.array(t, dtype=numpy.float64).dtype == numpy.float64
    numpy.testing.assert_array_equal(numpy.exp(numpy.asarray(t)), numpy.exp(a))


def test_dlpack_out_and_in_share_memory():
    t = minigrad.Tensor(numpy.arange(4.0, dtype=numpy.float32))
    a = numpy.from_dlpack(t)
    assert numpy.shares_memory(a, t.asnumpy())
    back = minigrad.from_dlpack(numpy.arange(3, dtype=numpy.int32))
    assert isinstance(back, minigrad.Tensor) and back.dtype == mstype.int32
    source = numpy.ones(3, numpy.float16)
    shared = minigrad.from_dlpack(source)
    source[0] = 7
    assert shared.asnumpy()[0] == 7 and shared.device == "CPU"


def test_set_context():
    minigrad.set_context(device_target="CPU", mode=0, device_id=0)  # MindSpore keys are accepted
    assert minigrad.get_context("device_target") == "CPU"
    with pytest.raises(ValueError,
                       match=r"device_target must be one of \('CPU', 'GPU'\), got 'TPU'"):
        minigrad.set_context(device_target="TPU")
    with pytest.raises(ValueError, match="unknown context key 'modes'"):
        minigrad.get_context("modes")
    # MindSpore's own keys read back (MindSpore's get_context example reads device_id)
    assert minigrad.get_context("mode") == 0 and minigrad.get_context("device_id") == 0


def test_mindspore_mode_constants_and_defaults():
    from minigrad import context

    before = dict(context._ignored)
    try:
        context._ignored.clear()
        assert minigrad.get_context("mode") == minigrad.PYNATIVE_MODE == 1
        minigrad.set_context(mode=minigrad.GRAPH_MODE)  # accepted; minigrad stays eager
        assert minigrad.get_context("mode") == minigrad.GRAPH_MODE == 0
        with pytest.raises(ValueError, match="'save_graphs' has no value"):
            minigrad.get_context("save_graphs")
    finally:
        context._ignored.clear()
        context._ignored.update(before)


@pytest.mark.skipif(backend.CUDA_AVAILABLE, reason="checks the error raised without CuPy")
def test_gpu_without_cupy_raises_runtime_error():
    with pytest.raises(RuntimeError, match="needs CuPy"):
        minigrad.set_context(device_target="GPU")
    assert minigrad.get_context("device_target") == "CPU"
    with pytest.raises(RuntimeError, match="needs CuPy"):
        minigrad.Tensor([1.0]).to("GPU")
    with pytest.raises(RuntimeError, match="needs CuPy"):
        minigrad.Tensor([1.0], device="GPU")


def test_to_same_device_and_dtype():
    t = minigrad.Tensor([1.0, 2.0], requires_grad=True)
    assert t.to("CPU") is t and t.to("cpu") is t
    h = t.to(dtype=mstype.float16)
    assert h.dtype == mstype.float16
    (h * 2).sum().backward()
    assert t.grad.dtype == mstype.float32
    numpy.testing.assert_array_equal(t.grad.asnumpy(), [2.0, 2.0])
    assert t.astype(mstype.float64).dtype == mstype.float64


def test_repr():
    text = repr(minigrad.Tensor([[1.0, 2.0]], requires_grad=True))
    assert "shape=[1, 2]" in text and "dtype=float32" in text and "requires_grad=True" in text
    assert "[[1., 2.]]" in text
    assert "requires_grad" not in repr(minigrad.Tensor([1]))
    long = repr(minigrad.Tensor(numpy.zeros(1000)))
    assert "..." in long and len(long) < 300


def test_comparisons_return_bool_tensors_and_tensors_stay_hashable():
    a, b = minigrad.Tensor([1.0, 2.0, 3.0]), minigrad.Tensor([2.0, 2.0, 2.0])
    for result, expected in (
        (a == b, [0, 1, 0]),
        (a != b, [1, 0, 1]),
        (a < b, [1, 0, 0]),
        (a <= b, [1, 1, 0]),
        (a > b, [0, 0, 1]),
        (a >= 2, [0, 1, 1]),
    ):
        assert isinstance(result, minigrad.Tensor) and result.dtype == mstype.bool_
        numpy.testing.assert_array_equal(result.asnumpy(), numpy.array(expected, bool))
    assert len({a: 1, b: 2}) == 2


def test_setitem():
    t = minigrad.Tensor(numpy.zeros((3, 3), numpy.float16))
    t[0] = 1.5
    t[1, 1:] = minigrad.Tensor([2.0, 3.0])
    t[t == 0] = -1
    t[minigrad.Tensor([2]), 0] = 9
    numpy.testing.assert_array_equal(t.asnumpy(), [[1.5, 1.5, 1.5], [-1, 2, 3], [9, -1, -1]])
    assert t.dtype == mstype.float16


def test_setitem_on_graph_tensor_raises_but_on_leaf_is_allowed():
    x = minigrad.Tensor([1.0, 2.0], requires_grad=True)
    x[0] = 5.0  # in-place update of a leaf (what an optimizer does)
    with pytest.raises(RuntimeError, match="part of a graph"):
        (x * 2)[0] = 1.0


def test_method_mirrors_of_the_ops():
    t = minigrad.Tensor(numpy.array([[1.0, 4.0], [9.0, 16.0]]))
    numpy.testing.assert_allclose(t.sqrt().asnumpy(), [[1, 2], [3, 4]])
    numpy.testing.assert_allclose(t.log().exp().asnumpy(), t.asnumpy())
    numpy.testing.assert_allclose(t.clip(2, 10).asnumpy(), [[2, 4], [9, 10]])
    assert t.swapaxes(0, 1).asnumpy()[0, 1] == 9.0
    assert t.mean().item() == 7.5 and t.max().item() == 16 and t.min(axis=0).tolist() == [1, 4]
    assert (-t).abs().sum().item() == 30
    assert t.relu().tanh().sigmoid().shape == (2, 2)


def test_parameter():
    p = minigrad.Parameter(minigrad.Tensor([1.0, 2.0], dtype=mstype.float16), name="fc.weight")
    assert isinstance(p, minigrad.Tensor) and p.requires_grad and p.is_leaf
    assert p.name == "fc.weight" and p.dtype == mstype.float16
    data = p.asnumpy()
    p.set_data(numpy.array([3.0, 4.0]))  # in place, cast to the parameter's dtype
    assert p.dtype == mstype.float16 and p.asnumpy() is data
    numpy.testing.assert_array_equal(p.asnumpy(), [3.0, 4.0])
    with pytest.raises(ValueError,
                       match=r"'fc.weight': data of shape \(3,\) must be of shape \(2,\)"):
        p.set_data(numpy.zeros(3))
    with pytest.raises(TypeError, match="name must be a non-empty str or None"):
        minigrad.Parameter([1.0], name=3)
    assert not minigrad.Parameter([1.0], requires_grad=False).requires_grad
    assert "fc.weight" in repr(p)
    (p * p).sum().backward()
    numpy.testing.assert_array_equal(p.grad.asnumpy(), [6.0, 8.0])


# ---- device-parametrized (the GPU cases run only with CuPy and a GPU) ----------------------


def test_tensor_on_device(device):
    t = minigrad.Tensor([1.0, 2.0], device=device)
    assert t.device == device
    assert isinstance(t.asnumpy(), numpy.ndarray)
    assert backend.device_of(t.data) == device
    assert repr(t).count("device=GPU") == (device == "GPU")


def test_context_sets_the_default_device(device):
    minigrad.set_context(device_target=device)
    t = minigrad.Tensor([1.0, 2.0])
    assert t.device == device
    assert minigrad.Tensor(numpy.ones(2)).device == device  # host data follows the context
    assert minigrad.Tensor(minigrad.Tensor(numpy.ones(2), device="CPU")).device == "CPU"


def test_ops_and_backward_stay_on_device(device):
    x = minigrad.Tensor(
        numpy.array([[1.0, 2.0], [3.0, 4.0]], numpy.float16), device=device, requires_grad=True
    )
    y = (minigrad.ops.matmul(x, x) * 2.0).sum()
    assert y.device == device and y.dtype == mstype.float16
    y.backward()
    assert x.grad.device == device and x.grad.dtype == mstype.float16


@pytest.mark.gpu
@pytest.mark.skipif(not backend.CUDA_AVAILABLE, reason="needs CuPy and a CUDA GPU")
def test_to_moves_between_devices_and_gradients_flow_back():
    x = minigrad.Tensor([1.0, 2.0], requires_grad=True)
    g = x.to("GPU")
    assert g.device == "GPU" and not g.is_leaf
    (g * g).sum().backward()
    assert x.grad.device == "CPU"
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 4.0])
    back = g.to("CPU", dtype=mstype.float16)
    assert back.device == "CPU" and back.dtype == mstype.float16


@pytest.mark.gpu
@pytest.mark.skipif(not backend.CUDA_AVAILABLE, reason="needs CuPy and a CUDA GPU")
def test_gpu_dlpack_roundtrip():
    import cupy

    t = minigrad.Tensor([1.0, 2.0], device="GPU")
    c = cupy.from_dlpack(t)
    assert isinstance(c, cupy.ndarray)
    back = minigrad.from_dlpack(c)
    assert back.device == "GPU"
    numpy.testing.assert_array_equal(back.asnumpy(), [1.0, 2.0])


def test_numpy_array_of_tensor_is_a_copy():
    # numpy.array(x) copies (copy=True is its default), as for PyTorch tensors; numpy.asarray
    # may share
    t = Tensor(np.arange(3, dtype=np.float32))
    a = np.array(t)
    a[0] = 99.0
    assert t.data[0] == 0.0


def test_numpy_array_copy_false_refuses_a_needed_copy():
    # NumPy 2 protocol: copy=False must raise ValueError when a copy (here: a cast) is needed
    t = Tensor(np.arange(3, dtype=np.float32))
    with pytest.raises(ValueError):
        np.array(t, dtype=np.float64, copy=False)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert np.shares_memory(np.asarray(t), t.data)


def test_iter_over_0d_tensor_raises():
    # PyTorch: TypeError "iteration over a 0-d tensor" (it silently yielded nothing)
    with pytest.raises(TypeError, match="0-d"):
        iter(Tensor(np.float32(2.0)))
    assert [r.shape for r in Tensor(np.zeros((2, 3), np.float32))] == [(3,), (3,)]


def test_in_is_elementwise_any():
    # NumPy / PyTorch: ``x in t`` is (t == x).any() (not "truth value ... ambiguous")
    t = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert 3.0 in t
    assert 30.0 not in t
    assert Tensor(np.float32(4.0)) in t


def test_int_float_of_one_element_tensor():
    # PyTorch: any one-element tensor converts; more elements is a clear error
    assert int(Tensor([3])) == 3
    assert float(Tensor([[2.5]])) == 2.5
    assert float(Tensor(np.float16(1.5))) == 1.5
    with pytest.raises(TypeError, match="one-element"):
        float(Tensor([1.0, 2.0]))


def test_index_protocol_for_integer_tensors():
    # PyTorch: an integer tensor of one element is an index (range, list indexing, slicing)
    assert [10, 20, 30][Tensor(1)] == 20
    assert list(range(Tensor(np.int32(3)))) == [0, 1, 2]
    assert operator_index(Tensor(np.int64(2))) == 2
    assert np.arange(5)[Tensor([2])].shape == (
        1,
    )  # still an index array to NumPy, as np.array([2])
    with pytest.raises(TypeError):
        [10, 20][Tensor(1.0)]


def operator_index(x):
    import operator

    return operator.index(x)


def test_format_of_0d_tensor():
    # PyTorch: format(t, spec) formats t.item() for a 0-d tensor
    assert format(Tensor(np.float32(2.5)), ".3f") == "2.500"
    assert f"{Tensor(np.float16(0.5)):.2f}" == "0.50"
    assert format(Tensor(np.float32(2.5))) == "2.5" == str(Tensor(np.float32(2.5)))  # str()
    # MindSpore 2.x: str (and print) give the values as NumPy does, repr adds shape and dtype
    assert str(Tensor(np.array([1.0, 2.0], np.float16))) == "[1. 2.]"
    assert repr(Tensor(np.float32(2.5))).startswith("Tensor(shape=[], dtype=float32")
    with pytest.raises(TypeError):
        format(Tensor([1.0, 2.0]), ".3f")


def test_deepcopy_of_non_leaf_tensor_raises():
    # PyTorch: only graph leaves support deepcopy (the copy's backward filled copies of the leaves,
    # leaving x.grad None without a word)
    x = Tensor(np.ones(3, np.float32), requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="leaves"):
        copy.deepcopy(y)
    x2 = copy.deepcopy(x)
    assert x2.requires_grad and x2.is_leaf and x2.data is not x.data


def test_tensor_of_a_string_names_data():
    for bad in ("abc", None, {"a": 1}, [1, "a"]):
        with pytest.raises(TypeError, match="Tensor: data must be a Tensor, a number or an arr"):
            Tensor(bad)
    with pytest.raises(ValueError, match="nested lists of equal lengths"):
        Tensor([[1.0, 2.0], [3.0]])
    assert Tensor(2.5).dtype == np.float32 and Tensor([1, 2]).dtype == np.int64  # defaults kept
