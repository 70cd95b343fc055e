"""``minigrad._fp16_host.convert`` for bfloat16 <-> float32: ml_dtypes' ``astype`` bits and
warnings, through the native twin (``mg_bf16_to_float``, ``mg_float_to_bf16``) and without it.

Widening is checked on every bfloat16 bit pattern. Narrowing is checked on every bfloat16 value
with the low halves that decide its rounding (exact, just above, just below half, the tie, just
over half, the top), on named cases whose bits are written out (so ml_dtypes' own behaviour is
pinned too), and on random float32 bit patterns drawn by hypothesis. Without the native routine
(``MINIGRAD_NATIVE=0``) the same cases check the fallback, ``astype`` through ``convert``.
"""
import warnings

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("ml_dtypes")

from minigrad import _fp16_host, _native  # noqa: E402
from minigrad import dtype as dtypes  # noqa: E402
from minigrad._fp16_host import MIN_SIZE, convert  # noqa: E402

BF16, F16, F32 = dtypes.bfloat16, numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)


def routines():
    """The native (widen, narrow) routines, or None (no host library, ``MINIGRAD_NATIVE=0``)."""
    fns = _native.loaded().conversions
    if fns is None or (F32, BF16) not in fns:
        return None
    return fns[BF16, F32], fns[F32, BF16]


def native():
    """The native (widen, narrow) routines, or a skip saying why there are none."""
    fns = routines()
    if fns is None:
        pytest.skip(f"no native bfloat16 conversion ({_native.host_library_error()})")
    return fns


def floats(bits):
    return numpy.asarray(bits, numpy.uint64).astype(numpy.uint32).view(F32)


def bits_of(x):
    return x.view({2: numpy.uint16, 4: numpy.uint32}[x.itemsize])


def same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    ua, ub = bits_of(a), bits_of(b)
    bad = numpy.flatnonzero(ua != ub)
    assert bad.size == 0, [(i, hex(ua.flat[i]), hex(ub.flat[i])) for i in bad[:5]]


def quiet_astype(x, dtype):
    """``astype`` without its "invalid" warning for signalling NaNs."""
    with numpy.errstate(invalid="ignore"):
        return x.astype(dtype)


def _quiet_convert(x, dtype):
    with numpy.errstate(invalid="ignore"):
        return convert(x, dtype)


def narrow(x):
    """The native rounding of the float32 array ``x``: (bfloat16 result, signalling NaNs); without
    the native routine, astype's result and the count it should give (what the tests that also
    run without it compare with)."""
    fns = routines()
    if fns is None:
        return quiet_astype(x, BF16), signalling_nans(x)
    out = numpy.empty(x.shape, BF16)
    count = fns[1](x.ctypes.data, out.ctypes.data, x.size)
    return out, count


def signalling_nans(x):
    a = bits_of(x) & 0x7FFFFFFF
    return int(((a > 0x7F800000) & (a < 0x7FC00000)).sum())


def all_bfloat16():
    return numpy.arange(1 << 16, dtype=numpy.uint32).astype(numpy.uint16).view(BF16)


def rounding_cases():
    """Every bfloat16 value (both signs: zeros, subnormals, normals, inf, every NaN) with the
    low halves that decide its rounding, and a random low half."""
    top = numpy.arange(1 << 16, dtype=numpy.uint64) << 16
    lows = numpy.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], numpy.uint64)
    rest = numpy.random.default_rng(0).integers(0, 1 << 16, 1 << 16).astype(numpy.uint64)
    return floats(numpy.concatenate([(top[:, None] | lows).ravel(), top | rest]))


