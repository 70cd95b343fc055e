"""``minigrad._fp16_host.convert``: NumPy's astype bits for float16 <-> float32, on every path.

The native routine has a vector path (8 elements at a time) and a scalar path (tails, blocks
with NaN or near-overflow values, CPUs without F16C); both are checked exhaustively for fp16
inputs and on adversarial fp32 inputs: ties at every fp16 rounding boundary, the subnormal
range, the overflow threshold, NaN payloads (signalling and quiet), random bit patterns.
"""
import warnings

import numpy
import pytest

from minigrad import _fp16_host, _native
from minigrad._fp16_host import convert

F16, F32 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)


def native():
    fns = _native.loaded().conversions
    if fns is None or (F16, F32) not in fns:
        pytest.skip(f"no vector conversion in the host library ({_native.host_library_error()})")
    return fns


def all_halves():
    return numpy.arange(1 << 16, dtype=numpy.uint32).astype(numpy.uint16).view(numpy.float16)


def adversarial_floats():
    """fp32 values where rounding to fp16 is delicate, both signs."""
    halves = all_halves()
    with numpy.errstate(invalid="ignore"):
        finite = halves[numpy.isfinite(halves)]
    bits = finite.astype(numpy.float32).view(numpy.uint32).astype(numpy.int64)
    parts = []
    for delta in (-2, -1, 0, 1, 2):
        parts.append(bits + delta)                      # each fp16 value and its fp32 neighbours
        for half_ulp in (1 << 12, 1 << 13):             # ties (normal / one binade up)
            parts.append(bits + half_ulp + delta)
    parts.append(numpy.arange(0x32F00000, 0x38900000, 61))          # below 2^-25 .. above 2^-14
    parts.append(numpy.arange(0x477FE000 - 64, 0x47800000 + 64))    # 65504 .. 65536, ties at 65520
    parts.append(numpy.arange(0x7F800000, 0x7F800000 + 70000))      # inf, signalling NaNs
    parts.append(
        numpy.arange(0x7FC00000 - 300, 0x7FC00000 + 300)
    )  # quiet NaNs around the quiet bit
    parts.append(numpy.arange(0x7FFFE000, 0x80000000))  # NaNs with the top payload bits
    parts.append(numpy.random.default_rng(0).integers(0, 1 << 31, 400_000))
    u = numpy.concatenate(parts) % (1 << 31)
    return numpy.concatenate([u, u | (1 << 31)]).astype(numpy.uint32).view(numpy.float32)


def same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    ua, ub = (v.view(numpy.uint16 if v.dtype == F16 else numpy.uint32) for v in (a, b))
    bad = numpy.flatnonzero(ua != ub)
    assert bad.size == 0, [(i, hex(ua.flat[i]), hex(ub.flat[i])) for i in bad[:5]]


def quiet_astype(x, dtype):
    with numpy.errstate(over="ignore"):
        return x.astype(dtype)


def scalar_path(fn, x, dtype, block=7):
    """Convert through the native scalar code only: calls of fewer than 8 elements."""
    out = numpy.empty(x.shape, dtype)
    for start in range(0, x.size, block):
        n = min(block, x.size - start)
        fn(x.ctypes.data + start * x.itemsize, out.ctypes.data + start * out.itemsize, n)
    return out


def test_half_to_float_exhaustive():
    fns = native()
    x = all_halves()
    same_bits(_fp16_host.convert(x, F32), x.astype(F32))
    same_bits(scalar_path(fns[F16, F32], x, F32), x.astype(F32))


def test_float_to_half_adversarial():
    fns = native()
    x = adversarial_floats()
    expected = quiet_astype(x, F16)
    vector = numpy.empty(x.shape, F16)  # the routine itself: convert() redoes overflows in NumPy
    overflows = fns[F32, F16](x.ctypes.data, vector.ctypes.data, x.size)
    same_bits(vector, expected)
    assert overflows == int((numpy.isinf(expected) & numpy.isfinite(x)).sum())
    subset = x[::37].copy()
    same_bits(scalar_path(fns[F32, F16], subset, F16), expected[::37])
    finite = x[numpy.abs(x) < 65504]
    same_bits(_fp16_host.convert(finite, F16), finite.astype(F16))


def test_float_to_half_round_trips_every_half():
    native()
    x = all_halves().astype(F32)
    same_bits(_fp16_host.convert(x, F16), all_halves())


def test_overflow_count():
    fns = native()
    x = numpy.array([65519.0, 65520.0, 7e4, numpy.inf, numpy.nan, -1e38, 1.0] * 3, F32)
    out = numpy.empty(x.shape, F16)
    assert fns[F32, F16](x.ctypes.data, out.ctypes.data, x.size) == 9  # 65520, 7e4, -1e38; not inf


