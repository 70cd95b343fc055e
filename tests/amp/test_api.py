"""autocast, AMP levels, the TF face, GradScaler's protocol and serialization, reports."""
import numpy as np
import pytest

import minigrad
from minigrad import Model, Parameter, Tensor, amp, nn, ops
from minigrad import mixed_precision as mp
from minigrad.amp import GradScaler, autocast


def _x(shape=(4, 8), dtype=np.float32, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


# ---- autocast --------------------------------------------------------------------------------
def test_autocast_casts_matmul_to_fp16_and_fp32_ops_to_fp32():
    a, w = _x(), Parameter(_x((8, 3), seed=1), name="w")
    with autocast():
        y = ops.matmul(a, w)
        s = ops.softmax(y) if hasattr(ops, "softmax") else ops.exp(y)
        total = ops.sum(y)
    assert y.dtype == np.float16 and s.dtype == np.float32 and total.dtype == np.float32
    assert ops.matmul(a, w).dtype == np.float32       # off again outside
    total.backward()
    assert w.grad.dtype == np.float32                  # gradients return to fp32 parameters
    np.testing.assert_allclose(w.grad.asnumpy(), a.asnumpy().T @ np.ones((4, 3)), rtol=1e-2)


def test_autocast_decorator_disable_and_errors():
    @autocast()
    def f(a, b):
        with autocast(enabled=False):
            inner = ops.matmul(a, b)
        return ops.matmul(a, b), inner
    y, inner = f(_x(), _x((8, 3)))
    assert y.dtype == np.float16 and inner.dtype == np.float32
    assert minigrad._config.config.autocast_dtype is None
    with pytest.raises(TypeError, match="'dtype' must be float16 or bfloat16, but got float64"):
        autocast(np.float64)
    with pytest.raises(TypeError, match="'enabled' must be a bool"):
        autocast(enabled="yes")


# ---- AMP levels ------------------------------------------------------------------------------
class BNNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(8, 6)
        self.bn = nn.BatchNorm1d(6)
        self.out = nn.Dense(6, 3)

    def construct(self, x):
        return self.out(ops.relu(self.bn(self.fc(x))))


def _train(level, **kwargs):
    minigrad.set_seed(0)
    net = BNNet()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    train = amp.build_train_network(net, opt, nn.MSELoss(), level=level, **kwargs)
    x, y = _x((16, 8)), _x((16, 3), seed=2)
    outs = [train(x, y) for _ in range(30)]
    return net, opt, train, outs


def test_level_o2_fp16_network_fp32_batchnorm_dynamic_scale_master_weights():
    net, opt, train, outs = _train("O2")
    assert isinstance(train, nn.TrainOneStepWithLossScaleCell)
    assert isinstance(train.loss_scaling_manager, nn.DynamicLossScaleUpdateCell)
    assert net.fc.weight.dtype == np.float16 and net.bn.gamma.dtype == np.float32
    assert all(np.asarray(o[0].asnumpy()).dtype == np.float32 for o in outs)       # loss in fp32
    assert any("master." in k for k in opt.state_dict())                          # fp32 masters
    losses = [float(o[0]) for o in outs if not bool(o[1])]
    assert float(outs[0][2]) == 2.0 ** 24 and losses[-1] < losses[0]


def test_levels_o0_o1_o3_and_errors():
    net, _, train, outs = _train("O0")
    assert type(train) is nn.TrainOneStepCell and net.fc.weight.dtype == np.float32
    net, _, train, outs = _train("O1")
    assert net.fc.weight.dtype == np.float32 and float(outs[-1]) < float(outs[0])
    net, _, train, _ = _train("O3")
    assert type(train) is nn.TrainOneStepCell and net.bn.gamma.dtype == np.float16
    net, _, train, _ = _train("O3", loss_scale_manager=amp.FixedLossScaleManager(64.0))
    assert isinstance(train.loss_scaling_manager, nn.FixedLossScaleUpdateCell)
    opt = nn.SGD(BNNet().trainable_params(), 0.1)
    with pytest.raises(TypeError, match=r"build_train_network: level must be one of \['O0', 'O1', "
                                        r"'O2', 'O3', 'auto'\], got 2 \(int\)"):
        amp.build_train_network(BNNet(), opt, level=2)
    with pytest.raises(ValueError, match=r"level must be one of \[.*'auto'\], got 'O4'$"):
        amp.build_train_network(BNNet(), opt, level="O4")
    with pytest.raises(ValueError, match=r"level must be one of \['O0', 'O1', 'O2', 'O3'\] when "
                                         r"device_target is 'CPU' \('auto' means O2 on a GPU\), "
                                         r"got 'auto'"):
        amp.build_train_network(BNNet(), opt, level="auto")
    with pytest.raises(ValueError, match="unsupported argument 'foo'"):
        amp.build_train_network(BNNet(), opt, level="O2", foo=1)
    with pytest.raises(TypeError, match="'loss_scale_manager' must be a LossScaleManager"):
        amp.build_train_network(BNNet(), opt, level="O2", loss_scale_manager=128)


def test_model_with_dynamic_manager_and_loss_scale_monitor():
    from minigrad.train.callback import LossScaleMonitor
    minigrad.set_seed(0)
    net = BNNet()
    manager = amp.DynamicLossScaleManager(2 ** 20, 2, 4)
    model = Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9), amp_level="O2",
                  loss_scale_manager=manager)
    monitor = LossScaleMonitor()
    data = [(_x((16, 8), seed=i), _x((16, 3), seed=i + 9)) for i in range(12)]
    model.train(1, data, callbacks=[monitor])
    assert monitor.scales[0] == 2.0 ** 20 and len(monitor.scales) == 12
    # the host manager mirrors the cell's decisions
    assert manager.get_loss_scale() == float(model._train_network.scale_sense.data)


