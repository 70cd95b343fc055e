"""Loss scaling with higher-order gradients: a gradient penalty (the norm of the loss's gradient,
added to the loss) through each face.

* PyTorch: the GradScaler recipe of PyTorch's "Automatic Mixed Precision examples" notes
  (``autograd.grad`` of the scaled loss with ``create_graph=True``, unscaled out of place,
  penalty, ``scaler.scale(loss).backward()``), ported line for line; weights and gradients
  match PyTorch 2.13 CPU within 1e-5 relative over several steps.
* MindSpore: the same step with a functional ``DynamicLossScaler`` (the inner gradient is
  ``minigrad.grad`` of the scaled loss inside the loss) and with
  ``TrainOneStepWithLossScaleCell`` (the inner gradient seeded with the cell's scale).
* TensorFlow: ``LossScaleOptimizer.get_scaled_loss`` / ``get_unscaled_gradients`` inside the
  loss.

In each, a scale that makes the inner gradient overflow float16 skips the step like any other
overflow: weights untouched, scale backed off.
"""
import numpy
import pytest

import minigrad
from minigrad import Tensor, amp, autograd, mixed_precision, nn, ops

LR = 0.05
STEPS = 4


def _net():
    minigrad.set_seed(11)
    return nn.SequentialCell([nn.Dense(4, 8), nn.Tanh(), nn.Dense(8, 2)])


def _batches():
    rng = numpy.random.RandomState(0)
    return [(Tensor(rng.randn(6, 4).astype(numpy.float32)),
             Tensor(rng.randn(6, 2).astype(numpy.float32))) for _ in range(STEPS)]


def _weights(net):
    return [p.asnumpy().copy() for p in net.trainable_params()]


