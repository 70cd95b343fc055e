"""One THOR step equals the Kronecker-factored formula computed directly in float64.

For a batch-mean loss L = (1/N) Σ_n ℓ_n with δ = ∂ℓ_n/∂(layer output), the factors are
A = mean over rows of a aᵀ (rows: samples; samples x positions for a convolution; one-hot ids for
an embedding) and G = (1/N) Σ_n Σ_t δ_nt δ_ntᵀ; the update of the first step (momentum's v
starts at zero) is lr · (G + √λ I)⁻¹ · ∇W · (A + √λ I)⁻¹ (embedding: diag(A + √λ)⁻¹ ∇W G⁻¹),
or the block-diagonal version of both inverses when split_dim is smaller than the factor.
For a sum loss (reduction "sum", or "none": the train cell backpropagates the per-sample losses
with a seed of ones) G is the Fisher of that sum, Σ_n δ δᵀ, and ∇W is the sum's gradient.
"""
import math

import numpy
import pytest

import minigrad
from minigrad import Tensor, nn

LR, LAM = 0.5, 0.04


def blockdiag_inverse(matrix, size):
    """Inverse of the block-diagonal part of ``matrix`` with blocks of ``size`` (last shorter)."""
    out = numpy.zeros_like(matrix)
    for lo in range(0, matrix.shape[0], size):
        hi = min(lo + size, matrix.shape[0])
        out[lo:hi, lo:hi] = numpy.linalg.inv(matrix[lo:hi, lo:hi])
    return out


def one_step(net, x, target, **options):
    opt = nn.thor(net, Tensor(numpy.float32(LR)), Tensor(numpy.float32(LAM)), 0.9, frequency=2,
                  **options)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    train(Tensor(x), Tensor(target))
    return opt


@pytest.mark.parametrize("split_dim", [128, 2, 3])
def test_dense_step_is_the_dense_formula(split_dim):
    rng = numpy.random.default_rng(0)
    n, d_in, d_out = 6, 5, 4
    net = nn.Dense(d_in, d_out)
    w0, b0 = net.weight.asnumpy().astype(numpy.float64), net.bias.asnumpy().astype(numpy.float64)
    x = rng.standard_normal((n, d_in)).astype(numpy.float32)
    t = rng.standard_normal((n, d_out)).astype(numpy.float32)
    opt = one_step(net, x, t, split_dim=split_dim)

    x64 = x.astype(numpy.float64)
    y = x64 @ w0.T + b0
    delta = 2.0 * (y - t) / d_out               # per-sample dℓ_n/dy_n for MSE's mean
    a = x64.T @ x64 / n
    g = delta.T @ delta / n
    grad_w = delta.T @ x64 / n
    s = numpy.sqrt(LAM)
    step = blockdiag_inverse(g + s * numpy.eye(d_out), split_dim) @ grad_w \
        @ blockdiag_inverse(a + s * numpy.eye(d_in), split_dim)
    numpy.testing.assert_allclose(net.weight.asnumpy(), w0 - LR * step, rtol=1e-4, atol=1e-5)
    numpy.testing.assert_allclose(net.bias.asnumpy(), b0 - LR * delta.mean(0), rtol=1e-5,
                                  atol=1e-6)  # the bias takes the plain gradient
    assert opt.last_report.refreshed == ("weight",)