def test_overflow_warns_and_raises_like_numpy():
    native()
    x = numpy.full(_fp16_host.MIN_SIZE, 1.0, F32)
    x[100] = 1e6
    with pytest.warns(RuntimeWarning, match="overflow"):
        got = _fp16_host.convert(x, F16)
    assert numpy.isinf(got[100]) and (got[:100] == 1).all()
    with numpy.errstate(over="raise"), pytest.raises(FloatingPointError):
        _fp16_host.convert(x, F16)
    out = numpy.empty(x.shape, F16)
    with numpy.errstate(over="raise"), pytest.raises(FloatingPointError):
        _fp16_host.convert(x, F16, out=out)


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a,  # dense, C order
        lambda a: numpy.asfortranarray(a),  # dense, F order: astype keeps it
        lambda a: a[:, ::2],  # strided view
        lambda a: a.T,  # transposed view (F order)
        lambda a: a[:3, :5],  # small
        lambda a: a.reshape(-1)[1:-1],  # 1-D, offset
    ],
    ids=["c", "f", "strided", "transposed", "small", "offset"],
)
@pytest.mark.parametrize("pair", [(F16, F32), (F32, F16)], ids=["to_fp32", "to_fp16"])
def test_layouts_match_astype(make, pair):
    src, dst = pair
    base = (numpy.random.default_rng(1).standard_normal((96, 130)) * 300).astype(src)
    x = make(base)
    got = _fp16_host.convert(x, dst)
    want = x.astype(dst)
    same_bits(got, want)
    assert got.flags.c_contiguous == want.flags.c_contiguous
    assert got.flags.f_contiguous == want.flags.f_contiguous
    out = numpy.empty(x.shape, dst)
    assert _fp16_host.convert(x, dst, out=out) is out
    same_bits(out, want)


def test_out_of_another_layout_is_filled_correctly():
    x = numpy.random.default_rng(2).standard_normal((100, 80)).astype(F32)
    out = numpy.empty((80, 100), F16).T  # F-ordered out for a C-ordered x
    _fp16_host.convert(x, F16, out=out)
    same_bits(out, x.astype(F16))


def test_native_path_is_used_for_large_dense_arrays(monkeypatch):
    fns = dict(native())
    calls = []

    def recording(key):
        def call(*args):
            calls.append(key)
            return fns[key](*args)

        return call

    monkeypatch.setattr(_native.loaded(), "conversions", {key: recording(key) for key in fns})
    x = numpy.ones(_fp16_host.MIN_SIZE, F32)
    _fp16_host.convert(_fp16_host.convert(x, F16), F32)
    _fp16_host.convert(x[:10], F16)
    assert calls == [(F32, F16), (F16, F32)]


def test_without_the_native_routine_numpy_converts(monkeypatch):
    monkeypatch.setattr(_native.loaded(), "conversions", None)
    x = adversarial_floats()[:50_000]
    same_bits(_fp16_host.convert(x, F16), quiet_astype(x, F16))
    h = all_halves()
    same_bits(_fp16_host.convert(h, F32), h.astype(F32))


def test_other_dtypes_go_to_astype():
    x = numpy.arange(10_000, dtype=numpy.float64)
    same_bits(_fp16_host.convert(x, F32), x.astype(F32))
    assert _fp16_host.convert(x, numpy.dtype(numpy.int32)).dtype == numpy.int32


def test_read_only_input_converts_natively():
    fns = dict(native())
    x = numpy.random.default_rng(3).standard_normal(_fp16_host.MIN_SIZE).astype(F32)
    x.flags.writeable = False  # no writable buffer to take the address of: the slow address
    same_bits(_fp16_host.convert(x, F16), x.astype(F16))
    h = x.astype(F16)
    h.flags.writeable = False
    same_bits(_fp16_host.convert(h, F32), h.astype(F32))
    assert fns == _native.loaded().conversions


