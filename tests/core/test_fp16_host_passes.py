"""The fused fp16 host passes of ``minigrad._fp16_host`` give the bits of the NumPy code
they replace.

ReLU forward/backward (every fp16 bit pattern), Dense's bias epilogue ``fp16(y + fp32(b))`` and
its bias gradient ``fp16(Σ_rows fp32(g))`` (ties at fp16 rounding boundaries, subnormals, ±0,
±inf, NaN payloads, overflow), NumPy's warnings where a result is inf or NaN, the ops with and
without the native passes, and the cases the native passes leave to NumPy.
"""

import math
import warnings

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minigrad import Tensor, _native
from minigrad import _fp16_host
from minigrad.ops import linalg
from minigrad.ops import math as ops_math

F16, F32 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)
SPECIAL_HALVES = [
    0x0000,
    0x8000,
    0x0001,
    0x8001,
    0x03FF,
    0x83FF,
    0x0400,
    0x7BFF,
    0xFBFF,
    0x7C00,
    0xFC00,
    0x7C01,
    0xFC01,
    0x7E00,
    0xFE00,
    0x7FFF,
    0xFFFF,
    0x3C00,
    0xBC00,
]


@pytest.fixture(autouse=True)
def native():
    if _native.loaded().fp16_passes is None:
        pytest.skip("no host library with vector conversion")


@pytest.fixture
def numpy_only(monkeypatch):
    """Run the ops' NumPy code: the fused passes off (the conversions stay native)."""

    def off():
        monkeypatch.setattr(_native.loaded(), "fp16_passes", None)

    return off


def bits(x):
    return x.view({2: numpy.uint16, 4: numpy.uint32, 1: numpy.uint8}[x.itemsize])


def same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    bad = numpy.flatnonzero(bits(got) != bits(want))
    assert bad.size == 0, [(i, hex(bits(got).flat[i]), hex(bits(want).flat[i])) for i in bad[:5]]


def all_halves():
    return numpy.arange(1 << 16, dtype=numpy.uint32).astype(numpy.uint16).view(F16)


