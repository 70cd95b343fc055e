"""One THOR step equals the Kronecker-factored formula computed directly in float64.

For a batch-mean loss L = (1/N) Σ_n ℓ_n with δ = ∂ℓ_n/∂(layer output), the factors are
A = mean over rows of a aᵀ (rows: samples; samples x positions for a convolution; one-hot ids for
an embedding) and G = (1/N) Σ_n Σ_t δ_nt δ_ntᵀ; the update of the first step (momentum's v
starts at zero) is lr · (G + √λ I)⁻¹ · ∇W · (A + √λ I)⁻¹ (embedding: diag(A + √λ)⁻¹ ∇W G⁻¹),
or the block-diagonal version of both inverses when split_dim is smaller than the factor.
"""
import numpy
import pytest

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
