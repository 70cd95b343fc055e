"""WithLossCell and TrainOneStepCell."""
import numpy
import pytest

import minigrad
from helpers import DEVICES
from minigrad import Tensor, nn

RNG = numpy.random.RandomState(0)


class RecordingOptimizer:
    """Plain SGD that keeps the gradients it was given."""

    def __init__(self, params, lr=0.1):
        self.parameters = tuple(params)
        self.lr = lr
        self.received = []

    def __call__(self, grads):
        self.received.append([g.asnumpy().copy() for g in grads])
        for p, g in zip(self.parameters, grads):
            p.set_data(p.data - self.lr * g.data)
        return True


def _mlp():
    minigrad.set_seed(0)
    return nn.SequentialCell(
        nn.Dense(4, 8, weight_init="he_uniform", activation="relu"), nn.Dense(8, 3)
    )


def _data():
    return Tensor(RNG.randn(16, 4).astype(numpy.float32)), Tensor(
        RNG.randint(0, 3, 16).astype(numpy.int32)
    )


def test_with_loss_cell():
    net = _mlp()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    with_loss = nn.WithLossCell(net, loss_fn)
    assert with_loss.backbone_network is net
    x, y = _data()
    assert float(with_loss(x, y)) == pytest.approx(float(loss_fn(net(x), y)))
    with pytest.raises(TypeError, match=r"backbone must be a Cell, got <function .*> \(function\)"):
        nn.WithLossCell(lambda x: x, loss_fn)
    with pytest.raises(TypeError, match=r"loss_fn must be callable, got 3 \(int\)"):
        nn.WithLossCell(net, 3)
    with pytest.raises(TypeError, match=r"loss_fn must be a loss instance such as MSELoss\(\), got "
                                        r"<class '.*MSELoss'> \(type\)"):
        nn.WithLossCell(net, nn.MSELoss)


def test_train_one_step_gradients_match_value_and_grad_and_sens_scales_them():
    x, y = _data()
    net = _mlp()
    with_loss = nn.WithLossCell(
        net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    )
    params = net.trainable_params()
    loss_ref, grads_ref = minigrad.value_and_grad(with_loss, None, params)(x, y)
    before = [p.asnumpy().copy() for p in params]

    optimizer = RecordingOptimizer(params)
    step = nn.TrainOneStepCell(with_loss, optimizer, sens=4.0)
    loss = step(x, y)
    assert float(loss) == pytest.approx(float(loss_ref)) and loss.dtype == minigrad.float32
    for got, ref, old, p in zip(optimizer.received[0], grads_ref, before, params):
        numpy.testing.assert_allclose(got, 4.0 * ref.asnumpy(), rtol=1e-5, atol=1e-7)
        numpy.testing.assert_allclose(p.asnumpy(), old - 0.1 * got, rtol=1e-6, atol=1e-7)
    assert [p.name for p in step.trainable_params()] == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_train_one_step_runs_the_network_once():
    calls = []
    net = _mlp()
    net.register_forward_hook(lambda cell, inputs, output: calls.append(1))
    step = nn.TrainOneStepCell(
        nn.WithLossCell(net, nn.MSELoss()), RecordingOptimizer(net.trainable_params())
    )
    step(Tensor(RNG.randn(2, 4).astype(numpy.float32)), Tensor(numpy.zeros((2, 3), numpy.float32)))
    assert len(calls) == 1


def test_grad_reducer_is_the_hook_for_gradient_reduction():
    class Halving(nn.TrainOneStepCell):
        def grad_reducer(self, grads):
            return tuple(g * 0.5 for g in grads)

    net = _mlp()
    optimizer = RecordingOptimizer(net.trainable_params())
    x, y = _data()
    with_loss = nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="sum"))
    _, grads = minigrad.value_and_grad(with_loss, None, net.trainable_params())(x, y)
    Halving(with_loss, optimizer)(x, y)
    numpy.testing.assert_allclose(
        optimizer.received[0][0], 0.5 * grads[0].asnumpy(), rtol=1e-5, atol=1e-7
    )


def test_training_an_mlp_with_momentum_reduces_the_loss():
    x = RNG.randn(64, 4).astype(numpy.float32)
    y = (x[:, 0] > 0).astype(numpy.int32) + (x[:, 1] > 0).astype(numpy.int32)
    net = _mlp()
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    step = nn.TrainOneStepCell(
        nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")),
        optimizer,
    )
    step.set_train()
    losses = [float(step(Tensor(x), Tensor(y))) for _ in range(60)]
    assert losses[-1] < 0.5 * losses[0]


