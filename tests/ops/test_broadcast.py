"""Property tests: broadcasting binary ops over random broadcast-compatible shapes.

For each drawn pair (or triple, for ``where``) of shapes the output shape must be
``numpy.broadcast_shapes``, each gradient must have its input's shape and dtype, and the
values must pass the float64 gradient check.
"""
import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from minigrad import Tensor, ops
from minigrad.testing import assert_forward, check_backward


@st.composite
def broadcastable_shapes(draw, n=2, max_dims=4, max_side=4):
    """``n`` shapes that broadcast together: each drops leading axes of a common shape and
    sets some of its sides to 1."""
    common = draw(st.lists(st.integers(1, max_side), min_size=0, max_size=max_dims))
    shapes = []
    for _ in range(n):
        dropped = draw(st.integers(0, len(common)))
        shapes.append(tuple(1 if draw(st.booleans()) else side for side in common[dropped:]))
    return shapes


def _values(shape, name, role, seed):
    rng = numpy.random.RandomState(seed)
    if name in ("maximum", "minimum"):  # even vs odd tenths: never tied
        return rng.randint(-10, 10, shape) * 0.2 + (0.1 if role else 0.0)
    if name == "div" and role:
        return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return rng.uniform(-2.0, 2.0, shape)


BINARY = {"add": numpy.add, "sub": numpy.subtract, "mul": numpy.multiply, "div": numpy.divide,
          "maximum": numpy.maximum, "minimum": numpy.minimum}


@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32], ids=["float16", "float32"])
@pytest.mark.parametrize("name", sorted(BINARY))
@given(shapes=broadcastable_shapes(), seed=st.integers(0, 2 ** 16))
def test_binary_broadcasting(name, dtype, shapes, seed):
    a, b = (_values(s, name, role, seed + role).astype(dtype) for role, s in enumerate(shapes))
    fn = getattr(ops, name)
    ta = minigrad.Tensor(a, requires_grad=True)
    tb = minigrad.Tensor(b, requires_grad=True)
    out = fn(ta, tb)
    assert out.shape == numpy.broadcast_shapes(a.shape, b.shape)
    assert_forward(out, BINARY[name](a.astype(numpy.float64), b.astype(numpy.float64)), dtype)
    out.backward(numpy.ones(out.shape))
    assert ta.grad.shape == a.shape and tb.grad.shape == b.shape
    assert ta.grad.dtype == dtype and tb.grad.dtype == dtype
    check_backward(fn, [a, b], seed=seed)


@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32], ids=["float16", "float32"])
@given(shapes=broadcastable_shapes(n=3), seed=st.integers(0, 2 ** 16))
def test_where_broadcasting(dtype, shapes, seed):
    s_cond, s_x, s_y = shapes
    cond = numpy.random.RandomState(seed).rand(*s_cond) > 0.5
    x, y = (
        _values(s_x, "where", 0, seed).astype(dtype),
        _values(s_y, "where", 1, seed + 1).astype(dtype),
    )
    out = ops.where(cond, minigrad.Tensor(x), minigrad.Tensor(y))
    assert out.shape == numpy.broadcast_shapes(*shapes)
    numpy.testing.assert_array_equal(out.asnumpy(), numpy.where(cond, x, y))
    check_backward(lambda p, q: ops.where(cond, p, q), [x, y], seed=seed)


@given(
    shapes=broadcastable_shapes(n=1),
    target_extra=st.lists(st.integers(1, 3), max_size=2),
    seed=st.integers(0, 2**16),
)
def test_broadcast_to_then_sum_back(shapes, target_extra, seed):
    (shape,) = shapes
    target = tuple(target_extra) + tuple(side if side != 1 else 3 for side in shape)
    x = numpy.random.RandomState(seed).uniform(-1, 1, shape).astype(numpy.float32)
    out = ops.broadcast_to(minigrad.Tensor(x), target)
    numpy.testing.assert_array_equal(out.asnumpy(), numpy.broadcast_to(x, target))
    check_backward(lambda t: ops.broadcast_to(t, target), [x], seed=seed)


@st.composite
def shape_and_axes(draw, max_dims=4, max_side=4):
    """A shape and a subset of its axes (None, an int, or a tuple, possibly negative)."""
    shape = tuple(draw(st.lists(st.integers(1, max_side), min_size=1, max_size=max_dims)))
    axes = draw(st.sets(st.integers(0, len(shape) - 1)))
    form = draw(st.sampled_from(["none", "tuple", "negative"]))
    if form == "none":
        return shape, None
    axes = tuple(sorted(axes))
    if form == "negative":
        axes = tuple(a - len(shape) for a in axes)
    return shape, axes[0] if len(axes) == 1 and draw(st.booleans()) else axes


@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32], ids=["float16", "float32"])
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@given(case=shape_and_axes(), keepdims=st.booleans(), seed=st.integers(0, 2**16))
def test_reductions_over_random_axes(name, dtype, case, keepdims, seed):
    shape, axis = case
    n = int(numpy.prod(shape))
    x = (numpy.random.RandomState(seed).permutation(n) - n / 2).reshape(shape) * (2.0 / n)
    x = x.astype(dtype)  # distinct values: max/min have one winner

    def fn(t):
        return getattr(ops, name)(t, axis=axis, keepdims=keepdims)

    expected = getattr(numpy, name)(x.astype(numpy.float64), axis=axis, keepdims=keepdims)
    assert_forward(fn(minigrad.Tensor(x)), expected, dtype)
    check_backward(fn, [x], seed=seed)


@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_transpose_and_reshape_roundtrip(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    x = numpy.random.RandomState(len(shape)).uniform(-1, 1, shape).astype(numpy.float32)

    def fn(t):
        return ops.reshape(ops.transpose(t, perm), (-1,))[::-1]

    numpy.testing.assert_array_equal(
        fn(minigrad.Tensor(x)).asnumpy(), x.transpose(perm).reshape(-1)[::-1]
    )
    check_backward(fn, [x])


@pytest.mark.parametrize("shape,target", [((3,), (1,)), ((3,), (2, 1)), ((2, 3), (3,))])
def test_broadcast_to_a_shape_it_cannot_reach_names_both_shapes(shape, target):
    # broadcast_to's own message covered only shapes with no common broadcast; (3,) -> (2, 1)
    # (common shape (2, 3), not the target) fell through to NumPy's 'remapped shapes' message
    with pytest.raises(
        ValueError,
        match=r"shape must be a shape that x of shape %s broadcasts to, got %s"
        % (
            str(shape).replace("(", r"\(").replace(")", r"\)"),
            str(target).replace("(", r"\(").replace(")", r"\)"),
        ),
    ):
        ops.broadcast_to(Tensor(numpy.zeros(shape)), target)