def with_warnings(fn, *args):
    """fn(*args) and the messages of the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args)
    return result, sorted(str(w.message) for w in caught)


def halves(shape, seed, special_share=0.05):
    """Random fp16 values of all magnitudes with some special bit patterns mixed in."""
    rng = numpy.random.default_rng(seed)
    h = rng.integers(0, 1 << 16, size=shape, dtype=numpy.uint32).astype(numpy.uint16)
    special = rng.random(shape) < special_share
    h[special] = rng.choice(SPECIAL_HALVES, size=int(special.sum()))
    return h.view(F16)


def floats_near_half_boundaries(n, seed, scale=1.0):
    """fp32 values on, beside and half-way between fp16 values (rounding ties), subnormals
    included."""
    rng = numpy.random.default_rng(seed)
    h = rng.integers(0, 0x7C00, n).astype(numpy.uint16).view(F16).astype(F32) * F32.type(scale)
    u = h.view(numpy.uint32).astype(numpy.int64) + rng.choice(
        [-1, 0, 1, 1 << 12, 1 << 13, (1 << 13) + 1], n
    )
    u |= rng.integers(0, 2, n) << 31
    return (u % (1 << 32)).astype(numpy.uint32).view(F32)


# ---- ReLU ----------------------------------------------------------------------------------------


def relu_numpy(x):
    fn = ops_math.ReLU()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_native.loaded(), "fp16_passes", None)
        return fn.forward(x), fn


def test_relu_forward_every_half():
    x = all_halves()
    out, mask = _fp16_host.relu_pass(x)
    want, fn = relu_numpy(x)
    same_bits(out, want)
    same_bits(mask, fn.mask)
    with numpy.errstate(invalid="ignore"):
        finite_or_inf = ~numpy.isnan(x)
        same_bits(out[finite_or_inf], numpy.maximum(x, F16.type(0))[finite_or_inf] + F16.type(0))
    assert numpy.isnan(out[~finite_or_inf]).all()


def test_relu_backward_every_half():
    g = all_halves()
    mask = numpy.random.default_rng(0).random(g.shape) < 0.5
    same_bits(_fp16_host.relu_backward_pass(g, mask), (g.view(numpy.int16) * mask).view(F16))


# every class of fp32 bit pattern: ±0, subnormals, normals, ±max, ±inf, quiet and signalling NaNs
SPECIAL_FLOAT_BITS = numpy.array([0, 0x80000000, 1, 0x80000001, 0x007FFFFF, 0x00800000,
                                  0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
                                  0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x3F800000,
                                  0xBF800000], numpy.uint32)


def floats_of_every_kind(n, seed):
    """n fp32 values from random bit patterns, a fifth of them special ones."""
    rng = numpy.random.default_rng(seed)
    u = rng.integers(0, 1 << 32, n, dtype=numpy.uint64).astype(numpy.uint32)
    special = rng.random(n) < 0.2
    u[special] = rng.choice(SPECIAL_FLOAT_BITS, int(special.sum()))
    return u.view(F32)


def test_relu_forward_every_kind_of_float():
    x = numpy.concatenate([SPECIAL_FLOAT_BITS.view(F32), floats_of_every_kind(1 << 16, 3)])
    out, mask = _fp16_host.relu_pass(x)
    want, fn = relu_numpy(x)
    same_bits(out, want)
    same_bits(mask, fn.mask)
    same_bits(out, numpy.maximum(x, F32.type(0)))  # NumPy's own rule: -0 -> +0, NaNs kept


def test_relu_backward_every_kind_of_float():
    g = numpy.concatenate([SPECIAL_FLOAT_BITS.view(F32), floats_of_every_kind(1 << 16, 4)])
    mask = numpy.random.default_rng(1).random(g.shape) < 0.5
    mask[: SPECIAL_FLOAT_BITS.size] = False  # -0, NaN from inf, NaN kept where the mask is off
    with numpy.errstate(invalid="ignore"):
        same_bits(_fp16_host.relu_backward_pass(g, mask), g * mask)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=0, max_size=3), st.integers(0, 2**32 - 1))
def test_relu_op_matches_numpy_fp32(shape, seed):
    x = floats_of_every_kind(math.prod(shape), seed).reshape(shape)
    g = floats_of_every_kind(math.prod(shape), seed + 1).reshape(shape)
    fn = ops_math.ReLU()
    out = fn.forward(x)
    want, ref = relu_numpy(x)
    same_bits(out, want)
    with numpy.errstate(invalid="ignore"):
        same_bits(fn.backward(g), ref.backward(g))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=0, max_size=3), st.integers(0, 2**32 - 1))
def test_relu_op_matches_numpy(shape, seed):
    x = halves(tuple(shape), seed, special_share=0.2)
    g = halves(tuple(shape), seed + 1)
    fn = ops_math.ReLU()
    out = fn.forward(x)
    want, ref = relu_numpy(x)
    same_bits(out, want)
    same_bits(fn.backward(g), ref.backward(g))


# ---- Dense's bias epilogue ----------------------------------------------------------------------


def add_bias_numpy(y, b):
    return (y + b.astype(F32)).astype(F16)


def add_bias_op(y, b):
    """Dense's epilogue as the op runs it: the native pass, or (inf/NaN results) its NumPy code."""
    return linalg.add_bias_narrow(y.copy(), b, F16)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 1100),
    st.integers(0, 2**32 - 1),
    st.sampled_from([1e-6, 1.0, 300.0, 6e4]),
)
def test_add_bias_to_half_matches_numpy(rows, cols, seed, scale):
    y = floats_near_half_boundaries(rows * cols, seed, scale).reshape(rows, cols)
    b = halves(cols, seed + 1, special_share=0)
    b[numpy.abs(b.astype(F32)) > 1e4] = 0  # finite, no overflow (which the test below covers)
    b[numpy.isnan(b)] = -0.0
    before = y.copy()
    got, got_warnings = with_warnings(add_bias_op, y, b)
    want, want_warnings = with_warnings(add_bias_numpy, y, b)
    same_bits(got, want)
    same_bits(y, before)
    assert got_warnings == want_warnings


