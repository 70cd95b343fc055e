"""``DistributedGradReducer`` on the GPU in a group of one, counted on the strict device: the
reducer copies gradients into its device buckets without reading the device, so a loss-scaled
data-parallel step reads it once (the overflow flag), a plain one never, and both train as
stand-alone."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, amp, nn
from minigrad.testing.strict_device import strict_device


@pytest.fixture(autouse=True)
def _stand_alone():
    minigrad.reset_auto_parallel_context()
    yield
    minigrad.reset_auto_parallel_context()


def _train(data_parallel, level, reads):
    minigrad.reset_auto_parallel_context()
    if data_parallel:
        minigrad.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    minigrad.set_seed(3)
    net = nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 2)])
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    manager = amp.DynamicLossScaleManager(2.0 ** 10, 2, 2) if level == "O2" else None
    step = amp.build_train_network(net, opt, nn.MSELoss(), level=level,
                                   loss_scale_manager=manager)
    assert isinstance(step.grad_reducer, nn.DistributedGradReducer) == data_parallel
    rng = numpy.random.default_rng(0)
    counts = []
    for _ in range(3):
        x = Tensor(rng.standard_normal((5, 4)).astype(numpy.float32))
        y = Tensor(rng.standard_normal((5, 2)).astype(numpy.float32))
        reads.reset()
        step(x, y)
        counts.append(reads.count)
    assert all(b.buffer is None or minigrad.backend.device_of(b.buffer) == "GPU"
               for b in getattr(step.grad_reducer, "buckets", ()))
    return counts, [p.asnumpy() for p in net.trainable_params()]


@pytest.mark.parametrize("level, reads_per_step", [("O0", 0), ("O2", 1)])
def test_reducer_reads_nothing_and_trains_as_stand_alone(level, reads_per_step):
    with strict_device() as reads:
        minigrad.set_context(device_target="GPU")
        counts, parallel = _train(True, level, reads)
        _, alone = _train(False, level, reads)
    assert counts == [reads_per_step] * 3
    for a, b in zip(parallel, alone):
        numpy.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
