"""``minigrad.communication`` in one process (no ``init``, or ``init`` refused): a group of one,
the collectives' checks, the parallel context, and ``init`` without mpi4py."""
import ast
import sys

import numpy
import pytest

import minigrad
from helpers import DEVICES, REPO_ROOT
from minigrad import backend, communication, nn


@pytest.fixture(autouse=True)
def _stand_alone():
    minigrad.reset_auto_parallel_context()
    yield
    minigrad.reset_auto_parallel_context()


def test_without_init_one_process():
    assert not communication.is_initialized()
    assert (communication.get_rank(), communication.get_group_size()) == (0, 1)
    assert (communication.get_local_rank(), communication.get_local_rank_size()) == (0, 1)
    assert communication.get_rank("hccl_world_group") == 0  # MindSpore's world group names
    communication.barrier()
    communication.release()  # nothing to release: no error


@pytest.mark.parametrize("device", DEVICES)
def test_collectives_of_a_group_of_one_return_the_input(device):
    x = backend.to_device(numpy.arange(6, dtype=numpy.float32).reshape(2, 3), device)
    xp = backend.get_array_module(x)
    for op in communication.REDUCE_OPS:
        out = communication.all_reduce(x[:, ::2], op)  # any layout; a new array
        assert out is not x and backend.device_of(out) == device
        assert xp.array_equal(out, x[:, ::2])
    assert xp.array_equal(communication.broadcast(x), x)
    gathered = communication.all_gather(x)
    assert gathered.shape == (1, 2, 3) and backend.device_of(gathered) == device
    y = x.copy()
    assert communication.all_reduce_(y, "mean") is y
    assert communication.any_rank(True) and not communication.any_rank(numpy.bool_(False))
    assert communication.all_gather_object({"a": 1}) == [{"a": 1}]
    assert communication.broadcast_object(5) == 5


def test_collectives_refuse_bad_arguments():
    with pytest.raises(ValueError, match=r"all_reduce: op must be one of .* got 'avg'"):
        communication.all_reduce(numpy.ones(2), "avg")
    with pytest.raises(TypeError,
                       match=r"array must be a NumPy or CuPy array, got \[1.0, 2.0\] \(list\)"):
        communication.all_reduce([1.0, 2.0])
    with pytest.raises(ValueError, match="C-contiguous and writeable"):
        communication.all_reduce_(numpy.ones((2, 4))[:, ::2])
    frozen = numpy.ones(3)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="C-contiguous and writeable"):
        communication.all_reduce_(frozen)
    with pytest.raises(TypeError, match=r"all_reduce_: array must be of a float dtype for "
                                        r"op='mean', not int64, got array\(\[1, 1\]\)"):
        communication.all_reduce(numpy.ones(2, numpy.int64), "mean")
    with pytest.raises(ValueError, match=r"broadcast: root must be an int in \[0, 0\], got 1"):
        communication.broadcast(numpy.ones(2), root=1)
    with pytest.raises(TypeError, match=r"broadcast: root must be an int in \[0, 0\], got 0.0"):
        communication.broadcast(numpy.ones(2), root=0.0)
    with pytest.raises(ValueError, match="get_rank: group must be None or the world group"):
        communication.get_rank("my_group")


def test_init_without_mpi4py_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py raises ImportError
    with pytest.raises(ImportError, match=r'pip install "minigrad\[mpi\]"'):
        communication.init()
    assert not communication.is_initialized()


def test_init_refuses_an_unknown_backend():
    with pytest.raises(ValueError, match=r"'backend_name' must be None or one of "
                                         r"\('mpi', 'nccl'\), got 'hccl'"):
        communication.init("hccl")


@pytest.mark.skipif(backend.CUDA_AVAILABLE, reason="checks the error without CuPy/GPU")
def test_init_nccl_without_cupy_says_why():
    with pytest.raises(RuntimeError, match="init\\('nccl'\\) needs CuPy and a CUDA GPU"):
        communication.init("nccl")


def test_parallel_context_set_get_reset():
    assert minigrad.get_auto_parallel_context("parallel_mode") == "stand_alone"
    assert not communication.is_data_parallel()
    minigrad.set_auto_parallel_context(parallel_mode=minigrad.ParallelMode.DATA_PARALLEL,
                                       gradients_mean=True,
                                       comm_fusion={"allreduce": {"mode": "size", "config": 2}})
    assert communication.is_data_parallel()
    assert minigrad.get_auto_parallel_context("gradients_mean") is True
    assert communication.bucket_bytes() == 2 * 2 ** 20
    minigrad.reset_auto_parallel_context()
    assert minigrad.get_auto_parallel_context("gradients_mean") is False
    assert communication.bucket_bytes() == 25 * 2 ** 20


