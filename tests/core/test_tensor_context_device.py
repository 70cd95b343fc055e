"""Where a new Tensor lives: host data (NumPy arrays and scalars, Python numbers) follows the
context's device, a device array or a Tensor stays where it is, and an explicit ``device``
wins; checked on the strict device (``minigrad.testing.strict_device``) and on a real GPU."""
import numpy
import pytest

import minigrad
from helpers import GPU_KINDS, gpu_of
from minigrad import Tensor, backend, nn


@pytest.mark.parametrize("kind", GPU_KINDS)
@pytest.mark.parametrize("data", [numpy.arange(6, dtype=numpy.float32).reshape(2, 3),
                                  numpy.float32(2.5), 3.0, [[1, 2], [3, 4]]],
                         ids=["array", "numpy scalar", "float", "list"])
def test_host_data_follows_a_gpu_context(kind, data):
    with gpu_of(kind):
        t = Tensor(data)
        assert t.device == "GPU"
        numpy.testing.assert_array_equal(t.asnumpy(), numpy.asarray(data))
        assert Tensor(data, device="CPU").device == "CPU"


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_tensors_and_device_arrays_stay_where_they_are(kind):
    with gpu_of(kind):
        on_gpu = Tensor(numpy.ones(3, numpy.float32))
        on_cpu = Tensor(numpy.ones(3, numpy.float32), device="CPU")
        assert Tensor(on_cpu).device == "CPU"
        minigrad.set_context(device_target="CPU")
        assert Tensor(on_gpu).device == "GPU" and Tensor(on_gpu.data).device == "GPU"
        assert Tensor(on_gpu, device="CPU").device == "CPU"


def test_a_cpu_context_keeps_host_data_on_the_host():
    minigrad.set_context(device_target="CPU")
    data = numpy.ones(3, numpy.float32)
    t = Tensor(data)
    assert t.device == "CPU" and isinstance(t.data, numpy.ndarray)


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_an_optimizers_fixed_rates_live_on_the_device_and_cost_no_read(kind):
    with gpu_of(kind) as reads:
        minigrad.set_seed(0)
        net = nn.Dense(4, 2)
        opt = nn.Momentum([{"params": [net.weight], "lr": 0.1},
                           {"params": [net.bias]}], 0.01, 0.9)
        assert all(rate.device == "GPU" for rate in opt._fixed_rates())
        train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
        x = Tensor(numpy.ones((3, 4), numpy.float32))
        y = Tensor(numpy.zeros((3, 2), numpy.float32))
        assert x.device == y.device == "GPU"
        train(x, y)
        if reads is not None:
            reads.reset()
        before = net.weight.asnumpy()
        train(x, y)
        if reads is not None:
            assert reads.count == 1  # the weight read just below, nothing for the rates
        step = before - net.weight.asnumpy()
        opt._fixed_rates()[0].set_data(numpy.float32(0.0))  # read again once, after the change
        assert opt.get_lr() == (0.0, pytest.approx(0.01))
        if reads is not None:
            assert reads.count == 3  # the weight, then the rates as they changed
        assert backend.device_of(opt._fixed_rates()[0].data) == "GPU"
    assert numpy.abs(step).max() > 0


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_python_conversions_of_a_gpu_tensor_are_explicit_reads(kind):
    with gpu_of(kind) as reads:
        t = Tensor(numpy.array([1.5, 0.0, 2.0], numpy.float32))
        assert t.tolist() == [1.5, 0.0, 2.0]
        assert bool(t[0]) and not bool(t[1]) and 2.0 in t and 7.0 not in t
        assert float(t[2]) == 2.0 and int(t[0]) == 1
        if reads is not None:
            assert reads.count == 7  # each conversion is one read, none is refused
        with pytest.raises(ValueError):
            bool(Tensor(numpy.ones(3, numpy.float32)))
