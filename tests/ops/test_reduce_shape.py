"""Reductions, shape ops, indexing and matmul: forward vs NumPy, backward vs the checker."""
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad
from helpers.fp16 import F16, F32, F64, FIXTURE_OK, assert_bits, fp16_values, grads, run, unary_case
from minigrad import Tensor, ops
from minigrad.testing import assert_forward, check_backward, noncontiguous


def _distinct(shape, seed=0):
    """Values with no ties (a shuffled grid), so max/min have one winner per slice."""
    n = int(numpy.prod(shape))
    values = (numpy.arange(n) - n / 2) * (4.0 / max(n, 1))
    return numpy.random.RandomState(seed).permutation(values).reshape(shape)


def _rand(shape, seed=0):
    return numpy.random.RandomState(seed).uniform(-2, 2, shape)


# ---- reductions ---------------------------------------------------------------------------

REDUCTIONS = {"sum": numpy.sum, "mean": numpy.mean, "max": numpy.max, "min": numpy.min}
AXES = [None, 0, -1, (0, 2), (), (2, 0, 1)]


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction(name, axis, keepdims, dtype, device):
    x = _distinct((3, 4, 5)).astype(dtype)

    def fn(t):
        return getattr(ops, name)(t, axis=axis, keepdims=keepdims)
    out = fn(minigrad.Tensor(x, device=device))
    assert_forward(
        out, REDUCTIONS[name](x.astype(numpy.float64), axis=axis, keepdims=keepdims), dtype
    )
    check_backward(fn, [minigrad.Tensor(x, device=device)])


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_methods_and_noncontiguous(name, dtype):
    x = _distinct((4, 6)).astype(dtype)
    for view in (x.T, noncontiguous(x)):
        out = getattr(minigrad.Tensor(view), name)(axis=1, keepdims=True)
        assert_forward(
            out, REDUCTIONS[name](view.astype(numpy.float64), axis=1, keepdims=True), dtype
        )
        check_backward(lambda t: getattr(t, name)(axis=1), [view])


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_of_scalar_tensor(name):
    x = minigrad.Tensor(numpy.float32(2.5), requires_grad=True)
    out = getattr(ops, name)(x)
    assert out.shape == () and out.item() == 2.5
    out.backward()
    assert x.grad.item() == 1.0


def test_reduction_axis_out_of_range():
    with pytest.raises(ValueError, match=r"axis must be .*\[-2, 1\] \(the axes of a tensor of"
        r" 2 dimensions\), got 3"):
        ops.sum(minigrad.Tensor(numpy.ones((2, 3))), axis=3)


