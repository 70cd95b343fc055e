"""bfloat16 training through the three faces: MindSpore's ``dtype=`` on ``auto_mixed_precision``
and ``build_train_network`` (and ``Model``), PyTorch's ``autocast(dtype=bfloat16)``, Keras's
``"mixed_bfloat16"`` policy. No loss scale by default (bf16 has float32's exponent range), and a
loss scale forced on changes no parameter bit: a power-of-two scale is exact in bf16."""
import numpy as np
import pytest

pytest.importorskip("ml_dtypes")

import minigrad  # noqa: E402
from helpers.models import TinyMLP, cross_entropy  # noqa: E402
from minigrad import Model, Tensor, amp, mixed_precision, nn, ops  # noqa: E402
from minigrad.nn import TrainOneStepCell, TrainOneStepWithLossScaleCell  # noqa: E402

BF16, F16, F32 = minigrad.bfloat16, np.dtype(np.float16), np.dtype(np.float32)


class _BNNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(8, 6)
        self.bn = nn.BatchNorm1d(6)
        self.out = nn.Dense(6, 3)

    def construct(self, x):
        return self.out(self.bn(self.fc(x)))


def _data(n=32, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, 8).astype(np.float32)
    return Tensor(x), Tensor(x[:, :3].argmax(1).astype(np.int32))


def _record_dtypes(net):
    seen = {}
    for name, cell in net.cells_and_names():
        if name:
            cell.register_forward_hook(lambda c, i, o, name=name: seen.__setitem__(name, o.dtype))
    return seen


def _params(net):
    return [p.asnumpy().copy() for p in net.get_parameters()]


# ---- PyTorch's face ---------------------------------------------------------------------------
def test_autocast_bf16_runs_matmuls_in_bf16_and_fragile_ops_in_fp32():
    a = Tensor(np.random.RandomState(1).randn(4, 8).astype(np.float32))
    w = Tensor(np.random.RandomState(2).randn(8, 3).astype(np.float32))
    for ctx in (amp.autocast("cpu", dtype=BF16), amp.autocast(dtype="bfloat16"),
                amp.autocast(device_type="cpu", dtype=BF16)):
        with ctx:
            y = ops.matmul(a, w)
            assert y.dtype == BF16
            assert ops.softmax(y).dtype == F32 and ops.sum(y).dtype == F32
    assert ops.matmul(a, w).dtype == F32  # off again
    with pytest.raises(TypeError, match="'dtype' must be float16 or bfloat16, but got float32"):
        amp.autocast(dtype=F32)


def test_autocast_bf16_training_step_and_forced_grad_scaler_change_nothing():
    """PyTorch trains bf16 autocast without a GradScaler; one forced on (a power-of-two scale,
    float32 gradients under autocast) gives the same parameters bit for bit."""
    x, y = _data()
    results = []
    for scaler in (None, amp.GradScaler(init_scale=2.0 ** 12)):
        minigrad.set_seed(0)
        net, loss_fn = TinyMLP(), cross_entropy()
        opt = nn.SGD(net.trainable_params(), 0.1)
        for _ in range(3):
            opt.zero_grad()
            with amp.autocast("cpu", dtype=BF16):
                loss = loss_fn(net(x), y)
            assert loss.dtype == F32
            if scaler is None:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
        results.append(_params(net))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


# ---- MindSpore's face ---------------------------------------------------------------------------
@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_auto_mixed_precision_takes_bf16(level):
    minigrad.set_seed(0)
    net = _BNNet()
    wrapped = amp.auto_mixed_precision(net, level, dtype=BF16)
    seen = _record_dtypes(net)  # after the level's own hooks: what the next cell receives
    out = wrapped(_data()[0])
    assert out.dtype == F32                                          # _OutputTo32
    assert seen["fc"] == BF16
    assert seen["bn"] == (F32 if level == "O1" else BF16)            # O2: fp32 inside, cast back
    assert all(p.dtype == F32 for p in net.get_parameters())


@pytest.mark.parametrize("dtype", [F32, "float64", "int8", 3])
def test_auto_mixed_precision_refuses_other_dtypes(dtype):
    net = _BNNet()
    with pytest.raises(ValueError, match="dtype must be float16 or bfloat16"):
        amp.auto_mixed_precision(net, "O2", dtype=dtype)
    assert net.fc.weight.dtype == F32


def test_build_train_network_bf16_o2_has_no_loss_scale_and_fp32_masters():
    minigrad.set_seed(0)
    net = _BNNet()
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    step = amp.build_train_network(net, opt, cross_entropy(), level="O2", dtype=BF16)
    assert type(step) is TrainOneStepCell                        # no loss scale by default
    assert net.fc.weight.dtype == BF16 and net.bn.gamma.dtype == F32
    x, y = _data()
    losses = [float(step(x, y).asnumpy()) for _ in range(20)]
    assert losses[-1] < losses[0]
    assert opt.slots.masters[0] is not None and opt.slots.masters[0].dtype == F32
    # fp16 keeps its default dynamic loss scale
    net16 = _BNNet()
    step16 = amp.build_train_network(net16, nn.SGD(net16.trainable_params(), 0.1),
                                     cross_entropy(), level="O2")
    assert isinstance(step16, TrainOneStepWithLossScaleCell)


