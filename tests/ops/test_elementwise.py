"""Elementwise ops (ops/arithmetic.py, ops/math.py): forward vs NumPy, backward vs the checker.

Inputs keep away from kinks (0 for abs/relu, the bounds of clip, ties of maximum) so that the
float64 central difference is meaningful; behaviour at the kinks is tested with exact values.
"""
import warnings

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from helpers import DEVICES
from helpers.fp16 import (
    F16,
    F32,
    F64,
    FIXTURE_OK,
    assert_bits,
    assert_close_to_rounded,
    binary_case,
    fp16_values,
    grads,
    in_fp32,
    quiet,
    run,
    ulps,
    unary_case,
)
from minigrad import Tensor, _native, ops
from minigrad.testing import assert_forward, check_backward, noncontiguous, tolerance


def _away_from_zero(shape, seed=0, low=0.1, high=2.0):
    rng = numpy.random.RandomState(seed)
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


def _positive(shape, seed=0):
    return numpy.random.RandomState(seed).uniform(0.5, 3.0, shape)


def _clip_input(shape, seed=0):
    x = _away_from_zero(shape, seed)
    return numpy.where(
        numpy.abs(x - 0.7) < 0.05, 1.0, numpy.where(numpy.abs(x + 0.5) < 0.05, -1.0, x)
    )


def _sigmoid(x):
    return 1 / (1 + numpy.exp(-x))


UNARY = {
    # name: (minigrad function, NumPy reference, input maker)
    "neg": (ops.neg, numpy.negative, _away_from_zero),
    "abs": (ops.abs, numpy.abs, _away_from_zero),
    "exp": (ops.exp, numpy.exp, _away_from_zero),
    "log": (ops.log, numpy.log, _positive),
    "sqrt": (ops.sqrt, numpy.sqrt, _positive),
    "tanh": (ops.tanh, numpy.tanh, _away_from_zero),
    "sigmoid": (ops.sigmoid, _sigmoid, _away_from_zero),
    "relu": (ops.relu, lambda x: numpy.maximum(x, 0), _away_from_zero),
    "clip": (lambda x: ops.clip(x, -0.5, 0.7), lambda x: numpy.clip(x, -0.5, 0.7), _clip_input),
    "clip_min_only": (
        lambda x: ops.clip(x, min=-0.5),
        lambda x: numpy.maximum(x, -0.5),
        _clip_input,
    ),
    "neg_operator": (lambda x: -x, numpy.negative, _away_from_zero),
    "abs_operator": (lambda x: abs(x), numpy.abs, _away_from_zero),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(3, 4), (), (2, 3, 2)])
def test_unary(name, shape, dtype, device):
    fn, ref, make = UNARY[name]
    x = make(shape).astype(dtype)
    out = fn(minigrad.Tensor(x, device=device))
    assert out.device == device
    assert_forward(out, ref(x.astype(numpy.float64)), dtype)
    check_backward(fn, [minigrad.Tensor(x, device=device)])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_noncontiguous(name, dtype):
    fn, ref, make = UNARY[name]
    x = make((3, 4)).astype(dtype)
    for view in (noncontiguous(x), numpy.asfortranarray(x), x.T):
        assert not view.flags.c_contiguous or view.ndim < 2
        assert_forward(fn(minigrad.Tensor(view)), ref(view.astype(numpy.float64)), dtype)
        check_backward(fn, [view])


def test_unary_float64_tight():
    for name, (fn, ref, make) in UNARY.items():
        x = make((4, 3), seed=3)
        assert_forward(fn(minigrad.Tensor(x)), ref(x), numpy.float64)
        check_backward(fn, [x])


def test_kinks_use_documented_subgradients():
    x = minigrad.Tensor(numpy.array([-1.0, 0.0, 2.0], numpy.float32), requires_grad=True)
    (ops.relu(x) + ops.abs(x)).sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [-1.0, 0.0, 2.0])
    x.grad = None
    ops.clip(x, 0.0, 2.0).sum().backward()  # bounds are inside: the gradient passes there
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 1.0, 1.0])


def test_clip_needs_a_bound():
    with pytest.raises(ValueError, match="min and max"):
        ops.clip(minigrad.Tensor([1.0]))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sigmoid"])
def test_transcendentals_reject_integer_tensors(name):
    with pytest.raises(TypeError, match=f"^{name}: x must be a float Tensor.*not int64"):
        getattr(ops, name)(minigrad.Tensor([1, 2]))