def test_max_min_of_empty_tensor_raise():
    with pytest.raises(ValueError, match=r"empty tensor of shape \(0, 3\)"):
        ops.max(minigrad.Tensor(numpy.ones((0, 3))))


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_share_gradient_among_ties(name, dtype):
    x = numpy.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype)
    if name == "min":
        x = -x
    t = minigrad.Tensor(x, requires_grad=True)
    getattr(t, name)(axis=1).sum().backward()
    assert t.grad.dtype == dtype
    numpy.testing.assert_allclose(
        t.grad.asnumpy(), [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-3
    )
    t.grad = None
    getattr(t, name)().backward(minigrad.Tensor(numpy.array(6.0, dtype)))  # a global tie of 2
    numpy.testing.assert_allclose(t.grad.asnumpy(), [[0, 3, 3], [0, 0, 0]])


def test_fp16_sum_and_mean_accumulate_in_fp32():
    x = minigrad.Tensor(numpy.full(4096, 0.1, numpy.float16))
    exact = 4096 * float(numpy.float16(0.1))
    assert x.sum().dtype == numpy.float16 and x.mean().dtype == numpy.float16
    assert abs(float(x.sum()) - exact) < 0.5  # fp16 spacing at 409.6 is 0.25
    assert abs(float(x.mean()) - float(numpy.float16(0.1))) < 1e-4
    naive = numpy.float16(0)
    for _ in range(4096):
        naive = numpy.float16(naive + numpy.float16(0.1))
    assert abs(float(naive) - exact) > 50  # what fp16 accumulation would have given


# ---- shape ops ----------------------------------------------------------------------------

SHAPE_CASES = {
    # name: (minigrad function, NumPy reference, input shape)
    "reshape": (lambda t: ops.reshape(t, (4, -1)), lambda a: a.reshape(4, -1), (2, 3, 4)),
    "reshape_int": (lambda t: ops.reshape(t, 24), lambda a: a.reshape(24), (2, 3, 4)),
    "reshape_method": (lambda t: t.reshape(6, 4), lambda a: a.reshape(6, 4), (2, 3, 4)),
    "view_method": (lambda t: t.view((3, 8)), lambda a: a.reshape(3, 8), (2, 3, 4)),
    "flatten": (lambda t: t.flatten(), lambda a: a.reshape(-1), (2, 3, 4)),
    "transpose": (lambda t: ops.transpose(t), lambda a: a.transpose(), (2, 3, 4)),
    "transpose_axes": (
        lambda t: ops.transpose(t, (1, 2, 0)),
        lambda a: a.transpose(1, 2, 0),
        (2, 3, 4),
    ),
    "transpose_negative": (
        lambda t: t.transpose(0, -1, 1),
        lambda a: a.transpose(0, 2, 1),
        (2, 3, 4),
    ),
    "T": (lambda t: t.T, lambda a: a.T, (3, 4)),
    "swapaxes": (lambda t: ops.swapaxes(t, 0, -1), lambda a: a.swapaxes(0, -1), (2, 3, 4)),
    "expand_dims": (lambda t: ops.expand_dims(t, 1), lambda a: numpy.expand_dims(a, 1), (2, 3)),
    "expand_dims_end": (lambda t: t.expand_dims(-1), lambda a: numpy.expand_dims(a, -1), (2, 3)),
    "squeeze": (lambda t: ops.squeeze(t), lambda a: a.squeeze(), (2, 1, 3, 1)),
    "squeeze_axis": (lambda t: t.squeeze(-1), lambda a: a.squeeze(-1), (2, 1, 3, 1)),
    "broadcast_to": (
        lambda t: ops.broadcast_to(t, (2, 3, 4)),
        lambda a: numpy.broadcast_to(a, (2, 3, 4)),
        (3, 1),
    ),
    "broadcast_method": (
        lambda t: t.broadcast_to((5, 3)),
        lambda a: numpy.broadcast_to(a, (5, 3)),
        (3,),
    ),
}


@pytest.mark.parametrize("name", sorted(SHAPE_CASES))
def test_shape_op(name, dtype, device):
    fn, ref, shape = SHAPE_CASES[name]
    x = _rand(shape).astype(dtype)
    out = fn(minigrad.Tensor(x, device=device))
    numpy.testing.assert_array_equal(out.asnumpy(), ref(x))
    assert out.dtype == dtype
    check_backward(fn, [minigrad.Tensor(x, device=device)])
    check_backward(fn, [noncontiguous(x)])


@pytest.mark.parametrize(
    "call,message",
    [
        (
            lambda t: ops.reshape(t, (5, 5)),
            r"shape must be a shape of 24 elements .* x of shape \(2, 3, 4\), got \(5, 5\)",
        ),
        (lambda t: ops.transpose(t, (0, 0, 1)), r"axes must be a permutation .*got \(0, 0,"
            r" 1\)"),
        (lambda t: ops.squeeze(t, 1), r"axis must be axes of size 1 .*\(axis 1 has size 3\),"
            r" got 1"),
        (lambda t: ops.expand_dims(t, 5), r"axis must be an int in \[-4, 3\].*got 5"),
        (
            lambda t: ops.broadcast_to(t, (3, 3)),
            r"shape must be a shape that x of shape \(2, 3, 4\) broadcasts to, got \(3, 3\)",
        ),
        (lambda t: ops.swapaxes(t, 0, 3), r"axis2 must be an int in \[-3, 2\].*got 3"),
    ],
)
def test_shape_errors_name_the_shapes(call, message):
    with pytest.raises(ValueError, match=message):
        call(minigrad.Tensor(numpy.zeros((2, 3, 4))))


# ---- indexing ----------------------------------------------------------------------------

INDICES = {
    "int": 1,
    "negative_int": -1,
    "slice": slice(1, 3),
    "step_slice": (slice(None), slice(None, None, 2)),
    "reverse": (slice(None, None, -1), 0),
    "ellipsis_newaxis": (Ellipsis, None, 1),
    "int_array": numpy.array([0, 2]),
    "repeated_int_array": numpy.array([0, 2, 0, 0]),
    "list": [3, 1, 1],
    "two_int_arrays": (numpy.array([0, 1, 1]), numpy.array([2, 2, 0])),
    "mixed_slice_array": (slice(None), numpy.array([[0, 1], [2, 0]])),
    "bool_mask": numpy.array([True, False, True, True]),
    "bool_mask_2d": _rand((4, 3), 7) > 0,
    "int_tensor": minigrad.Tensor([2, 2, 3]),
}


@pytest.mark.parametrize("name", sorted(INDICES))
def test_getitem(name, dtype, device):
    index = INDICES[name]
    x = _rand((4, 3)).astype(dtype)
    np_index = numpy.asarray(index) if isinstance(index, minigrad.Tensor) else index
    out = minigrad.Tensor(x, device=device)[index]
    numpy.testing.assert_array_equal(out.asnumpy(), x[np_index])
    check_backward(lambda t: t[index], [minigrad.Tensor(x, device=device)])
    check_backward(lambda t: ops.getitem(t, index), [x.T.copy().T])  # an F-ordered input


def test_getitem_repeated_indices_add_their_gradients(dtype):
    x = minigrad.Tensor(numpy.zeros(4, dtype), requires_grad=True)
    x[numpy.array([0, 2, 0, 0])].sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [3, 0, 1, 0])
    assert x.grad.dtype == dtype