@pytest.mark.parametrize(
    "y_value, b_value, warning",
    [
        (65519.0, 0.0, None),  # the largest value that still rounds to 65504
        (65519.0, 1.0, "overflow"),  # 65520: rounds to inf
        (-7e4, 0.0, "overflow"),
        (numpy.inf, 1.0, None),  # inf stays inf, no warning
        (numpy.inf, -numpy.inf, "invalid"),
        (numpy.nan, 1.0, None),
        (-0.0, -0.0, None),
        (5.96e-8, 0.0, None),  # the smallest fp16 subnormal
        (2.98e-8, 0.0, None),  # half of it: a tie, to +0
    ],
)
def test_add_bias_special_values(y_value, b_value, warning):
    y = numpy.random.default_rng(3).standard_normal((9, 21)).astype(F32)
    b = numpy.random.default_rng(4).standard_normal(21).astype(F16)
    y[4, 13], b[13] = y_value, b_value
    y[7, 5] = -0.0
    b[5] = -0.0
    got, got_warnings = with_warnings(add_bias_op, y, b)
    want, want_warnings = with_warnings(add_bias_numpy, y, b)
    same_bits(got, want)
    assert got_warnings == want_warnings
    assert (warning is None) == (not got_warnings)
    if warning:
        assert warning in got_warnings[0]
        assert _fp16_host.add_bias_to_half(y, b) is None  # inf/NaN results: the op's NumPy code
        with numpy.errstate(over="raise", invalid="raise"), pytest.raises(FloatingPointError):
            add_bias_op(y, b)


# ---- Dense's bias gradient ----------------------------------------------------------------------


def sum_rows_numpy(g):
    g32 = g.astype(F32)
    return g32, g32.sum(axis=0).astype(F16)


def sum_rows_op(g):
    """Dense's bias gradient as the op runs it: the native pass, or (inf/NaN sums) its NumPy
    code."""
    return linalg._widen_sum_rows(g, F16)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(2, 1100), st.integers(0, 2**32 - 1), st.booleans())
def test_widen_sum_rows_matches_numpy(rows, cols, seed, specials):
    if rows * cols > 120_000:
        rows = 120_000 // cols
    g = halves((rows, cols), seed, special_share=0.01 if specials else 0)
    if not specials:
        g[~numpy.isfinite(g)] = 0
        g = (g.astype(F32) * F32.type(1e-3)).astype(F16)  # sums of this size stay finite
    (g32, gb), got_warnings = with_warnings(sum_rows_op, g)
    (want32, wantb), want_warnings = with_warnings(sum_rows_numpy, g)
    same_bits(g32, want32)
    same_bits(gb, wantb)
    assert got_warnings == want_warnings


def test_widen_sum_rows_finite_special_columns():
    g = numpy.zeros((200, 5), F16)
    g[:, 0] = -0.0  # -0 everywhere: sums to +0, as NumPy's (from +0) does
    g[:, 1] = F16.type(6e-8)  # subnormals summed
    g[:, 2] = F16.type(1.0)
    g[0, 2] = F16.type(2048)  # 2048 + 1 + 1 ...: each fp32 add rounds, in row order
    g[:, 3] = -F16.type(65504)  # -13.1e6: finite in fp32, -inf in fp16 (NumPy warns)
    g[:, 4] = F16.type(330)  # 66000: the same, from fp32 rounding
    g32, gb = sum_rows_numpy(g[:, :3])
    (got32, gotb), got_warnings = with_warnings(sum_rows_op, g[:, :3].copy())
    same_bits(got32, g32)
    same_bits(gotb, gb)
    assert not got_warnings and bits(gotb)[0] == 0
    (got32, gotb), got_warnings = with_warnings(sum_rows_op, g)
    (want32, wantb), want_warnings = with_warnings(sum_rows_numpy, g)
    same_bits(gotb, wantb)
    assert got_warnings == want_warnings == ["overflow encountered in cast"]


def test_widen_sum_rows_nonfinite_columns():
    g = numpy.ones((200, 4), F16)
    g[0, 0], g[1, 0] = numpy.inf, -numpy.inf  # invalid: NaN, with NumPy's warning
    g[5, 1] = numpy.nan
    g[:, 2] = all_halves()[0x7C01 : 0x7C01 + 200]  # signalling NaN payloads
    g[3, 3] = -numpy.inf
    (g32, gb), got_warnings = with_warnings(sum_rows_op, g)
    (want32, wantb), want_warnings = with_warnings(sum_rows_numpy, g)
    same_bits(g32, want32)
    same_bits(gb, wantb)
    assert got_warnings == want_warnings == ["invalid value encountered in reduce"]
    assert _fp16_host.widen_sum_rows(g) is None  # inf/NaN sums: the op's NumPy code


# ---- the ops, with and without the native passes -------------------------------------------------


