"""nn.RMSProp: MindSpore's rule (epsilon under the root, the learning rate inside the moment)
against a float64 re-implementation, PyTorch's RMSprop where the two rules meet, fp16
parameters through fp32 masters, a skipped loss-scaled step, and the argument checks."""
import numpy as np
import pytest

from helpers.optim import params
from minigrad import Tensor, nn


def _rule(w, grads, lr, decay, momentum, eps, centered):
    """The documented update, in float64, over a sequence of gradients."""
    w = w.astype(np.float64)
    s, m, mean = np.zeros_like(w), np.zeros_like(w), np.zeros_like(w)
    for g in grads:
        s = decay * s + (1 - decay) * g * g
        denominator = s
        if centered:
            mean = decay * mean + (1 - decay) * g
            denominator = s - mean * mean
        m = momentum * m + lr * g / np.sqrt(denominator + eps)
        w = w - m
    return w


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_rmsprop_follows_mindspore_rule(centered, momentum):
    (p,) = params((6,))
    start = p.asnumpy().copy()
    opt = nn.RMSProp([p], learning_rate=0.01, decay=0.8, momentum=momentum, epsilon=1e-6,
                     centered=centered)
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(6).astype(np.float32) for _ in range(4)]
    for g in grads:
        opt((Tensor(g),))
    expected = _rule(start, grads, 0.01, 0.8, momentum, 1e-6, centered)
    np.testing.assert_allclose(p.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    assert set(opt.state_dict()) - {"global_step", "learning_rate"} == (
        {"mean_square.p0", "moment.p0", "mean_grad.p0"} if centered
        else {"mean_square.p0", "moment.p0"})


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_without_momentum_meets_pytorch_when_epsilon_vanishes(centered):
    """Without momentum both rules are w -= lr g / sqrt(s); they differ only in where epsilon
    goes (under the root in MindSpore, outside in PyTorch), so with a negligible epsilon they
    agree."""
    torch = pytest.importorskip("torch")
    (p,) = params((5,))
    tp = torch.nn.Parameter(torch.tensor(p.asnumpy().astype(np.float64)))
    ours = nn.RMSProp([p], learning_rate=0.003, decay=0.99, epsilon=1e-30, centered=centered)
    theirs = torch.optim.RMSprop([tp], lr=0.003, alpha=0.99, eps=0.0, centered=centered)
    rng = np.random.default_rng(2)
    for _ in range(5):
        g = rng.standard_normal(5).astype(np.float32)
        ours((Tensor(g),))
        tp.grad = torch.tensor(g.astype(np.float64))
        theirs.step()
    np.testing.assert_allclose(p.asnumpy(), tp.detach().numpy(), rtol=1e-5)


def test_fp16_parameters_update_through_fp32_masters_and_a_skipped_step_changes_nothing():
    (p,) = params((4,), dtype=np.float16)
    net = nn.Dense(4, 1, has_bias=False)
    net.weight.set_data(Tensor(p.asnumpy().reshape(1, 4)))
    net.to_float(np.float16).cast_parameters(np.float16)
    opt = nn.RMSProp(net.trainable_params(), learning_rate=0.01)
    cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt,
                                            Tensor(np.float32(2.0 ** 10)))
    x, y = Tensor(np.ones((2, 4), np.float32)), Tensor(np.zeros((2, 1), np.float32))
    cell(x, y)
    assert net.weight.dtype == np.float16 and opt.global_step == 1
    weight, state = net.weight.asnumpy().copy(), opt.state_dict()
    _, overflow, _ = cell(Tensor(np.full((2, 4), np.inf, np.float32)), y)
    assert bool(overflow) and opt.global_step == 1
    np.testing.assert_array_equal(net.weight.asnumpy(), weight)
    for key, array in state.items():
        np.testing.assert_array_equal(opt.state_dict()[key], array)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(decay=-0.1), ValueError, "decay"),
    (dict(momentum=-1.0), ValueError, "momentum"),
    (dict(epsilon=0.0), ValueError, "epsilon"),
    (dict(centered=1), TypeError, "centered"),
    (dict(use_locking="no"), TypeError, "use_locking"),
    (dict(lr=0.1), TypeError, "learning_rate"),
])
def test_rmsprop_argument_checks(kwargs, error, match):
    with pytest.raises(error, match=match):
        nn.RMSProp(params((2,)), **kwargs)