def test_getitem_bool_tensor_mask():
    x = minigrad.Tensor(numpy.array([1.0, -2.0, 3.0]), requires_grad=True)
    y = x[x > 0]
    numpy.testing.assert_array_equal(y.asnumpy(), [1.0, 3.0])
    (y * y).sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 0.0, 6.0])


# ---- matmul -------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((4,), (4,)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((2, 3, 4), (4,)),
    ((4,), (2, 4, 5)),
    ((1, 4), (4, 1)),
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, dtype, device):
    a, b = _rand(shapes[0]).astype(dtype), _rand(shapes[1], 1).astype(dtype)
    out = ops.matmul(minigrad.Tensor(a, device=device), minigrad.Tensor(b, device=device))
    # the reference: exact products of the rounded inputs, accumulated in float64
    assert_forward(out, numpy.matmul(a.astype(numpy.float64), b.astype(numpy.float64)), dtype)
    check_backward(
        ops.matmul, [minigrad.Tensor(a, device=device), minigrad.Tensor(b, device=device)]
    )


def test_matmul_noncontiguous_and_operator(dtype):
    a, b = _rand((4, 3)).astype(dtype).T, noncontiguous(_rand((4, 5), 1).astype(dtype))
    expected = a.astype(numpy.float64) @ b.astype(numpy.float64)
    assert_forward(minigrad.Tensor(a) @ minigrad.Tensor(b), expected, dtype)
    assert_forward(minigrad.Tensor(a).matmul(minigrad.Tensor(b)), expected, dtype)
    check_backward(lambda x, y: x @ y, [a, b])
    check_backward(lambda x, y: y.T @ x.T, [b.T, a.T])


def test_matmul_float64_tight():
    check_backward(ops.matmul, [_rand((2, 3, 4)), _rand((4, 5), 1)])


def test_matmul_errors_name_both_shapes():
    a, b = minigrad.Tensor(numpy.zeros((3, 4))), minigrad.Tensor(numpy.zeros((5, 2)))
    with pytest.raises(ValueError, match=r"^matmul: b must have 4 rows to multiply a of shape"
        r" \(3, 4\), got b of shape \(5, 2\)"):
        ops.matmul(a, b)
    with pytest.raises(ValueError, match="at least 1 dimension"):
        ops.matmul(minigrad.Tensor(numpy.float64(2.0)), a)


@pytest.mark.parametrize(
    "shapes",
    [((3, 4), (5, 4)), ((2, 3, 4), (5, 4)), ((4,), (5, 4)), ((2, 3, 4), (2, 5, 4))],
    ids=str,
)
def test_matmul_transpose_b(shapes, dtype):
    a, b = _rand(shapes[0]).astype(dtype), _rand(shapes[1], 1).astype(dtype)
    out = ops.matmul(minigrad.Tensor(a), minigrad.Tensor(b), transpose_b=True)
    expected = numpy.matmul(a.astype(numpy.float64), b.astype(numpy.float64).swapaxes(-1, -2))
    assert_forward(out, expected, dtype)
    check_backward(lambda x, y: ops.matmul(x, y, transpose_b=True), [a, b])