def dense_run(x, w, b, g):
    fn = linalg.Dense()
    fn.needs_grad = (True, True, b is not None)[: 3 if b is not None else 2]
    out = fn.forward(x, w, *(() if b is None else (b,)))
    return (out,) + tuple(fn.backward(g))


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from([(7,), (3, 5), (2, 2, 3)]),
    st.integers(1, 70),
    st.integers(1, 70),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_dense_op_matches_numpy(lead, fan_in, fan_out, with_bias, seed):
    rng = numpy.random.default_rng(seed)
    x = (rng.standard_normal(lead + (fan_in,)) * 3).astype(F16)
    w = (rng.standard_normal((fan_out, fan_in)) * 3).astype(F16)
    b = (rng.standard_normal(fan_out) * 3).astype(F16) if with_bias else None
    g = (rng.standard_normal(lead + (fan_out,)) * 3).astype(F16)
    fused = dense_run(x, w, b, g)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_native.loaded(), "fp16_passes", None)
        plain = dense_run(x, w, b, g)
    for got, want in zip(fused, plain):
        same_bits(got, want)


def test_fused_passes_are_used_in_the_fp16_dense_relu(monkeypatch):
    calls = []
    for name in ("relu_pass", "relu_backward_pass", "add_bias_to_half", "widen_sum_rows"):

        def record(*args, _name=name, _fn=getattr(_fp16_host, name)):
            calls.append(_name)
            return _fn(*args)

        monkeypatch.setattr(_fp16_host, name, record)
    from minigrad import ops

    x = Tensor(numpy.ones((4, 3), F16))
    w = Tensor(numpy.ones((5, 3), F16), requires_grad=True)
    b = Tensor(numpy.ones(5, F16), requires_grad=True)
    ops.relu(ops.dense(x, w, b)).sum().backward()
    assert sorted(calls) == [
        "add_bias_to_half",
        "relu_backward_pass",
        "relu_pass",
        "widen_sum_rows",
    ]


def test_native_passes_leave_other_arrays_to_numpy():
    x = halves((6, 10), 5)
    assert _fp16_host.relu_pass(x[:, ::2]) is None  # a strided view
    assert _fp16_host.relu_pass(x.astype(numpy.float64)) is None
    assert _fp16_host.relu_pass(x[:0]) is None  # empty
    assert _fp16_host.relu_backward_pass(x, numpy.ones((6, 5), bool)) is None
    assert _fp16_host.widen_sum_rows(x[:, :1].copy()) is None  # one column: NumPy sums pairwise
    assert _fp16_host.widen_sum_rows(x.reshape(-1)) is None
    y = numpy.ones((6, 10), F32)
    assert _fp16_host.add_bias_to_half(y, numpy.ones(9, F16)) is None
    assert _fp16_host.add_bias_to_half(y, numpy.ones(10, F32)) is None
    assert _fp16_host.add_bias_to_half(y.T.copy().T, numpy.ones(10, F16)) is None  # F order


def test_read_only_inputs_take_the_slow_address():
    x = halves((6, 10), 6, special_share=0)
    x[~numpy.isfinite(x)] = 1
    x.flags.writeable = False
    out, mask = _fp16_host.relu_pass(x)
    same_bits(out, relu_numpy(x)[0])
    g32, gb = _fp16_host.widen_sum_rows(x)
    same_bits(gb, sum_rows_numpy(x)[1])


@pytest.mark.parametrize("under", ["warn", "raise"])
def test_add_bias_steps_aside_when_underflow_is_not_ignored(under):
    """The native rounding does not report underflow: under errstate(under=...) other than
    "ignore" the epilogue gives None and the op's NumPy code warns or raises as NumPy does."""
    y = numpy.ones((4, 10), F32)
    y[2, 3] = 1e-9  # + a zero bias: flushes to zero in fp16
    y[1, 5] = 1e-6  # an inexact fp16 subnormal
    b = numpy.zeros(10, F16)
    assert _fp16_host.add_bias_to_half(y, b) is not None
    with numpy.errstate(under=under):
        assert _fp16_host.add_bias_to_half(y, b) is None
    if under == "warn":
        with numpy.errstate(under="warn"):
            got, got_warnings = with_warnings(add_bias_op, y, b)
            want, want_warnings = with_warnings(add_bias_numpy, y, b)
        assert got_warnings == want_warnings and any("underflow" in w for w in got_warnings)
        same_bits(got, want)
    else:
        with numpy.errstate(under="raise"), pytest.raises(FloatingPointError, match="underflow"):
            add_bias_op(y, b)


