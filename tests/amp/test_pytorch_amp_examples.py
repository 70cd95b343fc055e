"""PyTorch's published mixed-precision examples, ported: the "Automatic Mixed Precision
examples" notes page (docs.pytorch.org/docs/stable/notes/amp_examples.html) and the "Automatic
Mixed Precision" recipe (docs.pytorch.org/tutorials/recipes/recipes/amp_recipe.html).

minigrad's PyTorch face is the scaler and autocast (``amp.GradScaler``, ``amp.autocast``,
``autograd.grad``, ``nn.utils.clip_grad_norm_``, Torch-style ``backward``/``step``/``zero_grad``),
not ``torch.nn``: each port builds its model with minigrad's cells, spells the optimizer
MindSpore's way (``nn.SGD(params, learning_rate=...)``), and runs on "cpu" where the page says
"cuda". Otherwise the loop is the page's, and the same loop runs in PyTorch 2.13 on the CPU
(autocast to float16, ``GradScaler("cpu")``) from the same weights: the parameters and the
scale trajectory must agree. The "Gradient penalty" example is ported in
``test_gradient_penalty.py``, the "Autocast and Custom Autograd Functions" ones in
``test_custom_fwd.py``.
"""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, amp, nn

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_blas_thread")  # whole training runs

IN, HIDDEN, OUT = 16, 32, 8
LR = 0.05


def make_model(num_layers=3, size=IN):
    """The recipe's make_model: Linear + ReLU layers, a last Linear (here in minigrad)."""
    layers = []
    for _ in range(num_layers - 1):
        layers.append(nn.Dense(size, size))
        layers.append(nn.ReLU())
    layers.append(nn.Dense(size, size))
    return nn.SequentialCell(layers)


def torch_twin(net):
    """A torch.nn.Sequential with ``net``'s Dense layers' very weights (float32)."""
    layers = []
    for cell in net.cells():
        if isinstance(cell, nn.Dense):
            linear = torch.nn.Linear(cell.in_channels, cell.out_channels)
            with torch.no_grad():
                linear.weight.copy_(torch.tensor(cell.weight.asnumpy()))
                linear.bias.copy_(torch.tensor(cell.bias.asnumpy()))
            layers.append(linear)
        else:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def data(num_batches=4, batch=8, size=IN, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, size)).astype(np.float32),
             rng.standard_normal((batch, size)).astype(np.float32)) for _ in range(num_batches)]


def assert_same(net, twin, rtol=2e-3, atol=2e-4):
    ours = [p.asnumpy() for p in net.trainable_params()]
    theirs = [p.detach().numpy() for p in twin.parameters()]
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def autocast_cpu(enabled=True):
    return torch.autocast(device_type="cpu", dtype=torch.float16, enabled=enabled)


def torch_step(twin, t_opt, t_scaler, input, target, enabled=True, max_norm=None):
    """The page's loop body in PyTorch: zero_grad, an autocast forward, a scaled backward,
    (unscale_ and clip_grad_norm_ to ``max_norm``,) step, update. Returns the loss and the
    clipped gradients' norm (None without clipping)."""
    t_opt.zero_grad()
    with autocast_cpu(enabled):
        t_loss = torch.nn.functional.mse_loss(twin(torch.tensor(input)), torch.tensor(target))
    t_scaler.scale(t_loss).backward()
    total = None
    if max_norm is not None:
        t_scaler.unscale_(t_opt)
        total = torch.nn.utils.clip_grad_norm_(twin.parameters(), max_norm)
    t_scaler.step(t_opt)
    t_scaler.update()
    return t_loss, total


# ---- the notes page --------------------------------------------------------------------------
def test_typical_mixed_precision_training():
    minigrad.set_seed(0)
    model = make_model()
    optimizer = nn.SGD(model.trainable_params(), learning_rate=LR)
    loss_fn = nn.MSELoss()
    twin = torch_twin(model)
    t_opt = torch.optim.SGD(twin.parameters(), lr=LR)

    scaler = amp.GradScaler("cpu")
    t_scaler = torch.amp.GradScaler("cpu")
    for epoch in range(2):
        for input, target in data():
            optimizer.zero_grad()
            with amp.autocast(device_type="cpu", dtype=minigrad.float16):
                output = model(Tensor(input))
                loss = loss_fn(output, Tensor(target))
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

            t_loss, _ = torch_step(twin, t_opt, t_scaler, input, target)
            assert output.dtype == minigrad.float16 and loss.dtype == minigrad.float32
            assert scaler.get_scale() == t_scaler.get_scale()
            np.testing.assert_allclose(float(loss.asnumpy()), t_loss.item(), rtol=2e-3)
    assert_same(model, twin)


