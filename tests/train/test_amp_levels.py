"""The AMP levels end to end through ``Model``: tiny networks of every layer kind learn at O0-O3
with the documented parameter and output dtypes, and a checkpointed run resumes bit for bit."""
import numpy as np
import pytest

import minigrad
from helpers.models import TinyMLP, cross_entropy
from minigrad import Model, Tensor, amp, nn
from minigrad.train.metrics import Accuracy


class _CNN(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, pad_mode="same")
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2, 2)
        self.flat = nn.Flatten()
        self.fc = nn.Dense(16, 3)

    def construct(self, x):
        return self.fc(self.flat(self.pool(self.relu(self.bn(self.conv(x))))))


class _LN(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(8, 16)
        self.ln = nn.LayerNorm((16,))
        self.fc2 = nn.Dense(16, 3)

    def construct(self, x):
        return self.fc2(self.ln(self.fc1(x)))


class _Emb(nn.Cell):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.flat = nn.Flatten()
        self.fc = nn.Dense(32, 3)

    def construct(self, x):
        return self.fc(self.flat(self.emb(x)))


class _Drop(TinyMLP):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(keep_prob=0.9)

    def construct(self, x):
        return self.fc2(self.drop(self.relu(self.fc1(x))))


def _task(kind, n=32):
    rng = np.random.RandomState(0)
    if kind == "emb":
        x = rng.randint(0, 10, size=(n, 4)).astype(np.int32)
        return Tensor(x), Tensor((x[:, 0] % 3).astype(np.int32))
    x = (
        rng.randn(n, 1, 4, 4).astype(np.float32)
        if kind == "cnn"
        else rng.randn(n, 8).astype(np.float32)
    )
    return Tensor(x), Tensor(x.reshape(n, -1)[:, :3].argmax(1).astype(np.int32))


_NETS = {
    "mlp": (TinyMLP, "x"),
    "cnn": (_CNN, "cnn"),
    "ln": (_LN, "x"),
    "emb": (_Emb, "emb"),
    "drop": (_Drop, "x"),
}


_NORM_PARAMS = ("bn.gamma", "bn.beta", "ln.gamma", "ln.beta")


@pytest.mark.parametrize("level", ["O0", "O1", "O2", "O3"])
@pytest.mark.parametrize("name", sorted(_NETS))
def test_matrix_levels_learn_with_the_documented_dtypes(name, level, recwarn):
    minigrad.set_seed(1)
    cls, kind = _NETS[name]
    net = cls()
    x, y = _task(kind)
    manager = None if level in ("O0", "O3") else amp.DynamicLossScaleManager(2.0**10, 2, 5)
    model = Model(
        net,
        cross_entropy(),
        nn.Adam(net.trainable_params(), 0.02),
        metrics={"acc": Accuracy()},
        amp_level=level,
        loss_scale_manager=manager,
    )
    losses = []
    for _ in range(12):
        out = model.train_network(x, y)
        loss = out[0] if isinstance(out, tuple) else out
        assert loss.dtype == np.float32
        losses.append(float(loss))
    assert losses[-1] < 0.9 * losses[0]
    for pname, p in net.parameters_and_names():
        if pname.endswith(("moving_mean", "moving_variance")) or p.dtype.kind != "f":
            assert p.dtype == np.float32 or p.dtype.kind != "f"
        elif level in ("O0", "O1") or (level == "O2" and pname in _NORM_PARAMS):
            assert p.dtype == np.float32, pname
        else:
            assert p.dtype == np.float16, pname
    pred = model.predict(x)
    assert pred.dtype == (np.float32 if level == "O0" else np.float16)
    assert model.eval([(x, y)])["acc"] > 0.4
    assert not [w for w in recwarn.list if issubclass(w.category, RuntimeWarning)]
    assert minigrad._config.config.autocast_dtype is None


@pytest.mark.parametrize(
    "name,level,opt_name", [("cnn", "O2", "adamw"), ("ln", "O1", "momentum"), ("emb", "O3", "adam")]
)
def test_checkpoint_resume_is_bit_identical(tmp_path, name, level, opt_name):
    from minigrad.train.callback import CheckpointConfig, ModelCheckpoint
    from minigrad.train.checkpoint import load_checkpoint

    def build():
        minigrad.set_seed(4)
        net = _NETS[name][0]()
        params = net.trainable_params()
        opt = {
            "adamw": lambda: nn.AdamWeightDecay(params, 0.01, weight_decay=0.01),
            "adam": lambda: nn.Adam(params, 0.01),
            "momentum": lambda: nn.Momentum(params, 0.05, 0.9),
        }[opt_name]()
        model = Model(
            net,
            cross_entropy(),
            opt,
            amp_level=level,
            loss_scale_manager=amp.DynamicLossScaleManager(2.0**14, 2, 2),
        )
        return model, opt

    x, y = _task(_NETS[name][1])
    data = [(x[i : i + 8], y[i : i + 8]) for i in range(0, 32, 8)]

    def snapshot(model, opt):
        state = {"p." + p.name: p.asnumpy().tobytes() for p in model.train_network.get_parameters()}
        for key, value in opt.state_dict().items():
            state["o." + key] = np.asarray(
                value.asnumpy() if hasattr(value, "asnumpy") else value
            ).tobytes()
        return state

    model, opt = build()
    ckpt = ModelCheckpoint("q", str(tmp_path), CheckpointConfig(save_checkpoint_steps=4))
    model.train(2, data, callbacks=[ckpt])
    saved = snapshot(model, opt)
    model.train(3, data, initial_epoch=2)
    reference = snapshot(model, opt)

    fresh, fresh_opt = build()
    load_checkpoint(str(tmp_path / "q-2_4.ckpt"), net=fresh.train_network, optimizer=fresh_opt)
    assert snapshot(fresh, fresh_opt) == saved
    fresh.train(3, data, initial_epoch=2)
    assert snapshot(fresh, fresh_opt) == reference