def test_bias_gradient_cannot_underflow():
    """Sums of fp16 values are multiples of 2^-24, so rounding them to fp16 is exact below the
    smallest normal: NumPy does not report underflow, and the native pass stays on."""
    g = numpy.full((5, 10), numpy.float16(6e-8), F16)  # the smallest subnormal, 2^-24
    g[:, 4] = numpy.float16(-3e-5)  # a subnormal column
    with numpy.errstate(under="raise"):
        got = _fp16_host.widen_sum_rows(g)
        want = sum_rows_numpy(g)
    assert got is not None
    same_bits(got[1], want[1])


def test_relu_passes_take_a_channels_last_batch_and_keep_its_layout():
    # an (N, C, H, W) batch stored channels-last is dense: one native pass, the same layout
    x = numpy.ascontiguousarray(halves((2, 5, 6, 7), 8).transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    out, mask = _fp16_host.relu_pass(x)
    want, fn = relu_numpy(x)
    same_bits(out, want)
    same_bits(mask, fn.mask)
    assert out.strides == x.strides and mask.strides == tuple(s // 2 for s in x.strides)
    g = numpy.ascontiguousarray(halves((2, 6, 7, 5), 9).transpose(0, 3, 1, 2).copy().transpose(
        0, 2, 3, 1)).transpose(0, 3, 1, 2)
    same_bits(_fp16_host.relu_backward_pass(g, mask), (g.view(numpy.int16) * mask).view(F16))
    # a gradient in another layout than the mask: left to NumPy
    assert _fp16_host.relu_backward_pass(numpy.ascontiguousarray(g), mask) is None


# ---- fp16 addition ------------------------------------------------------------------------------


def add_numpy(a, b):
    """NumPy's fp16 addition (each element widened to fp32, added, rounded once)."""
    return a + b


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 70000), st.integers(0, 2**32 - 1))
def test_add_halves_matches_numpy_on_finite_sums(n, seed):
    a, b = halves(n, seed), halves(n, seed + 1)
    a[~numpy.isfinite(a)], b[~numpy.isfinite(b)] = 1.0, -0.0
    a[numpy.abs(a) > 30000], b[numpy.abs(b) > 30000] = 2.5, -3.0  # sums stay finite
    got, want = _fp16_host.add_halves(a, b), add_numpy(a, b)
    same_bits(got, want)  # -0 + -0, subnormals, rounding ties to even


def test_add_halves_every_half_against_its_neighbours():
    a = all_halves()
    finite = numpy.isfinite(a) & (numpy.abs(a) < 32752)  # sums of two stay below 65504
    a = a[finite]
    for b in (numpy.roll(a, 1), -a, a[::-1].copy()):  # cancellation to ±0 included
        same_bits(_fp16_host.add_halves(a, b), add_numpy(a, b))


@pytest.mark.parametrize("a_value, b_value", [(65504.0, 32.0), (numpy.inf, -numpy.inf),
                                              (numpy.inf, 1.0), (numpy.nan, 1.0)])
def test_add_halves_leaves_inf_and_nan_sums_to_numpy(a_value, b_value):
    a, b = numpy.ones(5000, F16), numpy.ones(5000, F16)
    a[4321], b[4321] = a_value, b_value
    assert _fp16_host.add_halves(a, b) is None  # the caller's NumPy code warns as NumPy does
    with numpy.errstate(all="ignore"):
        same_bits((Tensor(a) + Tensor(b)).data, add_numpy(a, b))
    with numpy.errstate(over="raise", invalid="raise"):
        if numpy.isfinite(a_value + b_value) or a_value == -b_value:
            with pytest.raises(FloatingPointError):
                Tensor(a) + Tensor(b)


def test_add_halves_takes_one_layout_only():
    a = halves((8, 40, 30), 1).transpose(0, 2, 1)  # dense, not C-ordered
    assert _fp16_host.add_halves(a, numpy.ascontiguousarray(a)) is None  # layouts differ
    a[~(numpy.abs(a) < 30000)] = 0
    out = _fp16_host.add_halves(a, a)
    assert out.strides == a.strides
    same_bits(out, add_numpy(a, a))
    assert _fp16_host.add_halves(a.astype(F32), a.astype(F32)) is None
    assert _fp16_host.add_halves(a[:, ::2], a[:, ::2]) is None
