"""Sparse labels outside [0, C) on the GPU, counted on the strict device: the check runs on the
device and raises the CPU's ValueError at the next device read, with no read of its own; a
loss-scaled step raises at its overflow read before it changes any parameter or its scale."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, amp, backend, nn
from minigrad.amp import GradScaler
from minigrad.testing.strict_device import strict_device

LOSS = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
MESSAGE = r"sparse labels must be in \[0, 4\), got values in \[-1, 4\]"


@pytest.fixture
def reads():
    with strict_device() as counter:
        minigrad.set_context(device_target="GPU")
        yield counter


def _net(dtype=None):
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 4)])
    if dtype is not None:
        net.to_float(dtype)
    return net, nn.Momentum(net.trainable_params(), 0.01, 0.9)


def _host_batch(labels=(0, 1, 2, 3)):
    x = numpy.random.default_rng(0).standard_normal((len(labels), 8)).astype(numpy.float32)
    return x, numpy.array(labels, numpy.int32)


def _batch(labels=(0, 1, 2, 3)):
    return tuple(Tensor(a, device="GPU") for a in _host_batch(labels))


def _state(net):
    return [p.asnumpy().copy() for p in net.trainable_params()]


def test_the_cpu_raises_in_the_call():
    x, y = _host_batch((0, 4, -1, 2))
    with pytest.raises(ValueError, match=MESSAGE):
        LOSS(Tensor(x[:, :4]), Tensor(y))


def test_a_loss_scaled_step_raises_at_its_one_read_and_changes_nothing(reads):
    net, opt = _net()
    manager = amp.DynamicLossScaleManager(2.0 ** 10, 2, 100)
    step = amp.build_train_network(net, opt, LOSS, level="O2", loss_scale_manager=manager)
    before = _state(net)
    reads.reset()
    with pytest.raises(ValueError, match=MESSAGE):
        step(*_batch((0, 4, -1, 2)))
    assert reads.count == 1
    assert all(numpy.array_equal(a, b) for a, b in zip(before, _state(net)))
    assert manager.get_loss_scale() == 2.0 ** 10
    reads.reset()
    step(*_batch())  # the failed check is spent: the next step trains
    assert reads.count == 1 and not step.last_report.skipped


def test_the_torch_face_raises_at_the_scaler_step(reads):
    net, opt = _net(minigrad.float16)
    scaler = GradScaler(2.0 ** 10)
    x, y = _batch((0, 4, -1, 2))
    before = _state(net)
    reads.reset()
    scaler.scale(LOSS(net(x.astype(minigrad.float16)), y)).backward()
    assert reads.count == 0
    with pytest.raises(ValueError, match=MESSAGE):
        scaler.step(opt)
    assert reads.count == 1
    assert all(numpy.array_equal(a, b) for a, b in zip(before, _state(net)))


def test_a_step_without_reads_defers_the_error_to_the_next_read(reads):
    """O0 reads nothing: its step applies the NaN gradients of the bad samples, and the next read
    of a device scalar (here ``loss.item()``; a loss callback or a loss-scaled step alike)
    raises."""
    net, opt = _net()
    step = amp.build_train_network(net, opt, LOSS, level="O0")
    reads.reset()
    loss = step(*_batch((0, 4, -1, 2)))
    assert reads.count == 0
    with pytest.raises(ValueError, match=MESSAGE):
        loss.item()
    assert reads.count == 1
    assert numpy.isnan(_state(net)[0]).any()


def test_checks_of_unread_steps_merge_into_one_range(reads):
    net, _ = _net()
    LOSS(net(_batch((0, 4, 1, 2))[0]), _batch((0, 4, 1, 2))[1])
    LOSS(net(_batch((0, -1, 1, 2))[0]), _batch((0, -1, 1, 2))[1])
    loss = LOSS(net(_batch()[0]), _batch()[1])
    assert len(backend._deferred) == 1
    with pytest.raises(ValueError, match=MESSAGE):
        float(loss)
    assert float(loss) > 0 and reads.count == 2  # the queue is spent by the first read


def test_model_train_raises_at_the_loss_callback(reads):
    net, opt = _net()
    model = minigrad.train.Model(net, LOSS, opt)
    data = minigrad.dataset.NumpySlicesDataset(dict(zip("xy", _host_batch((0, 4, -1, 2)))),
                                               shuffle=False).batch(4)
    with pytest.raises(ValueError, match=MESSAGE):
        model.train(1, data, callbacks=[minigrad.train.LossMonitor()], dataset_sink_mode=False)
