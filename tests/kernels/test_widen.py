"""The widening kernel ``check_unscale_fp16_to_fp32``: fp16 in, flag + fp32(x) * inv_scale out.

Run through the same four host builds of ``kernels/float_status.cu`` as the other kernels
(the ``host_lib`` fixture of ``tests/kernels/conftest.py``), with misaligned starts and tiny chunks,
and through ``amp.float_status.OverflowStatus``, where O2's fp16 gradients take this path.
"""
import numpy
import pytest

from helpers.bits import assert_same_values
from helpers.kernel_builds import SPECIALS, make_array
from minigrad.amp import _status_launch, float_status

F16 = numpy.dtype(numpy.float16)


def widen(lib, arrays, chunk, inv_scale):
    """Run the widening kernel directly on two blocks; return (status, outputs)."""
    status = numpy.zeros(8, numpy.float32)
    status[1:] = 7.0
    outs = [numpy.full(a.shape, -1.0, numpy.float32) for a in arrays]
    work = [(a, o) for a, o in zip(arrays, outs) if a.size]
    if work:
        ins, outputs = zip(*work)
        table, n_chunks = _status_launch.chunk_table(ins, chunk, outputs)
        lib.launch_check_unscale_fp16_to_fp32(
            min(2, n_chunks),
            table.ctypes.data,
            len(ins),
            n_chunks,
            chunk,
            inv_scale,
            status.ctypes.data,
        )
    assert (status[1:] == 7.0).all()
    return status, outs


@pytest.mark.parametrize("chunk", [1, 3, 8, 100, 65536])
def test_widening_kernel_matches_numpy(host_lib, chunk):
    lengths = [0, 1, 2, 7, 8, 9, 31, 33, 64, 65, 257, 1000]
    specials = SPECIALS[F16]
    for k, n in enumerate(lengths):
        arrays = [make_array(F16, m, offset=(m + k) % 9, seed=m) for m in lengths]
        arrays[-1][3] = numpy.array(0x0001, numpy.uint16).view(F16)  # a subnormal
        if n:
            arrays[k][(n * 5) // 7] = numpy.array(specials[k % len(specials)], numpy.uint16).view(
                F16
            )
        finite = all(numpy.isfinite(a).all() for a in arrays)
        before = [a.copy() for a in arrays]
        status, outs = widen(host_lib, arrays, chunk, 0.125)
        assert status[0] == (0.0 if finite else 1.0)
        for a, b, out in zip(arrays, before, outs):
            numpy.testing.assert_array_equal(
                a.view(numpy.uint16), b.view(numpy.uint16)
            )  # input untouched
            assert_same_values(out, a.astype(numpy.float32) * numpy.float32(0.125))


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_step_unscales_fp16_into_fp32_bits(layout):
    base = (numpy.random.default_rng(5).standard_normal((300, 70)) * 3000).astype(numpy.float16)
    x = {"C": base, "F": numpy.asfortranarray(base), "strided": base[::2, 1::3]}[layout]
    kept = x.copy()
    inv = float_status.inverse(2.0**13)
    (out, none, wide), overflow = float_status.unscale_and_check(
        [x, None, numpy.ones(3, numpy.float32)], 2.0**13
    )
    assert not overflow and none is None and out.dtype == numpy.float32 and out.shape == x.shape
    assert_same_values(out, x.astype(numpy.float32) * inv)
    assert_same_values(wide, numpy.full(3, inv, numpy.float32))
    numpy.testing.assert_array_equal(x.view(numpy.uint16), kept.view(numpy.uint16))
    if layout == "F":
        assert out.flags.f_contiguous


def test_step_flags_nonfinite_fp16():
    x = numpy.ones(10000, numpy.float16)
    x[9999] = numpy.float16(numpy.inf)
    _, overflow = float_status.unscale_and_check([numpy.ones(5, numpy.float16), x], 4.0)
    assert overflow


def test_widen_without_host_build_matches(monkeypatch):
    monkeypatch.setattr(_status_launch._native, "host_library", lambda: None)
    x = (numpy.random.default_rng(6).standard_normal(5000) * 100).astype(numpy.float16)[1:]
    status = numpy.zeros(8, numpy.float32)
    out, empty = _status_launch.widen(status, [x, x[:0]], 0.25)
    assert status[0] == 0 and empty.shape == (0,) and empty.dtype == numpy.float32
    assert_same_values(out, x.astype(numpy.float32) * numpy.float32(0.25))
    x[7] = numpy.nan
    _status_launch.widen(status, [x], 0.25)
    assert status[0] == 1