def test_seed_example_with_momentum_and_fp16_network():
    """The seed's Net/MSELoss/Momentum/WithLossCell, trained one step; and an fp16 copy."""

    class Net(nn.Cell):
        def __init__(self, in_features, out_features):
            super(Net, self).__init__()
            self.weight = minigrad.Parameter(
                Tensor(numpy.ones([in_features, out_features]).astype(numpy.float32)), name="weight"
            )
            self.matmul = minigrad.ops.MatMul()

        def construct(self, x):
            return self.matmul(x, self.weight)

    size, in_features, out_features = 16, 16, 10
    for dtype in (minigrad.float32, minigrad.float16):
        net = Net(in_features, out_features).cast_parameters(dtype).to_float(dtype)
        optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
        train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), optimizer)
        inputs = Tensor(numpy.ones([size, in_features]).astype(numpy.float32))
        label = Tensor(numpy.zeros([size, out_features]).astype(numpy.float32))
        first = train(inputs, label)
        assert first.dtype == minigrad.float32 and float(first) == pytest.approx(256.0)
        assert net.weight.dtype == dtype
        assert float(train(inputs, label)) < float(first)


def test_bad_train_one_step_arguments():
    net = nn.WithLossCell(_mlp(), nn.MSELoss())
    with pytest.raises(TypeError, match=r"network must be a Cell, got <function .*> \(function\)"):
        nn.TrainOneStepCell(lambda x: x, RecordingOptimizer([]))
    expected = (r"optimizer must be callable on gradients with a 'parameters' attribute, "
                r"got <object object .*> \(object\)")
    with pytest.raises(TypeError, match=expected):
        nn.TrainOneStepCell(net, object())


@pytest.mark.parametrize("device", DEVICES)
def test_cnn_training_steps_agree_across_devices(device):
    """A small CNN (conv, batch norm, pooling, dense, sparse cross entropy, Momentum) trained for
    three steps on ``device`` gives the CPU's losses and parameters."""
    x = RNG.randn(8, 1, 8, 8).astype(numpy.float32)
    y = RNG.randint(0, 3, 8).astype(numpy.int32)

    def run(target):
        minigrad.set_context(device_target=target)
        minigrad.set_seed(5)
        net = nn.SequentialCell(
            nn.Conv2d(1, 4, 3, has_bias=True),
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.MaxPool2d(2, 2),
            nn.Flatten(),
            nn.Dense(64, 3, weight_init="he_uniform"),
        )
        optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
        step = nn.TrainOneStepCell(
            nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")),
            optimizer,
        ).set_train()
        losses = [float(step(Tensor(x, device=target), Tensor(y, device=target))) for _ in range(3)]
        return losses, [p.asnumpy() for p in net.get_parameters()]

    cpu_losses, cpu_params = run("CPU")
    losses, params = run(device)
    assert cpu_losses[-1] < cpu_losses[0]
    numpy.testing.assert_allclose(losses, cpu_losses, rtol=1e-4)
    for got, expected in zip(params, cpu_params):
        numpy.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_o2_loss_scaled_steps_agree_across_devices(device):
    """An O2 network (fp16 parameters, fp32 masters, dynamic loss scale) on ``device``: the same
    skipped steps and scales as on the CPU (the first steps overflow at the default 2**24 scale),
    close losses and parameters, fp16 parameters kept on the device, and an injected overflow
    that leaves every parameter bit-identical."""
    x = RNG.randn(16, 12).astype(numpy.float32)
    y = RNG.randint(0, 4, 16).astype(numpy.int32)

    def run(target):
        minigrad.set_context(device_target=target)
        minigrad.set_seed(7)
        net = nn.SequentialCell(nn.Dense(12, 32), nn.ReLU(), nn.Dense(32, 4))
        step = minigrad.amp.build_train_network(
            net,
            nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9),
            nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
            level="O2",
        )
        data, labels = Tensor(x, device=target), Tensor(y, device=target)
        trace = []
        for _ in range(12):
            loss, overflow, scale = step(data, labels)
            trace.append((bool(overflow.asnumpy()), float(scale.asnumpy()), float(loss.asnumpy())))
        assert all(p.dtype == numpy.float16 and p.device == target for p in net.trainable_params())
        before = [p.asnumpy().copy() for p in net.trainable_params()]
        _, overflow, _ = step(
            Tensor(numpy.full_like(x, 1e30), device=target), labels
        )  # inf in fp16
        assert bool(overflow.asnumpy())
        for p, b in zip(net.trainable_params(), before):
            assert p.asnumpy().tobytes() == b.tobytes()
        return trace, before

    cpu_trace, cpu_params = run("CPU")
    trace, params = run(device)
    assert [t[:2] for t in trace] == [t[:2] for t in cpu_trace]
    assert any(t[0] for t in cpu_trace) and not cpu_trace[-1][0]
    numpy.testing.assert_allclose([t[2] for t in trace], [t[2] for t in cpu_trace], rtol=2e-3)
    for got, expected in zip(params, cpu_params):
        numpy.testing.assert_allclose(
            got.astype(numpy.float32), expected.astype(numpy.float32), rtol=1e-2, atol=1e-3
        )
