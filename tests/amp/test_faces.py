"""One core, three faces: same model, data and injected overflows -> same scale trajectory and
skipped steps; skipped steps leave parameters and optimizer state bit-identical."""
import numpy as np
import pytest

import minigrad
from helpers.models import TinyMLP, cross_entropy
from helpers.faults import GradientInjector, snapshot
from minigrad import Model, Tensor, amp, nn, value_and_grad
from minigrad.amp import GradScaler
from minigrad.mixed_precision import DynamicLossScale, LossScaleOptimizer


class MLP(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(8, 16, activation="relu")
        self.fc2 = nn.Dense(16, 4)

    def construct(self, x):
        return self.fc2(self.fc1(x))


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    out = []
    for _ in range(n):
        x = rng.standard_normal((16, 8)).astype(np.float32)
        out.append((Tensor(x), Tensor(x @ w)))
    return out


def _faults(plan):
    """``{step: (param index, value, flat position)}`` as the injector's ``{step: faults}``."""
    return {step: {index: (position, value)} for step, (index, value, position) in plan.items()}


def _fresh(seed=7):
    minigrad.set_seed(seed)
    net = MLP()
    return net, nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)


def _run_mindspore(data, plan, s0, window):
    net, opt = _fresh()
    inj = GradientInjector(net.trainable_params(), _faults(plan))
    cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt,
                                            nn.DynamicLossScaleUpdateCell(s0, 2, window))
    scales, skipped = [], []
    for step, (x, y) in enumerate(data):
        inj.at(step)
        _, overflow, _ = cell(x, y)
        skipped.append(bool(overflow))
        scales.append(float(cell.scale_sense.data))
    return scales, skipped, net


def _run_tensorflow(data, plan, s0, window):
    net, opt = _fresh()
    inj = GradientInjector(net.trainable_params(), _faults(plan))
    lso = LossScaleOptimizer(opt, DynamicLossScale(s0, window, 2.0))
    loss_fn = nn.MSELoss()
    grad_fn = value_and_grad(
        lambda x, y: lso.get_scaled_loss(loss_fn(net(x), y)), None, lso.parameters
    )
    scales, skipped = [], []
    for step, (x, y) in enumerate(data):
        inj.at(step)
        _, grads = grad_fn(x, y)
        applied = lso.apply_gradients(zip(lso.get_unscaled_gradients(grads), lso.parameters))
        skipped.append(not applied)
        scales.append(float(lso.loss_scale().data))
    return scales, skipped, net


def _run_torch(data, plan, s0, window):
    net, opt = _fresh()
    inj = GradientInjector(net.trainable_params(), _faults(plan))
    scaler = GradScaler(s0, 2.0, 0.5, window)
    loss_fn = nn.MSELoss()
    scales, skipped = [], []
    for step, (x, y) in enumerate(data):
        inj.at(step)
        opt.zero_grad()
        scaler.scale(loss_fn(net(x), y)).backward()
        skipped.append(not scaler.step(opt))
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, skipped, net


def _overflowing_batches():
    """An fp16 classifier and 8 batches; batches 2, 3 and 6 make the scaled gradients overflow."""
    minigrad.set_seed(3)
    net = TinyMLP()
    rng = np.random.RandomState(1)
    batches = []
    for k in range(8):
        x = rng.randn(8, 8).astype(np.float32)
        if k in (2, 3, 6):
            x[0, 0] = 6.0e4
        batches.append((Tensor(x), Tensor(x[:, :3].argmax(1).astype(np.int32))))
    return net, batches


def _o2_faces(init=2.0**12, window=2):
    """The three faces on one O2 classifier (an fp16 network, fp32 loss): the MindSpore
    ``Model`` with a dynamic manager, PyTorch-style GradScaler, TensorFlow-style
    LossScaleOptimizer. Each gives (scale used per step, skipped per step, parameter bits)."""
    net, batches = _overflowing_batches()
    model = Model(
        net,
        cross_entropy(),
        nn.Momentum(net.trainable_params(), 0.01, 0.9),
        amp_level="O2",
        loss_scale_manager=amp.DynamicLossScaleManager(init, 2, window),
    )
    ms = [model.train_network(x, y) for x, y in batches]
    results = [([float(s) for _, _, s in ms], [bool(o) for _, o, _ in ms], _bits(net))]

    net, batches = _overflowing_batches()
    amp.cast_network(net, np.float16, True)
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    scaler = GradScaler(init, 2.0, 0.5, window)
    scales, skipped = [], []
    for x, y in batches:
        opt.zero_grad()
        scales.append(scaler.get_scale())
        scaler.scale(cross_entropy()(net(x).astype(np.float32), y)).backward()
        skipped.append(not scaler.step(opt))
        scaler.update()
    results.append((scales, skipped, _bits(net)))

    net, batches = _overflowing_batches()
    amp.cast_network(net, np.float16, True)
    lso = LossScaleOptimizer(
        nn.Momentum(net.trainable_params(), 0.01, 0.9), DynamicLossScale(init, window, 2.0)
    )
    params = list(lso.parameters)
    scales, skipped = [], []
    for x, y in batches:
        scales.append(float(lso.loss_scale().data))
        fn = lambda a, b: lso.get_scaled_loss(cross_entropy()(net(a).astype(np.float32), b))  # noqa: E731
        _, grads = value_and_grad(fn, None, params)(x, y)
        skipped.append(not lso.apply_gradients(zip(lso.get_unscaled_gradients(grads), params)))
    results.append((scales, skipped, _bits(net)))
    return results, [2, 3, 6], None