def test_build_train_network_cast_model_type_bf16_and_refusals():
    net = _BNNet()
    amp.build_train_network(net, nn.SGD(net.trainable_params(), 0.1), cross_entropy(),
                            level="O3", cast_model_type="bfloat16")
    assert net.fc.weight.dtype == BF16 and net.bn.gamma.dtype == BF16
    net = _BNNet()
    with pytest.raises(ValueError, match="dtype must be float16 or bfloat16"):
        amp.build_train_network(net, nn.SGD(net.trainable_params(), 0.1), cross_entropy(),
                                level="O2", dtype="float32")
    assert net.fc.weight.dtype == F32


@pytest.mark.parametrize("manager", [lambda: amp.FixedLossScaleManager(2.0 ** 10, False),
                                     lambda: amp.DynamicLossScaleManager()],
                         ids=["fixed", "dynamic"])
def test_a_loss_scale_forced_on_bf16_changes_no_parameter_bit(manager):
    x, y = _data()
    results = []
    for kwargs in ({}, {"loss_scale_manager": manager()}):
        minigrad.set_seed(0)
        net = _BNNet()
        # a fixed scale without overflow checks is undone by the optimizer (MindSpore's rule)
        fixed = kwargs and kwargs["loss_scale_manager"].get_update_cell() is None
        opt = nn.Momentum(net.trainable_params(), 0.05, 0.9,
                          loss_scale=kwargs["loss_scale_manager"].get_loss_scale() if fixed
                          else 1.0)
        step = amp.build_train_network(net, opt, cross_entropy(), level="O2", dtype=BF16,
                                       **kwargs)
        for _ in range(5):
            step(x, y)
        results.append(_params(net))
    for a, b in zip(*results):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_model_takes_dtype():
    minigrad.set_seed(0)
    net = TinyMLP()
    seen = _record_dtypes(net)
    model = Model(net, cross_entropy(), nn.Momentum(net.trainable_params(), 0.05, 0.9),
                  amp_level="O2", dtype=BF16)
    x, y = _data()
    model.train_network(x, y)
    assert seen["fc1"] == BF16 and net.fc1.weight.dtype == BF16


# ---- Keras's face -----------------------------------------------------------------------------
def test_mixed_bfloat16_policy():
    policy = mixed_precision.Policy("mixed_bfloat16")
    assert (policy.compute_dtype, policy.variable_dtype) == ("bfloat16", "float32")
    assert policy.loss_scale is None and repr(policy) == '<Policy "mixed_bfloat16">'
    assert mixed_precision.Policy("bfloat16").variable_dtype == "bfloat16"
    mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        minigrad.set_seed(0)
        net = TinyMLP()
    finally:
        mixed_precision.set_global_policy("float32")
    assert net.fc1.weight.dtype == F32
    seen = _record_dtypes(net)
    x, y = _data()
    model = Model(net, cross_entropy(), nn.Momentum(net.trainable_params(), 0.05, 0.9))
    before = float(cross_entropy()(net(x), y).asnumpy())
    for _ in range(10):
        model.train_network(x, y)
    assert seen["fc1"] == BF16
    assert float(cross_entropy()(net(x), y).asnumpy()) < before


@pytest.mark.requires_native
def test_o2_bf16_step_is_the_same_with_and_without_the_native_conversion(monkeypatch):
    """Five bf16 O2 steps give the same losses and parameter bits whether ``_fp16_host.convert``
    runs its native bfloat16 twin (counted: both directions run) or ml_dtypes' ``astype``; the
    casts of the input, of the parameters at build time and of the masters are large enough."""
    from minigrad import _native

    def train():
        minigrad.set_seed(0)
        net = nn.SequentialCell([nn.Dense(64, 96), nn.ReLU(), nn.Dense(96, 10)])
        cell = amp.build_train_network(net, nn.Momentum(net.trainable_params(), 0.05, 0.9),
                                       cross_entropy(), level="O2", dtype=BF16)
        rng = np.random.default_rng(0)
        x = Tensor(rng.standard_normal((128, 64)).astype(F32))
        y = Tensor(rng.integers(0, 10, 128).astype(np.int32))
        losses = [float(cell(x, y).asnumpy()) for _ in range(5)]
        return losses, [p.data.copy() for p in net.trainable_params()]

    native = {pair: fn for pair, fn in (_native.loaded().conversions or {}).items()
              if BF16 in pair}
    if not native:
        pytest.skip("the host library has no bfloat16 conversion")
    calls = []
    monkeypatch.setattr(_native.loaded(), "conversions",
                        {pair: (lambda pair, fn: lambda *a: calls.append(pair) or fn(*a))(pair, fn)
                         for pair, fn in native.items()})
    fast = train()
    assert set(calls) == set(native), "the native bfloat16 conversion did not run both ways"
    monkeypatch.setattr(_native.loaded(), "conversions", None)
    plain = train()
    assert fast[0] == plain[0]
    for a, b in zip(fast[1], plain[1]):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