def test_fp16_transcendentals_are_rounded_once():
    # computed in fp32 and rounded once: exactly the fp16 rounding of the fp32 result
    x = numpy.linspace(0.5, 3, 101).astype(numpy.float16)
    for name in ("exp", "log", "sqrt", "tanh"):
        expected = getattr(numpy, name)(x.astype(numpy.float32)).astype(numpy.float16)
        numpy.testing.assert_array_equal(getattr(ops, name)(minigrad.Tensor(x)).asnumpy(), expected)


def test_sigmoid_saturates_without_warnings():
    x = minigrad.Tensor(numpy.array([-1000.0, 0.0, 1000.0], numpy.float32))
    with numpy.errstate(all="raise"):
        out = ops.sigmoid(x).asnumpy()
    numpy.testing.assert_allclose(out, [0.0, 0.5, 1.0], atol=1e-7)


# ---- binary -------------------------------------------------------------------------------


def _pair(shape_a, shape_b, name, seed=0):
    rng = numpy.random.RandomState(seed)
    if name == "pow":
        return rng.uniform(0.5, 2.0, shape_a), rng.uniform(-2.0, 2.0, shape_b)
    if name in ("maximum", "minimum"):  # a on even tenths, b on odd tenths: never tied
        return (rng.randint(-10, 10, shape_a) * 0.2, rng.randint(-10, 10, shape_b) * 0.2 + 0.1)
    return _away_from_zero(shape_a, seed), _away_from_zero(shape_b, seed + 1)


BINARY = {
    "add": (ops.add, numpy.add),
    "sub": (ops.sub, numpy.subtract),
    "mul": (ops.mul, numpy.multiply),
    "div": (ops.div, numpy.divide),
    "pow": (ops.pow, numpy.power),
    "maximum": (ops.maximum, numpy.maximum),
    "minimum": (ops.minimum, numpy.minimum),
    "add_operator": (lambda a, b: a + b, numpy.add),
    "sub_operator": (lambda a, b: a - b, numpy.subtract),
    "mul_operator": (lambda a, b: a * b, numpy.multiply),
    "div_operator": (lambda a, b: a / b, numpy.divide),
    "pow_operator": (lambda a, b: a**b, numpy.power),
}
SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((4,), (3, 4)),
    ((2, 1, 4), (3, 1)),
    ((), (3,)),
    ((3, 1), (1, 4)),
    ((), ()),
]


def _base(name):
    return name.replace("_operator", "")


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_binary(name, shapes, dtype, device):
    fn, ref = BINARY[name]
    a, b = (v.astype(dtype) for v in _pair(*shapes, _base(name)))
    out = fn(minigrad.Tensor(a, device=device), minigrad.Tensor(b, device=device))
    assert out.device == device
    assert_forward(out, ref(a.astype(numpy.float64), b.astype(numpy.float64)), dtype)
    check_backward(fn, [minigrad.Tensor(a, device=device), minigrad.Tensor(b, device=device)])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_noncontiguous(name, dtype):
    fn, ref = BINARY[name]
    a, b = (v.astype(dtype) for v in _pair((4, 3), (3, 4), _base(name)))
    a, b = a.T, noncontiguous(b)
    assert_forward(
        fn(minigrad.Tensor(a), minigrad.Tensor(b)),
        ref(a.astype(numpy.float64), b.astype(numpy.float64)),
        dtype,
    )
    check_backward(fn, [a, b])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float64_tight(name):
    fn, ref = BINARY[name]
    a, b = _pair((3, 1), (2, 1, 4), _base(name), seed=5)
    assert_forward(fn(minigrad.Tensor(a), minigrad.Tensor(b)), ref(a, b), numpy.float64)
    check_backward(fn, [a, b])


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow"])
def test_binary_with_python_scalar_on_either_side(name, dtype):
    fn, ref = BINARY[name]
    a = _pair((3,), (3,), name)[0].astype(dtype)
    for args, expected in (
        ((minigrad.Tensor(a), 1.5), ref(a.astype(numpy.float64), 1.5)),
        ((1.5, minigrad.Tensor(a)), ref(1.5, a.astype(numpy.float64))),
    ):
        assert_forward(fn(*args), expected, dtype)
    check_backward(lambda x: fn(x, 1.5), [a])
    check_backward(lambda x: fn(1.5, x), [a])


def test_binary_needs_a_tensor():
    with pytest.raises(TypeError, match="at least one Tensor"):
        ops.add(1.0, 2.0)