def test_gradient_clipping_on_unscaled_gradients():
    minigrad.set_seed(1)
    model = make_model()
    optimizer = nn.SGD(model.trainable_params(), learning_rate=LR)
    twin = torch_twin(model)
    t_opt = torch.optim.SGD(twin.parameters(), lr=LR)
    scaler, t_scaler = amp.GradScaler("cpu"), torch.amp.GradScaler("cpu")
    max_norm = 0.05
    for input, target in data(seed=1):
        optimizer.zero_grad()
        with amp.autocast(device_type="cpu", dtype=minigrad.float16):
            output = model(Tensor(input))
            loss = nn.MSELoss()(output, Tensor(target))
        scaler.scale(loss).backward()

        # Unscales the gradients of optimizer's assigned params in-place
        scaler.unscale_(optimizer)

        # Since the gradients of optimizer's assigned params are unscaled, clips as usual:
        total = nn.utils.clip_grad_norm_(model.trainable_params(), max_norm)

        # optimizer's gradients are already unscaled, so scaler.step does not unscale them,
        # although it still skips optimizer.step() if the gradients contain infs or NaNs.
        scaler.step(optimizer)
        scaler.update()

        _, t_total = torch_step(twin, t_opt, t_scaler, input, target, max_norm=max_norm)
        np.testing.assert_allclose(float(total.asnumpy()), t_total.item(), rtol=2e-3)
    assert_same(model, twin)


def test_gradient_accumulation():
    minigrad.set_seed(2)
    model = make_model()
    optimizer = nn.SGD(model.trainable_params(), learning_rate=LR)
    twin = torch_twin(model)
    t_opt = torch.optim.SGD(twin.parameters(), lr=LR)
    scaler, t_scaler = amp.GradScaler("cpu"), torch.amp.GradScaler("cpu")
    iters_to_accumulate = 2
    for i, (input, target) in enumerate(data(seed=2)):
        with amp.autocast(device_type="cpu", dtype=minigrad.float16):
            output = model(Tensor(input))
            loss = nn.MSELoss()(output, Tensor(target))
            loss = loss / iters_to_accumulate

        # Accumulates scaled gradients.
        scaler.scale(loss).backward()

        if (i + 1) % iters_to_accumulate == 0:
            # may unscale_ here if desired (e.g., to allow clipping unscaled gradients)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()

        with autocast_cpu():
            t_loss = torch.nn.functional.mse_loss(twin(torch.tensor(input)),
                                                  torch.tensor(target)) / iters_to_accumulate
        t_scaler.scale(t_loss).backward()
        if (i + 1) % iters_to_accumulate == 0:
            t_scaler.step(t_opt)
            t_scaler.update()
            t_opt.zero_grad()
    assert_same(model, twin)


