"""fp16 test helpers: adversarial fp16 inputs (random bit patterns, specials, layouts) as
hypothesis strategies, the rule 'compute in fp32, round once', bit-exact and ulp comparisons,
and gradients for the float64 checks of the fp16 ops."""
import warnings

import numpy
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from minigrad import Tensor

F16, F32, F64 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
SPECIALS = numpy.array([0.0, -0.0, 2.0 ** -24, -(2.0 ** -24), 2.0 ** -14, 6.0e-5, 65504.0, -65504.0,
                        numpy.inf, -numpy.inf, numpy.nan, 1.0, -1.0, 300.0, -300.0, 0.5], F16)


FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


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
    assert got.dtype == ref.dtype and got.shape == ref.shape, (
        got.dtype,
        got.shape,
        ref.dtype,
        ref.shape,
    )
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
    other = list(base[draw(st.integers(0, len(base))) :])
    for i in range(len(other)):
        if draw(st.booleans()):
            other[i] = 1
    return (base, tuple(other)) if draw(st.booleans()) else (tuple(other), base)


@st.composite
def binary_case(draw):
    large = draw(st.booleans())
    sa, sb = shapes(draw, large)
    rng = numpy.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return (
        layout(rng, fp16_values(rng, sa), draw(st.sampled_from(["C", "fortran", "strided"]))),
        layout(rng, fp16_values(rng, sb), draw(st.sampled_from(["C", "strided"]))),
    )


@st.composite
def unary_case(draw):
    large = draw(st.booleans())
    shape = shapes(draw, large)[0] if not large else draw(st.sampled_from([(64, 80), (4100,)]))
    rng = numpy.random.default_rng(draw(st.integers(0, 2**32 - 1)))
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


def ulps(a, b):
    """Distance in fp16 steps between finite fp16 arrays of one sign convention."""

    def key(x):
        i = x.view(numpy.int16).astype(numpy.int32)
        return numpy.where(i < 0, -(i & 0x7FFF), i)

    return numpy.abs(key(a) - key(b))


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


FAST = settings(max_examples=15, deadline=None)


def nchw(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F16)


def strided(x):
    """``x``'s values in a non-contiguous view (every other element of the last axis)."""
    big = numpy.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    big[..., ::2] = x
    return big[..., ::2]


def conv_by_hand(x, w, b, stride, pad, dilation, groups):
    """The documented sum, in float64:
    out[n,o,h,w] = b[o] + Σ W[o,c,i,j]·x_pad[n, g·Cg + c, ...]."""
    x, w = x.astype(F64), w.astype(F64)
    top, bottom, left, right = pad
    xp = numpy.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, hp, wp = xp.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    ho, wo = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    out = numpy.zeros((n, o, ho, wo))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(kh):
            for j in range(kw):
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    i * dh : i * dh + sh * (ho - 1) + 1 : sh,
                    j * dw : j * dw + sw * (wo - 1) + 1 : sw,
                ]
                out[:, oc] += numpy.einsum("nchw,c->nhw", patch, w[oc, :, i, j])
    return out if b is None else out + b.astype(F64)[None, :, None, None]