def test_matmul_transpose_b_errors():
    a = minigrad.Tensor(numpy.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"b must have 4 columns \(transpose_b=True\) to multiply "
                       r"a of shape \(3, 4\), got b of shape \(4, 5\)"):
        ops.matmul(a, minigrad.Tensor(numpy.zeros((4, 5))), transpose_b=True)
    with pytest.raises(ValueError, match="b must have at least 2 dimension"):
        ops.matmul(a, minigrad.Tensor(numpy.zeros(4)), transpose_b=True)


@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32])
@pytest.mark.parametrize("x_shape, bias", [((5, 4), True), ((2, 3, 4), True), ((5, 4), False)])
def test_dense_matches_matmul_plus_bias(dtype, x_shape, bias):
    from minigrad.testing import tolerance

    rng = numpy.random.default_rng(0)
    x, w, b = rng.standard_normal(x_shape), rng.standard_normal((3, 4)), rng.standard_normal(3)
    args = [x, w, b] if bias else [x, w]
    out = ops.dense(*[minigrad.Tensor(a.astype(dtype)) for a in args])
    expected = x.astype(dtype).astype(numpy.float64) @ w.astype(dtype).astype(numpy.float64).T
    if bias:
        expected = expected + b.astype(dtype)
    atol, rtol = tolerance(numpy.dtype(dtype))
    assert out.dtype == dtype and out.shape == x_shape[:-1] + (3,)
    numpy.testing.assert_allclose(
        out.asnumpy().astype(numpy.float64), expected, atol=atol, rtol=rtol
    )
    check_backward(lambda *t: ops.dense(*t), args, dtype=dtype)


def test_dense_rejects_mismatched_shapes():
    x, w = (
        minigrad.Tensor(numpy.ones((2, 4), numpy.float32)),
        minigrad.Tensor(numpy.ones((3, 5), numpy.float32)),
    )
    with pytest.raises(ValueError, match=r"weight must have shape \(out, 4\) for x of shape"
        r" \(2, 4\), got weight of shape \(3, 5\)"):
        ops.dense(x, w)
    with pytest.raises(ValueError, match=r"bias must have shape \(3,\) for weight of shape "
                       r"\(3, 5\), got bias of shape \(2,\)"):
        ops.dense(
            minigrad.Tensor(numpy.ones((2, 5), numpy.float32)), w, numpy.ones(2, numpy.float32)
        )


def test_getitem_repeated_fp16_gradients_accumulate_in_fp32():
    """4096 fp16 ones scattered onto one element: fp16 accumulation would stall at 2048."""
    x = minigrad.Tensor(numpy.zeros(3, numpy.float16), requires_grad=True)
    ops.getitem(x, numpy.zeros(4096, numpy.int64)).sum().backward()
    assert x.grad.dtype == numpy.float16 and x.grad.asnumpy().tolist() == [4096.0, 0.0, 0.0]
    assert numpy.float16(2048) + numpy.float16(1) == 2048  # what fp16 accumulation would give


@pytest.mark.parametrize("axes", [(0, 2), (0, 3), (-3, 1), (1, 5)])
def test_transpose_refuses_an_axis_out_of_range_naming_the_axes_given(axes):
    # NumPy: x.transpose((0, 2)) of a 2-D array is an AxisError; (0, 2) must not become (0, 0)
    # or, worse, (0, 3) become the valid (0, 1) and silently return x unchanged
    x = Tensor(numpy.zeros((2, 3)))
    message = r"axes must be a permutation of the 2 axes of a tensor of shape \(2, 3\), got "
    with pytest.raises(ValueError, match=message + r"\(%d, %d\)" % axes):
        ops.transpose(x, axes)
    with pytest.raises(ValueError, match=message + r"\(%d, %d\)" % axes):
        x.transpose(*axes)


def test_transpose_still_takes_negative_axes_in_range():
    x = numpy.arange(24.0).reshape(2, 3, 4)
    numpy.testing.assert_array_equal(
        ops.transpose(Tensor(x), (-1, 0, -2)).asnumpy(), x.transpose(-1, 0, -2)
    )


@settings(max_examples=60, deadline=None)
@given(ndim=st.integers(1, 4), data=st.data())
def test_transpose_accepts_exactly_what_numpy_accepts(ndim, data):
    axes = tuple(
        data.draw(st.lists(st.integers(-ndim - 2, ndim + 1), min_size=ndim, max_size=ndim))
    )
    x = numpy.arange(float(numpy.prod(range(2, ndim + 2)))).reshape(range(2, ndim + 2))
    try:
        expected = x.transpose(axes)
    except ValueError:  # AxisError and 'repeated axis' are ValueErrors
        with pytest.raises(ValueError, match="must be a permutation"):
            ops.transpose(Tensor(x), axes)
        return
    t = Tensor(x, requires_grad=True)
    out = ops.transpose(t, axes)
    numpy.testing.assert_array_equal(out.asnumpy(), expected)
    out.backward(numpy.ones(out.shape))
    assert t.grad.shape == x.shape


