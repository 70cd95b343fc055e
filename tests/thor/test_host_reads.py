"""THOR on the GPU, counted on the strict device: its layers keep their traces on the device (no
read in the forward or backward pass), a reuse step reads the device once (the finiteness of
the gradients), and a refresh step's reads all happen inside the optimizer's step."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.testing.strict_device import strict_device


@pytest.mark.parametrize("fisher", ["empirical", "mc"])
def test_reads_per_refresh_and_reuse_step(fisher):
    with strict_device() as reads:
        minigrad.set_context(device_target="GPU")
        minigrad.set_seed(0)
        net = nn.SequentialCell([nn.Conv2d(1, 4, 3, has_bias=True), nn.Tanh(), nn.Flatten(),
                                 nn.Dense(4 * 8 * 8, 10)])
        opt = nn.thor(net, Tensor(numpy.float32(0.05)), Tensor(numpy.float32(0.01)), 0.9,
                      frequency=2, split_dim=64, fisher=fisher,
                      **({"fisher_seed": 1} if fisher == "mc" else {}))
        with_loss = nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True,
                                                                           reduction="mean"))
        train = nn.TrainOneStepCell(with_loss, opt)
        rng = numpy.random.default_rng(0)
        kinds, counts = [], []
        for _ in range(4):
            x = Tensor(rng.standard_normal((16, 1, 8, 8)).astype(numpy.float32), device="GPU")
            y = Tensor(rng.integers(0, 10, 16).astype(numpy.int32), device="GPU")
            reads.reset()
            train(x, y)
            sites = list(reads.sites)
            assert all(site.startswith(("thor/", "linalg.py")) for site in sites), sites
            kinds.append(opt.last_report.refreshed)
            counts.append(len(sites))
        assert opt.blocks[0].A_inv is not None
        assert minigrad.backend.device_of(opt.blocks[0].A_inv) == "GPU"
    assert [bool(k) for k in kinds] == [True, False, True, False]
    assert counts[1] == counts[3] == 1
