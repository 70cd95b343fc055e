"""Review, session 3n: an fp16 consistency battery over the public ops.

Forward: each op's fp16 result is compared, bit for bit (any NaN matching any NaN, -0 told from
+0), with its documented rule computed by hand in NumPy (mostly fp16(op(fp32(a), fp32(b))); NumPy's
own fp16 loop where the op says so), on the native host path and with the host library gone
(``MINIGRAD_NATIVE=0``'s semantics), on random fp16 bit patterns mixed with subnormals, ±0,
±65504, inf and NaN, broadcast, empty, non-contiguous, and large enough (>= 4096 elements) for
the native conversions. The RuntimeWarnings an op gives are compared with NumPy's for the same
fp16 operation. Backward: fp16 gradients against the float64 gradient rounded to fp16.
"""
import warnings

import numpy
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from minigrad import Tensor, ops
from minigrad import _native

F16, F32, F64 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
SPECIALS = numpy.array([0.0, -0.0, 2.0 ** -24, -(2.0 ** -24), 2.0 ** -14, 6.0e-5, 65504.0, -65504.0,
                        numpy.inf, -numpy.inf, numpy.nan, 1.0, -1.0, 300.0, -300.0, 0.5], F16)
FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(params=["native", "numpy"])
def path(request, monkeypatch):
    """The host library as found, or gone (what MINIGRAD_NATIVE=0 gives)."""
    if request.param == "numpy":
        with _native.numpy_fallback():
            assert _native.loaded().conversions is None
            yield request.param
        return
    if _native.loaded().conversions is None:
        pytest.skip("no host library with vector fp16 conversion here")
    yield request.param


def fp16_values(rng, shape, finite=False, specials=0.2):
    """Random fp16 bit patterns (all exponents: subnormals, inf, NaN) with ``specials`` of them
    replaced by special values."""
    bits = rng.integers(0, 1 << 16, size=shape, dtype=numpy.uint16)
    # quiet NaNs (any payload): a signalling NaN makes NumPy's own fp16 loops warn 'invalid'
    # (and sNaN ** 0 is NaN there), which is NumPy's behaviour, not an op's
    bits[(bits & 0x7C00) == 0x7C00] |= numpy.uint16(0x0200)
    x = bits.view(F16).copy()
    pick = rng.random(shape) < specials
    x[pick] = rng.choice(SPECIALS, size=int(pick.sum()))
    if finite:
        x[~numpy.isfinite(x)] = F16.type(1.5)
    return x


def layout(rng, x, kind):
    """``x``'s values as a C-ordered array, a transposed (F-ordered) one, or a strided view."""
    if kind == "strided":
        big = numpy.empty(x.shape[:-1] + (2 * x.shape[-1],) if x.ndim else (), x.dtype)
        if x.ndim:
            big[..., ::2] = x
            return big[..., ::2]
        big[...] = x
        return big
    if kind == "fortran":
        return numpy.asfortranarray(x)
    return x


def assert_bits(got, ref):
    got, ref = numpy.asarray(got), numpy.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape, ref.dtype, ref.shape)
    gn, rn = numpy.isnan(got), numpy.isnan(ref)
    assert numpy.array_equal(gn, rn), (got[gn != rn], ref[gn != rn])
    udt = numpy.dtype(f"u{got.dtype.itemsize}")
    bad = (got.view(udt) != ref.view(udt)) & ~gn
    assert not bad.any(), (got[bad][:8], ref[bad][:8])


def kinds(record):
    """The kinds of floating-point RuntimeWarnings recorded: overflow, invalid, divide."""
    out = set()
    for w in record:
        if issubclass(w.category, RuntimeWarning):
            text = str(w.message)
            out |= {k for k in ("overflow", "invalid", "divide by zero") if k in text}
    return out


def run(fn, *args):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = fn(*args)
    return result, kinds(record)


def shapes(draw, large):
    """A pair of broadcastable shapes (possibly empty; large: >= 4096 elements)."""
    if large:
        base = draw(st.sampled_from([(64, 80), (5, 1024), (4097,), (3, 40, 40)]))
    else:
        base = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    other = list(base[draw(st.integers(0, len(base))):])
    for i in range(len(other)):
        if draw(st.booleans()):
            other[i] = 1
    return (base, tuple(other)) if draw(st.booleans()) else (tuple(other), base)


