"""One core, three faces: same model, data and injected overflows -> same scale trajectory and
skipped steps; skipped steps leave parameters and optimizer state bit-identical."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, nn, value_and_grad
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


class Injector:
    """Leaf-gradient hooks that put inf or NaN into chosen parameters' gradients at chosen steps."""

    def __init__(self, net, plan):
        self.plan, self.step = plan, 0   # plan: {step: (param index, value)}
        for i, p in enumerate(net.trainable_params()):
            p.register_hook(self._hook(i))

    def _hook(self, index):
        def hook(grad):
            hit = self.plan.get(self.step)
            if hit is not None and hit[0] == index:
                g = grad.asnumpy().copy()
                g.reshape(-1)[hit[2] % g.size] = hit[1]
                return Tensor(g)
            return None
        return hook


def _fresh(seed=7):
    minigrad.set_seed(seed)
    net = MLP()
    return net, nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)


def _run_mindspore(data, plan, s0, window):
    net, opt = _fresh()
    inj = Injector(net, plan)
    cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt,
                                            nn.DynamicLossScaleUpdateCell(s0, 2, window))
    scales, skipped = [], []
    for step, (x, y) in enumerate(data):
        inj.step = step
        _, overflow, _ = cell(x, y)
        skipped.append(bool(overflow))
        scales.append(float(cell.scale_sense.data))
    return scales, skipped, net


def _run_tensorflow(data, plan, s0, window):
    net, opt = _fresh()
    inj = Injector(net, plan)
    lso = LossScaleOptimizer(opt, DynamicLossScale(s0, window, 2.0))
    loss_fn = nn.MSELoss()
    grad_fn = value_and_grad(lambda x, y: lso.get_scaled_loss(loss_fn(net(x), y)), None, lso.parameters)
    scales, skipped = [], []
    for step, (x, y) in enumerate(data):
        inj.step = step
        _, grads = grad_fn(x, y)
        applied = lso.apply_gradients(zip(lso.get_unscaled_gradients(grads), lso.parameters))
        skipped.append(not applied)
        scales.append(float(lso.loss_scale().data))
    return scales, skipped, net


def _run_torch(data, plan, s0, window):
    net, opt = _fresh()
    inj = Injector(net, plan)
    scaler = GradScaler(s0, 2.0, 0.5, window)
    loss_fn = nn.MSELoss()
    scales, skipped = [], []
    for step, (x, y) in enumerate(data):
        inj.step = step
        opt.zero_grad()
        scaler.scale(loss_fn(net(x), y)).backward()
        skipped.append(not scaler.step(opt))
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, skipped, net


def test_three_faces_same_trajectory_and_skips():
    data = _batches(24)
    plan = {2: (0, np.inf, 3), 5: (3, np.nan, 1), 6: (1, -np.inf, 0), 15: (2, np.nan, 7), 16: (0, np.inf, 5)}
    results = [run(data, plan, 2.0 ** 10, 3) for run in (_run_mindspore, _run_tensorflow, _run_torch)]
    (scales, skipped, net), others = results[0], results[1:]
    assert [i for i, s in enumerate(skipped) if s] == sorted(plan)
    assert scales[:8] == [1024, 1024, 512, 512, 512, 256, 128, 128]
    for other_scales, other_skipped, other_net in others:
        assert other_scales == scales
        assert other_skipped == skipped
        for p, q in zip(net.trainable_params(), other_net.trainable_params()):
            np.testing.assert_allclose(p.asnumpy(), q.asnumpy(), rtol=1e-6, atol=1e-7)


def _snapshot(net, opt):
    return ([p.asnumpy().tobytes() for p in net.trainable_params()],
            {k: (v.tobytes() if isinstance(v, np.ndarray) else v) for k, v in opt.state_dict().items()})


@pytest.mark.parametrize("face", ["mindspore", "torch"])
def test_fault_injection_skipped_steps_are_bit_identical_and_training_converges(face):
    steps = 1000
    rng = np.random.default_rng(11)
    data = _batches(20, seed=1) * (steps // 20)
    plan = {int(s): (int(rng.integers(4)), [np.inf, -np.inf, np.nan][int(rng.integers(3))],
                     int(rng.integers(1000)))
            for s in rng.choice(steps, size=steps // 8, replace=False)}
    net, opt = _fresh()
    inj = Injector(net, plan)
    loss_fn = nn.MSELoss()
    if face == "mindspore":
        cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, loss_fn), opt,
                                                nn.DynamicLossScaleUpdateCell(2.0 ** 12, 2, 50))
    else:
        scaler = GradScaler(2.0 ** 12, 2.0, 0.5, 50)
    losses, skipped = [], 0
    for step, (x, y) in enumerate(data):
        inj.step = step
        before = _snapshot(net, opt)
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
            assert _snapshot(net, opt) == before
            name = net.trainable_params()[plan[step][0]].name
            assert report.reason == "gradient_overflow"
            assert (name in report.nan_params) == np.isnan(plan[step][1])
            assert (name in report.inf_params) == np.isinf(plan[step][1])
        losses.append(float(loss))
    assert skipped == len(plan)
    assert np.mean(losses[-20:]) < 0.05 * np.mean(losses[:20])
