"""THOR on CuPy: the same steps as on the CPU (same weights, same data), within fp32 tolerance;
with fisher="mc" the labels are drawn on the host, so both devices sample the same ones."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, backend, nn

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not backend.CUDA_AVAILABLE, reason="needs CuPy and a CUDA GPU")]


def run(device, fisher):
    minigrad.set_context(device_target=device)
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Conv2d(1, 4, 3, has_bias=True), nn.Tanh(), nn.Flatten(),
                             nn.Dense(4 * 8 * 8, 10)])
    opt = nn.thor(net, Tensor(numpy.float32(0.05)), Tensor(numpy.float32(0.01)), 0.9,
                  frequency=2, split_dim=64, fisher=fisher,
                  **({"fisher_seed": 1} if fisher == "mc" else {}))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)
    rng = numpy.random.default_rng(0)
    for _ in range(3):
        x = Tensor(rng.standard_normal((16, 1, 8, 8)).astype(numpy.float32))
        y = Tensor(rng.integers(0, 10, 16).astype(numpy.int32))
        train(x, y)
    return [backend.as_numpy(p.data) for p in net.trainable_params()], opt


@pytest.mark.parametrize("fisher", ["empirical", "mc"])
def test_gpu_steps_match_cpu(fisher):
    cpu, _ = run("CPU", fisher)
    gpu, opt = run("GPU", fisher)
    assert backend.device_of(opt.blocks[0].A_inv) == "GPU"
    for a, b in zip(cpu, gpu):
        numpy.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-5)