def conv_reference(x, w, b, stride, pads):
    """Patches (N, T, C·kh·kw) in the weight's (c, i, j) order and the output, by loops."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    top, bottom, left, right = pads
    xp = numpy.zeros((n, c, h + top + bottom, wd + left + right))
    xp[:, :, top:top + h, left:left + wd] = x
    ho = (xp.shape[2] - kh) // stride[0] + 1
    wo = (xp.shape[3] - kw) // stride[1] + 1
    patches = numpy.zeros((n, ho * wo, c * kh * kw))
    for i in range(ho):
        for j in range(wo):
            window = xp[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw]
            patches[:, i * wo + j] = window.reshape(n, -1)
    y = patches @ w.reshape(o, -1).T + b          # (N, T, O)
    return patches, y, (ho, wo)


@pytest.mark.parametrize("split_dim", [128, 5])
def test_conv_step_is_the_kfc_formula(split_dim):
    """Stride (2, 1), explicit asymmetric padding and a non-square 2x3 kernel."""
    rng = numpy.random.default_rng(1)
    n, c, o = 3, 2, 3
    pads = (1, 0, 1, 2)
    net = nn.Conv2d(c, o, (2, 3), stride=(2, 1), pad_mode="pad", padding=pads, has_bias=True)
    w0 = net.weight.asnumpy().astype(numpy.float64)
    b0 = net.bias.asnumpy().astype(numpy.float64)
    x = rng.standard_normal((n, c, 5, 4)).astype(numpy.float32)
    patches, y, (ho, wo) = conv_reference(x.astype(numpy.float64), w0, b0, (2, 1), pads)
    t = rng.standard_normal((n, o, ho, wo)).astype(numpy.float32)
    one_step(net, x, t, split_dim=split_dim)

    t_rows = t.transpose(0, 2, 3, 1).reshape(n, ho * wo, o)
    delta = 2.0 * (y - t_rows) / (o * ho * wo)   # (N, T, O)
    rows_p, rows_d = patches.reshape(-1, patches.shape[-1]), delta.reshape(-1, o)
    a = rows_p.T @ rows_p / (n * ho * wo)
    g = rows_d.T @ rows_d / n
    grad_w = rows_d.T @ rows_p / n
    s = numpy.sqrt(LAM)
    d = a.shape[0]
    step = blockdiag_inverse(g + s * numpy.eye(o), split_dim) @ grad_w \
        @ blockdiag_inverse(a + s * numpy.eye(d), split_dim)
    numpy.testing.assert_allclose(net.weight.asnumpy().reshape(o, -1),
                                  w0.reshape(o, -1) - LR * step, rtol=1e-4, atol=1e-5)


def test_embedding_step_is_the_diagonal_formula():
    rng = numpy.random.default_rng(2)
    vocab, emb, n, length = 7, 3, 5, 2
    net = nn.Embedding(vocab, emb)
    table0 = net.embedding_table.asnumpy().astype(numpy.float64)
    ids = rng.integers(0, vocab - 1, (n, length)).astype(numpy.int32)  # the last id unused
    t = rng.standard_normal((n, length, emb)).astype(numpy.float32)
    one_step(net, ids, t)

    onehot = numpy.eye(vocab)[ids.reshape(-1)]                # (R, vocab)
    y = onehot @ table0
    delta = 2.0 * (y - t.reshape(-1, emb)) / (length * emb)  # per sample, per position
    rows = n * length
    a = onehot.sum(0) / rows
    g = delta.T @ delta / n
    grad = onehot.T @ delta / n
    s = numpy.sqrt(LAM)
    step = (grad / (a + s)[:, None]) @ numpy.linalg.inv(g + s * numpy.eye(emb))
    numpy.testing.assert_allclose(net.embedding_table.asnumpy(), table0 - LR * step, rtol=1e-4,
                                  atol=1e-5)


def test_one_sample_dense_fisher_is_exactly_kronecker():
    """For one sample, vec(δ aᵀ) vec(δ aᵀ)ᵀ = (a aᵀ) ⊗ (δ δᵀ): THOR's A ⊗ G is the exact
    empirical Fisher of the weight (checked on the recorded factors)."""
    rng = numpy.random.default_rng(3)
    net = nn.Dense(3, 2, has_bias=False)
    x = rng.standard_normal((1, 3)).astype(numpy.float32)
    t = rng.standard_normal((1, 2)).astype(numpy.float32)
    w0 = net.weight.asnumpy().astype(numpy.float64)
    opt = one_step(net, x, t)
    block = opt.blocks[0]
    delta = 2.0 * (x.astype(numpy.float64) @ w0.T - t) / 2
    grad = numpy.outer(delta[0], x[0])
    fisher = numpy.outer(grad.T.reshape(-1), grad.T.reshape(-1))   # column-major vec
    numpy.testing.assert_allclose(numpy.kron(block.A, block.G), fisher, rtol=1e-4, atol=1e-6)


def dense_sum_reference(w0, x, t_ids):
    """float64 step of a cross-entropy Dense (N, 5) -> (N, 4) summed over the batch."""
    x64 = x.astype(numpy.float64)
    y = x64 @ w0.T
    p = numpy.exp(y - y.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    delta = p - numpy.eye(w0.shape[0])[t_ids]     # dℓ_n/dy_n
    a = x64.T @ x64 / len(x)
    g = delta.T @ delta                           # Σ_n δ δᵀ: the sum's Fisher
    grad_w = delta.T @ x64                        # the sum's gradient
    s = numpy.sqrt(LAM)
    return numpy.linalg.inv(g + s * numpy.eye(len(g))) @ grad_w \
        @ numpy.linalg.inv(a + s * numpy.eye(len(a)))


@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_sum_loss_step_is_the_formula_of_the_sum(reduction):
    """THOR reads the reduction of the train cell's loss (MindSpore's default is "none")."""
    rng = numpy.random.default_rng(4)
    minigrad.set_seed(0)
    net = nn.Dense(5, 4, has_bias=False)
    w0 = net.weight.asnumpy().astype(numpy.float64)
    x = rng.standard_normal((6, 5)).astype(numpy.float32)
    ids = rng.integers(0, 4, 6).astype(numpy.int32)
    opt = nn.thor(net, Tensor(numpy.float32(LR)), Tensor(numpy.float32(LAM)), 0.9, frequency=2)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction=reduction)
    nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)(Tensor(x), Tensor(ids))
    assert opt.loss_reduction == reduction
    numpy.testing.assert_allclose(net.weight.asnumpy(),
                                  w0 - LR * dense_sum_reference(w0, x, ids), rtol=1e-4, atol=1e-5)


def test_explicit_loss_reduction_in_a_custom_loop():
    """A ``value_and_grad`` loop has no loss Cell to read: ``loss_reduction="sum"`` says it; the
    default takes the sum for a mean and gives G N times the sum's Fisher."""
    rng = numpy.random.default_rng(5)
    x = rng.standard_normal((6, 5)).astype(numpy.float32)
    ids = rng.integers(0, 4, 6).astype(numpy.int32)
    steps = {}
    for reduction in ("sum", None):
        minigrad.set_seed(0)
        net = nn.Dense(5, 4, has_bias=False)
        w0 = net.weight.asnumpy().astype(numpy.float64)
        opt = nn.thor(net, Tensor(numpy.float32(LR)), Tensor(numpy.float32(LAM)), 0.9,
                      frequency=2, loss_reduction=reduction)
        loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="sum")
        grad_fn = minigrad.value_and_grad(lambda a, b: loss(net(a), b), None,
                                          net.trainable_params())
        _, grads = grad_fn(Tensor(x), Tensor(ids))
        opt(grads)
        steps[reduction] = (w0 - net.weight.asnumpy()) / LR
        g_sum = opt.blocks[0].G
    expected = dense_sum_reference(w0, x, ids)
    numpy.testing.assert_allclose(steps["sum"], expected, rtol=1e-4, atol=1e-5)
    assert not numpy.allclose(steps[None], expected, rtol=1e-2)
    y = x.astype(numpy.float64) @ w0.T
    p = numpy.exp(y - y.max(1, keepdims=True))
    delta = p / p.sum(1, keepdims=True) - numpy.eye(4)[ids]
    numpy.testing.assert_allclose(g_sum, len(x) * delta.T @ delta, rtol=1e-4)  # the default


