"""concat, stack, split (ops/join.py): forward, backward, dtype promotion, errors, round trips."""
import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from helpers.fp16 import F16, F32, assert_bits, nchw, strided
from minigrad import Tensor, ops
from minigrad.testing import assert_forward, check_backward, noncontiguous


def _inputs(shapes, dtype, seed=0):
    rng = numpy.random.RandomState(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis, dtype, device):
    shapes = {
        0: [(1, 3), (2, 3), (3, 3)],
        1: [(2, 1), (2, 4), (2, 2)],
        -1: [(2, 1), (2, 4), (2, 2)],
    }
    arrays = _inputs(shapes[axis], dtype)
    out = ops.concat([minigrad.Tensor(a, device=device) for a in arrays], axis=axis)
    assert out.device == device
    assert_forward(out, numpy.concatenate(arrays, axis=axis), dtype)
    check_backward(
        lambda *ts: ops.concat(ts, axis=axis), [minigrad.Tensor(a, device=device) for a in arrays]
    )


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack(axis, dtype, device):
    arrays = _inputs([(2, 3)] * 3, dtype)
    out = ops.stack([minigrad.Tensor(a, device=device) for a in arrays], axis=axis)
    assert_forward(out, numpy.stack(arrays, axis=axis), dtype)
    check_backward(
        lambda *ts: ops.stack(ts, axis=axis), [minigrad.Tensor(a, device=device) for a in arrays]
    )


@pytest.mark.parametrize("how", [3, [1, 4], [0, 2, 2, 6]], ids=str)
def test_split(how, dtype, device):
    x = _inputs([(2, 6)], dtype)[0]
    pieces = ops.split(minigrad.Tensor(x, device=device), how, axis=1)
    expected = numpy.split(x, how, axis=1)
    assert isinstance(pieces, tuple) and len(pieces) == len(expected)
    for p, e in zip(pieces, expected):
        assert_forward(p, e.astype(numpy.float64), dtype)
    check_backward(lambda t: ops.split(t, how, axis=1), [minigrad.Tensor(x, device=device)])


def test_split_gradient_of_unused_pieces_is_zero():
    x = minigrad.Tensor(numpy.arange(6.0, dtype=numpy.float32), requires_grad=True)
    a, b, c = ops.split(x, 3)
    (b * 2).sum().backward()
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [0, 0, 2, 2, 0, 0])
    assert x.grad.dtype == numpy.float32


def test_noncontiguous_inputs():
    a, b = _inputs([(3, 4), (4, 3)], numpy.float32)
    a, b = noncontiguous(a), b.T
    assert_forward(
        ops.concat([minigrad.Tensor(a), minigrad.Tensor(b)], axis=0),
        numpy.concatenate([a, b]).astype(numpy.float64),
    )
    check_backward(lambda x, y: ops.concat([x, y], axis=1), [a, b])
    check_backward(lambda x, y: ops.stack([x, y], axis=1), [a, b])
    check_backward(lambda x: ops.split(x, [1], axis=0), [b])


def test_mixed_dtypes_promote_and_gradients_keep_each_dtype():
    a = minigrad.Tensor(numpy.ones((1, 2), numpy.float16), requires_grad=True)
    b = minigrad.Tensor(numpy.ones((1, 2), numpy.float32), requires_grad=True)
    out = ops.concat([a, b])
    assert out.dtype == numpy.float32
    out.sum().backward()
    assert a.grad.dtype == numpy.float16 and b.grad.dtype == numpy.float32


def test_int_with_float_takes_the_float_dtype():
    # the dtype policy (minigrad.dtype): not NumPy's float64 for int64 with float16
    ints = minigrad.Tensor(numpy.arange(2).reshape(1, 2))
    halves = minigrad.Tensor(numpy.ones((1, 2), numpy.float16))
    assert ops.concat([ints, halves]).dtype == numpy.float16
    assert ops.stack([halves, ints]).dtype == numpy.float16


