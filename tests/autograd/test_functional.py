"""autograd.functional: vjp, jvp, vhp, hvp, jacobian and hessian against PyTorch's
``torch.autograd.functional`` (skipped without PyTorch) and against closed forms."""
import numpy
import pytest

from minigrad import Tensor, autograd, ops
from minigrad.autograd import functional as F

RNG = numpy.random.RandomState(0)
A, B, V = RNG.randn(2, 3), RNG.randn(3, 2), RNG.randn(2, 3)


def _mine(a, b):
    return ops.tanh(a @ b), (ops.exp(a) * a).sum()


def _theirs(torch):
    return lambda a, b: (torch.tanh(a @ b), (torch.exp(a) * a).sum())


def _scalar(a, b):
    return (ops.tanh(a @ b) ** 2).sum() + (a ** 3).sum()


def _scalar_theirs(torch):
    return lambda a, b: (torch.tanh(a @ b) ** 2).sum() + (a ** 3).sum()


def _close(got, expected):
    if isinstance(got, tuple):
        assert isinstance(expected, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            _close(g, e)
        return
    numpy.testing.assert_allclose(got.asnumpy(), expected.detach().numpy(), rtol=1e-10,
                                  atol=1e-12)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _args(torch, *arrays):
    return tuple(Tensor(a) for a in arrays), tuple(torch.tensor(a) for a in arrays)


def test_vjp_and_jvp_match_pytorch(torch):
    mine, theirs = _args(torch, A, B)
    seeds, their_seeds = _args(torch, RNG.randn(2, 2), numpy.float64(1.5))
    _close(F.vjp(_mine, mine, seeds), torch.autograd.functional.vjp(_theirs(torch), theirs,
                                                                    their_seeds))
    tangents, their_tangents = _args(torch, V, RNG.randn(3, 2))
    _close(F.jvp(_mine, mine, tangents), torch.autograd.functional.jvp(_theirs(torch), theirs,
                                                                       their_tangents))


def test_vhp_hvp_hessian_match_pytorch(torch):
    mine, theirs = _args(torch, A, B)
    vs, their_vs = _args(torch, V, RNG.randn(3, 2))
    f, tf = _scalar, _scalar_theirs(torch)
    _close(F.vhp(f, mine, vs), torch.autograd.functional.vhp(tf, theirs, their_vs))
    _close(F.hvp(f, mine, vs), torch.autograd.functional.hvp(tf, theirs, their_vs))
    _close(F.hessian(f, mine), torch.autograd.functional.hessian(tf, theirs))
    _close(F.jacobian(_mine, mine), torch.autograd.functional.jacobian(_theirs(torch), theirs))


def test_single_tensor_inputs_and_outputs():
    x = Tensor(numpy.array([1.0, 2.0, 3.0]))
    f = lambda t: (t ** 3).sum()  # noqa: E731   H = diag(6x)
    value, hv = F.hvp(f, x, Tensor(numpy.ones(3)))
    assert value.tolist() == 36.0 and hv.tolist() == [6.0, 12.0, 18.0]
    numpy.testing.assert_array_equal(F.hessian(f, x).asnumpy(), numpy.diag([6.0, 12.0, 18.0]))
    j = F.jacobian(lambda t: t * t, x)
    numpy.testing.assert_array_equal(j.asnumpy(), numpy.diag([2.0, 4.0, 6.0]))
    _, jv = F.jvp(lambda t: (t * t).sum(), x, Tensor(numpy.ones(3)))
    assert jv.tolist() == 12.0
    assert not value.requires_grad and not hv.requires_grad


def test_create_graph_results_are_differentiable():
    x = Tensor(numpy.array([1.0, 2.0]), requires_grad=True)
    _, hv = F.hvp(lambda t: (t ** 4).sum(), x, Tensor(numpy.ones(2)), create_graph=True)
    assert hv.requires_grad  # 12x², so d/dx Σ = 24x
    (g,) = autograd.grad(hv.sum(), x)
    assert g.tolist() == [24.0, 48.0]


def test_independent_inputs_get_zeros_or_raise_in_strict_mode():
    x, unused = Tensor(numpy.array([1.0, 2.0])), Tensor(numpy.array([5.0]))
    _, (gx, gu) = F.vjp(lambda a, b: (a * a).sum(), (x, unused))
    assert gx.tolist() == [2.0, 4.0] and gu.tolist() == [0.0]
    with pytest.raises(RuntimeError, match="independent of input 1"):
        F.vjp(lambda a, b: (a * a).sum(), (x, unused), strict=True)
    _, (hx, hu) = F.vhp(lambda a, b: (a ** 3).sum(), (x, unused), (x, unused))
    assert hx.tolist() == [6.0, 24.0] and hu.tolist() == [0.0]
    _, constant = F.vjp(lambda a: Tensor(numpy.ones(2)), x, Tensor(numpy.ones(2)))
    assert constant.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.vjp(lambda t: t * 2, x), ValueError, r"v is needed for a tensor of shape \(2,\)"),
    (lambda x: F.vjp(lambda t: t * 2, x, Tensor(numpy.ones(3))), ValueError,
     r"v\[0\] has shape \(3,\), expected \(2,\)"),
    (lambda x: F.vjp(lambda t: t * 2, x, numpy.ones(2)), TypeError, r"v\[0\] must be a Tensor"),
    (lambda x: F.vjp(lambda t: t * 2, [x]), TypeError, r"inputs\[0\] must be a Tensor, got list"),
    (lambda x: F.vjp(lambda t: 2.0, x), TypeError, "must return Tensors, got float"),
    (lambda x: F.hvp(lambda t: t * 2, x, x), ValueError, "one-element Tensor, got shape"),
    (lambda x: F.jacobian(lambda t: t, x, vectorize=True), ValueError, "vectorize must be False"),
    (lambda x: F.jacobian(lambda t: t, x, strategy="forward-mode"), ValueError,
     "strategy must be 'reverse-mode'"),
    (lambda x: F.hessian(lambda t: t.sum(), x, create_graph="yes"), TypeError,
     "create_graph must be a bool"),
])
def test_argument_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(Tensor(numpy.array([1.0, 2.0])))