@pytest.mark.parametrize("fn", [ops.maximum, ops.minimum])
def test_maximum_minimum_split_ties_evenly(fn):
    a = minigrad.Tensor(numpy.array([1.0, 2.0, 3.0], numpy.float32), requires_grad=True)
    b = minigrad.Tensor(numpy.array([1.0, 0.0, 5.0], numpy.float32), requires_grad=True)
    fn(a, b).sum().backward()
    big_a = 1.0 if fn is ops.maximum else 0.0
    numpy.testing.assert_array_equal(a.grad.asnumpy(), [0.5, big_a, 1 - big_a])
    numpy.testing.assert_array_equal(b.grad.asnumpy(), [0.5, 1 - big_a, big_a])


def test_pow_gradient_of_exponent_is_finite_for_nonpositive_base():
    a = minigrad.Tensor(numpy.array([0.0, -2.0, 2.0]), requires_grad=True)
    b = minigrad.Tensor(numpy.array([2.0, 2.0, 2.0]), requires_grad=True)
    (a**b).sum().backward()
    numpy.testing.assert_allclose(a.grad.asnumpy(), [0.0, -4.0, 4.0])
    numpy.testing.assert_allclose(b.grad.asnumpy(), [0.0, 0.0, 4 * numpy.log(2.0)])


def test_integer_division_gives_float32():
    out = ops.div(minigrad.Tensor([1, 2, 3]), minigrad.Tensor([2, 2, 2]))
    assert out.dtype == minigrad.float32
    numpy.testing.assert_array_equal(out.asnumpy(), [0.5, 1.0, 1.5])


# ---- where, cast, comparisons --------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes", [((3, 4), (3, 4), (3, 4)), ((3, 1), (4,), (3, 4)), ((4,), (3, 4), (1,))], ids=str
)
def test_where(shapes, dtype, device):
    s_cond, s_x, s_y = shapes
    rng = numpy.random.RandomState(0)
    cond = rng.rand(*s_cond) > 0.5
    x, y = _away_from_zero(s_x).astype(dtype), _away_from_zero(s_y, 1).astype(dtype)
    mx, my = minigrad.Tensor(x, device=device), minigrad.Tensor(y, device=device)
    for c in (cond, minigrad.Tensor(cond, device=device)):
        assert_forward(ops.where(c, mx, my), numpy.where(cond, x, y).astype(numpy.float64), dtype)
    check_backward(lambda a, b: ops.where(cond, a, b), [mx, my])
    check_backward(
        lambda a, b: ops.where(minigrad.Tensor(cond, device=device), a, b), [noncontiguous(x), y]
    )


def test_where_with_scalar_branch_keeps_dtype(dtype):
    x = minigrad.Tensor(numpy.array([1.0, -2.0, 3.0], dtype), requires_grad=True)
    out = ops.where(x > 0, x, 0.0)
    assert out.dtype == dtype
    out.sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [1.0, 0.0, 1.0])


@pytest.mark.parametrize(
    "src,dst",
    [
        ("float16", "float32"),
        ("float32", "float16"),
        ("float32", "float64"),
        ("float64", "float32"),
    ],
)
def test_cast(src, dst, device):
    x = _away_from_zero((3, 4)).astype(src)
    out = ops.cast(minigrad.Tensor(x, device=device), dst)
    assert out.dtype == numpy.dtype(dst) and out.device == device
    numpy.testing.assert_array_equal(out.asnumpy(), x.astype(dst))
    # the gradient comes back in the source dtype (checked inside check_backward). A cast down
    # rounds the float64 evaluations too: a large step keeps that rounding small (cast is linear)
    atol, rtol = tolerance(min(numpy.dtype(src), numpy.dtype(dst), key=lambda d: d.itemsize))
    check_backward(
        lambda t: ops.cast(t, dst) * 2,
        [minigrad.Tensor(x, device=device)],
        eps=0.5,
        atol=atol,
        rtol=rtol,
    )


def test_cast_to_same_dtype_is_identity_and_bad_dtype_raises():
    x = minigrad.Tensor([1.0, 2.0])
    assert ops.cast(x, minigrad.float32) is x
    with pytest.raises(ValueError, match="complex128"):
        ops.cast(x, numpy.complex128)