@st.composite
def binary_case(draw):
    large = draw(st.booleans())
    sa, sb = shapes(draw, large)
    rng = numpy.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    return (layout(rng, fp16_values(rng, sa), draw(st.sampled_from(["C", "fortran", "strided"]))),
            layout(rng, fp16_values(rng, sb), draw(st.sampled_from(["C", "strided"]))))


@st.composite
def unary_case(draw):
    large = draw(st.booleans())
    shape = shapes(draw, large)[0] if not large else draw(st.sampled_from([(64, 80), (4100,)]))
    rng = numpy.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    return layout(rng, fp16_values(rng, shape), draw(st.sampled_from(["C", "fortran", "strided"])))


def in_fp32(fn):
    """The rule 'computed in fp32 on the widened inputs, rounded once to fp16'."""
    def rule(*arrays):
        with numpy.errstate(all="ignore"):
            return numpy.asarray(fn(*[a.astype(F32) for a in arrays])).astype(F16)
    return rule


def quiet(fn, *arrays):
    with numpy.errstate(all="ignore"):
        return fn(*arrays)


BINARY = {
    "add": (ops.add, in_fp32(numpy.add), numpy.add),
    "sub": (ops.sub, in_fp32(numpy.subtract), numpy.subtract),
    "mul": (ops.mul, in_fp32(numpy.multiply), numpy.multiply),
    "div": (ops.div, in_fp32(numpy.true_divide), numpy.true_divide),
    # Pow documents out = a ** b: NumPy's fp16 loop (which differs from fp16(fp32 pow) only for
    # signalling NaNs: sNaN ** 0 and 1 ** sNaN are NaN there, 1 after a widening astype)
    "pow": (ops.pow, lambda a, b: quiet(numpy.power, a, b), numpy.power),
    "maximum": (ops.maximum, lambda a, b: quiet(numpy.maximum, a, b), numpy.maximum),
    "minimum": (ops.minimum, lambda a, b: quiet(numpy.minimum, a, b), numpy.minimum),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@FIXTURE_OK
@given(case=binary_case())
def test_binary_forward_bits_and_warnings(path, name, case):
    op, rule, numpy_fp16 = BINARY[name]
    a, b = case
    got, got_kinds = run(lambda: op(Tensor(a), Tensor(b)).asnumpy())
    assert_bits(got, rule(a, b))
    # the warnings of NumPy's own fp16 loop (which the docstring says minigrad's bits equal)
    _, numpy_kinds = run(numpy_fp16, a, b)
    assert got_kinds == numpy_kinds


UNARY = {  # op, rule, NumPy's own fp16 function whose warnings the op should give (or None)
    "neg": (ops.neg, numpy.negative, numpy.negative),
    "abs": (ops.abs, numpy.abs, numpy.abs),
    "exp": (ops.exp, in_fp32(numpy.exp), numpy.exp),
    "log": (ops.log, in_fp32(numpy.log), numpy.log),
    "sqrt": (ops.sqrt, in_fp32(numpy.sqrt), numpy.sqrt),
    "tanh": (ops.tanh, in_fp32(numpy.tanh), numpy.tanh),
    # ReLU documents +0 for every x <= 0 that is not NaN (-0 included), NaN passing unchanged
    "relu": (ops.relu, lambda x: numpy.where((x > 0) | numpy.isnan(x), x, F16.type(0)), None),
    "square": (ops.square, numpy.square, numpy.square),
    "clip": (lambda t: ops.clip(t, -2.5, 300.0), lambda x: numpy.clip(x, F16.type(-2.5), F16.type(300)), None),
    "leaky_relu": (lambda t: ops.leaky_relu(t, 0.2),
                   lambda x: numpy.where(x > 0, x, x * F16.type(0.2)), None),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@FIXTURE_OK
@given(x=unary_case())
def test_unary_forward_bits_and_warnings(path, name, x):
    op, rule, numpy_fp16 = UNARY[name]
    got, got_kinds = run(lambda: op(Tensor(x)).asnumpy())
    with numpy.errstate(all="ignore"):
        assert_bits(got, rule(x))
    if numpy_fp16 is not None:
        assert got_kinds == run(numpy_fp16, x)[1]
    else:
        assert not got_kinds  # a select: NumPy's maximum/clip/where are silent on NaN


def ulps(a, b):
    """Distance in fp16 steps between finite fp16 arrays of one sign convention."""
    def key(x):
        i = x.view(numpy.int16).astype(numpy.int32)
        return numpy.where(i < 0, -(i & 0x7FFF), i)
    return numpy.abs(key(a) - key(b))


@FIXTURE_OK
@given(x=unary_case())
def test_sigmoid_fp16_is_the_rounded_logistic_and_silent(path, x):
    got, got_kinds = run(lambda: ops.sigmoid(Tensor(x)).asnumpy())
    with numpy.errstate(all="ignore"):
        ref = (1 / (1 + numpy.exp(-x.astype(F64)))).astype(F16)
    assert not got_kinds
    assert numpy.array_equal(numpy.isnan(got), numpy.isnan(ref))
    fin = ~numpy.isnan(ref)
    assert (ulps(got[fin], ref[fin]) <= 1).all()


@pytest.mark.parametrize("dtype", [F32, F64])
def test_sigmoid_keeps_relative_accuracy_in_the_left_tail(dtype):
    # the tanh form 0.5 + 0.5·tanh(x/2) cancels for x << 0: sigmoid(-15) in fp32 was 2.98e-7
    # (true 3.06e-7) and sigmoid(-40) was 0 in fp32 and fp64 (true 4.2e-18)
    x = numpy.array([-15.0, -17.0, -40.0, -80.0, -700.0, 3.0, 0.0, -0.0, 30.0], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ops.sigmoid(Tensor(x)).asnumpy()
    ref = 1 / (1 + numpy.exp(-x.astype(numpy.longdouble)))
    numpy.testing.assert_allclose(got, ref.astype(dtype), rtol=4 * numpy.finfo(dtype).eps, atol=0)


@FIXTURE_OK
@given(x=unary_case(), axis=st.sampled_from([None, 0, -1]))
def test_sum_mean_fp16_are_the_fp32_reduction_rounded(path, x, axis):
    if axis is not None and x.ndim == 0:
        axis = None
    got_s, ks = run(lambda: ops.sum(Tensor(x), axis).asnumpy())
    with numpy.errstate(all="ignore"):
        assert_bits(got_s, numpy.asarray(x.astype(F32).sum(axis=axis)).astype(F16))
    if x.size and (axis is None or x.shape[axis]):
        got_m, km = run(lambda: ops.mean(Tensor(x), axis).asnumpy())
        with numpy.errstate(all="ignore"):
            assert_bits(got_m, numpy.asarray(x.astype(F32).mean(axis=axis)).astype(F16))


@FIXTURE_OK
@given(x=unary_case())
def test_softmax_log_softmax_fp16_follow_the_fp32_rule(path, x):
    if x.ndim == 0 or x.shape[-1] == 0:
        return
    x = x.copy()
    x[numpy.isinf(x)] = F16.type(7)  # inf - inf has no softmax; NaN rows still propagate
    def by_hand(log):
        z = x.astype(F32) - x.astype(F32).max(axis=-1, keepdims=True)
        e = numpy.exp(z)
        return (z - numpy.log(e.sum(axis=-1, keepdims=True)) if log else e / e.sum(axis=-1, keepdims=True)).astype(F16)

    for op, log in ((ops.softmax, False), (ops.log_softmax, True)):
        got, k = run(lambda: op(Tensor(x)).asnumpy())
        ref, ref_k = run(by_hand, log)
        assert_bits(got, ref)
        assert k == ref_k  # only the rounding of a log_softmax below -65504 may warn (overflow)


@FIXTURE_OK
@given(x=unary_case(), approximate=st.booleans())
def test_gelu_fp16_matches_its_fp32_evaluation(path, x, approximate):
    x = x.copy()
    x[~numpy.isfinite(x)] = F16.type(-3)
    got = ops.gelu(Tensor(x), approximate).asnumpy()
    assert_bits(got, ops.gelu(Tensor(x.astype(F32)), approximate).asnumpy().astype(F16))


@given(case=binary_case())
def test_fp32_results_do_not_depend_on_the_host_library(case):
    a, b = (v.astype(F32) for v in case)
    fns = [lambda: ops.mul(Tensor(a), Tensor(b)), lambda: ops.div(Tensor(a), Tensor(b)),
           lambda: ops.relu(Tensor(a)), lambda: ops.sum(Tensor(a)), lambda: ops.sigmoid(Tensor(a))]
    with numpy.errstate(all="ignore"):
        native = [f().asnumpy() for f in fns]
        with _native.numpy_fallback():
            plain = [f().asnumpy() for f in fns]
    for n, p in zip(native, plain):
        assert_bits(n, p)


# ---- gradients -------------------------------------------------------------------------------

def grads(fn, arrays, g):
    ts = [Tensor(a, requires_grad=True) for a in arrays]
    with numpy.errstate(all="ignore"):
        fn(*ts).backward(Tensor(g))
    return [t.grad.asnumpy() for t in ts]


def assert_close_to_rounded(got, exact, ulp=2):
    """fp16 ``got`` within ``ulp`` fp16 steps of the float64 gradient ``exact`` rounded to fp16
    (inf where that overflows; NaN only where it is NaN)."""
    with numpy.errstate(all="ignore"):
        ref = exact.astype(F16)
    assert got.dtype == F16
    assert numpy.array_equal(numpy.isnan(got), numpy.isnan(ref)), (got, ref)
    fin = numpy.isfinite(ref)
    assert numpy.array_equal(got[~fin], ref[~fin]), (got[~fin], ref[~fin])
    assert numpy.isfinite(got[fin]).all(), (got[fin], ref[fin])
    assert (ulps(got[fin], ref[fin]) <= ulp).all(), (got[fin], ref[fin])


@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 40))
def test_elementwise_gradients_match_float64(seed, n):
    rng = numpy.random.default_rng(seed)
    a = fp16_values(rng, (n,), finite=True, specials=0.3)
    b = fp16_values(rng, (n,), finite=True, specials=0.3)
    g = fp16_values(rng, (n,), finite=True, specials=0.3)
    a64, b64, g64 = (v.astype(F64) for v in (a, b, g))
    b = numpy.where(b == 0, F16.type(3), b)
    b64 = b.astype(F64)
    ga, gb = grads(ops.mul, [a, b], g)
    assert_close_to_rounded(ga, g64 * b64, 0)
    assert_close_to_rounded(gb, g64 * a64, 0)
    ga, gb = grads(ops.div, [a, b], g)
    assert_close_to_rounded(ga, g64 / b64, 0)
    assert_close_to_rounded(gb, -g64 * a64 / (b64 * b64), 1)
    (gx,) = grads(ops.square, [a], g)
    assert_close_to_rounded(gx, 2 * a64 * g64, 0)
    # pow on a > 0 and a moderate exponent (the function itself stays finite)
    pa = numpy.abs(a).clip(F16.type(0.25), F16.type(4))
    pb = (b % F16.type(6)).astype(F16)
    ga, gb = grads(ops.pow, [pa, pb], g)
    pa64, pb64 = pa.astype(F64), pb.astype(F64)
    assert_close_to_rounded(ga, numpy.where(pb64 == 0, 0, g64 * pb64 * pa64 ** (pb64 - 1)), 2)


def test_mul_broadcast_gradient_sums_before_rounding():
    # da = Σ g·b over the broadcast axis: 2·60000 - 2·60000 = 0 (the products rounded to fp16
    # first are inf and -inf, whose sum was NaN)
    ga, gb = grads(ops.mul, [numpy.array([1.0], F16), numpy.array([60000, -60000], F16)],
                   numpy.array([2, 2], F16))
    assert_bits(ga, numpy.array([0.0], F16))
    assert_bits(gb, numpy.array([2, 2], F16))


def test_div_gradient_of_b_is_not_lost_to_an_fp16_intermediate():
    # db = -g·a/b² = -100·1e-6/1e-6 ≈ -101 (g/b = 1e5 overflowed fp16 first: db was -inf)
    a, b, g = numpy.array([1e-6], F16), numpy.array([1e-3], F16), numpy.array([100], F16)
    ga, gb = grads(ops.div, [a, b], g)
    assert_bits(ga, numpy.array([numpy.inf], F16))
    exact = -g.astype(F64) * a.astype(F64) / b.astype(F64) ** 2
    assert_close_to_rounded(gb, exact, 0)


def test_div_broadcast_gradient_of_b_sums_before_rounding():
    a = numpy.array([60000, -60000], F16)
    ga, gb = grads(ops.div, [a, numpy.array([0.5], F16)], numpy.array([1, 1], F16))
    assert_bits(gb, numpy.array([0.0], F16))


def test_square_gradient_does_not_overflow_through_2x():
    # dx = 2·x·g = 2·40000·0.001 ≈ 80 (2·x = 80000 overflowed fp16 first: dx was inf)
    (gx,) = grads(ops.square, [numpy.array([40000.0, 2.0 ** -24], F16)], numpy.array([0.001, 0.5], F16))
    exact = 2 * numpy.array([40000.0, 2.0 ** -24]) * numpy.array([0.001, 0.5], F16).astype(F64)
    assert_close_to_rounded(gx, exact, 0)


def test_pow_gradient_is_not_nan_through_an_fp16_intermediate():
    # da = g·b·a^(b-1) = 1000·100·0.5^99 ≈ 1.6e-25 -> 0 (g·b overflowed to inf, a^(b-1) underflowed to 0)
    ga, gb = grads(ops.pow, [numpy.array([0.5], F16), numpy.array([100.0], F16)], numpy.array([1000], F16))
    assert_bits(ga, numpy.array([0.0], F16))
    assert_bits(gb, numpy.array([-0.0], F16))  # db = g·out·log(0.5) ≈ -5e-28


@pytest.mark.parametrize("reduce", [ops.max, ops.min])
def test_max_min_gradient_shared_by_more_than_65504_ties(reduce):
    # dx = g / count at each of the 70000 tied extremes: 1/70000 ≈ 1.43e-5 (the count was an fp16
    # 70000 = inf, and every share was 0)
    (gx,) = grads(reduce, [numpy.zeros(70000, F16)], numpy.array(1.0, F16))
    assert_bits(gx, numpy.full(70000, 1 / 70000, F64).astype(F16))


@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 30), ties=st.booleans())
def test_max_min_gradient_fp16_is_g_over_count(seed, n, ties):
    rng = numpy.random.default_rng(seed)
    x = fp16_values(rng, (n,), finite=True)
    if ties:
        x[rng.random(n) < 0.5] = x.max()
    g = fp16_values(rng, (), finite=True)
    for reduce, top in ((ops.max, x.max()), (ops.min, x.min())):
        (gx,) = grads(reduce, [x], g)
        count = (x == top).sum()
        assert_bits(gx, (g.astype(F64) * (x == top) / count).astype(F16))


@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 6), c=st.integers(1, 5))
def test_softmax_sigmoid_tanh_gradients_match_float64(seed, n, c):
    rng = numpy.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * 4).astype(F16)
    g = rng.standard_normal((n, c)).astype(F16)
    x64, g64 = x.astype(F64), g.astype(F64)
    (gx,) = grads(ops.softmax, [x], g)
    y = numpy.exp(x64 - x64.max(-1, keepdims=True))
    y /= y.sum(-1, keepdims=True)
    exact = y * (g64 - (g64 * y).sum(-1, keepdims=True))
    numpy.testing.assert_allclose(gx.astype(F64), exact, atol=2e-3, rtol=2e-3)
    (gx,) = grads(ops.sigmoid, [x], g)
    s = 1 / (1 + numpy.exp(-x64))
    numpy.testing.assert_allclose(gx.astype(F64), g64 * s * (1 - s), atol=1e-3, rtol=4e-3)
    (gx,) = grads(ops.tanh, [x], g)
    numpy.testing.assert_allclose(gx.astype(F64), g64 * (1 - numpy.tanh(x64) ** 2), atol=1e-3, rtol=4e-3)
