"""THOR's Monte-Carlo Fisher (fisher="mc"): G from the loss on labels sampled from the model,
checked against float64 formulas (one draw exactly, the expectation over draws), its arguments,
its cost (only on recording steps), the loss scale divided out under O2, and the
ill-conditioned regression where it needs fewer steps than the empirical Fisher."""
import math

import numpy
import pytest

import minigrad
from minigrad import Tensor, amp, nn
from minigrad.amp import FixedLossScaleManager
from minigrad.thor.fisher import sample_categorical, sample_gaussian

LR, DAMP, ZERO = (Tensor(numpy.float32(v)) for v in (0.05, 0.01, 0.0))


def mlp(seed=0, out=3):
    minigrad.set_seed(seed)
    # small initial weights (σ = 0.01, zero biases): the factors' traces settle in a few steps
    return nn.SequentialCell([nn.Dense(5, 7, "normal", "zeros", activation="tanh"),
                              nn.Dense(7, out, "normal", "zeros")])


def data(seed=0, n=24, classes=3):
    rng = numpy.random.default_rng(seed)
    x = rng.standard_normal((n, 5)).astype(numpy.float32)
    return (Tensor(x), Tensor(rng.integers(0, classes, n).astype(numpy.int32)),
            Tensor(rng.standard_normal((n, classes)).astype(numpy.float32)))


def forward64(net, x):
    """float64 forward of the 2-layer tanh MLP: output, and the Jacobian of the output wrt
    each layer's pre-activation output, per sample: [(N, out, 7), (N, out, out)]."""
    w1, b1, w2, b2 = (p.asnumpy().astype(numpy.float64) for p in net.trainable_params())
    h = numpy.tanh(x @ w1.T + b1)
    out = h @ w2.T + b2
    j1 = w2[None] * (1 - h * h)[:, None, :]
    j2 = numpy.broadcast_to(numpy.eye(out.shape[1]), (len(x),) + (out.shape[1],) * 2)
    return out, [j1, j2]


def softmax(z):
    e = numpy.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def g_from_output_grads(jacobians, delta):
    """G = (1/N) Σ_n (J_nᵀ δ_n)(J_nᵀ δ_n)ᵀ for per-sample output gradients δ (N, out)."""
    out = []
    for j in jacobians:
        d = numpy.einsum("noh,no->nh", j, delta)
        out.append(d.T @ d / len(delta))
    return out


def first_step(loss, labels, **options):
    net = mlp()
    opt = nn.thor(net, LR, DAMP, 0.9, frequency=2, fisher="mc", fisher_seed=7, **options)
    x = data()[0]
    nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)(x, labels)
    return net, opt, x


@pytest.mark.parametrize("sparse", [True, False])
def test_g_is_the_cross_entropy_formula_for_the_drawn_labels(sparse):
    _, ids, _ = data()
    labels = ids if sparse else Tensor(numpy.eye(3, dtype=numpy.float32)[ids.asnumpy()])
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=sparse, reduction="mean")
    reference = mlp()
    out, jacobians = forward64(reference, data()[0].asnumpy().astype(numpy.float64))
    _, opt, _ = first_step(loss, labels)
    drawn = sample_categorical(out.astype(numpy.float32), opt.sampler.rng(0), True,
                               numpy.float64)
    expected = g_from_output_grads(jacobians, softmax(out) - drawn)
    true_labels = numpy.eye(3)[ids.asnumpy()]
    empirical = g_from_output_grads(jacobians, softmax(out) - true_labels)
    for block, g, e in zip(opt.blocks, expected, empirical):
        assert block.G.dtype == numpy.float32
        numpy.testing.assert_allclose(block.G, g, rtol=2e-4, atol=1e-6)
        assert numpy.abs(g - e).max() > 0.05 * numpy.abs(g).max()  # not the true labels' G