def _x(shape=(2, 3)):
    return minigrad.Tensor(numpy.arange(numpy.prod(shape), dtype=numpy.float32).reshape(shape))


@pytest.mark.parametrize("op", [ops.sum, ops.mean, ops.max, ops.min])
@pytest.mark.parametrize("axis", [0.5, (0.5,), (0, 1.0), "0"])
def test_reduction_non_int_axis_is_a_type_error_naming_axis(op, axis):
    # not int(0.5), which would sum axis 0 without a word, nor "'float' object is not iterable"
    with pytest.raises(TypeError, match=r"axis.*int.*got"):
        op(_x(), axis)


def test_reduction_int_and_tuple_axes_still_work():
    x = _x()
    numpy.testing.assert_array_equal(ops.sum(x, numpy.int64(1)).asnumpy(), [3, 12])
    numpy.testing.assert_array_equal(ops.sum(x, (0, -1)).asnumpy(), 15)
    numpy.testing.assert_array_equal(ops.max(x, [1]).asnumpy(), [2, 5])


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


@pytest.mark.parametrize("reduce", [ops.max, ops.min])
def test_max_min_gradient_shared_by_more_than_65504_ties(reduce):
    # dx = g / count at each of the 70000 tied extremes: 1/70000 ≈ 1.43e-5 (the count as an fp16
    # 70000 is inf, and every share would be 0)
    (gx,) = grads(reduce, [numpy.zeros(70000, F16)], numpy.array(1.0, F16))
    assert_bits(gx, numpy.full(70000, 1 / 70000, F64).astype(F16))


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), ties=st.booleans())
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


def test_getitem_repeated_indices_and_broadcast_sum_in_fp32():
    x = numpy.zeros((2, 3), F16)
    g = numpy.array([[2048, 2048, 60000], [1, 2**-24, 60000], [1, 2**-24, -60000]], F16)
    (gx,) = grads(lambda t: t[numpy.array([0, 0, 0]), :], [x], g)
    assert_bits(gx, numpy.array([[2050, 2048, 60000], [0, 0, 0]], F16))
    (gx,) = grads(lambda t: t[[1, 1, 1]], [x], g)
    assert_bits(gx, numpy.array([[0, 0, 0], [2050, 2048, 60000]], F16))
    (gx,) = grads(lambda t: ops.broadcast_to(t, (3, 3)), [numpy.zeros((1, 3), F16)], g)
    assert_bits(gx, numpy.array([[2050, 2048, 60000]], F16))
    # slices and bool masks select once: the gradient is g itself (subnormals, inf, -0 kept)
    v = numpy.array([2**-24, numpy.inf, -0.0, 3], F16)
    (gx,) = grads(lambda t: t[::2], [numpy.zeros(4, F16)], v[:2])
    assert_bits(gx, numpy.array([2**-24, 0, numpy.inf, 0], F16))
    (gx,) = grads(lambda t: t[numpy.array([True, False, True, True])], [numpy.zeros(4, F16)], v[1:])
    assert_bits(gx, numpy.array([numpy.inf, 0, -0.0, 3], F16))


@pytest.mark.parametrize("reduce", [ops.mean, ops.sum], ids=lambda f: f.__name__)
def test_sum_and_mean_gradients_keep_the_inputs_memory_order(reduce):
    """Global average pooling of a channels-last batch hands back a channels-last gradient
    (the ops below it then run on one layout); a C-ordered input gets a C-ordered one."""
    from helpers.layouts import is_channels_last, layouts

    x = numpy.random.default_rng(0).standard_normal((3, 4, 5, 6)).astype(numpy.float32)
    want = None
    for name, view in layouts(x).items():
        t = Tensor(view, requires_grad=True)
        reduce(t, axis=(2, 3)).backward(Tensor(numpy.arange(12.0, dtype=numpy.float32)
                                               .reshape(3, 4)))
        g = t.grad.data
        assert is_channels_last(g) == (name == "channels_last")
        assert g.flags.c_contiguous == (name != "channels_last")
        want = g if want is None else want
        numpy.testing.assert_array_equal(g, want)
