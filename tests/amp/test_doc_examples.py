"""The examples of MindSpore's API pages for TrainOneStepWithLossScaleCell, FixedLossScaleManager
and Model, and of PyTorch's GradScaler, run on minigrad with the peer's module replaced by
``minigrad``."""
import numpy as np
import pytest

import minigrad
from helpers.doubles import MatMulNet as Net  # the examples' network, as they name it
from minigrad import FixedLossScaleManager, Model, Parameter, Tensor, nn
from minigrad import dtype as mstype

size, in_features, out_features = 16, 16, 10


def test_train_one_step_with_loss_scale_cell_driven_by_an_update_cell():
    net = Net(in_features, out_features)
    loss = nn.MSELoss()
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    net_with_loss = nn.WithLossCell(net, loss)
    manager = nn.DynamicLossScaleUpdateCell(
        loss_scale_value=2**12, scale_factor=2, scale_window=1000
    )
    train_network = nn.TrainOneStepWithLossScaleCell(net_with_loss, optimizer, scale_sense=manager)
    input = Tensor(np.ones([out_features, in_features]), minigrad.float32)
    labels = Tensor(
        np.ones(
            [
                out_features,
            ]
        ),
        minigrad.float32,
    )
    before = net.weight.asnumpy().copy()
    output = train_network(input, labels)

    loss_value, overflow, scale = output
    assert loss_value.shape == () and overflow.shape == () and overflow.dtype == np.bool_
    assert not bool(overflow) and float(scale) == 2**12
    # the update used the unscaled gradient: same step as plain Momentum on dL/dw
    expected = before - 0.1 * (2 * (np.ones((10, 16)).T @ (np.ones((10, 10)) * 16 - 1)) / 100)
    np.testing.assert_allclose(net.weight.asnumpy(), expected, rtol=1e-5)
    assert train_network.last_report.skipped is False


def test_train_one_step_with_loss_scale_tensor_driven_float32_max_overflows():
    net = Net(in_features, out_features)
    loss = nn.MSELoss()
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    net_with_loss = nn.WithLossCell(net, loss)
    inputs = Tensor(np.ones([size, in_features]).astype(np.float32))
    label = Tensor(np.zeros([size, out_features]).astype(np.float32))
    scaling_sens = Tensor(np.full((1), np.finfo(np.float32).max), dtype=mstype.float32)
    train_network = nn.TrainOneStepWithLossScaleCell(
        net_with_loss, optimizer, scale_sense=scaling_sens
    )
    before = net.weight.asnumpy().copy()
    state_before = optimizer.state_dict()
    output = train_network(inputs, label)

    assert bool(output[1]) is True
    assert net.weight.asnumpy().tobytes() == before.tobytes()  # bit-identical
    assert optimizer.state_dict().keys() == state_before.keys() and optimizer.global_step == 0
    assert output[2].shape == (1,) and float(output[2][0]) == np.finfo(np.float32).max
    report = train_network.last_report
    assert (
        report.skipped and report.reason == "gradient_overflow" and report.inf_params == ("weight",)
    )
    # host-side update of a Tensor scale_sense
    train_network.set_sense_scale(Tensor(np.full((1), 2.0**10), dtype=mstype.float32))
    output = train_network(inputs, label)
    assert bool(output[1]) is False and float(output[2][0]) == 2.0**10
    assert net.weight.asnumpy().tobytes() != before.tobytes()


def test_train_one_step_with_loss_scale_errors():
    net_with_loss = nn.WithLossCell(Net(4, 2), nn.MSELoss())
    optimizer = nn.Momentum(net_with_loss.trainable_params(), learning_rate=0.1, momentum=0.9)
    with pytest.raises(
        TypeError, match="'scale_sense' must be Cell or Tensor, but got 'scale_sense' type: float"
    ):
        nn.TrainOneStepWithLossScaleCell(net_with_loss, optimizer, scale_sense=1024.0)
    with pytest.raises(
        ValueError, match=r"shape of 'scale_sense' must be \(1,\) or \(\), but got \(2,\)"
    ):
        nn.TrainOneStepWithLossScaleCell(
            net_with_loss, optimizer, scale_sense=Tensor(np.ones(2, np.float32))
        )
    cell = nn.TrainOneStepWithLossScaleCell(
        net_with_loss, optimizer, scale_sense=Tensor(np.float32(8))
    )
    with pytest.raises(TypeError, match="'sens' must be Tensor, but got float"):
        cell.set_sense_scale(4.0)


class DocExampleNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 2)

    def construct(self, x):
        return self.fc(x)


def _data(n=4):
    rng = np.random.default_rng(0)
    return [
        (
            Tensor(rng.standard_normal((8, 4)).astype(np.float32)),
            Tensor(rng.standard_normal((8, 2)).astype(np.float32)),
        )
        for _ in range(n)
    ]