def _bits(net):
    return [p.asnumpy().tobytes() for p in net.trainable_params()]


def _fp32_injected_faces():
    """The three faces on an fp32 MLP with inf/NaN written into chosen gradients at chosen steps;
    each gives (scale after each step, skipped per step, parameter bits)."""
    data = _batches(24)
    plan = {
        2: (0, np.inf, 3),
        5: (3, np.nan, 1),
        6: (1, -np.inf, 0),
        15: (2, np.nan, 7),
        16: (0, np.inf, 5),
    }
    results = [run(data, plan, 2.0**10, 3) for run in (_run_mindspore, _run_tensorflow, _run_torch)]
    results = [(scales, skipped, _bits(net)) for scales, skipped, net in results]
    return results, sorted(plan), [1024, 1024, 512, 512, 512, 256, 128, 128]


@pytest.mark.parametrize(
    "faces", [_fp32_injected_faces, _o2_faces], ids=["fp32-injected", "o2-fp16"]
)
def test_three_faces_same_scales_skips_and_parameter_bits(faces):
    """MindSpore's cell (or Model), PyTorch's GradScaler and TensorFlow's LossScaleOptimizer over
    one core: the same skipped steps (exactly the faulty ones), the same scale trajectory and
    bit-identical parameters."""
    results, faulty, first_scales = faces()
    (scales, skipped, params), others = results[0], results[1:]
    assert [i for i, s in enumerate(skipped) if s] == faulty
    if first_scales is not None:
        assert scales[: len(first_scales)] == first_scales
    for other_scales, other_skipped, other_params in others:
        assert other_scales == scales
        assert other_skipped == skipped
        assert other_params == params


@pytest.mark.parametrize("face", ["mindspore", "torch"])
def test_fault_injection_skipped_steps_are_bit_identical_and_training_converges(face):
    steps = 1000
    rng = np.random.default_rng(11)
    data = _batches(20, seed=1) * (steps // 20)
    plan = {
        int(s): (
            int(rng.integers(4)),
            [np.inf, -np.inf, np.nan][int(rng.integers(3))],
            int(rng.integers(1000)),
        )
        for s in rng.choice(steps, size=steps // 8, replace=False)
    }
    net, opt = _fresh()
    inj = GradientInjector(net.trainable_params(), _faults(plan))
    loss_fn = nn.MSELoss()
    if face == "mindspore":
        cell = nn.TrainOneStepWithLossScaleCell(
            nn.WithLossCell(net, loss_fn), opt, nn.DynamicLossScaleUpdateCell(2.0**12, 2, 50)
        )
    else:
        scaler = GradScaler(2.0**12, 2.0, 0.5, 50)
    losses, skipped = [], 0
    for step, (x, y) in enumerate(data):
        inj.at(step)
        before = snapshot(net, opt)
        if face == "mindspore":
            loss, overflow, _ = cell(x, y)
            applied = not bool(overflow)
            report = cell.last_report
        else:
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            scaler.scale(loss).backward()
            applied = scaler.step(opt)
            scaler.update()
            report = scaler.last_report
        assert applied == (step not in plan)
        if not applied:
            skipped += 1
            assert snapshot(net, opt) == before
            name = net.trainable_params()[plan[step][0]].name
            assert report.reason == "gradient_overflow"
            assert (name in report.nan_params) == np.isnan(plan[step][1])
            assert (name in report.inf_params) == np.isinf(plan[step][1])
        losses.append(float(loss))
    assert skipped == len(plan)
    assert np.mean(losses[-20:]) < 0.05 * np.mean(losses[:20])