def test_explicit_loss_reduction_wins_over_the_train_cells_loss():
    net = nn.Dense(5, 4)
    opt = nn.thor(net, Tensor(numpy.float32(LR)), Tensor(numpy.float32(LAM)), 0.9,
                  loss_reduction="mean")
    nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss(reduction="sum")), opt)
    assert opt.loss_reduction == "mean"
    other = nn.thor(nn.Dense(5, 4), Tensor(numpy.float32(LR)), Tensor(numpy.float32(LAM)), 0.9,
                    fisher="mc", fisher_loss=nn.MSELoss(reduction="sum"))
    assert other.loss_reduction == "sum"  # read from fisher_loss


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_layernorm_diagonal_rule_follows_the_reduction(reduction):
    """MindSpore's g / (g²/N + √λ) for a batch mean; g / (g²/N² + √λ) for a sum."""
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(6, 4), nn.LayerNorm((4,))])
    opt = nn.thor(net, Tensor(numpy.float32(LR)), Tensor(numpy.float32(LAM)), 0.0,
                  batch_size=16, loss_reduction=reduction)
    gamma = net.cells()[1].gamma
    before = gamma.asnumpy().astype(numpy.float64)
    grads = [numpy.full(p.shape, 0.5, numpy.float32) for p in opt.parameters]
    opt(grads)
    n = 16 if reduction == "mean" else 256
    expected = before - LR * 0.5 / (0.25 / n + math.sqrt(LAM))
    numpy.testing.assert_allclose(gamma.asnumpy(), expected, rtol=1e-5)


@pytest.mark.parametrize("value, error", [("batch", ValueError), (1, TypeError)])
def test_bad_loss_reduction_names_the_argument(value, error):
    with pytest.raises(error, match="loss_reduction"):
        nn.thor(nn.Dense(3, 2), Tensor(numpy.float32(LR)), Tensor(numpy.float32(LAM)), 0.9,
                loss_reduction=value)