def test_fixed_loss_scale_manager_examples_with_model():
    net = DocExampleNet()
    # 1) no update when there is an overflow
    loss_scale_manager = FixedLossScaleManager()
    optim = nn.Momentum(params=net.trainable_params(), learning_rate=0.1, momentum=0.9)
    model = Model(net, loss_fn=nn.MSELoss(), loss_scale_manager=loss_scale_manager, optimizer=optim)
    assert isinstance(model._train_network, nn.TrainOneStepWithLossScaleCell)
    model.train(1, _data())
    assert optim.global_step == 4 and loss_scale_manager.get_loss_scale() == 128.0

    # 2) the update runs even on overflow; the optimizer divides by its own loss_scale
    loss_scale = 1024.0
    loss_scale_manager = FixedLossScaleManager(loss_scale, False)
    optim = nn.Momentum(
        params=net.trainable_params(), learning_rate=0.1, momentum=0.9, loss_scale=loss_scale
    )
    model = Model(net, loss_fn=nn.MSELoss(), loss_scale_manager=loss_scale_manager, optimizer=optim)
    assert type(model._train_network) is nn.TrainOneStepCell
    assert model._train_network.sens == 1024.0
    assert loss_scale_manager.get_update_cell() is None
    assert loss_scale_manager.get_drop_overflow_update() is False


def test_fixed_manager_drop_false_matches_unscaled_training():
    """sens=loss_scale in the cell and 1/loss_scale in the optimizer: the same update as no
    scaling."""
    results = []
    for manager, opt_scale in ((None, 1.0), (FixedLossScaleManager(1024.0, False), 1024.0)):
        minigrad.set_seed(3)
        net = DocExampleNet()
        optim = nn.Momentum(
            net.trainable_params(), learning_rate=0.1, momentum=0.9, loss_scale=opt_scale
        )
        Model(net, loss_fn=nn.MSELoss(), loss_scale_manager=manager, optimizer=optim).train(
            1, _data()
        )
        results.append(net.fc.weight.asnumpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)


class _DocExampleModel(nn.Cell):
    """The GradScaler seed's SimpleModel (``nn.Linear(10, 1)`` -> ``nn.Dense(10, 1)``)."""

    def __init__(self, extra_weight=None):
        super().__init__()
        self.fc = nn.Dense(10, 1)
        if extra_weight is not None:
            self.weight = Parameter(Tensor(np.ones(1, np.float32) * extra_weight), name="weight")
        self.extra = extra_weight is not None

    def construct(self, x):
        x = self.fc(x)
        return x * self.weight if self.extra else x


@pytest.mark.parametrize("extra_weight, fp16, expected", [(None, False, True), (1e10, True, False)])
def test_grad_scaler_step_examples(extra_weight, fp16, expected):
    """The seed runs ``torch.amp.autocast('cpu')``, which is bfloat16 on CPU (fp32's range);
    minigrad's autocast is fp16. The normal step is translated range-faithfully (fp32 compute:
    in fp16 the seed's 2**16 start overflows a first step, see the next test); the 1e10 weight
    is run under fp16 autocast, where its gradient (~1e20 x 2**16) overflows. (In fp32 that
    gradient is finite, ~3e24, and the step would run.)"""
    from minigrad.amp import GradScaler, autocast

    minigrad.set_seed(int(extra_weight is not None))
    model = _DocExampleModel(extra_weight)
    optimizer = minigrad.optim.SGD(model.trainable_params(), learning_rate=0.01)
    scaler = GradScaler()
    loss_fn = nn.MSELoss()
    rng = np.random.default_rng(0)
    data = Tensor(rng.standard_normal((5, 10)).astype(np.float32))
    target = Tensor(rng.standard_normal((5, 1)).astype(np.float32))
    before = [p.asnumpy().copy() for p in model.trainable_params()]

    optimizer.zero_grad()
    with autocast(enabled=fp16):
        output = model(data)
        loss = loss_fn(output, target)
    with np.errstate(over="ignore"):
        scaler.scale(loss).backward()
    step_performed = scaler.step(optimizer)
    scaler.update()

    assert step_performed is expected
    after = [p.asnumpy() for p in model.trainable_params()]
    changed = [a.tobytes() != b.tobytes() for a, b in zip(after, before)]
    assert all(changed) if expected else not any(changed)
    if not expected:
        assert scaler.get_scale() == 2.0**15 and scaler.last_report.skipped


def test_grad_scaler_doc_example_in_fp16_autocast_skips_first_then_steps():
    """With fp16 autocast the seed's 2**16 start overflows the fp16 gradients at first: the scaler
    backs off, skips those steps untouched, and then steps."""
    from minigrad.amp import GradScaler, autocast

    minigrad.set_seed(0)
    model = _DocExampleModel()
    optimizer = minigrad.optim.SGD(model.trainable_params(), learning_rate=0.01)
    scaler = GradScaler()
    rng = np.random.default_rng(0)
    data = Tensor(rng.standard_normal((5, 10)).astype(np.float32))
    target = Tensor(rng.standard_normal((5, 1)).astype(np.float32) * 4)
    performed = []
    for _ in range(6):
        optimizer.zero_grad()
        with autocast():
            loss = nn.MSELoss()(model(data), target)
        assert model.fc(data).dtype == np.float32  # outside autocast: fp32 again
        with np.errstate(over="ignore"):
            scaler.scale(loss).backward()
        performed.append(scaler.step(optimizer))
        scaler.update()
    first_ok = performed.index(True)
    assert first_ok >= 1 and all(performed[first_ok:])
    assert scaler.get_scale() == 2.0 ** (16 - first_ok)
    assert optimizer.global_step == len(performed) - first_ok