def test_multiple_models_losses_and_optimizers():
    minigrad.set_seed(4)
    model0, model1 = make_model(num_layers=2), make_model(num_layers=2)
    optimizer0 = nn.SGD(model0.trainable_params(), learning_rate=LR)
    optimizer1 = nn.SGD(model1.trainable_params(), learning_rate=LR)
    twin0, twin1 = torch_twin(model0), torch_twin(model1)
    t_opt0 = torch.optim.SGD(twin0.parameters(), lr=LR)
    t_opt1 = torch.optim.SGD(twin1.parameters(), lr=LR)
    loss_fn = nn.MSELoss()
    scaler, t_scaler = amp.GradScaler("cpu"), torch.amp.GradScaler("cpu")
    for input, target in data(seed=4):
        input, target = Tensor(input), Tensor(target)
        optimizer0.zero_grad()
        optimizer1.zero_grad()
        with amp.autocast(device_type="cpu", dtype=minigrad.float16):
            output0 = model0(input)
            output1 = model1(input)
            loss0 = loss_fn(2 * output0 + 3 * output1, target)
            loss1 = loss_fn(3 * output0 - 5 * output1, target)

        # (retain_graph here is unrelated to amp, it's present because in this
        # example, both backward() calls share some sections of graph.)
        scaler.scale(loss0).backward(retain_graph=True)
        scaler.scale(loss1).backward()

        # You can choose which optimizers receive explicit unscaling, if you
        # want to inspect or modify the gradients of the params they own.
        scaler.unscale_(optimizer0)

        scaler.step(optimizer0)
        scaler.step(optimizer1)

        scaler.update()

        x, y = torch.tensor(input.asnumpy()), torch.tensor(target.asnumpy())
        t_opt0.zero_grad()
        t_opt1.zero_grad()
        with autocast_cpu():
            o0, o1 = twin0(x), twin1(x)
            t_loss0 = torch.nn.functional.mse_loss(2 * o0 + 3 * o1, y)
            t_loss1 = torch.nn.functional.mse_loss(3 * o0 - 5 * o1, y)
        t_scaler.scale(t_loss0).backward(retain_graph=True)
        t_scaler.scale(t_loss1).backward()
        t_scaler.unscale_(t_opt0)
        t_scaler.step(t_opt0)
        t_scaler.step(t_opt1)
        t_scaler.update()
    assert_same(model0, twin0)
    assert_same(model1, twin1)