@pytest.mark.parametrize("kwargs, error, text", [
    ({"parallel_mode": "model_parallel"}, ValueError, "'parallel_mode' must be one of"),
    ({"parallel_mode": "auto_parallel"}, ValueError, "'auto_parallel' is not implemented"),
    ({"gradients_mean": 1}, TypeError, "context: gradients_mean must be a bool, got 1 \\(int\\)"),
    ({"device_num": -1}, ValueError, "context: device_num must be a non-negative int, got -1"),
    ({"global_rank": 1.0}, TypeError, "context: global_rank must be a non-negative int, got 1.0"),
    ({"gradient_fp32_sync": False}, ValueError, "reduces fp16 gradients in fp32"),
    ({"comm_fusion": {"allreduce": {"mode": "index", "config": [2]}}}, ValueError,
     "'comm_fusion' must be"),
    ({"strategy_ckpt_load_file": "x"}, ValueError, "'strategy_ckpt_load_file' is not a key"),
])
def test_parallel_context_refuses_bad_values_and_changes_nothing(kwargs, error, text):
    with pytest.raises(error, match=text):
        minigrad.set_auto_parallel_context(**{"parallel_mode": "data_parallel", **kwargs})
    assert minigrad.get_auto_parallel_context("parallel_mode") == "stand_alone"
    with pytest.raises(ValueError, match="unknown key 'mode'"):
        minigrad.get_auto_parallel_context("mode")


def test_all_reduce_buffer_in_one_process_is_a_plain_array_reduced_as_any_other():
    assert minigrad.get_auto_parallel_context("all_reduce_shared_memory") is True
    for dtype in (numpy.float32, numpy.float64, numpy.float16, numpy.int32):
        buffer = communication.all_reduce_buffer(5, dtype)
        assert (type(buffer), buffer.shape, buffer.dtype) == (numpy.ndarray, (5,), dtype)
        buffer[...] = 3
        assert communication.all_reduce_(buffer, "sum") is buffer
        numpy.testing.assert_array_equal(buffer, 3)
    assert communication.all_reduce_buffer(0, numpy.float32).shape == (0,)
    with pytest.raises(TypeError, match="all_reduce_buffer: size must be a non-negative int, "
                                        r"got 2.5 \(float\)"):
        communication.all_reduce_buffer(2.5, numpy.float32)
    with pytest.raises(ValueError, match="all_reduce_buffer: size must be a non-negative int, "
                                         "got -1"):
        communication.all_reduce_buffer(-1, numpy.float32)
    with pytest.raises(TypeError, match="all_reduce_shared_memory must be a bool, got 1"):
        minigrad.set_auto_parallel_context(all_reduce_shared_memory=1)
    minigrad.set_auto_parallel_context(all_reduce_shared_memory=False)
    assert not nn.DistributedGradReducer([minigrad.Parameter(numpy.zeros(2))]).shared


def test_reduce_flag_in_one_process():
    assert communication.reduce_flag(numpy.True_) is True
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel")
    assert communication.reduce_flag(0) is False


def test_the_package_imports_only_layer_one():
    """communication sits in layer 1 (the amp core, optim and nn import it): its modules import
    no minigrad module but ``backend``, ``dtype``, ``_checks`` and each other (read from the
    source)."""
    allowed = {"minigrad.backend", "minigrad.dtype", "minigrad._checks"}
    for path in (REPO_ROOT / "minigrad" / "communication").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                if name.startswith("minigrad.") and not name.startswith("minigrad.communication"):
                    assert name in allowed, f"{path.name} imports {name}"


def test_plan_shares_balances_the_cost_greedily_the_same_way_every_time():
    assert communication.plan_shares([5, 1, 4, 2, 3], 2) == [0, 0, 1, 0, 1]  # 5+2+1 | 4+3
    assert communication.plan_shares([1, 1, 1], 1) == [0, 0, 0]
    assert communication.plan_shares([2, 2, 2, 2], 3) == [0, 1, 2, 0]  # ties: the lowest rank
    assert communication.plan_shares([], 2) == []
    with pytest.raises(ValueError, match=r"plan_shares: costs\[1\] must be a finite float in "
                                         r"\[0.0, inf\), got -1"):
        communication.plan_shares([1, -1], 2)
    with pytest.raises(ValueError, match="plan_shares: size must be a positive int, got 0"):
        communication.plan_shares([1], 0)


def test_share_work_in_a_group_of_one_computes_everything_in_order():
    calls = []

    def compute(indices):
        calls.append(indices)
        return [10 * i for i in indices]
    assert communication.share_work([3, 1, 2], compute) == [0, 10, 20]
    assert calls == [[0, 1, 2]]
    assert communication.share_work([], compute) == [] and calls == [[0, 1, 2]]
    with pytest.raises(ValueError, match="'compute' returned 1 results for 2 items"):
        communication.share_work([1, 1], lambda indices: [0])


def test_distributed_inversion_is_a_context_flag_that_needs_a_group():
    assert communication.get_auto_parallel_context("distributed_inversion") is False
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel", distributed_inversion=True)
    assert communication.get_auto_parallel_context("distributed_inversion") is True
    assert not communication.shares_inversions()  # a group of one inverts everything itself
    with pytest.raises(TypeError, match="distributed_inversion"):
        minigrad.set_auto_parallel_context(distributed_inversion="yes")
