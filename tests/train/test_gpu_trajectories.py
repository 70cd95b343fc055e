"""The same training on the GPU as on the CPU: the digits MLP and CNN in fp32 (parameters within
1e-5 relative after the run), an O2 run with dynamic loss scaling (the same skipped steps, fp16
tolerance) and THOR. Each runs on the strict device everywhere and on a real GPU where there is
one. Without scikit-learn the digits are replaced by a seeded digits-shaped task (64 pixels, 10
classes), the same on both devices."""
import numpy
import pytest

import minigrad
from helpers import GPU_KINDS, gpu_of
from minigrad import Tensor, amp, nn
from minigrad.dataset import load_digits


def _digits(flatten, n=512):
    try:
        (x, y), _ = load_digits(flatten=flatten)
    except ImportError:
        rng = numpy.random.default_rng(0)
        prototypes = rng.random((10, 64)).astype(numpy.float32)
        y = rng.integers(0, 10, n).astype(numpy.int32)
        x = numpy.clip(prototypes[y] + 0.3 * rng.standard_normal((n, 64)), 0, 1)
        x = x.astype(numpy.float32) if flatten else x.reshape(n, 1, 8, 8).astype(numpy.float32)
    return x[:n], y[:n]


def _mlp():
    return nn.SequentialCell([nn.Dense(64, 256, weight_init="he_uniform"), nn.ReLU(),
                              nn.Dense(256, 10, weight_init="he_uniform")])


def _cnn():
    return nn.SequentialCell([
        nn.Conv2d(1, 16, 3, pad_mode="same", has_bias=True, weight_init="he_uniform"), nn.ReLU(),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Conv2d(16, 32, 3, pad_mode="same", has_bias=True, weight_init="he_uniform"),
        nn.ReLU(), nn.MaxPool2d(kernel_size=2, stride=2), nn.Flatten(),
        nn.Dense(32 * 2 * 2, 10, weight_init="he_uniform")])


def _train(device, make, flatten, steps, level="O0", scale=None):
    """``steps`` steps of batch 32; returns (losses, skipped flags, parameters) on the host."""
    minigrad.set_context(device_target=device)
    minigrad.set_seed(0)
    net = make()
    x, y = _digits(flatten)
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    manager = amp.DynamicLossScaleManager(scale, 2, 20) if scale else None
    step = amp.build_train_network(net, opt, loss, level=level, loss_scale_manager=manager)
    losses, skipped = [], []
    for k in range(steps):
        i = (32 * k) % (len(x) - 32)
        out = step(Tensor(x[i:i + 32], device=device), Tensor(y[i:i + 32], device=device))
        losses.append(float((out[0] if isinstance(out, tuple) else out).asnumpy()))
        skipped.append(bool(out[1].asnumpy()) if isinstance(out, tuple) else False)
    return numpy.array(losses), skipped, [p.asnumpy() for p in net.trainable_params()]


def _relative(a, b):
    a = numpy.concatenate([v.astype(numpy.float64).ravel() for v in a])
    b = numpy.concatenate([v.astype(numpy.float64).ravel() for v in b])
    return float(numpy.linalg.norm(a - b) / numpy.linalg.norm(a))


@pytest.mark.parametrize("kind", GPU_KINDS)
@pytest.mark.parametrize("model, flatten, steps", [(_mlp, True, 50), (_cnn, False, 20)],
                         ids=["mlp", "cnn"])
def test_fp32_training_matches_the_cpu(kind, model, flatten, steps):
    cpu_losses, _, cpu = _train("CPU", model, flatten, steps)
    with gpu_of(kind):
        gpu_losses, _, gpu = _train("GPU", model, flatten, steps)
    assert cpu_losses[-1] < cpu_losses[0]
    assert _relative(cpu, gpu) < 1e-5, f"parameters differ by {_relative(cpu, gpu):.2e} relative"
    numpy.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5)


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_o2_dynamic_scaling_skips_the_same_steps(kind):
    cpu_losses, cpu_skipped, cpu = _train("CPU", _mlp, True, 50, "O2", 2.0 ** 24)
    with gpu_of(kind) as reads:
        gpu_losses, gpu_skipped, gpu = _train("GPU", _mlp, True, 50, "O2", 2.0 ** 24)
    assert gpu_skipped == cpu_skipped and any(cpu_skipped) and not all(cpu_skipped)
    assert _relative(cpu, gpu) < 1e-2, f"parameters differ by {_relative(cpu, gpu):.2e} relative"
    numpy.testing.assert_allclose(gpu_losses, cpu_losses, rtol=2e-2)
    if reads is not None:  # per step the flag and the loss this test reads, one more for the
        # report of each skipped step, and the 4 parameters at the end
        assert reads.count == 50 + 50 + sum(gpu_skipped) + 4


def _train_thor(device, steps=20):
    """THOR (frequency 5) on the digits MLP: losses and parameters on the host."""
    minigrad.set_context(device_target=device)
    minigrad.set_seed(0)
    net = _mlp()
    x, y = _digits(True)
    opt = nn.thor(net, Tensor(numpy.float32(0.05), device=device),
                  Tensor(numpy.float32(0.03), device=device), 0.9, frequency=5, split_dim=64)
    step = nn.TrainOneStepCell(nn.WithLossCell(
        net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")), opt)
    losses = []
    for k in range(steps):
        i = (32 * k) % (len(x) - 32)
        losses.append(float(step(Tensor(x[i:i + 32], device=device),
                                 Tensor(y[i:i + 32], device=device)).asnumpy()))
    return numpy.array(losses), [p.asnumpy() for p in net.trainable_params()]


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_thor_matches_the_cpu(kind):
    cpu_losses, cpu = _train_thor("CPU")
    with gpu_of(kind):
        gpu_losses, gpu = _train_thor("GPU")
    assert cpu_losses[-1] < cpu_losses[0]
    # the inverses come from another factorisation on the device (CuPy's Cholesky and the
    # blocked triangular inverse; NumPy's blocked Cholesky inverse on the host): fp32 rounding
    assert _relative(cpu, gpu) < 1e-4, f"parameters differ by {_relative(cpu, gpu):.2e} relative"
    numpy.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4)