# (float32 bits, bfloat16 bits, signalling NaN): what ml_dtypes' astype gives
NARROWING = [
    (0x00000000, 0x0000, 0), (0x80000000, 0x8000, 0),            # +-0 keep their sign
    (0x3F800000, 0x3F80, 0), (0x3F807FFF, 0x3F80, 0),            # 1.0, just below half
    (0x3F808000, 0x3F80, 0), (0x3F818000, 0x3F82, 0),            # ties to even: down, up
    (0x3F808001, 0x3F81, 0), (0xBF818000, 0xBF82, 0),            # just over half; sign kept
    (0x00000001, 0x0000, 0), (0x80000001, 0x8000, 0),            # smallest subnormal -> +-0
    (0x00008000, 0x0000, 0), (0x00018000, 0x0002, 0),            # subnormal ties to even
    (0x00010000, 0x0001, 0), (0x00008001, 0x0001, 0),            # subnormals kept, no flush
    (0x007FFFFF, 0x0080, 0), (0x807F8000, 0x8080, 0),            # to the smallest normal
    (0x7F7F0000, 0x7F7F, 0), (0x7F7F7FFF, 0x7F7F, 0),            # bf16 max, just below the tie
    (0x7F7F8000, 0x7F80, 0), (0xFF7F8000, 0xFF80, 0),            # the tie above max: +-inf
    (0x7F7E8000, 0x7F7E, 0), (0x7F7FFFFF, 0x7F80, 0),            # an even tie; float32 max
    (0x7F800000, 0x7F80, 0), (0xFF800000, 0xFF80, 0),            # +-inf
    (0x7FC00000, 0x7FC0, 0), (0xFFC00000, 0xFFC0, 0),            # quiet NaN, sign kept
    (0x7FC00001, 0x7FC0, 0), (0x7FFFFFFF, 0x7FC0, 0),            # payloads dropped
    (0xFFFFFFFF, 0xFFC0, 0), (0x7FC18000, 0x7FC0, 0),            # never rounded into
    (0x7F800001, 0x7FC0, 1), (0x7FBFFFFF, 0x7FC0, 1),            # signalling NaN: quietened
    (0xFF800001, 0xFFC0, 1), (0xFFA12345, 0xFFC0, 1),
]
# (bfloat16 bits, float32 bits): widening is a shift, every payload kept
WIDENING = [(0x0000, 0x00000000), (0x8000, 0x80000000), (0x0001, 0x00010000),
            (0x7F7F, 0x7F7F0000), (0xFF80, 0xFF800000), (0x7FC0, 0x7FC00000),
            (0x7F81, 0x7F810000), (0xFFC1, 0xFFC10000), (0xFFFF, 0xFFFF0000)]


@pytest.mark.parametrize("source, want, signalling", NARROWING,
                         ids=[f"{s:08x}" for s, _, _ in NARROWING])
