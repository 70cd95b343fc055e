"""The pool of reusable temporaries (ops/_scratch.py): an array is handed out again only once
nothing refers to it, and a conv's saved patch matrices survive other convs of the same
shape."""
import os
import platform
import subprocess
import sys

import numpy
import pytest

from minigrad import Tensor, ops
from minigrad.ops import _scratch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIG = (1 << 15,)  # float32 elements: above the threshold the tests set


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch):
    """Pool from 64 KiB up (small arrays keep the tests light), with an empty pool."""
    monkeypatch.setattr(_scratch, "MIN_BYTES", 1 << 16)
    _scratch.clear()
    yield
    _scratch.clear()


def test_an_array_in_use_is_never_handed_out_again():
    a = _scratch.empty(numpy, BIG, numpy.float32)
    view = a[10:20]
    del a
    b = _scratch.empty(numpy, BIG, numpy.float32)  # the first is alive through its view
    assert not numpy.shares_memory(view, b)
    del view
    c = _scratch.empty(numpy, BIG, numpy.int32)  # same size in bytes: the first one again
    assert c.shape == BIG and c.dtype == numpy.int32 and c.flags.c_contiguous
    assert not numpy.shares_memory(b, c)
    address = c.__array_interface__["data"][0]
    del c
    d = _scratch.empty(numpy, (2, BIG[0] // 2), numpy.float32)
    assert d.__array_interface__["data"][0] == address


def test_small_arrays_and_full_pools_give_fresh_arrays():
    small = _scratch.empty(numpy, (4, 4), numpy.float64)
    assert small.shape == (4, 4) and not _scratch._pool
    held = [_scratch.empty(numpy, BIG, numpy.float32) for _ in range(_scratch.PER_SIZE + 2)]
    assert len(_scratch._pool[held[0].nbytes]) == _scratch.PER_SIZE
    for i, a in enumerate(held):
        for b in held[i + 1:]:
            assert not numpy.shares_memory(a, b)


def test_saved_patch_matrices_survive_later_convolutions():
    # the first conv's graph keeps its patch matrices; the second, of the same shapes, must get
    # other memory, so the first gradient is what it is without the second
    rng = numpy.random.default_rng(0)
    shape, w = (8, 16, 24, 24), rng.standard_normal((16, 16, 3, 3)).astype(numpy.float32)
    x1, x2 = (rng.standard_normal(shape).astype(numpy.float32) for _ in range(2))
    g = rng.standard_normal(shape).astype(numpy.float32)

    def weight_gradient(x, other=None):
        wt = Tensor(w, requires_grad=True)
        out = ops.conv2d(Tensor(x), wt, padding=1)
        if other is not None:
            ops.conv2d(Tensor(other), Tensor(w, requires_grad=True), padding=1).sum().backward()
        out.backward(Tensor(g))
        return wt.grad.data
    alone = weight_gradient(x1)
    assert numpy.array_equal(weight_gradient(x1, other=x2), alone)


GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
# 8 arrays of 8 MiB filled, freed, again, five times: the pattern of a training step's
# activations, which glibc's default thresholds hand back to the system every time
_FAULTS = """
import resource
import numpy
import minigrad

def round_():
    arrays = [numpy.ones(1 << 21, numpy.float32) for _ in range(8)]
    del arrays
round_(); round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    round_()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(keep):
    env = dict(os.environ, MINIGRAD_KEEP_HOST_MEMORY=keep)
    out = subprocess.run([sys.executable, "-c", _FAULTS], env=env, capture_output=True,
                         text=True, check=True, cwd=ROOT)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not GLIBC, reason="the malloc thresholds are glibc's")
def test_freed_heap_memory_is_kept_for_the_next_step():
    assert page_faults("1") < 100  # the same memory again: no new pages
    assert page_faults("0") > 5000  # glibc's defaults: 64 MiB of new pages a round


def test_keep_freed_memory_says_whether_it_applies():
    assert _scratch.keep_freed_memory() is GLIBC