@pytest.mark.parametrize("value", [1e-10, 1e-6, -3e-8])  # flushes to zero; inexact subnormals
def test_underflow_warns_and_raises_like_numpy(value):
    """NumPy's cast reports underflow when errstate asks; the native path does not, so it steps
    aside then (and stays native under the default "ignore")."""
    native()
    x = numpy.full(_fp16_host.MIN_SIZE, 1.0, F32)
    x[7] = value
    want = x.astype(F16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same_bits(_fp16_host.convert(x, F16), want)  # default: silent, as astype
    with numpy.errstate(under="warn"), pytest.warns(RuntimeWarning, match="underflow"):
        same_bits(_fp16_host.convert(x, F16), want)
    with numpy.errstate(under="raise"), pytest.raises(FloatingPointError, match="underflow"):
        _fp16_host.convert(x, F16)
    with numpy.errstate(under="raise"), pytest.raises(FloatingPointError, match="underflow"):
        _fp16_host.convert(x, F16, out=numpy.empty(x.shape, F16))
    with numpy.errstate(under="raise"):  # widening never underflows: still native, still exact
        same_bits(_fp16_host.convert(want, F32), want.astype(F32))


@pytest.mark.requires_native
def test_convert_into_a_read_only_out_raises_like_numpy():
    out = numpy.zeros(5000, F16)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        convert(numpy.ones(5000, F32), F16, out=out)
    assert not out.any()


def _layouts(x):
    return [x, numpy.asfortranarray(x), x[:, ::2], x.T, x[::3], x[None], x[:0]]


def _same(result, expected):
    return (
        result.dtype == expected.dtype
        and result.shape == expected.shape
        and result.strides == expected.strides
        and result.tobytes(order="A") == expected.tobytes(order="A")
    )


@pytest.mark.parametrize("native", [True, False])
def test_convert_gives_astypes_bits_and_memory_order(native, monkeypatch):
    if not native:
        monkeypatch.setattr(_native.loaded(), "conversions", None)
    rng = numpy.random.default_rng(0)
    x = (rng.standard_normal((120, 80)) * 1e4).astype(F32)  # finite in fp16: the native path runs
    x.flat[:6] = [numpy.inf, -numpy.inf, numpy.nan, -0.0, 1e-8, 6e-5]
    x.view(numpy.uint32).flat[6] = 0x7FC00123  # a NaN payload
    for a in _layouts(x):
        assert _same(_fp16_host.convert(a, F16), a.astype(F16))
    h = x.astype(F16)
    for a in _layouts(h):
        assert _same(_fp16_host.convert(a, F32), a.astype(F32))
    for a in (x, numpy.asfortranarray(x)):
        out = numpy.empty_like(a, dtype=F16)
        assert _fp16_host.convert(a, F16, out=out) is out and out.tobytes("A") == a.astype(
            F16
        ).tobytes("A")
    out = numpy.empty(x.shape, F16, order="F")  # another order than x: still right
    _fp16_host.convert(x, F16, out=out)
    numpy.testing.assert_array_equal(out.view(numpy.uint16), x.astype(F16).view(numpy.uint16))


def test_convert_warns_and_raises_as_astype_under_errstate():
    x = numpy.ones((100, 80), F32)
    x[7, 7] = 1e6  # fp16 overflow
    x[8, 8] = 1e-7  # an inexact fp16 subnormal: underflow
    for setting in ("warn", "raise", "ignore"):
        for key in ("over", "under"):
            with numpy.errstate(**{key: setting}):
                outcomes = []
                for fn in (lambda: _fp16_host.convert(x, F16), lambda: x.astype(F16)):
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        try:
                            fn()
                            outcomes.append(sorted(str(w.message) for w in caught))
                        except FloatingPointError as e:
                            outcomes.append(str(e))
                assert outcomes[0] == outcomes[1], (key, setting)


def test_dense_arrays_in_any_axis_order_convert_natively_and_keep_their_order(monkeypatch):
    fns = dict(native())
    calls = []
    monkeypatch.setattr(_native.loaded(), "conversions",
                        {k: (lambda f: lambda *a: calls.append(1) or f(*a))(f)
                         for k, f in fns.items()})
    x = (numpy.random.default_rng(3).standard_normal((2, 6, 5, 70)) * 300).astype(F32)
    cl = x.transpose(0, 3, 1, 2)  # an (N, C, H, W) batch stored channels-last
    assert _fp16_host.dense(cl) and not cl.flags.c_contiguous and not cl.flags.f_contiguous
    for src, dst in ((cl, F16), (cl.astype(F16), F32)):
        got = convert(src, dst)
        same_bits(got, src.astype(dst))
        assert got.strides == tuple(s // src.itemsize * dst.itemsize for s in src.strides)
    assert len(calls) == 2


def test_dense_and_same_layout():
    a = numpy.zeros((3, 4, 5), F32)
    assert _fp16_host.dense(a) and _fp16_host.dense(a.T) and _fp16_host.dense(a.transpose(1, 0, 2))
    assert _fp16_host.dense(a[:1]) and _fp16_host.dense(a[:0]) and not _fp16_host.dense(a[:, :1])
    assert not _fp16_host.dense(a[:, ::2]) and not _fp16_host.dense(a[::-1])
    assert not _fp16_host.dense(numpy.broadcast_to(a[:1], (3, 4, 5)))
    b = numpy.zeros((3, 4, 5), F16)
    assert _fp16_host.same_layout(a, b) and _fp16_host.same_layout(a.T, b.T)
    assert not _fp16_host.same_layout(a, numpy.zeros((5, 4, 3), F16).T)
