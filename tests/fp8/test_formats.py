"""The FP8 casts round to nearest even and saturate (or not) bit for bit as ml_dtypes casts, on
every FP8 value, every midpoint between neighbours and the values just beside them, ±max,
max·(1 ± ε), subnormals, NaN, ±inf and ±0."""
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minigrad.fp8 import E4M3, E5M2, decode, formats

ml_dtypes = pytest.importorskip("ml_dtypes")
PAIRS = [(E4M3, ml_dtypes.float8_e4m3fn), (E5M2, ml_dtypes.float8_e5m2)]
# encode takes ml_dtypes' cast on NumPy; encode_arith is the arithmetic CuPy arrays go through
ENCODERS = pytest.mark.parametrize("encode", [formats.encode, formats.encode_arith],
                                   ids=["encode", "encode_arith"])


def reference(x, ml, fmt, saturate):
    x = numpy.asarray(x, dtype=numpy.float32)
    if saturate:  # a saturating cast is the clamp then the plain cast (torchao's way)
        x = numpy.clip(x, -fmt.max, fmt.max)
    return x.astype(ml).view(numpy.uint8)


def adversarial(fmt, ml):
    values = numpy.unique(numpy.abs(numpy.arange(256, dtype=numpy.uint8).view(ml)
                                    .astype(numpy.float64)))
    values = values[numpy.isfinite(values)]
    mids = ((values[1:] + values[:-1]) / 2).astype(numpy.float32)
    up, down = numpy.float32(numpy.inf), numpy.float32(-numpy.inf)
    eps = numpy.finfo(numpy.float32).eps
    special = [fmt.max, fmt.max * (1 + eps), fmt.max * (1 - eps), fmt.max * 1.07, 1e38,
               fmt.smallest_subnormal, fmt.smallest_subnormal / 2, fmt.smallest_subnormal * 0.51,
               fmt.smallest_subnormal * 1.5, 2.0 ** fmt.min_normal_exp, 1e-30, 0.0,
               numpy.inf, numpy.nan]
    x = numpy.concatenate([values, mids, numpy.nextafter(mids, up), numpy.nextafter(mids, down),
                           numpy.asarray(special)]).astype(numpy.float32)
    return numpy.concatenate([x, -x])


@ENCODERS
@pytest.mark.parametrize("fmt, ml", PAIRS, ids=["E4M3", "E5M2"])
@pytest.mark.parametrize("saturate", [True, False])
def test_encode_is_bit_exact_against_ml_dtypes_on_adversarial_values(encode, fmt, ml, saturate):
    x = adversarial(fmt, ml)
    got, want = encode(x, fmt, saturate), reference(x, ml, fmt, saturate)
    assert got.dtype == numpy.uint8
    bad = got != want
    assert not bad.any(), (x[bad][:8], got[bad][:8], want[bad][:8])


@ENCODERS
@pytest.mark.parametrize("fmt, ml", PAIRS, ids=["E4M3", "E5M2"])
def test_overflow_saturates_or_becomes_what_a_plain_cast_gives(encode, fmt, ml):
    x = numpy.array([fmt.max * 2, -numpy.inf, numpy.nan], dtype=numpy.float32)
    sat = decode(encode(x, fmt, True), fmt)
    assert sat[0] == fmt.max and sat[1] == -fmt.max and numpy.isnan(sat[2])
    plain = decode(encode(x, fmt, False), fmt)
    if fmt.has_inf:
        assert plain[0] == numpy.inf and plain[1] == -numpy.inf
    else:  # E4M3 has no inf: overflow is NaN
        assert numpy.isnan(plain[:2]).all()


@ENCODERS
def test_ties_go_to_the_even_mantissa(encode):
    # 464 lies halfway between 448 (mantissa 110) and 480 (the NaN pattern's place): down to 448;
    # 1 + 1/16 lies halfway between 1 (000) and 1.125 (001): down to 1; 1 + 3/16 up to 1.25
    x = numpy.array([464.0, 1 + 1 / 16, 1 + 3 / 16], dtype=numpy.float32)
    assert decode(encode(x, E4M3, False), E4M3).tolist() == [448.0, 1.0, 1.25]


@pytest.mark.parametrize("fmt, ml", PAIRS, ids=["E4M3", "E5M2"])
def test_decode_table_is_ml_dtypes_values(fmt, ml):
    want = numpy.arange(256, dtype=numpy.uint8).view(ml).astype(numpy.float32)
    numpy.testing.assert_array_equal(formats.decode_table(fmt), want)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1,
                max_size=64), st.booleans(), st.sampled_from([0, 1]))
def test_encode_arith_matches_ml_dtypes_on_any_float32(values, saturate, which):
    fmt, ml = PAIRS[which]
    x = numpy.array(values, dtype=numpy.float32)
    numpy.testing.assert_array_equal(formats.encode_arith(x, fmt, saturate),
                                     reference(x, ml, fmt, saturate))


@ENCODERS
def test_float16_and_float64_inputs_round_once(encode):
    x64 = numpy.array([1 + 1 / 16 + 2.0 ** -40, 300.0])  # just above a tie: up, not to even
    assert decode(encode(x64, E4M3), E4M3).tolist() == [1.125, 288.0]
    x16 = numpy.array([1.0625, -0.0], dtype=numpy.float16)
    assert encode(x16, E4M3).tolist() == [0x38, 0x80]


def test_format_names():
    assert formats.as_format("e4m3") is E4M3 and formats.as_format("float8_e5m2") is E5M2
    with pytest.raises(ValueError, match="fmt"):
        formats.as_format("E3M4")
    with pytest.raises(TypeError, match="fmt"):
        formats.as_format(8)
