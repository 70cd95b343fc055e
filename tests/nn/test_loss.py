"""Losses against NumPy, in float32 and with float16 inputs (result always float32)."""
import numpy
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.testing import check_backward

RNG = numpy.random.RandomState(0)


def _reduce(values, reduction):
    return {"mean": values.mean(), "sum": values.sum(), "none": values}[reduction]


def _log_softmax(x):
    x = x.astype(numpy.float64)
    z = x - x.max(axis=1, keepdims=True)
    return z - numpy.log(numpy.exp(z).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1(dtype, reduction):
    x, y = RNG.randn(4, 3).astype(dtype), RNG.randn(4, 3).astype(dtype)
    diff = x.astype(numpy.float64) - y.astype(numpy.float64)
    for cls, values in ((nn.MSELoss, diff ** 2), (nn.L1Loss, numpy.abs(diff))):
        out = cls(reduction)(Tensor(x), Tensor(y))
        assert out.dtype == minigrad.float32
        numpy.testing.assert_allclose(
            out.asnumpy(), _reduce(values, reduction), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_softmax_cross_entropy_sparse_and_dense(dtype, reduction):
    logits = (RNG.randn(5, 4) * 3).astype(dtype)
    ids = RNG.randint(0, 4, 5)
    expected = _reduce(-_log_softmax(logits)[numpy.arange(5), ids], reduction)
    sparse = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction=reduction)
    out = sparse(Tensor(logits), Tensor(ids.astype(numpy.int32)))
    assert out.dtype == minigrad.float32
    numpy.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    one_hot = numpy.eye(4, dtype=dtype)[ids]
    dense = nn.SoftmaxCrossEntropyWithLogits(sparse=False, reduction=reduction)
    numpy.testing.assert_allclose(
        dense(Tensor(logits), Tensor(one_hot)).asnumpy(), expected, rtol=1e-5, atol=1e-6
    )


def test_softmax_cross_entropy_defaults_and_stability():
    loss = nn.SoftmaxCrossEntropyWithLogits()
    assert loss.sparse is False and loss.reduction == "none"
    logits = numpy.array([[1000.0, 0.0], [-1000.0, 1000.0]], numpy.float32)
    out = nn.SoftmaxCrossEntropyWithLogits(sparse=True)(Tensor(logits), Tensor(numpy.array([0, 0])))
    numpy.testing.assert_allclose(out.asnumpy(), [0.0, 2000.0])
    big = numpy.array(
        [[60000.0, -60000.0]], numpy.float16
    )  # fp16 logits whose softmax sum overflows fp16
    out = nn.SoftmaxCrossEntropyWithLogits(sparse=True)(Tensor(big), Tensor(numpy.array([1])))
    numpy.testing.assert_allclose(out.asnumpy(), [120000.0])


def test_loss_gradients_reach_fp16_logits_as_fp16():
    logits = Tensor((RNG.randn(3, 4)).astype(numpy.float16), requires_grad=True)
    nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")(
        logits, Tensor(numpy.array([0, 3, 1]))
    ).backward()
    assert logits.grad.dtype == minigrad.float16
    ids = numpy.array([2, 0, 1])
    check_backward(
        lambda x: nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="sum")(x, Tensor(ids)),
        [RNG.randn(3, 4)],
        dtype=numpy.float32,
    )  # losses compute in float32
    check_backward(
        lambda x, y: nn.MSELoss()(x, y), [RNG.randn(3, 2), RNG.randn(3, 2)], dtype=numpy.float32
    )


def test_loss_base_get_loss_with_weights():
    base = nn.LossBase("sum")
    x = Tensor(numpy.array([1.0, 2.0], numpy.float16))
    out = base.get_loss(x, Tensor(numpy.array([3.0, 0.5], numpy.float32)))
    assert out.dtype == minigrad.float32 and float(out) == 4.0


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: nn.MSELoss(reduction="avg"),
            r"reduction must be one of \['mean', 'sum', 'none'\], got 'avg'",
        ),
        (lambda: nn.SoftmaxCrossEntropyWithLogits(reduction="batchmean"), "got 'batchmean'"),
        (lambda: nn.SoftmaxCrossEntropyWithLogits(sparse=1), "sparse must be a bool, got 1"),
    ],
)
def test_bad_loss_arguments(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make()


def test_bad_cross_entropy_inputs():
    logits = Tensor(RNG.randn(2, 3).astype(numpy.float32))
    sparse = nn.SoftmaxCrossEntropyWithLogits(sparse=True)
    with pytest.raises(ValueError, match=r"in \[0, 3\), got values in \[0, 3\]"):
        sparse(logits, Tensor(numpy.array([0, 3])))
    with pytest.raises(ValueError, match=r"shape \(2,\).*got \(2, 1\)"):
        sparse(logits, Tensor(numpy.array([[0], [1]])))
    with pytest.raises(TypeError, match="integer class ids, got dtype float32"):
        sparse(logits, Tensor(numpy.array([0.0, 1.0], numpy.float32)))
    with pytest.raises(
        ValueError, match=r"labels must have the logits' shape \(2, 3\), got \(2,\)"
    ):
        nn.SoftmaxCrossEntropyWithLogits()(logits, Tensor(numpy.array([0.0, 1.0], numpy.float32)))
    with pytest.raises(ValueError, match=r"logits must have shape \(N, C\), got \(3,\)"):
        sparse(Tensor(numpy.zeros(3, numpy.float32)), Tensor(numpy.array([0])))


def test_mse_loss_shape_mismatch_names_logits_and_labels():
    with pytest.raises(ValueError, match=r"MSELoss: labels\.shape must be logits\.shape \(4, 3\) "
                                         r"or a shape that broadcasts with it, got \(4, 2\)$"):
        nn.MSELoss()(Tensor(np.ones((4, 3), np.float32)), Tensor(np.ones((4, 2), np.float32)))
    with pytest.raises(ValueError, match=r"L1Loss: labels\.shape must be .*, got \(2,\)$"):
        nn.L1Loss()(Tensor(np.ones((4, 3), np.float32)), Tensor(np.ones(2, np.float32)))
