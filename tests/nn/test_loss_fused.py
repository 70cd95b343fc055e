"""The fused fast paths of the training step give the values of the node-by-node graphs they
replace.

Sparse softmax cross-entropy is one node (``nn.loss.SoftmaxCrossEntropy``): its loss and its
gradient must be bit-identical to log_softmax, getitem, neg and mean/sum as separate nodes.
"""

import numpy
import pytest

from minigrad import Tensor, nn, ops
from minigrad.testing import check_backward


def node_by_node(logits, ids, reduction):
    log_probs = ops.log_softmax(ops.cast(logits, numpy.float32), -1)
    per_sample = -ops.getitem(log_probs, (numpy.arange(len(ids)), ids))
    return {"mean": ops.mean, "sum": ops.sum}.get(reduction, lambda t: t)(per_sample)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32, numpy.float64])
def test_sparse_cross_entropy_bits_match_separate_nodes(dtype, reduction):
    rng = numpy.random.default_rng(3)
    x0 = (rng.standard_normal((37, 11)) * 4).astype(dtype)
    ids = rng.integers(0, 11, 37).astype(numpy.int32)
    ids[:5] = 7  # repeated classes
    fused_x, plain_x = Tensor(x0, requires_grad=True), Tensor(x0, requires_grad=True)
    fused = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction=reduction)(fused_x, Tensor(ids))
    plain = node_by_node(plain_x, ids, reduction)
    assert fused.dtype == plain.dtype == numpy.float32 and fused.shape == plain.shape
    numpy.testing.assert_array_equal(fused.data, plain.data)
    seed = rng.standard_normal(fused.shape).astype(numpy.float32)
    fused.backward(Tensor(seed))
    plain.backward(Tensor(seed))
    assert fused_x.grad.dtype == dtype
    numpy.testing.assert_array_equal(fused_x.grad.data, plain_x.grad.data)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_sparse_cross_entropy_gradient_check(reduction):
    rng = numpy.random.default_rng(4)
    ids = Tensor(rng.integers(0, 5, 6).astype(numpy.int64))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction=reduction)
    check_backward(
        lambda x: loss(x, ids), [rng.standard_normal((6, 5))], dtype=numpy.float32
    )  # float32 losses


def test_sparse_cross_entropy_is_one_node():
    x = Tensor(numpy.zeros((4, 3), numpy.float32), requires_grad=True)
    out = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")(
        x, Tensor(numpy.array([0, 1, 2, 0]))
    )
    assert type(out._ctx).__name__ == "SoftmaxCrossEntropy" and out._ctx.inputs[0] is x
