"""The communication package's argument checks beyond what the API walk pins, in one process:
a float dtype is any of minigrad's (``dtype.is_float``: bfloat16 too, whose NumPy kind is not
"f"), and the collectives, the parameter helpers and the work sharing name what they refuse."""
import numpy
import pytest

import minigrad
from minigrad import communication, nn
from minigrad import dtype as dtypes

needs_bf16 = pytest.mark.skipif(not dtypes.HAS_LOWP, reason="bfloat16 needs ml_dtypes")


@pytest.fixture(autouse=True)
def _stand_alone():
    minigrad.reset_auto_parallel_context()
    yield
    minigrad.reset_auto_parallel_context()


@needs_bf16
def test_mean_of_a_bfloat16_array_is_a_float_mean():
    x = numpy.array([1.0, 3.0], dtypes.bfloat16)
    assert x.dtype.kind != "f"  # what a kind test would refuse
    out = communication.all_reduce(x, "mean")
    assert out.dtype == dtypes.bfloat16 and out.tolist() == [1.0, 3.0] and out is not x
    y = x.copy()
    assert communication.all_reduce_(y, "mean") is y
    assert communication.all_reduce_start(x.copy(), "mean").wait().tolist() == [1.0, 3.0]


def test_mean_refuses_arrays_of_no_float_dtype_by_name():
    for dtype in (numpy.int32, numpy.bool_):
        with pytest.raises(TypeError, match=rf"array must be of a float dtype for op='mean', "
                                            rf"not {numpy.dtype(dtype)}, got array\("):
            communication.all_reduce(numpy.ones(2, dtype), "mean")


def test_collectives_take_arrays_only():
    for value in (numpy.float32(1.0), minigrad.Tensor(numpy.ones(2, numpy.float32))):
        for collective in (communication.all_reduce, communication.all_reduce_,
                           communication.broadcast, communication.all_gather):
            with pytest.raises(TypeError, match="array must be a NumPy or CuPy array, got "):
                collective(value)
    zero_d = numpy.array(2.0)  # a 0-d array is an array
    assert communication.all_reduce(zero_d).shape == () and communication.all_reduce_(zero_d) == 2
    with pytest.raises(TypeError, match=r"all_reduce_: op must be one of \['sum', .*\], got "
                                        r"array\(\[1\., 1\.\]\) \(ndarray\)"):
        communication.all_reduce_(numpy.ones(2), op=numpy.ones(2))
    with pytest.raises(ValueError, match=r"broadcast_: array must be C-contiguous \(broadcast"):
        communication.broadcast_(numpy.ones((2, 4))[:, ::2])


def test_group_must_be_the_world_groups_name():
    with pytest.raises(TypeError, match=r"get_group_size: group must be None or the world group "
                                        r"'world' .*, got \['world'\] \(list\)"):
        communication.get_group_size(["world"])
    assert communication.get_local_rank_size("nccl_world_group") == 1


def test_all_reduce_buffer_dtype_is_a_numeric_dtype():
    assert communication.all_reduce_buffer(2, "float32").dtype == numpy.float32
    with pytest.raises(TypeError, match=r"all_reduce_buffer: dtype must be one of \[.*\] \(a "
                                        r"dtype, a scalar type or a dtype's name\), got "
                                        r"np.float32\(3.0\)"):
        communication.all_reduce_buffer(2, numpy.float32(3.0))
    with pytest.raises(ValueError, match=r"dtype must be one of \[.*\], got 'complex64'"):
        communication.all_reduce_buffer(2, "complex64")


def test_parameter_helpers_check_the_parameters_in_a_group_of_one():
    params = nn.Dense(3, 2).trainable_params()
    communication.synchronize_parameters(params)  # nothing to do in a group of one
    communication.synchronize_parameters(p for p in params)  # an iterator is taken too
    communication.check_same_model(params)
    for helper in (communication.synchronize_parameters, communication.check_same_model,
                   communication.broadcast_parameters):
        with pytest.raises(TypeError, match=rf"{helper.__name__}: parameters must be a tuple, "
                                            r"list or iterator of Parameters, got 'w'"):
            helper("w")
        with pytest.raises(TypeError, match=r"parameters\[1\] must be a Parameter, got 3"):
            helper([params[0], 3])
    with pytest.raises(ValueError, match=r"broadcast_parameters: root must be an int in \[0, 0\], "
                                         r"got 1"):
        communication.broadcast_parameters(params, root=1)


def test_work_sharing_checks_costs_size_and_compute():
    with pytest.raises(TypeError, match=r"share_work: costs must be a tuple or list of finite "
                                        r"numbers >= 0, got 'abc'"):
        communication.share_work("abc", list)
    with pytest.raises(TypeError, match=r"costs\[0\] must be a finite float .*, got None"):
        communication.plan_shares([None], 1)
    with pytest.raises(TypeError, match="plan_shares: size must be a positive int, got True"):
        communication.plan_shares([1.0], True)
    with pytest.raises(TypeError, match="share_work: compute must be callable, got None"):
        communication.share_work([1.0], None)
    assert communication.plan_shares((numpy.float32(2.0), 1), 2) == [0, 1]