@pytest.mark.parametrize(
    "name,ref",
    [
        ("equal", numpy.equal),
        ("not_equal", numpy.not_equal),
        ("less", numpy.less),
        ("less_equal", numpy.less_equal),
        ("greater", numpy.greater),
        ("greater_equal", numpy.greater_equal),
    ],
)
def test_comparisons(name, ref, dtype, device):
    a = numpy.array([[1.0, 2.0, 3.0]], dtype)
    b = numpy.array([[2.0], [2.0]], dtype)
    ta = minigrad.Tensor(a, requires_grad=True, device=device)
    out = getattr(ops, name)(ta, minigrad.Tensor(b, device=device))
    assert out.dtype == numpy.bool_ and not out.requires_grad
    numpy.testing.assert_array_equal(out.asnumpy(), ref(a, b))
    numpy.testing.assert_array_equal(getattr(ops, name)(ta, 2.0).asnumpy(), ref(a, 2.0))


@pytest.mark.parametrize("cond_device", DEVICES)
def test_where_condition_moves_to_the_operands_device(cond_device, device):
    cond = minigrad.Tensor(numpy.array([True, False, True]), device=cond_device)
    x = minigrad.Tensor(numpy.array([1.0, 2.0, 3.0], numpy.float32), device=device)
    out = ops.where(cond, x, 0.0)
    assert out.device == device
    numpy.testing.assert_array_equal(out.asnumpy(), [1.0, 0.0, 3.0])
    assert ops.where([[False, True, False]], x, -x).asnumpy().tolist() == [[-1.0, 2.0, -3.0]]


@pytest.mark.gpu
@pytest.mark.skipif(not minigrad.backend.CUDA_AVAILABLE, reason="needs CuPy and a CUDA GPU")
def test_operands_on_two_devices_name_both():
    a = minigrad.Tensor([1.0, 2.0], device="CPU")
    b = minigrad.Tensor([1.0, 2.0], device="GPU")
    with pytest.raises(ValueError, match=r"different devices: CPU \(shape \(2,\)\) and GPU"):
        a + b


@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32, numpy.float64])
def test_pow_gradient_of_a_zero_exponent_is_zero_at_zero(dtype):
    # PyTorch's pow_backward masks exponent == 0 to a zero gradient; 0 * 0**-1 would give nan
    x = Tensor(numpy.array([0.0, 2.0, -1.0], dtype), requires_grad=True)
    (x**0).sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 0.0, 0.0])
    b = Tensor(numpy.array([0.0, 1.0, 2.0], dtype), requires_grad=True)
    a = Tensor(numpy.zeros(3, dtype), requires_grad=True)
    (a**b).sum().backward()
    numpy.testing.assert_array_equal(a.grad.asnumpy(), [0.0, 1.0, 0.0])


def test_clip_of_an_int_tensor_by_float_bounds_follows_the_dtype_policy():
    # dtype policy: int tensor (op) Python float -> float32 (NumPy and PyTorch promote too);
    # bounds truncated to ints would make clip([0, 3], 0.5, 2.5) return [0, 2]
    x = Tensor(numpy.array([0, 1, 3], numpy.int32))
    out = ops.clip(x, 0.5, 2.5)
    assert out.dtype == minigrad.float32
    numpy.testing.assert_array_equal(out.asnumpy(), [0.5, 1.0, 2.5])
    assert x.clip(min=0.5).asnumpy().tolist() == [0.5, 1.0, 3.0]
    ints = ops.clip(x, 1, 2)  # int bounds keep the int dtype
    assert ints.dtype == numpy.int32 and ints.asnumpy().tolist() == [1, 1, 2]