# ---- TF face ---------------------------------------------------------------------------------
def test_tf_loss_scale_get_config_and_optimizer():
    dyn = mp.DynamicLossScale(initial_loss_scale=2 ** 8, increment_period=5, multiplier=4.0)
    assert mp.DynamicLossScale.from_config(dyn.get_config()).get_config() == dyn.get_config()
    assert mp.get(dyn.get_config()).get_config() == dyn.get_config()
    assert mp.get(dyn) is dyn and mp.get(None) is None
    assert isinstance(mp.get(8), mp.FixedLossScale) and isinstance(mp.get(2.5), mp.FixedLossScale)
    assert float(mp.get("dynamic")().data) == 2.0 ** 15
    with pytest.raises(ValueError, match="Could not interpret loss scale identifier: 'static'"):
        mp.get("static")
    with pytest.raises(TypeError):
        mp.LossScale()

    net = nn.Dense(8, 2)
    lso = mp.LossScaleOptimizer(nn.SGD(net.trainable_params(), 0.1), dyn)
    scaled = lso.get_scaled_loss(lambda: Tensor(np.float32(2.0)))
    assert float(scaled()) == 512.0
    half = [Tensor(np.full(p.shape, 256.0, np.float16)) for p in lso.parameters]
    assert all(g.dtype == np.float32 and float(g.asnumpy().max()) == 1.0
               for g in lso.get_unscaled_gradients(half))
    assert float(half[0].asnumpy()[0, 0]) == 256.0 and half[0].dtype == np.float16
    grads = [Tensor(np.full(p.shape, 256.0, np.float32)) for p in lso.parameters]
    unscaled = lso.get_unscaled_gradients(grads)
    assert all(float(g.asnumpy().max()) == 1.0 for g in unscaled)
    assert float(grads[0].asnumpy()[0, 0]) == 256.0
    assert lso.apply_gradients(unscaled) is True
    bad = [Tensor(np.full(p.shape, np.nan, np.float32)) for p in lso.parameters]
    before = [p.asnumpy().copy() for p in lso.parameters]
    assert lso.apply_gradients(list(zip(bad, lso.parameters))) is False
    assert all((p.asnumpy() == b).all() for p, b in zip(lso.parameters, before))
    assert float(dyn().data) == 64.0 and lso.last_report.nan_params == ("weight", "bias")
    with pytest.raises(ValueError, match=r"no gradient for parameters \['bias'\]"):
        lso.apply_gradients([(unscaled[0], lso.parameters[0])])


