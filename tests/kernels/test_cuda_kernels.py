"""The float-status kernels on a GPU, where the CPU cannot take them: arrays of more than 2**31
elements (64-bit indexing), blocks that take several chunks each (the grid-stride loop, which
the default grid of one block per chunk reaches only beyond 2**36 elements), and the widening
kernel's two store paths (16-byte stores where the output of each vector is 16-byte aligned,
4-byte stores elsewhere), all bit-exact against NumPy.
"""
import numpy
import pytest

from helpers import NO_GPU
from helpers.bits import assert_same_values, ref_unscale
from minigrad import backend
from minigrad.amp import _status_launch
from minigrad.amp import float_status as fs

pytestmark = [pytest.mark.gpu, NO_GPU]
F16, F32 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)
BIG = 2 ** 31 + 4099  # odd: the chunk holding the last elements ends in the scalar tail


def exact_pattern(n, dtype, seed=0):
    """``n`` values +-2**k * (1 + m/1024), |k| <= 8: halving and doubling them is exact."""
    rng = numpy.random.default_rng(seed)
    values = numpy.ldexp(1 + rng.integers(0, 1024, n) / 1024, rng.integers(-8, 9, n))
    return (values * rng.choice([-1.0, 1.0], n)).astype(dtype)


def tiled(n, dtype):
    """A GPU array of ``n`` elements repeating ``exact_pattern(4096)``, and that pattern."""
    pattern = exact_pattern(4096, dtype)
    x = backend.cupy.tile(backend.cupy.asarray(pattern), -(-n // pattern.size))[:n]
    return backend.cupy.ascontiguousarray(x), pattern


def sample_positions(n):
    edges = [0, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, n - 2, n - 1]
    rng = numpy.random.default_rng(1)
    return numpy.unique(numpy.concatenate([edges, rng.integers(0, n, 2000)]))


@pytest.mark.parametrize("dtype", [F16, F32], ids=str)
def test_more_than_2_31_elements(dtype):
    x, pattern = tiled(BIG, dtype)
    positions = sample_positions(BIG)
    status = fs.alloc_status("GPU")
    fs.check_overflow(status, x)
    assert not fs.get_status(status)
    x[BIG - 3] = numpy.inf  # beyond 2**31, in the last chunk's tail
    fs.check_overflow(status, x)
    assert fs.get_status(status)
    x[BIG - 3] = pattern[(BIG - 3) % pattern.size]
    fs.clear_status(status)
    fs.check_and_unscale(status, [x], 0.5)
    assert not fs.get_status(status)
    expected = ref_unscale(pattern[positions % pattern.size], 0.5)
    assert_same_values(x[backend.cupy.asarray(positions)], expected)
    if dtype == F16:
        (wide,) = fs.check_and_unscale_to_fp32(status, [x], 4.0)
        assert not fs.get_status(status)
        assert_same_values(wide[backend.cupy.asarray(positions)],
                           expected.astype(numpy.float32) * numpy.float32(4.0))


def test_blocks_take_several_chunks(monkeypatch):
    monkeypatch.setattr(_status_launch, "GPU_MAX_BLOCKS", 3)  # grid of 3 blocks, many chunks
    rng = numpy.random.default_rng(2)
    lengths = [1, 7, 65536, 65537, 3 * 65536 + 5, 200003]
    for dtype in (F16, F32):
        host = [exact_pattern(n + 3, dtype, seed=n)[k % 4:][:n] for k, n in enumerate(lengths)]
        for flagged in (None, 3, 5):  # clean, an inf in one array, a NaN in the last
            arrays = [backend.cupy.asarray(h) for h in host]
            arrays = [backend.cupy.empty(a.size + 1, dtype)[1:] if k % 2 else a
                      for k, a in enumerate(arrays)]  # odd arrays misaligned by one element
            for a, h in zip(arrays, host):
                a[...] = backend.cupy.asarray(h)
            if flagged is not None:
                position = int(rng.integers(0, lengths[flagged]))
                arrays[flagged][position] = numpy.inf if flagged == 3 else numpy.nan
            want = [backend.as_numpy(a) for a in arrays]
            status = fs.alloc_status("GPU")
            fs.check_overflow(status, *arrays)
            assert fs.get_status(status) == (flagged is not None)
            fs.clear_status(status)
            if dtype == F16:
                wide = fs.check_and_unscale_to_fp32(status, arrays, 0.25)
                assert fs.get_status(status) == (flagged is not None)
                for w, a in zip(wide, want):
                    assert_same_values(w, a.astype(numpy.float32) * numpy.float32(0.25))
                fs.clear_status(status)
            fs.check_and_unscale(status, arrays, 0.5)
            assert fs.get_status(status) == (flagged is not None)
            for a, w in zip(arrays, want):
                assert_same_values(a, ref_unscale(w, 0.5))


@pytest.mark.parametrize("offset", range(8))
def test_widening_stores_at_every_input_offset(offset):
    # A fresh output is 256-byte aligned, so vectors of the input (16-byte aligned) land on
    # 16-byte boundaries of the output only for offsets 0 and 4: 16-byte stores there,
    # 4-byte stores for the other six.
    n = 3 * 65536 + 11
    host = exact_pattern(n + offset, F16, seed=offset)
    base = backend.cupy.asarray(host)
    x = base[offset:]
    x[n // 3] = numpy.float16(numpy.nan) if offset % 2 else numpy.float16(-numpy.inf)
    status = fs.alloc_status("GPU")
    (wide,) = fs.check_and_unscale_to_fp32(status, [x], 2.0 ** -20)
    assert fs.get_status(status)
    assert_same_values(wide, backend.as_numpy(x).astype(numpy.float32) * numpy.float32(2.0 ** -20))
