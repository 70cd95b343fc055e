"""minigrad.set_seed: it seeds numpy.random too, refuses seeds NumPy cannot take without a
change, and repeats weights, dropout masks and NumPy draws within and across processes."""
import os
import subprocess
import sys

import numpy
import pytest

import minigrad
from helpers import REPO_ROOT
from minigrad import Tensor, nn


def test_set_seed_also_seeds_numpy_global_random():
    # MindSpore's set_seed: "The global seed is used by numpy.random, ..."; a script that makes its
    # data with numpy.random after set_seed(n) must repeat.
    minigrad.set_seed(5)
    first = numpy.random.rand(4)
    minigrad.set_seed(5)
    assert numpy.array_equal(numpy.random.rand(4), first)
    minigrad.set_seed(6)
    assert not numpy.array_equal(numpy.random.rand(4), first)


def test_set_seed_outside_numpy_range_is_a_value_error_and_changes_nothing():
    minigrad.set_seed(3)
    with pytest.raises(ValueError, match="seed"):
        minigrad.set_seed(2 ** 32)
    assert minigrad.get_seed() == 3
    minigrad.set_seed(2 ** 32 - 1)  # the largest numpy.random.seed takes
    assert minigrad.get_seed() == 2 ** 32 - 1


_DRAW = """
import numpy, minigrad
from minigrad import nn, ops, Tensor
minigrad.set_seed(11)
net = nn.Dense(5, 3)
mask = ops.dropout(Tensor(numpy.ones((4, 5), numpy.float32)), p=0.5, training=True).asnumpy()
data = numpy.random.rand(3)
print(repr((net.weight.asnumpy().tolist(), mask.tolist(), data.tolist())))
"""


def test_same_seed_same_weights_masks_and_numpy_draws_across_processes():
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    runs = [subprocess.run([sys.executable, "-c", _DRAW], capture_output=True, text=True, env=env,
                           check=True).stdout for _ in range(2)]
    assert runs[0] == runs[1] and runs[0].strip()


def test_seeding_before_building_repeats_the_network_and_the_dropout_masks():
    def build_and_draw():
        net = nn.SequentialCell([nn.Dense(4, 4), nn.Dropout(keep_prob=0.5)])
        net.set_train(True)
        out = net(Tensor(numpy.ones((3, 4), numpy.float32)))
        return [p.asnumpy().copy() for p in net.get_parameters()], out.asnumpy()

    minigrad.set_seed(2)
    params_a, out_a = build_and_draw()
    minigrad.set_seed(2)
    params_b, out_b = build_and_draw()
    assert all(numpy.array_equal(a, b) for a, b in zip(params_a, params_b))
    assert numpy.array_equal(out_a, out_b)