@pytest.mark.parametrize("reduction, variance", [("mean", 1.5), ("sum", 0.5)])
def test_g_is_the_squared_error_formula_for_the_drawn_labels(reduction, variance):
    _, _, y = data()
    reference = mlp()
    out, jacobians = forward64(reference, data()[0].asnumpy().astype(numpy.float64))
    _, opt, _ = first_step(nn.MSELoss(reduction=reduction), y)
    drawn = sample_gaussian(out.astype(numpy.float32), opt.sampler.rng(0), variance,
                            numpy.float32).astype(numpy.float64)
    c = 1 / 3 if reduction == "mean" else 1.0
    # the Fisher of the loss trained: (1/N) Σ δ δᵀ for a mean, Σ δ δᵀ for a sum
    scale = len(out) if reduction == "sum" else 1
    expected = [scale * g for g in g_from_output_grads(jacobians, 2 * c * (out - drawn))]
    for block, g in zip(opt.blocks, expected):
        numpy.testing.assert_allclose(block.G, g, rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("kind", ["cross_entropy", "mse"])
def test_g_averaged_over_draws_is_the_true_fisher(kind):
    """With lr 0 every step records G at the same weights from new draws; their mean tends to
    E_ŷ[G] = (1/N) Σ_n J_nᵀ F_n J_n, F_n = diag(p) - p pᵀ (cross-entropy, classes enumerated)
    or (2/k)·I (MSE mean over k outputs), computed in float64."""
    net = mlp()
    x, ids, y = data()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean") \
        if kind == "cross_entropy" else nn.MSELoss()
    opt = nn.thor(net, ZERO, DAMP, 0.0, frequency=2, factor_frequency=1, fisher="mc",
                  fisher_seed=3)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)
    out, jacobians = forward64(net, x.asnumpy().astype(numpy.float64))
    if kind == "cross_entropy":
        p = softmax(out)
        f = numpy.einsum("nc,cd->ncd", p, numpy.eye(3)) - p[:, :, None] * p[:, None, :]
    else:
        f = numpy.broadcast_to(2 / 3 * numpy.eye(3), (len(out), 3, 3))
    true = [numpy.einsum("noh,nop,npk->hk", j, f, j) / len(out) for j in jacobians]
    draws = 400
    means = [numpy.zeros_like(t) for t in true]
    for _ in range(draws):
        train(x, ids if kind == "cross_entropy" else y)
        for m, block in zip(means, opt.blocks):
            m += block.G / draws
    for m, t in zip(means, true):
        assert numpy.abs(m - t).max() <= 0.05 * numpy.abs(t).max()


def test_sampled_pass_runs_only_on_recording_steps_and_update_uses_true_labels():
    net = mlp()
    x, ids, _ = data()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.thor(net, LR, DAMP, 0.9, frequency=3, fisher="mc", fisher_loss=loss)
    twin = mlp()
    twin_opt = nn.thor(twin, LR, DAMP, 0.9, frequency=3)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)
    twin_train = nn.TrainOneStepCell(nn.WithLossCell(twin, loss), twin_opt)
    sampled = []
    for _ in range(6):
        loss_value = train(x, ids).asnumpy()
        twin_loss = twin_train(x, ids).asnumpy()  # the shared loss Cell: no sampled pass here
        sampled.append(opt.last_report.seconds["sampling"] > 0)
        if opt.global_step == 1:
            assert numpy.array_equal(loss_value, twin_loss)
            for block, twin_block in zip(opt.blocks, twin_opt.blocks):
                numpy.testing.assert_array_equal(block.A, twin_block.A)
                assert not numpy.allclose(block.G, twin_block.G)
            # the biases take the plain update: the true labels' gradient, as the twin's
            for name in ("0.bias", "1.bias"):
                numpy.testing.assert_array_equal(net.parameters_dict()[name].asnumpy(),
                                                 twin.parameters_dict()[name].asnumpy())
    assert sampled == [True, False, False, True, False, False]
    assert "sampling" not in twin_opt.last_report.seconds


def test_o2_scale_is_divided_out_of_the_sampled_g():
    def g(level, manager, loss_scale):
        net = mlp()
        opt = nn.thor(net, LR, DAMP, 0.9, frequency=2, loss_scale=loss_scale, fisher="mc",
                      fisher_seed=5)
        train = amp.build_train_network(net, opt, nn.MSELoss(), level=level,
                                        loss_scale_manager=manager)
        train(data()[0], data()[2])
        return [b.G for b in opt.blocks]
    reference = g("O0", None, 1.0)
    fp16 = g("O2", FixedLossScaleManager(128.0, drop_overflow_update=False), 128.0)
    for g32, g16 in zip(reference, fp16):
        assert g16.dtype == numpy.float32
        assert numpy.abs(g16 - g32).max() <= 2e-2 * numpy.abs(g32).max()


# ---- arguments -------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, error, match", [
    ({"fisher": "exact"}, ValueError, "fisher"),
    ({"fisher": 1}, TypeError, "fisher"),
    ({"fisher_loss": nn.MSELoss()}, ValueError, "fisher='mc' only"),
    ({"fisher_seed": 3}, ValueError, "fisher='mc' only"),
    ({"fisher": "mc", "fisher_loss": nn.L1Loss()}, TypeError, "L1Loss"),
    ({"fisher": "mc", "fisher_loss": nn.MSELoss}, TypeError, "supported losses"),
    ({"fisher": "mc", "fisher_seed": -1}, ValueError,
     r"thor: fisher_seed must be a non-negative int or None, got -1"),
    ({"fisher_loss": "abc"}, TypeError, r"thor: fisher_loss must be a loss .*, got 'abc' \(str\)"),
    ({"fisher_seed": "abc"}, TypeError, r"thor: fisher_seed must be a non-negative int or None"),
    ({"fisher": "mc", "fisher_seed": 1.5}, TypeError, "fisher_seed"),
])
def test_arguments_are_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        nn.thor(mlp(), LR, DAMP, 0.9, **kwargs)


