"""``nn.DistributedGradReducer`` in one process: the bucket plan, the values it returns, its
checks, and data-parallel mode on a group of one (the same training as stand-alone)."""
import numpy
import pytest

import minigrad
from minigrad import Parameter, Tensor, communication, nn
from minigrad.nn.distributed import plan_buckets


@pytest.fixture(autouse=True)
def _stand_alone():
    minigrad.reset_auto_parallel_context()
    yield
    minigrad.reset_auto_parallel_context()


def params(*shapes, dtype=numpy.float32):
    return [Parameter(numpy.zeros(s, dtype), name=f"p{i}") for i, s in enumerate(shapes)]


def test_buckets_fill_in_reverse_order_until_they_hold_the_byte_size():
    ps = params((10,), (20,), (5,), (100,), (1,))
    buckets = plan_buckets(ps, bucket_bytes=30 * 4, first_bucket_bytes=4)
    assert [[slot[0] for slot in b.slots] for b in buckets] == [[4], [3], [2, 1, 0]]
    assert [b.size for b in buckets] == [1, 100, 35]  # closed once full: 35 floats >= 30
    assert [slot[1] for slot in buckets[2].slots] == [0, 5, 25]  # offsets


def test_the_first_bucket_closes_at_one_mebibyte():
    ps = params((2 ** 18,), (2 ** 18,), (10,))  # 1 MiB, 1 MiB, 40 bytes
    buckets = plan_buckets(ps, bucket_bytes=2 ** 30)
    assert [[slot[0] for slot in b.slots] for b in buckets] == [[2, 1], [0]]
    small = plan_buckets(params((10,), (10,), (10,)), bucket_bytes=80)  # caps the first too
    assert [[slot[0] for slot in b.slots] for b in small] == [[2, 1], [0]]
    assert len(plan_buckets(params((3,), (3,), (3,)), bucket_bytes=100)) == 1


def test_float64_gradients_get_buckets_of_their_own_fp16_share_fp32():
    ps = params((4,), dtype=numpy.float16) + params((3,), dtype=numpy.float64) + params((2,))
    buckets = plan_buckets(ps, bucket_bytes=2 ** 20)
    assert [(b.dtype.name, [s[0] for s in b.slots]) for b in buckets] == [
        ("float32", [2, 0]), ("float64", [1])]


@pytest.mark.parametrize("mean, degree, expected", [(False, None, 1.0), (True, 4, 0.25)])
def test_reduced_values_sum_or_mean(mean, degree, expected):
    ps = params((2, 3), (3,)) + params((4,), dtype=numpy.float16)
    reducer = nn.DistributedGradReducer(ps, mean=mean, degree=degree, bucket_bytes=16)
    grads = (Tensor(numpy.full((2, 3), 2.0, numpy.float32)), None,
             Tensor(numpy.full(4, 60000.0, numpy.float16)))
    out = reducer(grads)
    assert [g.shape for g in out] == [(2, 3), (3,), (4,)]
    assert [g.dtype for g in out] == [numpy.float32] * 3  # fp16 is reduced (and returned) in fp32
    numpy.testing.assert_array_equal(out[0].asnumpy(), 2.0 * expected)
    numpy.testing.assert_array_equal(out[1].asnumpy(), 0.0)  # None counts as zeros
    numpy.testing.assert_array_equal(out[2].asnumpy(), 60000.0 * expected)
    assert len(reducer.buckets) == 2  # [fp16 (4,)] full at 16 bytes, then [(3,), (2, 3)]


def test_reducer_defaults_come_from_the_context():
    minigrad.set_auto_parallel_context(gradients_mean=True,
                                       comm_fusion={"allreduce": {"mode": "size", "config": 1}})
    reducer = nn.DistributedGradReducer(params((3,)))
    assert (reducer.mean, reducer.degree, reducer.bucket_bytes) == (True, 1, 2 ** 20)
    minigrad.set_auto_parallel_context(device_num=2)
    with pytest.raises(ValueError, match="device_num 2 is not the group size 1"):
        nn.DistributedGradReducer(params((3,)))


