"""Host reads per loss-scaled step on the GPU, counted on the strict device: the three faces at
O0/O2/O3 read the device once per clean step (the overflow flag, which decides the skip), never
in the forward or backward pass, and twice on an overflowing step (the flag, then the report's
inf/NaN names and the loss's finiteness in one transfer)."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, amp, nn, value_and_grad
from minigrad.amp import GradScaler
from minigrad.mixed_precision import DynamicLossScale, LossScaleOptimizer
from minigrad.testing.strict_device import strict_device

READS_PER_CLEAN_STEP = 1
READS_PER_OVERFLOWING_STEP = 2


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


def _batches():
    """Four GPU batches: the first step overflows at ``START`` (in fp16 and fp32), the next
    ones fit the scale 2 that one backoff by ``FACTOR`` leaves."""
    rng = numpy.random.default_rng(0)
    for k in range(4):
        x = rng.standard_normal((16, 8)).astype(numpy.float32)
        x[0, 0] = 1e4 if k == 0 else x[0, 0]  # a weight gradient of ~1e3: START * 1e3 is inf
        yield (Tensor(x, device="GPU"),
               Tensor(x[:, :4].argmax(1).astype(numpy.int32), device="GPU"))


LOSS = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
START, FACTOR = 2.0 ** 127, 2.0 ** 126


def _mindspore(level, reads):
    net, opt = _net()
    manager = amp.DynamicLossScaleManager(START, FACTOR, 100)
    step = amp.build_train_network(net, opt, LOSS, level=level, loss_scale_manager=manager)
    for x, y in _batches():
        reads.reset()
        step(x, y)
        yield step.last_report.skipped, reads.count


def _torch(level, reads):
    net, opt = _net(None if level == "O0" else minigrad.float16)
    scaler = GradScaler(START, 2.0, 1 / FACTOR, 100)
    for x, y in _batches():
        x = x if level == "O0" else x.astype(minigrad.float16)
        reads.reset()
        opt.zero_grad()
        loss = LOSS(net(x), y)
        forward = reads.count
        scaler.scale(loss).backward()
        assert reads.count == forward == 0
        scaler.step(opt)
        scaler.update()
        yield scaler.last_report.skipped, reads.count


def _tensorflow(level, reads):
    net, opt = _net(None if level == "O0" else minigrad.float16)
    lso = LossScaleOptimizer(opt, DynamicLossScale(START, 100, FACTOR))
    grad_fn = value_and_grad(lambda x, y: lso.get_scaled_loss(LOSS(net(x), y)), None,
                             lso.parameters)
    for x, y in _batches():
        x = x if level == "O0" else x.astype(minigrad.float16)
        reads.reset()
        _, grads = grad_fn(x, y)
        assert reads.count == 0  # forward and backward
        lso.apply_gradients(zip(lso.get_unscaled_gradients(grads), lso.parameters))
        yield lso.last_report.skipped, reads.count


@pytest.mark.parametrize("level", ["O0", "O2", "O3"])
@pytest.mark.parametrize("face", [_mindspore, _torch, _tensorflow],
                         ids=["mindspore", "torch", "tensorflow"])
def test_one_read_per_clean_step_two_on_overflow(reads, face, level):
    steps = list(face(level, reads))
    assert steps[0] == (True, READS_PER_OVERFLOWING_STEP)
    assert steps[1:] == [(False, READS_PER_CLEAN_STEP)] * 3


def test_forward_and_backward_of_the_cell_read_nothing(reads):
    net, opt = _net(minigrad.float16)
    with_loss = amp.build_train_network(net, opt, LOSS, level="O2",
                                        loss_scale_manager=amp.DynamicLossScaleManager(2.0, 2, 2))
    x, y = next(_batches())
    reads.reset()
    loss, grads = with_loss.loss_and_grads((x, y), numpy.float32(2.0))
    assert reads.count == 0 and grads[0].device == "GPU"