class MyModel(nn.Cell):
    """The notes' "Working with Multiple GPUs" model: autocast as a decorator of the forward
    pass (``construct`` here), so it holds in each thread or process that runs it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(IN, OUT)

    @amp.autocast(device_type="cpu")
    def construct(self, input):
        return self.fc(input)


def test_autocast_decorating_the_forward_pass():
    model = MyModel()
    output = model(Tensor(np.ones((2, IN), np.float32)))   # outside any autocast block
    assert output.dtype == minigrad.float16
    loss = nn.MSELoss()(output, Tensor(np.zeros((2, OUT), np.float32)))
    assert loss.dtype == minigrad.float32


# ---- the recipe ------------------------------------------------------------------------------
BATCH, EPOCHS = 16, 2


def _recipe_parts(seed):
    minigrad.set_seed(seed)
    net = make_model()
    opt = nn.SGD(net.trainable_params(), learning_rate=0.001 * 100)  # the recipe's 0.001, faster
    twin = torch_twin(net)
    t_opt = torch.optim.SGD(twin.parameters(), lr=0.001 * 100)
    return net, opt, twin, t_opt


def test_recipe_default_precision():
    net, opt, twin, t_opt = _recipe_parts(5)
    loss_fn = nn.MSELoss()
    for epoch in range(EPOCHS):
        for input, target in data(batch=BATCH, seed=5):
            output = net(Tensor(input))
            loss = loss_fn(output, Tensor(target))
            loss.backward()
            opt.step()
            opt.zero_grad()  # set_to_none=True here can modestly improve performance

            t_loss = torch.nn.functional.mse_loss(twin(torch.tensor(input)), torch.tensor(target))
            t_loss.backward()
            t_opt.step()
            t_opt.zero_grad()
    assert_same(net, twin, rtol=1e-5, atol=1e-6)


def test_recipe_adding_autocast():
    net, opt, _, _ = _recipe_parts(6)
    loss_fn = nn.MSELoss()
    for input, target in data(batch=BATCH, seed=6):
        # Runs the forward pass under ``autocast``.
        with amp.autocast(device_type="cpu", dtype=minigrad.float16):
            output = net(Tensor(input))
            # output is float16 because linear layers ``autocast`` to float16.
            assert output.dtype is minigrad.float16

            loss = loss_fn(output, Tensor(target))
            # loss is float32 because ``mse_loss`` layers ``autocast`` to float32.
            assert loss.dtype is minigrad.float32

        # Exits ``autocast`` before backward().
        # Backward passes under ``autocast`` are not recommended.
        # Backward ops run in the same ``dtype`` ``autocast`` chose for corresponding forward ops.
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in net.trainable_params())


@pytest.mark.parametrize("use_amp", [True, False])
def test_recipe_all_together_with_the_use_amp_switch(use_amp):
    net, opt, twin, t_opt = _recipe_parts(7)
    loss_fn = nn.MSELoss()
    scaler = amp.GradScaler("cpu", enabled=use_amp)
    t_scaler = torch.amp.GradScaler("cpu", enabled=use_amp)
    for epoch in range(EPOCHS):
        for input, target in data(batch=BATCH, seed=7):
            with amp.autocast(device_type="cpu", dtype=minigrad.float16, enabled=use_amp):
                output = net(Tensor(input))
                loss = loss_fn(output, Tensor(target))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()  # set_to_none=True here can modestly improve performance

            torch_step(twin, t_opt, t_scaler, input, target, enabled=use_amp)
    assert scaler.get_scale() == t_scaler.get_scale()
    assert_same(net, twin, *((2e-3, 2e-4) if use_amp else (1e-5, 1e-6)))


def test_recipe_inspecting_and_modifying_gradients():
    net, opt, twin, t_opt = _recipe_parts(8)
    scaler, t_scaler = amp.GradScaler("cpu"), torch.amp.GradScaler("cpu")
    for input, target in data(batch=BATCH, seed=8):
        with amp.autocast(device_type="cpu", dtype=minigrad.float16):
            output = net(Tensor(input))
            loss = nn.MSELoss()(output, Tensor(target))
        scaler.scale(loss).backward()

        # Unscales the gradients of optimizer's assigned params in-place
        scaler.unscale_(opt)

        # Since the gradients of optimizer's assigned params are now unscaled, clips as usual.
        # You may use the same value for max_norm here as you would without gradient scaling.
        nn.utils.clip_grad_norm_(net.trainable_params(), max_norm=0.1)

        scaler.step(opt)
        scaler.update()
        opt.zero_grad()

        torch_step(twin, t_opt, t_scaler, input, target, max_norm=0.1)
    assert_same(net, twin)


def test_recipe_saving_and_resuming(tmp_path):
    """The recipe saves ``net.state_dict()``, ``opt.state_dict()`` and ``scaler.state_dict()``
    in one dict. minigrad's Cell has no ``state_dict`` (a torch.nn name; the error says what to
    use): the edit saves the network and the optimizer with ``save_checkpoint`` and the
    scaler's state beside them (``append_dict``); resuming restores all three."""
    net, opt, _, _ = _recipe_parts(9)
    scaler = amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    for input, target in data(batch=BATCH, seed=9):
        with amp.autocast(device_type="cpu", dtype=minigrad.float16):
            loss = nn.MSELoss()(net(Tensor(input)), Tensor(target))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    with pytest.raises(AttributeError, match="save_checkpoint"):
        net.state_dict()
    path = str(tmp_path / "filename.ckpt")
    minigrad.save_checkpoint(net, path, optimizer=opt, append_dict=scaler.state_dict())

    net2, opt2, _, _ = _recipe_parts(10)   # other weights, to be overwritten
    scaler2 = amp.GradScaler("cpu")
    checkpoint = minigrad.load_checkpoint(path, net=net2, optimizer=opt2)
    scaler2.load_state_dict(checkpoint)
    assert scaler2.state_dict() == scaler.state_dict() and scaler2.get_scale() == 2.0 ** 12
    for p, q in zip(net.trainable_params(), net2.trainable_params()):
        np.testing.assert_array_equal(p.asnumpy(), q.asnumpy())


def test_recipe_inference_under_autocast():
    net, _, twin, _ = _recipe_parts(11)
    input = data(batch=BATCH, seed=11)[0][0]
    with amp.autocast(device_type="cpu", dtype=minigrad.float16):
        output = net(Tensor(input))
    with autocast_cpu():
        reference = twin(torch.tensor(input))
    assert output.dtype == minigrad.float16 and reference.dtype == torch.float16
    np.testing.assert_allclose(output.asnumpy().astype(np.float32),
                               reference.detach().numpy().astype(np.float32), rtol=1e-2,
                               atol=2e-3)
