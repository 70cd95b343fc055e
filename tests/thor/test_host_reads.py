"""THOR on the GPU, counted on the strict device: its layers keep their traces on the device (no
read in the forward or backward pass), a reuse step reads the device once (the finiteness of
the gradients), and a refresh step reads it four times, however many layers refresh: the
recorded traces, then the new factors' finiteness with the traces of the factors kept, then the
checks of every inverted stack, then the gradients' finiteness."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.testing.strict_device import strict_device

READS_PER_REUSE_STEP = 1
READS_PER_REFRESH_STEP = 4


def _run(reads, fisher, refresh="frequency", steps=4, depth=1):
    """Per step: (refreshed layers, host reads, where they happened)."""
    minigrad.set_seed(0)
    layers = [nn.Conv2d(1, 4, 3, has_bias=True), nn.Tanh(), nn.Flatten()]
    width = 4 * 8 * 8
    for _ in range(depth - 1):  # more Dense layers: the count does not grow with them
        layers += [nn.Dense(width, 32), nn.Tanh()]
        width = 32
    net = nn.SequentialCell(layers + [nn.Dense(width, 10)])
    opt = nn.thor(net, Tensor(numpy.float32(0.05)), Tensor(numpy.float32(0.01)), 0.9,
                  frequency=2, split_dim=64, fisher=fisher, refresh=refresh,
                  **({"fisher_seed": 1} if fisher == "mc" else {}))
    with_loss = nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True,
                                                                       reduction="mean"))
    train = nn.TrainOneStepCell(with_loss, opt)
    rng = numpy.random.default_rng(0)
    out = []
    for _ in range(steps):
        x = Tensor(rng.standard_normal((16, 1, 8, 8)).astype(numpy.float32))
        y = Tensor(rng.integers(0, 10, 16).astype(numpy.int32))
        assert x.device == "GPU"  # host data follows the context
        reads.reset()
        train(x, y)
        out.append((opt.last_report.refreshed, reads.count, list(reads.sites)))
    assert minigrad.backend.device_of(opt.blocks[0].A_inv) == "GPU"
    return out


@pytest.fixture
def strict():
    with strict_device() as reads:
        minigrad.set_context(device_target="GPU")
        yield reads


@pytest.mark.parametrize("fisher", ["empirical", "mc"])
def test_reads_per_refresh_and_reuse_step(strict, fisher):
    steps = _run(strict, fisher)
    for _, _, sites in steps:
        assert all(site.startswith(("thor/", "linalg.py")) for site in sites), sites
    assert [bool(refreshed) for refreshed, _, _ in steps] == [True, False, True, False]
    assert [count for _, count, _ in steps] == [READS_PER_REFRESH_STEP, READS_PER_REUSE_STEP] * 2


def test_the_count_does_not_grow_with_the_layers(strict):
    steps = _run(strict, "empirical", depth=3, steps=1)
    assert len(steps[0][0]) == 4 and steps[0][1] == READS_PER_REFRESH_STEP


def test_the_trace_rule_reads_as_often(strict):
    steps = _run(strict, "empirical", refresh="trace", steps=3)
    assert steps[0][0]  # the first step refreshes every layer
    assert all(count <= READS_PER_REFRESH_STEP for _, count, _ in steps), steps