def _torch_run(net, scaled):
    """The notes' recipe in PyTorch (fp32 on the CPU), from ``net``'s initial weights: the
    weights after each step. ``scaled=False`` is the same penalty without a GradScaler."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    with torch.no_grad():
        for mine, theirs in zip(net.trainable_params(), model.parameters()):
            theirs.copy_(torch.from_numpy(mine.asnumpy().copy()))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, enabled=scaled)
    history = []
    for x, y in _batches():
        input, target = torch.from_numpy(x.asnumpy()), torch.from_numpy(y.asnumpy())
        optimizer.zero_grad()
        output = model(input)
        loss = torch.nn.functional.mse_loss(output, target)
        scaled_grad_params = torch.autograd.grad(outputs=scaler.scale(loss),
                                                 inputs=model.parameters(), create_graph=True)
        inv_scale = 1. / scaler.get_scale()
        grad_params = [p * inv_scale for p in scaled_grad_params]
        grad_norm = 0
        for grad in grad_params:
            grad_norm += grad.pow(2).sum()
        grad_norm = grad_norm.sqrt()
        loss = loss + grad_norm
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        history.append([p.detach().numpy().copy() for p in model.parameters()])
    return history


def _grad_scaler_step(net, optimizer, scaler, x, y, autocast=False, inner=None):
    """One step of the notes' recipe, ported (``net.trainable_params()`` for
    ``model.parameters()``); ``inner`` (a list) receives the scaled inner gradients."""
    loss_fn = nn.MSELoss()
    optimizer.zero_grad()
    with amp.autocast(enabled=autocast):
        output = net(x)
        loss = loss_fn(output, y)
    scaled_grad_params = autograd.grad(outputs=scaler.scale(loss),
                                       inputs=net.trainable_params(), create_graph=True)
    if inner is not None:
        inner.extend(g.asnumpy() for g in scaled_grad_params)
    inv_scale = 1. / scaler.get_scale()
    grad_params = [p * inv_scale for p in scaled_grad_params]
    with amp.autocast(enabled=autocast):
        grad_norm = 0
        for grad in grad_params:
            grad_norm += grad.pow(2).sum()
        grad_norm = grad_norm.sqrt()
        loss = loss + grad_norm
    scaler.scale(loss).backward()
    applied = scaler.step(optimizer)
    scaler.update()
    return applied


def _close(history, expected):
    for step, (got, want) in enumerate(zip(history, expected)):
        for g, w in zip(got, want):
            numpy.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7,
                                          err_msg=f"weights after step {step + 1}")


def test_grad_scaler_recipe_matches_pytorch():
    net = _net()
    expected = _torch_run(net, scaled=True)
    optimizer = nn.SGD(net.trainable_params(), learning_rate=LR)
    scaler = amp.GradScaler("cpu", init_scale=1024.0)
    history = []
    for x, y in _batches():
        assert _grad_scaler_step(net, optimizer, scaler, x, y)
        history.append(_weights(net))
    _close(history, expected)
    # the penalty moves the weights: the same steps without it end elsewhere
    plain = _net()
    plain_optimizer = nn.SGD(plain.trainable_params(), learning_rate=LR)
    for x, y in _batches():
        grads = minigrad.grad(lambda a, b: nn.MSELoss()(plain(a), b), None,
                              plain.trainable_params())(x, y)
        plain_optimizer(grads)
    assert not numpy.allclose(_weights(plain)[0], history[-1][0], rtol=1e-4)


def test_grad_scaler_recipe_skips_a_step_whose_inner_gradient_overflows():
    net = _net()
    optimizer = nn.SGD(net.trainable_params(), learning_rate=LR)
    scaler = amp.GradScaler("cpu", init_scale=2.0 ** 24)  # float16 backward overflows at 2^24
    (x, y), *_ = _batches()
    before, inner = _weights(net), []
    assert not _grad_scaler_step(net, optimizer, scaler, x, y, autocast=True, inner=inner)
    assert not all(numpy.isfinite(g).all() for g in inner)  # the inner gradient overflowed
    report = scaler.last_report
    assert report.skipped and report.scale_after == 2.0 ** 23
    for b, w in zip(before, _weights(net)):
        numpy.testing.assert_array_equal(b, w)
    scaler.update(2.0 ** 8)
    assert _grad_scaler_step(net, optimizer, scaler, x, y, autocast=True)
    assert not numpy.array_equal(before[0], _weights(net)[0])


def _mindspore_step(net, optimizer, loss_scaler, x, y, autocast=False):
    """MindSpore 2.x's functional loss scaling, with the inner gradient of the scaled loss
    inside the loss (minigrad.grad nests in value_and_grad)."""
    loss_fn, weights = nn.MSELoss(), net.trainable_params()

    def scaled_loss(a, b):
        with amp.autocast(enabled=autocast):
            return loss_scaler.scale(loss_fn(net(a), b))

    def forward_fn(a, b):
        inner = loss_scaler.unscale(minigrad.grad(scaled_loss, None, weights)(a, b))
        penalty = ops.sqrt(sum((g * g).sum() for g in inner))
        return loss_scaler.scale(loss_scaler.unscale(scaled_loss(a, b)) + penalty)
    _, grads = minigrad.value_and_grad(forward_fn, None, weights)(x, y)
    is_finite = amp.all_finite(grads)
    if is_finite:
        optimizer(loss_scaler.unscale(grads))
    loss_scaler.adjust(is_finite)
    return bool(is_finite)


def test_mindspore_functional_scaler_matches_pytorch():
    net = _net()
    expected = _torch_run(net, scaled=False)
    optimizer = nn.SGD(net.trainable_params(), learning_rate=LR)
    loss_scaler = amp.DynamicLossScaler(scale_value=1024, scale_factor=2, scale_window=50)
    history = []
    for x, y in _batches():
        assert _mindspore_step(net, optimizer, loss_scaler, x, y)
        history.append(_weights(net))
    _close(history, expected)


def test_mindspore_functional_scaler_skips_an_inner_overflow():
    net = _net()
    optimizer = nn.SGD(net.trainable_params(), learning_rate=LR)
    loss_scaler = amp.DynamicLossScaler(scale_value=2 ** 24, scale_factor=2, scale_window=50)
    (x, y), *_ = _batches()
    before = _weights(net)
    assert not _mindspore_step(net, optimizer, loss_scaler, x, y, autocast=True)
    assert float(loss_scaler.scale_value.data) == 2.0 ** 23
    for b, w in zip(before, _weights(net)):
        numpy.testing.assert_array_equal(b, w)


class PenalizedLoss(nn.Cell):
    """loss + ‖∇loss‖, the inner gradient seeded with the train cell's scale (its
    ``scale_sense`` Parameter) and divided by it, as the outer one is."""

    def __init__(self, net, autocast=False):
        super().__init__(auto_prefix=False)
        self.net, self.loss_fn, self.autocast = net, nn.MSELoss(), autocast
        self.grad = ops.GradOperation(get_by_list=True, sens_param=True)
        self.scale = None  # the train cell's scale_sense, set once it exists

    def loss(self, x, y):
        with amp.autocast(enabled=self.autocast):
            return self.loss_fn(self.net(x), y)

    def construct(self, x, y):
        scaled = self.grad(self.loss, self.net.trainable_params())(x, y, self.scale)
        inverse = 1 / self.scale
        penalty = ops.sqrt(sum(((g * inverse) ** 2).sum() for g in scaled))
        return self.loss(x, y) + penalty


def _train_cell(net, scale, autocast=False):
    loss = PenalizedLoss(net, autocast)
    optimizer = nn.SGD(net.trainable_params(), learning_rate=LR)
    update = nn.DynamicLossScaleUpdateCell(scale, scale_factor=2, scale_window=50)
    cell = nn.TrainOneStepWithLossScaleCell(loss, optimizer, update)
    loss.scale = cell.scale_sense
    return cell


def test_mindspore_train_cell_matches_pytorch():
    net = _net()
    expected = _torch_run(net, scaled=False)
    cell = _train_cell(net, 1024.0)
    history = []
    for x, y in _batches():
        _, overflow, _ = cell(x, y)
        assert not bool(overflow)
        history.append(_weights(net))
    _close(history, expected)


def test_mindspore_train_cell_skips_an_inner_overflow():
    net = _net()
    cell = _train_cell(net, 2.0 ** 24, autocast=True)
    before = _weights(net)
    (x, y), *_ = _batches()
    _, overflow, scale = cell(x, y)
    assert bool(overflow) and float(scale.asnumpy()) == 2.0 ** 24
    assert cell.last_report.skipped and float(cell.scale_sense.asnumpy()) == 2.0 ** 23
    for b, w in zip(before, _weights(net)):
        numpy.testing.assert_array_equal(b, w)


def _tensorflow_step(net, opt, x, y, autocast=False):
    """TF's LossScaleOptimizer with the inner gradient of the scaled loss inside the loss."""
    loss_fn, weights = nn.MSELoss(), net.trainable_params()

    def loss(a, b):
        with amp.autocast(enabled=autocast):
            return loss_fn(net(a), b)

    def scaled_total(a, b):
        inner = minigrad.grad(lambda c, d: opt.get_scaled_loss(loss(c, d)), None, weights)(a, b)
        grads = opt.get_unscaled_gradients(inner)
        penalty = ops.sqrt(sum((g * g).sum() for g in grads))
        return opt.get_scaled_loss(loss(a, b) + penalty)
    _, scaled_grads = minigrad.value_and_grad(scaled_total, None, weights)(x, y)
    grads = opt.get_unscaled_gradients(scaled_grads)
    return opt.apply_gradients(zip(grads, weights))


def test_tensorflow_loss_scale_optimizer_matches_pytorch():
    net = _net()
    expected = _torch_run(net, scaled=False)
    opt = mixed_precision.LossScaleOptimizer(nn.SGD(net.trainable_params(), learning_rate=LR),
                                             mixed_precision.DynamicLossScale(1024.0))
    history = []
    for x, y in _batches():
        assert _tensorflow_step(net, opt, x, y)
        history.append(_weights(net))
    _close(history, expected)


def test_tensorflow_loss_scale_optimizer_skips_an_inner_overflow():
    net = _net()
    opt = mixed_precision.LossScaleOptimizer(nn.SGD(net.trainable_params(), learning_rate=LR),
                                             mixed_precision.DynamicLossScale(2.0 ** 24))
    before = _weights(net)
    (x, y), *_ = _batches()
    assert not _tensorflow_step(net, opt, x, y, autocast=True)
    assert opt.last_report.skipped and float(opt.loss_scale()) == 2.0 ** 23
    for b, w in zip(before, _weights(net)):
        numpy.testing.assert_array_equal(b, w)