def test_unsupported_loss_of_the_train_cell_is_refused():
    opt = nn.thor(mlp(), LR, DAMP, 0.9, fisher="mc")
    with pytest.raises(TypeError, match="L1Loss"):
        nn.TrainOneStepCell(nn.WithLossCell(opt.blocks[0].layer, nn.L1Loss()), opt)


def test_unknown_loss_raises_at_the_first_step_and_changes_nothing():
    net = mlp()
    opt = nn.thor(net, LR, DAMP, 0.9, fisher="mc")
    loss = nn.MSELoss()
    x, _, y = data()
    grad_fn = minigrad.value_and_grad(lambda a, b: loss(net(a), b), None,
                                      net.trainable_params())
    before = [p.asnumpy().copy() for p in net.trainable_params()]
    _, grads = grad_fn(x, y)
    with pytest.raises(RuntimeError, match="no loss to sample is known"):
        opt(grads)
    assert opt.global_step == 0 and all(b.A is None for b in opt.blocks)
    assert all(numpy.array_equal(p.asnumpy(), b) for p, b in zip(net.trainable_params(), before))
    opt.sampler.use_loss(loss)  # or fisher_loss=loss: a custom loop then works
    _, grads = grad_fn(x, y)
    opt(grads)
    assert opt.global_step == 1 and all(b.G is not None for b in opt.blocks)


def test_same_seed_same_draws_other_seed_other_draws():
    def g(seed, fisher_seed=None):
        minigrad.set_seed(seed)
        net = mlp()
        opt = nn.thor(net, LR, DAMP, 0.9, frequency=2, fisher="mc", fisher_seed=fisher_seed)
        x, ids, _ = data()
        loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)(x, ids)
        return opt.blocks[1].G
    numpy.testing.assert_array_equal(g(0, 11), g(0, 11))
    assert not numpy.array_equal(g(0, 11), g(0, 12))


# ---- the ill-conditioned regression ----------------------------------------------------------
def regression_steps(fisher, lr, damping):
    rng = numpy.random.default_rng(0)
    x = (rng.standard_normal((512, 24)) * numpy.geomspace(1, 1 / math.sqrt(300), 24))
    y = (x @ rng.standard_normal((24, 4)) + 0.05 * rng.standard_normal((512, 4)))
    x, y = x.astype(numpy.float32), y.astype(numpy.float32)
    minigrad.set_seed(0)
    net = nn.Dense(24, 4, weight_init="zeros", has_bias=False)
    loss = nn.MSELoss()
    opt = nn.thor(net, Tensor(numpy.float32(lr)), Tensor(numpy.float32(damping)), 0.0,
                  frequency=5, fisher=fisher)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)
    order = numpy.random.default_rng(1000)
    for step in range(1, 201):
        if step % 8 == 1:
            perm = order.permutation(512)
        idx = perm[(step - 1) % 8 * 64:][:64]
        train(Tensor(x[idx]), Tensor(y[idx]))
        with minigrad.no_grad():
            if float(loss(net(Tensor(x)), Tensor(y)).asnumpy()) <= 0.005:
                return step
    return None


def test_mc_needs_fewer_steps_than_empirical_on_an_ill_conditioned_regression():
    """Each Fisher at its best point of a small grid (lr x damping, momentum 0, frequency 5):
    the empirical G shrinks with the residuals, the sampled one stays the loss's curvature."""
    empirical = [regression_steps("empirical", lr, d) for lr in (0.1, 0.2) for d in (1e-3, 1e-2)]
    mc = [regression_steps("mc", lr, d) for lr in (0.25, 0.5) for d in (1e-4, 1e-3)]
    best_empirical = min(s for s in empirical if s)
    best_mc = min(s for s in mc if s)
    assert best_mc <= 0.5 * best_empirical, (empirical, mc)


def test_trace_rule_runs_the_sampled_pass_only_on_the_steps_that_refresh():
    """The sampled pass runs inside the forward pass, before the step's traces exist: a refresh
    the trace rule asks for (from the training loss's traces) is served by the next step."""
    net = mlp()
    x, ids, _ = data()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.thor(net, LR, DAMP, 0.9, refresh="trace", omega1=0.05, fisher="mc", fisher_seed=1)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)
    sampled, refreshed = [], []
    for _ in range(6):
        train(x, ids)
        sampled.append(opt.last_report.seconds["sampling"] > 0)
        refreshed.append(opt.last_report.refresh)
    assert sampled == refreshed and sampled[0] and sum(sampled) <= 2
    layer = opt.blocks[0].layer
    assert layer.thor_record == "traces" and not layer.thor
    train(x * 5.0, ids)             # tr(A) jumps: the rule asks for a refresh ...
    entry = opt.last_report.layers["0.weight"]
    assert entry.delta > 0.5 and entry.action == "reuse" and opt.blocks[0].due
    assert opt.last_report.seconds["sampling"] == 0
    assert layer.thor_record == "factors"
    train(x * 5.0, ids)             # ... served by this step's sampled pass
    assert opt.last_report.layers["0.weight"].action == "refresh"
    assert opt.last_report.seconds["sampling"] > 0 and not opt.blocks[0].due