# ---- GradScaler protocol ---------------------------------------------------------------------
def _setup():
    net = nn.Dense(4, 2)
    opt = nn.SGD(net.trainable_params(), 0.1)
    x = _x((3, 4))
    return net, opt, x


def test_grad_scaler_protocol_errors_like_pytorch():
    net, opt, x = _setup()
    scaler = GradScaler()
    scaler.scale(ops.sum(net(x))).backward()
    scaler.unscale_(opt)
    with pytest.raises(
        RuntimeError,
        match=r"unscale_\(\) has already been called on this optimizer since the last update\(\)",
    ):
        scaler.unscale_(opt)
    assert scaler.step(opt) is True
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)"):
        scaler.unscale_(opt)
    with pytest.raises(
        RuntimeError, match=r"step\(\) has already been called since the last update\(\)"
    ):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(AssertionError, match="No inf checks were recorded prior to update"):
        scaler.update()
    opt.zero_grad()
    with pytest.raises(AssertionError, match="No inf checks were recorded for this optimizer"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: None)
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        scaler.scale(3.0)


def test_grad_scaler_unscale_then_clip_state_dict_and_disabled():
    net, opt, x = _setup()
    scaler = GradScaler(init_scale=8.0, growth_interval=1)
    scaler.scale(ops.sum(net(x))).backward()
    scaler.unscale_(opt)
    np.testing.assert_allclose(net.bias.grad.asnumpy(), [3.0, 3.0])  # true gradient, clippable
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 16.0
    sd = scaler.state_dict()
    assert sd == {
        "scale": 16.0,
        "growth_factor": 2.0,
        "backoff_factor": 0.5,
        "growth_interval": 1,
        "_growth_tracker": 0,
    }
    other = GradScaler()
    other.load_state_dict(sd)
    assert other.state_dict() == sd
    with pytest.raises(RuntimeError, match="state dict is empty"):
        other.load_state_dict({})
    other.set_growth_factor(3.0)
    other.set_backoff_factor(0.25)
    other.set_growth_interval(7)
    assert (other.get_growth_factor(), other.get_backoff_factor(), other.get_growth_interval()) == (
        3.0,
        0.25,
        7,
    )
    scaler.update(new_scale=4.0)
    assert scaler.get_scale() == 4.0
    off = GradScaler(enabled=False)
    loss = ops.sum(net(x))
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    assert not off.is_enabled()


def test_grad_scaler_fp16_parameters_unscale_into_fp32():
    """Beyond PyTorch (which refuses fp16 gradients): a tiny true gradient survives the unscale."""
    w = Parameter(Tensor(np.ones(4, np.float16)), name="w")
    opt = nn.SGD([w], 1.0)
    scaler = GradScaler(init_scale=2.0**16)
    b = Tensor(np.full(4, 1e-4, np.float16))
    loss = ops.sum((w * b).astype(np.float32)) * 1e-4  # true gradient 1e-8: below fp16's 6e-8
    scaler.scale(loss).backward()
    scaler.step(opt)
    assert w.grad.dtype == np.float32
    np.testing.assert_allclose(w.grad.asnumpy(), 1e-8, rtol=1e-3)
    scaler.update()


# ---- report and underflow statistics ------------------------------------------------------------
def test_report_distinguishes_nonfinite_loss_and_tracks_underflow():
    net, opt, x = _setup()
    scaler = GradScaler(init_scale=4.0, track_underflow=True)
    loss = ops.sum(net(x)) * Tensor(np.float32(np.inf))
    with np.errstate(invalid="ignore"):
        scaler.scale(loss).backward()
    assert scaler.step(opt) is False
    scaler.update()
    r = scaler.last_report
    assert (
        r.skipped and r.reason == "nonfinite_loss" and (r.scale_before, r.scale_after) == (4.0, 2.0)
    )
    assert set(r.inf_params) | set(r.nan_params) == {"weight", "bias"}
    assert set(r.underflow) == {"weight", "bias"} and "skipped (nonfinite_loss)" in str(r)
    stats = amp.underflow_stats(["g"], [np.array([0.0, 1e-6, 1e-3, 5e-8, 1e-9], np.float32)])["g"]
    assert stats["zero"] == pytest.approx(0.4) and stats["subnormal"] == pytest.approx(0.4)