def test_named_narrowings(source, want, signalling):
    x = floats([source])
    assert int(bits_of(quiet_astype(x, BF16))[0]) == want  # ml_dtypes, the reference
    got, count = narrow(x)
    assert int(bits_of(got)[0]) == want and count == signalling
    big = numpy.repeat(x, MIN_SIZE)  # through convert, native unless signalling
    same_bits(quiet_astype(big, BF16), numpy.full(big.shape, want, numpy.uint16).view(BF16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        same_bits(convert(big, BF16), quiet_astype(big, BF16))


@pytest.mark.parametrize("source, want", WIDENING, ids=[f"{s:04x}" for s, _ in WIDENING])
def test_named_widenings(source, want):
    x = numpy.array([source], numpy.uint16).view(BF16)
    assert int(bits_of(x.astype(F32))[0]) == want
    big = numpy.repeat(x, MIN_SIZE)
    assert (bits_of(convert(big, F32)) == want).all()


def test_widening_every_bfloat16():
    x = all_bfloat16()
    want = x.astype(F32)
    if routines() is not None:
        out = numpy.empty(x.shape, F32)
        routines()[0](x.ctypes.data, out.ctypes.data, x.size)
        same_bits(out, want)
    same_bits(convert(x, F32), want)
    same_bits(convert(x[1:-2], F32), want[1:-2])  # odd lengths and offsets: the loop's tails


def test_narrowing_every_rounding_case():
    x = rounding_cases()
    got, count = narrow(x)
    same_bits(got, quiet_astype(x, BF16))
    assert count == signalling_nans(x) > 2 * 0x3F * 7  # 0x7F81..0x7FBF, both signs, and more
    for start, stop in ((1, 6), (3, 40), (5, 1029)):  # short calls: tails of the vector loop
        part, _ = narrow(x[start:stop].copy())
        same_bits(part, quiet_astype(x[start:stop], BF16))
    same_bits(_quiet_convert(x, BF16), quiet_astype(x, BF16))  # astype: signalling NaNs
    finite = x[numpy.isfinite(x)]
    same_bits(convert(finite, BF16), finite.astype(BF16))  # native where there is the routine


def test_every_bfloat16_round_trips():
    """bfloat16 -> float32 -> bfloat16 gives every value back, NaNs quiet with their sign."""
    x = all_bfloat16()
    wide = convert(x, F32)
    want = numpy.where(numpy.isnan(wide), (bits_of(x) & 0x8000) | 0x7FC0, bits_of(x))
    same_bits(_quiet_convert(wide, BF16), want.astype(numpy.uint16).view(BF16))
    finite = wide[numpy.isfinite(wide)]  # no signalling NaN: the native rounding
    same_bits(convert(finite, BF16), x[numpy.isfinite(wide)])


@given(st.lists(st.integers(0, (1 << 32) - 1), min_size=1, max_size=200))
def test_random_bit_patterns_match_astype(patterns):
    x = floats(patterns)
    got, count = narrow(x)
    same_bits(got, quiet_astype(x, BF16))
    assert count == signalling_nans(x)
    big = numpy.resize(x, MIN_SIZE + len(patterns))
    outcomes = []
    for fn in (lambda: convert(big, BF16), lambda: big.astype(BF16)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        outcomes.append((bits_of(result).tobytes(), sorted(str(w.message) for w in caught)))
    assert outcomes[0] == outcomes[1]
    h = bits_of(big).astype(numpy.uint16).view(BF16)  # the low halves as bfloat16 patterns
    same_bits(convert(h, F32), h.astype(F32))


@pytest.mark.parametrize("out", [False, True], ids=["new", "out"])
def test_signalling_nan_warns_and_raises_like_astype(out):
    """astype reports "invalid" for a signalling NaN rounded to bfloat16, under errstate; such
    an array goes to astype, and every setting gives astype's outcome and bits."""
    x = numpy.ones(MIN_SIZE, F32)
    x.view(numpy.uint32)[9] = 0x7F800123
    for setting in ("warn", "raise", "ignore"):
        outcomes = []
        for fn in (lambda: convert(x, BF16, out=numpy.empty(x.shape, BF16) if out else None),
                   lambda: x.astype(BF16)):
            with numpy.errstate(invalid=setting), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    outcomes.append((bits_of(fn()).tobytes(), [str(w.message) for w in caught]))
                except FloatingPointError as error:
                    outcomes.append(str(error))
        assert outcomes[0] == outcomes[1], setting
    with pytest.warns(RuntimeWarning, match="invalid value"):
        convert(x, BF16)


def test_overflow_and_underflow_are_silent_like_astype(monkeypatch):
    """Rounding to bfloat16 reports no overflow or underflow (astype reports none): the native
    path runs even where NumPy raises on them."""
    fns = dict(_native.loaded().conversions or {})
    if (F32, BF16) not in fns:
        pytest.skip("no native bfloat16 conversion")
    calls = []
    monkeypatch.setattr(_native.loaded(), "conversions",
                        {k: (lambda k, f: lambda *a: calls.append(k) or f(*a))(k, f)
                         for k, f in fns.items()})
    x = numpy.ones(MIN_SIZE, F32)
    x.view(numpy.uint32)[:4] = [0x7F7F8000, 0x7F7FFFFF, 0x00000001, 0x80008000]
    with numpy.errstate(all="raise"):
        got = convert(x, BF16)
        same_bits(got, x.astype(BF16))
        same_bits(convert(got, F32), got.astype(F32))
    assert calls == [(F32, BF16), (BF16, F32)]


def test_native_path_is_used_for_large_dense_arrays_only(monkeypatch):
    widen, narrow_fn = native()
    calls = []

    def recording(key, fn):
        return lambda *args: calls.append(key) or fn(*args)

    monkeypatch.setattr(_native.loaded(), "conversions",
                        {(BF16, F32): recording("widen", widen),
                         (F32, BF16): recording("narrow", narrow_fn)})
    x = numpy.linspace(-3, 3, MIN_SIZE * 2, dtype=F32).reshape(64, -1)
    convert(convert(x, BF16), F32)
    convert(x[:2, :10], BF16)       # small: astype
    convert(x[:, ::2], BF16)        # a strided view: astype
    convert(x.astype(F16), BF16)    # not a float32 <-> bfloat16 pair: astype
    assert calls == ["narrow", "widen"]


def _layouts(x):
    return {"c": x, "f": numpy.asfortranarray(x), "strided": x[:, ::2], "transposed": x.T,
            "offset": x.reshape(-1)[1:-1], "channels_last": x.reshape(2, 6, 5, -1).transpose(
                0, 3, 1, 2), "small": x[:3, :5], "empty": x[:0]}


@pytest.mark.parametrize("path", ["native", "astype"])
def test_layouts_and_memory_order_match_astype(path, monkeypatch):
    if path == "astype":
        monkeypatch.setattr(_native.loaded(), "conversions", None)
    else:
        native()
    x = (numpy.random.default_rng(1).standard_normal((60, 140)) * 1e3).astype(F32)
    x.flat[:5] = [numpy.inf, -numpy.inf, numpy.nan, -0.0, 1e-40]
    for src, dst in ((x, BF16), (x.astype(BF16), F32)):
        for name, a in _layouts(src).items():
            got, want = convert(a, dst), a.astype(dst)
            same_bits(got, want)
            assert got.strides == want.strides, name
            out = numpy.empty(a.shape, dst)
            assert convert(a, dst, out=out) is out
            same_bits(out, want)


def test_without_the_native_twin_astype_converts():
    """The fallback (``MINIGRAD_NATIVE=0``, no compiler): astype's bits on the same cases."""
    with _native.numpy_fallback():
        assert _native.loaded().conversions is None
        x = rounding_cases()
        same_bits(_quiet_convert(x, BF16), quiet_astype(x, BF16))
        h = all_bfloat16()
        same_bits(convert(h, F32), h.astype(F32))


def test_host_build_offers_bfloat16_only_with_ml_dtypes(monkeypatch):
    lib = _native.loaded().lib
    if lib is None:
        pytest.skip(f"no host library ({_native.host_library_error()})")
    assert {(BF16, F32), (F32, BF16)} <= set(_native.HostBuild(lib, None).conversions)
    monkeypatch.setattr(dtypes, "HAS_LOWP", False)
    without = _native.HostBuild(lib, None).conversions
    assert without is None or set(without) == {(F16, F32), (F32, F16)}
    assert _native.HostBuild(None, "no library").conversions is None


def test_float16_routines_stay_as_they_were():
    """The bfloat16 entries sit beside the float16 ones; a CPU without F16C has only them."""
    fns = _native.loaded().conversions
    if fns is None:
        pytest.skip(f"no host library ({_native.host_library_error()})")
    assert _native.loaded().lib.mg_convert_vectorized() == ((F16, F32) in fns)
    assert (_native.loaded().fp16_passes is not None) == ((F16, F32) in fns)
    x = numpy.linspace(-70000, 70000, MIN_SIZE, dtype=F32)
    with numpy.errstate(over="ignore"):
        same_bits(_fp16_host.convert(x, F16), x.astype(F16))
