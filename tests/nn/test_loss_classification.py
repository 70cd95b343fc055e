"""nn.CrossEntropyLoss and nn.BCELoss (MindSpore 2.x, PyTorch's definitions): values and
gradients against PyTorch 2.13 on the CPU, the gradient checker, fp16 inputs, the argument
checks."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.testing import check_backward

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)


def _torch_value_and_grad(loss, logits, labels, weight=None):
    x = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    out = loss(x, torch.tensor(labels))
    out.sum().backward()
    return out.detach().numpy(), x.grad.numpy()


def _ours(loss, logits, labels):
    x = Tensor(logits, requires_grad=True)
    out = loss(x, Tensor(labels))
    out.sum().backward()
    return out, x.grad.asnumpy()


CE_CASES = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(ignore_index=1),
    dict(weight=[0.5, 2.0, 1.0, 0.25]),
    dict(weight=[0.5, 2.0, 1.0, 0.25], ignore_index=2, label_smoothing=0.1),
    dict(label_smoothing=0.2, reduction="sum"),
]


@pytest.mark.parametrize("kwargs", CE_CASES, ids=str)
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5)], ids=["NC", "NCd"])
def test_cross_entropy_with_class_ids_matches_pytorch(kwargs, shape):
    logits = RNG.standard_normal(shape).astype(np.float32)
    ids = RNG.integers(0, 4, (shape[0],) + shape[2:]).astype(np.int64)
    weight = kwargs.get("weight")
    ours_kw = dict(kwargs, weight=None if weight is None else Tensor(np.float32(weight)))
    theirs_kw = dict(kwargs, weight=None if weight is None else torch.tensor(weight,
                                                                            dtype=torch.float64))
    value, grad = _ours(nn.CrossEntropyLoss(**ours_kw), logits, ids)
    ref_value, ref_grad = _torch_value_and_grad(torch.nn.CrossEntropyLoss(**theirs_kw),
                                                logits.astype(np.float64), ids)
    assert value.dtype == minigrad.float32
    np.testing.assert_allclose(value.asnumpy(), ref_value, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(grad, ref_grad, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs", [dict(), dict(label_smoothing=0.3),
                                    dict(weight=[1.0, 3.0, 0.5], reduction="sum")], ids=str)
def test_cross_entropy_with_class_probabilities_matches_pytorch(kwargs):
    logits = RNG.standard_normal((5, 3)).astype(np.float32)
    probs = RNG.dirichlet(np.ones(3), 5).astype(np.float32)
    weight = kwargs.get("weight")
    value, grad = _ours(nn.CrossEntropyLoss(**dict(
        kwargs, weight=None if weight is None else Tensor(np.float32(weight)))), logits, probs)
    ref_value, ref_grad = _torch_value_and_grad(torch.nn.CrossEntropyLoss(**dict(
        kwargs, weight=None if weight is None else torch.tensor(weight, dtype=torch.float64))),
        logits.astype(np.float64), probs.astype(np.float64))
    np.testing.assert_allclose(value.asnumpy(), ref_value, rtol=2e-6)
    np.testing.assert_allclose(grad, ref_grad, rtol=2e-5, atol=1e-7)


def test_cross_entropy_fp16_logits_compute_in_fp32_and_backprop_in_fp16():
    logits = RNG.standard_normal((4, 3)).astype(np.float16)
    ids = np.array([0, 2, 1, 1], np.int32)
    x = Tensor(logits, requires_grad=True)
    loss = nn.CrossEntropyLoss()(x, Tensor(ids))
    assert loss.dtype == minigrad.float32
    ref = nn.CrossEntropyLoss()(Tensor(logits.astype(np.float32)), Tensor(ids))
    assert float(loss.asnumpy()) == float(ref.asnumpy())
    loss.backward()
    assert x.grad.dtype == minigrad.float16


def test_cross_entropy_backward_passes_the_gradient_checker():
    ids = np.array([1, 0, 3, 2, 3])
    weight = Tensor(np.array([1.0, 0.5, 2.0, 1.5]))
    for kwargs in (dict(), dict(weight=weight, label_smoothing=0.1, ignore_index=0)):
        loss = nn.CrossEntropyLoss(**kwargs)
        check_backward(lambda x: loss(x, Tensor(ids)), [RNG.standard_normal((5, 4))],
                       dtype=np.float32)  # losses compute in float32


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(reduction="avg"), ValueError, "reduction"),
    (dict(label_smoothing=1.5), ValueError, "label_smoothing"),
    (dict(ignore_index=1.5), TypeError, "ignore_index"),
    (dict(weight=[1.0, 2.0]), TypeError, "weight"),
])
def test_cross_entropy_argument_checks(kwargs, error, match):
    with pytest.raises(error, match=match):
        nn.CrossEntropyLoss(**kwargs)


def test_cross_entropy_input_checks():
    loss = nn.CrossEntropyLoss()
    x = Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"class ids must be in \[0, 3\)"):
        loss(x, Tensor(np.array([0, 3])))
    with pytest.raises(ValueError, match="labels.shape"):
        loss(x, Tensor(np.array([0, 1, 2])))
    with pytest.raises(ValueError, match="weight.shape"):
        nn.CrossEntropyLoss(weight=Tensor(np.ones(2, np.float32)))(x, Tensor(np.array([0, 1])))
    with pytest.raises(TypeError, match="labels"):
        loss(x, [0, 1])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_matches_pytorch_edges_included(reduction, weighted):
    probs = np.array([[0.0, 0.2, 0.5], [0.9, 1.0, 0.999]], np.float32)
    targets = np.array([[0.0, 1.0, 0.5], [1.0, 0.0, 1.0]], np.float32)
    weight = np.array([0.5, 2.0, 1.0], np.float32)
    ours = nn.BCELoss(weight=Tensor(weight) if weighted else None, reduction=reduction)
    theirs = torch.nn.BCELoss(weight=torch.tensor(weight) if weighted else None,
                              reduction=reduction)
    x = Tensor(probs, requires_grad=True)
    value = ours(x, Tensor(targets))
    value.sum().backward()
    tx = torch.tensor(probs, requires_grad=True)
    ref = theirs(tx, torch.tensor(targets))
    ref.sum().backward()
    assert value.dtype == minigrad.float32
    np.testing.assert_allclose(value.asnumpy(), ref.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.asnumpy(), tx.grad.numpy(), rtol=1e-5)


def test_bce_backward_passes_the_gradient_checker_and_checks_shapes():
    targets = Tensor(RNG.uniform(0, 1, (4, 3)))
    check_backward(lambda p: nn.BCELoss()(p, targets), [RNG.uniform(0.05, 0.95, (4, 3))],
                   dtype=np.float32)
    with pytest.raises(ValueError, match="labels.shape"):
        nn.BCELoss()(Tensor(np.full((2, 3), 0.5, np.float32)), Tensor(np.ones((3,), np.float32)))
    with pytest.raises(TypeError, match="weight"):
        nn.BCELoss(weight=[1.0])