FP16_BINARY = {
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


@pytest.mark.parametrize("name", sorted(FP16_BINARY))
@FIXTURE_OK
@given(case=binary_case())
def test_binary_forward_bits_and_warnings(path, name, case):
    op, rule, numpy_fp16 = FP16_BINARY[name]
    a, b = case
    got, got_kinds = run(lambda: op(Tensor(a), Tensor(b)).asnumpy())
    assert_bits(got, rule(a, b))
    # the warnings of NumPy's own fp16 loop (which the docstring says minigrad's bits equal)
    _, numpy_kinds = run(numpy_fp16, a, b)
    assert got_kinds == numpy_kinds


FP16_UNARY = {  # op, rule, NumPy's own fp16 function whose warnings the op should give (or None)
    "neg": (ops.neg, numpy.negative, numpy.negative),
    "abs": (ops.abs, numpy.abs, numpy.abs),
    "exp": (ops.exp, in_fp32(numpy.exp), numpy.exp),
    "log": (ops.log, in_fp32(numpy.log), numpy.log),
    "sqrt": (ops.sqrt, in_fp32(numpy.sqrt), numpy.sqrt),
    "tanh": (ops.tanh, in_fp32(numpy.tanh), numpy.tanh),
    # ReLU documents +0 for every x <= 0 that is not NaN (-0 included), NaN passing unchanged
    "relu": (ops.relu, lambda x: numpy.where((x > 0) | numpy.isnan(x), x, F16.type(0)), None),
    "square": (ops.square, numpy.square, numpy.square),
    "clip": (
        lambda t: ops.clip(t, -2.5, 300.0),
        lambda x: numpy.clip(x, F16.type(-2.5), F16.type(300)),
        None,
    ),
    "leaky_relu": (
        lambda t: ops.leaky_relu(t, 0.2),
        lambda x: numpy.where(x > 0, x, x * F16.type(0.2)),
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(FP16_UNARY))
@FIXTURE_OK
@given(x=unary_case())
def test_unary_forward_bits_and_warnings(path, name, x):
    op, rule, numpy_fp16 = FP16_UNARY[name]
    got, got_kinds = run(lambda: op(Tensor(x)).asnumpy())
    with numpy.errstate(all="ignore"):
        assert_bits(got, rule(x))
    if numpy_fp16 is not None:
        assert got_kinds == run(numpy_fp16, x)[1]
    else:
        assert not got_kinds  # a select: NumPy's maximum/clip/where are silent on NaN


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
    # the tanh form 0.5 + 0.5·tanh(x/2) cancels for x << 0: sigmoid(-15) in fp32 is 2.98e-7
    # (true 3.06e-7) and sigmoid(-40) 0 in fp32 and fp64 (true 4.2e-18)
    x = numpy.array([-15.0, -17.0, -40.0, -80.0, -700.0, 3.0, 0.0, -0.0, 30.0], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ops.sigmoid(Tensor(x)).asnumpy()
    ref = 1 / (1 + numpy.exp(-x.astype(numpy.longdouble)))
    numpy.testing.assert_allclose(got, ref.astype(dtype), rtol=4 * numpy.finfo(dtype).eps, atol=0)


@given(case=binary_case())
def test_fp32_results_do_not_depend_on_the_host_library(case):
    a, b = (v.astype(F32) for v in case)
    fns = [
        lambda: ops.mul(Tensor(a), Tensor(b)),
        lambda: ops.div(Tensor(a), Tensor(b)),
        lambda: ops.relu(Tensor(a)),
        lambda: ops.sum(Tensor(a)),
        lambda: ops.sigmoid(Tensor(a)),
    ]
    with numpy.errstate(all="ignore"):
        native = [f().asnumpy() for f in fns]
        with _native.numpy_fallback():
            plain = [f().asnumpy() for f in fns]
    for n, p in zip(native, plain):
        assert_bits(n, p)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40))
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
    # first are inf and -inf, whose sum is NaN)
    ga, gb = grads(
        ops.mul,
        [numpy.array([1.0], F16), numpy.array([60000, -60000], F16)],
        numpy.array([2, 2], F16),
    )
    assert_bits(ga, numpy.array([0.0], F16))
    assert_bits(gb, numpy.array([2, 2], F16))


def test_div_gradient_of_b_is_not_lost_to_an_fp16_intermediate():
    # db = -g·a/b² = -100·1e-6/1e-6 ≈ -101 (g/b = 1e5 overflows fp16: through it db would be -inf)
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
    # dx = 2·x·g = 2·40000·0.001 ≈ 80 (2·x = 80000 overflows fp16: through it dx would be inf)
    (gx,) = grads(
        ops.square, [numpy.array([40000.0, 2.0**-24], F16)], numpy.array([0.001, 0.5], F16)
    )
    exact = 2 * numpy.array([40000.0, 2.0**-24]) * numpy.array([0.001, 0.5], F16).astype(F64)
    assert_close_to_rounded(gx, exact, 0)


def test_pow_gradient_is_not_nan_through_an_fp16_intermediate():
    # da = g·b·a^(b-1) = 1000·100·0.5^99 ≈ 1.6e-25 -> 0 (through fp16, g·b would overflow to inf
    # and a^(b-1) underflow to 0)
    ga, gb = grads(
        ops.pow, [numpy.array([0.5], F16), numpy.array([100.0], F16)], numpy.array([1000], F16)
    )
    assert_bits(ga, numpy.array([0.0], F16))
    assert_bits(gb, numpy.array([-0.0], F16))  # db = g·out·log(0.5) ≈ -5e-28