@given(
    sizes=st.lists(st.integers(0, 4), min_size=1, max_size=5),
    other=st.integers(1, 3),
    axis=st.sampled_from([0, 1]),
)
def test_split_then_concat_round_trip(sizes, other, axis):
    shape = [other, other]
    shape[axis] = sum(sizes)
    x = numpy.arange(numpy.prod(shape), dtype=numpy.float32).reshape(shape)
    cuts = numpy.cumsum(sizes)[:-1].tolist()
    pieces = ops.split(minigrad.Tensor(x), cuts, axis=axis)
    assert [p.shape[axis] for p in pieces] == sizes
    numpy.testing.assert_array_equal(ops.concat(pieces, axis=axis).asnumpy(), x)
    if sizes.count(sizes[0]) == len(sizes):
        restacked = ops.stack(pieces, axis=0).asnumpy()
        numpy.testing.assert_array_equal(restacked, numpy.stack(numpy.split(x, cuts, axis=axis)))


def test_errors_name_the_problem():
    a, b = minigrad.Tensor(numpy.zeros((2, 3))), minigrad.Tensor(numpy.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"tensor 1 has shape \(2, 4\).*\(2, 3\)"):
        ops.concat([a, b], axis=0)
    with pytest.raises(ValueError, match="stack needs tensors of one shape"):
        ops.stack([a, b])
    with pytest.raises(ValueError, match="tensors must be a non-empty list or tuple of Tensors"):
        ops.concat([])
    with pytest.raises(TypeError, match="tensors must be a non-empty list or tuple of Tensors"):
        ops.stack(a)
    with pytest.raises(ValueError, match="a divisor of the length 3"):
        ops.split(a, 2, axis=1)
    with pytest.raises(ValueError, match=r"axis must be an int in \[-2, 1\].*, got 2"):
        ops.concat([a, a], axis=2)


def test_join_and_shape_ops_are_exact_in_fp16():
    rng = numpy.random.default_rng(4)
    a, b = strided(nchw(rng, (2, 3, 4))), nchw(rng, (2, 3, 4))
    a[0, 0, :3] = [2**-24, numpy.inf, numpy.nan]
    assert_bits(ops.concat([Tensor(a), Tensor(b)], 1).asnumpy(), numpy.concatenate([a, b], 1))
    assert_bits(ops.stack([Tensor(a), Tensor(b)], -1).asnumpy(), numpy.stack([a, b], -1))
    pieces = ops.split(Tensor(a), [1, 1, 3], axis=2)
    for got, ref in zip(pieces, numpy.split(a, [1, 1, 3], axis=2)):
        assert_bits(got.asnumpy(), ref)
    assert_bits(ops.transpose(Tensor(a), (2, 0, 1)).asnumpy(), a.transpose(2, 0, 1))
    assert_bits(ops.squeeze(ops.reshape(Tensor(a), (1, 24, 1))).asnumpy(), a.reshape(24))
    ta, tb = Tensor(a, requires_grad=True), Tensor(b.astype(F32), requires_grad=True)
    out = ops.concat([ta, tb], 1)
    assert out.dtype == F32
    g = rng.standard_normal((2, 6, 4)).astype(F32)
    out.backward(Tensor(g))
    assert_bits(ta.grad.asnumpy(), g[:, :3].astype(F16))
    assert_bits(tb.grad.asnumpy(), g[:, 3:])
    # split: an unused piece's gradient is zero; stack/split gradients route each slice back
    t = Tensor(a, requires_grad=True)
    first, _, rest = ops.split(t, [1, 1], axis=2)
    ops.concat([rest, first], 2).backward(Tensor(nchw(rng, (2, 3, 4))))
    check_backward(lambda x: ops.split(x, 2, axis=2)[1] * 3, [nchw(rng, (2, 3, 4))])
    check_backward(lambda x, y: ops.stack([x, y], 1), [nchw(rng, (2, 3)), nchw(rng, (2, 3))])
    e = ops.concat([Tensor(numpy.zeros((0, 3), F16)), Tensor(numpy.ones((2, 3), F16))], 0)
    assert e.shape == (2, 3) and e.dtype == F16