def test_reducer_refuses_bad_arguments():
    with pytest.raises(TypeError, match=r"DistributedGradReducer: parameters must be an iterable "
                                        r"of Parameters \(element 1 is a ndarray\), got \[Param"):
        nn.DistributedGradReducer(params((3,)) + [numpy.zeros(3)])
    with pytest.raises(TypeError, match=r"parameters must be an iterable of Parameters, got "
                                        r"Parameter\(name='p0'.*\(Parameter\)"):
        nn.DistributedGradReducer(params((3,))[0])  # one Parameter, not a list of them
    with pytest.raises(ValueError, match="fusion_type must be a non-negative int, got -1"):
        nn.DistributedGradReducer(params((3,)), fusion_type=-1)
    with pytest.raises(TypeError, match=r"group must be None or a str, got \[0\] \(list\)"):
        nn.DistributedGradReducer(params((3,)), group=[0])
    with pytest.raises(TypeError, match="DistributedGradReducer: mean must be a bool, got 1"):
        nn.DistributedGradReducer(params((3,)), mean=1)
    with pytest.raises(ValueError, match="DistributedGradReducer: degree must be a positive int, "
                                         "got 0"):
        nn.DistributedGradReducer(params((3,)), degree=0)
    with pytest.raises(TypeError, match="DistributedGradReducer: overlap must be a bool, got "
                                        "'yes'"):
        nn.DistributedGradReducer(params((3,)), overlap="yes")
    with pytest.raises(TypeError, match="bucket_bytes must be a positive int, got 0.5"):
        nn.DistributedGradReducer(params((3,)), bucket_bytes=0.5)
    with pytest.raises(ValueError, match="DistributedGradReducer: group must be None or the world "
                                         "group"):
        nn.DistributedGradReducer(params((3,)), group="pairs")
    reducer = nn.DistributedGradReducer(params((3,), (2,)))
    with pytest.raises(ValueError, match=r"arrays must be 2 arrays, one per parameter \(not 1\)"):
        reducer((Tensor(numpy.ones(3, numpy.float32)),))
    with pytest.raises(ValueError, match=r"gradient of 'p1' has shape \(3,\), expected \(2,\)"):
        reducer((Tensor(numpy.ones(3, numpy.float32)),) * 2)


def test_a_wrong_size_anywhere_is_refused_before_any_bucket_is_reduced(monkeypatch):
    """Buckets are reduced last parameter first: a wrong first gradient is found before the
    other buckets are filled or reduced, and the buckets keep the last step's values."""
    reducer = nn.DistributedGradReducer(params((3,), (2,)), bucket_bytes=4)
    assert len(reducer.buckets) == 2
    good = (Tensor(numpy.ones(3, numpy.float32)), Tensor(numpy.ones(2, numpy.float32)))
    reducer(good)
    kept = [b.buffer.copy() for b in reducer.buckets]
    reduced = []
    monkeypatch.setattr(communication, "all_reduce_", lambda a, op: reduced.append(a))
    with pytest.raises(ValueError, match=r"gradient of 'p0' has shape \(4,\), expected \(3,\)"):
        reducer((Tensor(numpy.full(4, 7.0, numpy.float32)), Tensor(numpy.full(2, 7.0,
                                                                              numpy.float32))))
    assert reduced == []
    for bucket, old in zip(reducer.buckets, kept):
        numpy.testing.assert_array_equal(bucket.buffer, old)


def _train(data_parallel, cell):
    minigrad.reset_auto_parallel_context()
    if data_parallel:
        minigrad.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    minigrad.set_seed(3)
    net = nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 2)])
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    with_loss = nn.WithLossCell(net, nn.MSELoss())
    train = (nn.TrainOneStepCell(with_loss, opt) if cell == "plain" else
             nn.TrainOneStepWithLossScaleCell(with_loss, opt,
                                              nn.DynamicLossScaleUpdateCell(2.0 ** 10, 2, 2)))
    rng = numpy.random.default_rng(0)
    for _ in range(3):
        train(Tensor(rng.standard_normal((5, 4)).astype(numpy.float32)),
              Tensor(rng.standard_normal((5, 2)).astype(numpy.float32)))
    return train, [p.asnumpy() for p in net.trainable_params()]


@pytest.mark.parametrize("cell", ["plain", "scaled"])
def test_data_parallel_on_one_process_trains_as_stand_alone(cell):
    train, parallel = _train(True, cell)
    assert isinstance(train.grad_reducer, nn.DistributedGradReducer)
    alone, stand_alone = _train(False, cell)
    assert not isinstance(alone.grad_reducer, nn.DistributedGradReducer)
    for a, b in zip(parallel, stand_alone):
        numpy.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_optimizer_synchronizes_nothing_in_a_group_of_one():
    minigrad.set_auto_parallel_context(parallel_mode="data_parallel")
    p = params((3,))[0]
    nn.SGD([p], 0.1)
    assert p.version == 0  # no broadcast wrote it
    assert communication.get_group_size() == 1


def test_the_buckets_are_made_once_and_the_gradients_come_back_as_views_of_them():
    ps = params((2, 3), (3,)) + params((4,), dtype=numpy.float16)
    reducer = nn.DistributedGradReducer(ps, mean=True, degree=2, bucket_bytes=16)
    grads = (Tensor(numpy.ones((2, 3), numpy.float32)), Tensor(numpy.ones(3, numpy.float32)),
             Tensor(numpy.ones(4, numpy.float16)))
    first = reducer(grads)
    buffers = [b.buffer for b in reducer.buckets]
    second = reducer(grads)
    assert all(b.buffer is old for b, old in zip(reducer.buckets, buffers))  # made once
    for a, b in zip(first, second):
        assert numpy.shares_memory(a.asnumpy(), b.asnumpy())
        numpy.testing.assert_array_equal(b.asnumpy(), 0.5)
    with reducer.overlapping():  # a group of one: nothing to overlap, the same call after it
        pass
    numpy.testing.assert_array_equal(reducer(grads)[2].asnumpy(), 0.5)
