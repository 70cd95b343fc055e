"""Checkpoints: round trips (network + optimizer), clear errors, all-or-nothing loading, atomic
writes."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy
import numpy as np
import pytest

import minigrad
import minigrad as mg
from helpers import REPO_ROOT
from minigrad import Parameter, Tensor, nn
from minigrad.optim import Adam, Momentum
from minigrad.train import load_checkpoint, load_param_into_net, save_checkpoint

REPO = str(REPO_ROOT)


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(8, 3)

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def _train_cell(net, optimizer):
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return nn.TrainOneStepCell(nn.WithLossCell(net, loss), optimizer)


def _batches(n, seed=0):
    rng = numpy.random.default_rng(seed)
    return [
        (
            Tensor(rng.normal(size=(6, 4)).astype(numpy.float32)),
            Tensor(rng.integers(0, 3, size=6).astype(numpy.int32)),
        )
        for _ in range(n)
    ]


def _snapshot(net):
    return {p.name: p.asnumpy().copy() for p in net.get_parameters()}


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert numpy.array_equal(a[k], b[k]), k


# ---- round trips --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda params: Momentum(params, 0.1, 0.9, use_nesterov=True),
        lambda params: Adam(params, 0.01),
    ],
    ids=["momentum", "adam"],
)
def test_resuming_from_a_checkpoint_continues_bit_identically(tmp_path, make_optimizer):
    minigrad.set_seed(0)
    net = Net()
    optimizer = make_optimizer(net.trainable_params())
    step = _train_cell(net, optimizer)
    batches = _batches(6)
    for x, y in batches[:3]:
        step(x, y)
    path = save_checkpoint(net, tmp_path / "mid", optimizer=optimizer, append_dict={"epoch": 3})
    assert path.endswith("mid.ckpt")
    for x, y in batches[3:]:
        step(x, y)
    expected = _snapshot(net)

    minigrad.set_seed(1)  # a different initialisation, overwritten by the checkpoint
    net2 = Net()
    optimizer2 = make_optimizer(net2.trainable_params())
    params = load_checkpoint(path, net=net2, optimizer=optimizer2)
    assert int(params["epoch"].asnumpy()) == 3 and optimizer2.global_step == 3
    step2 = _train_cell(net2, optimizer2)
    for x, y in batches[3:]:
        step2(x, y)
    _assert_same(_snapshot(net2), expected)


def test_save_forms_and_filter_prefix(tmp_path):
    weights = [
        {"name": "a.w", "data": Tensor(numpy.ones((2, 2), numpy.float16))},
        {"name": "b.w", "data": numpy.arange(3)},
    ]
    path = save_checkpoint(weights, str(tmp_path / "list.ckpt"))
    loaded = load_checkpoint(path)
    assert loaded["a.w"].dtype == numpy.float16 and isinstance(loaded["a.w"], Parameter)
    assert loaded["b.w"].asnumpy().tolist() == [0, 1, 2]
    assert list(load_checkpoint(path, filter_prefix="a.")) == ["b.w"]
    assert list(load_checkpoint(path, filter_prefix=["a.", "b"])) == []
    with pytest.raises(TypeError, match=r"save_obj\[0\]"):
        save_checkpoint([{"name": "x"}], tmp_path / "bad")
    with pytest.raises(ValueError, match="duplicate"):
        save_checkpoint(weights, tmp_path / "dup", append_dict={"a.w": 1})
    with pytest.raises(TypeError, match="append_dict"):
        save_checkpoint(weights, tmp_path / "dup", append_dict={"s": "text"})


def test_no_optimizer_state_in_file(tmp_path):
    net = Net()
    path = save_checkpoint(net, tmp_path / "net")
    with pytest.raises(ValueError, match="no optimizer state"):
        load_checkpoint(path, net=net, optimizer=Momentum(net.trainable_params(), 0.1, 0.9))


# ---- mismatches: clear errors, nothing changed ---------------------------------------------------
def test_shape_and_dtype_mismatch_names_both_and_changes_nothing():
    net = Net()
    before = _snapshot(net)
    good = {name: Parameter(value + 1.0, name=name) for name, value in before.items()}
    bad = dict(good)
    bad["fc2.weight"] = Parameter(numpy.zeros((8, 3), numpy.float32))
    bad["fc1.bias"] = Parameter(numpy.zeros(8, numpy.int32))
    with pytest.raises(ValueError) as info:
        load_param_into_net(net, bad)
    message = str(info.value)
    assert "'fc2.weight': checkpoint shape (8, 3) != network shape (3, 8)" in message
    assert "'fc1.bias': checkpoint dtype int32 != network dtype float32" in message
    _assert_same(_snapshot(net), before)  # fc1.weight was fine, but nothing was assigned
    assert load_param_into_net(net, good) == ([], [])
    _assert_same(_snapshot(net), {k: v + 1.0 for k, v in before.items()})


def test_strict_and_lenient_loading():
    net = Net()
    values = {name: value * 0 + 2 for name, value in _snapshot(net).items()}
    partial = {k: v for k, v in values.items() if k != "fc2.bias"}
    with pytest.warns(UserWarning, match=r"network parameters not loaded: \['fc2.bias'\]"):
        assert load_param_into_net(net, partial) == (["fc2.bias"], [])
    with pytest.raises(
        ValueError,
        match=r"strict_load=True: network parameters missing from the "
        r"checkpoint: \['fc2.bias'\]",
    ):
        load_param_into_net(net, partial, strict_load=True)
    # float64 values load into float32 parameters unless strict; a dotted prefix is tolerated
    prefixed = {"network." + k: v.astype(numpy.float64) for k, v in values.items()}
    assert load_param_into_net(net, prefixed) == ([], [])
    with pytest.raises(ValueError, match="dtype float64 != network dtype float32"):
        load_param_into_net(
            net, {k: v.astype(numpy.float64) for k, v in values.items()}, strict_load=True
        )
    with pytest.raises(TypeError, match="parameter_dict must be a dict"):
        load_param_into_net(net, [1])


def test_bad_optimizer_state_leaves_network_untouched(tmp_path):
    net = Net()
    optimizer = Momentum(net.trainable_params(), 0.1, 0.9)
    _train_cell(net, optimizer)(*_batches(1)[0])
    path = save_checkpoint(net, tmp_path / "a", optimizer=optimizer)
    other = Net()
    before = _snapshot(other)
    wrong = Adam(other.trainable_params(), 0.1)  # no 'moments' slot: its load_state_dict refuses
    with pytest.raises(ValueError):
        load_checkpoint(path, net=other, optimizer=wrong)
    _assert_same(_snapshot(other), before)


# ---- damaged files ------------------------------------------------------------------------------
def _damage(path, how):
    data = bytearray(open(path, "rb").read())
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "bitflip":
        data[len(data) // 3] ^= 0xFF  # inside an array: the zip CRC catches it
    elif how == "garbage":
        data = bytearray(b"not a checkpoint at all" * 10)
    elif how == "empty":
        data = bytearray()
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("how", ["truncated", "bitflip", "garbage", "empty"])
def test_damaged_file_gives_clear_error_and_network_is_untouched(tmp_path, how):
    net = Net()
    path = save_checkpoint(Net(), tmp_path / "ckpt")
    _damage(path, how)
    before = _snapshot(net)
    with pytest.raises(
        ValueError, match=r"checkpoint file .*ckpt\.ckpt' is truncated or corrupt"
    ) as info:
        load_checkpoint(path, net=net)
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no zipfile traceback
    _assert_same(_snapshot(net), before)


def test_missing_and_foreign_files(tmp_path):
    with pytest.raises(ValueError, match=r"load_checkpoint: ckpt_file_name must be the path of a "
                       r"checkpoint file that exists, got '.*nope\.ckpt'"):
        load_checkpoint(tmp_path / "nope.ckpt")
    foreign = tmp_path / "foreign.npz"
    numpy.savez(foreign, w=numpy.ones(3))
    with pytest.raises(ValueError, match="is not a minigrad checkpoint"):
        load_checkpoint(foreign)


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    net = Net()
    path = save_checkpoint(net, tmp_path / "keep")
    old = open(path, "rb").read()

    def broken_savez(f, **arrays):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(numpy, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(Net(), path)
    assert open(path, "rb").read() == old and os.listdir(tmp_path) == ["keep.ckpt"]


# ---- killed in the middle of a save --------------------------------------------------------------
_WRITER = textwrap.dedent("""
    import sys
    import numpy
    from minigrad.train import save_checkpoint
    path = sys.argv[1]
    def content(value):  # ~16 MB, so that a kill often lands inside a write
        return [{"name": f"w{i}", "data": numpy.full(1 << 20, value, numpy.float32)}
                for i in range(4)]
    save_checkpoint(content(0.0), path, append_dict={"version": 0})
    print("ready", flush=True)
    version = 0
    while True:
        version += 1
        save_checkpoint(content(float(version)), path, append_dict={"version": version})
""")


def test_sigkill_during_save_never_leaves_a_corrupt_checkpoint(tmp_path):
    rng = random.Random(1234)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    target = str(tmp_path / "model.ckpt")
    for attempt in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, target], stdout=subprocess.PIPE, env=env
        )
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.02, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        loaded = load_checkpoint(target)  # must load: the old or the new content, never a mixture
        version = int(loaded.pop("version").asnumpy())
        assert sorted(loaded) == ["w0", "w1", "w2", "w3"]
        for p in loaded.values():
            assert p.shape == (1 << 20,) and numpy.all(p.asnumpy() == version)
        leftovers = [f for f in os.listdir(tmp_path) if f != "model.ckpt"]
        assert all(f.startswith(".model.ckpt.") and f.endswith(".tmp") for f in leftovers), (
            leftovers
        )


def test_checkpoint_functions_name_bad_arguments(tmp_path):
    net = nn.Dense(3, 2)
    with pytest.raises(TypeError, match=r"append_dict must be a dict.*list"):
        save_checkpoint(net, tmp_path / "a", append_dict=[1])
    assert os.listdir(tmp_path) == []
    path = save_checkpoint(net, tmp_path / "b")
    with pytest.raises(TypeError, match=r"filter_prefix must be a str or a tuple or list of "
                       r"non-empty strs, got 5 \(int\)"):
        load_checkpoint(path, filter_prefix=5)
    with pytest.raises(TypeError, match=r"filter_prefix must be a str or a tuple or list of "
                       r"non-empty strs, got \[1\]"):
        load_checkpoint(path, filter_prefix=[1])
    with pytest.raises(TypeError, match=r"'net' must be a Cell.*str"):
        load_checkpoint(path, net="net")
    with pytest.raises(TypeError, match=r"'net' must be a Cell.*str"):
        load_param_into_net("net", {})
    with pytest.raises(ValueError, match=r"load_checkpoint: filter_prefix must be a str or a "
                       r"tuple or list of non-empty strs, each once, got \['fc', ''\]"):
        load_checkpoint(path, filter_prefix=["fc", ""])
    with pytest.raises(ValueError, match=r"filter_prefix must be a str or a non-empty tuple or "
                       r"list of non-empty strs, got \[\]"):
        load_checkpoint(path, filter_prefix=[])
    with pytest.raises(TypeError, match=r"load_checkpoint: strict_load must be a bool, got 1 "
                       r"\(int\)"):
        load_checkpoint(path, net=net, strict_load=1)
    with pytest.raises(TypeError, match=r"load_checkpoint: optimizer must be an Optimizer or "
                       r"None, got 'sgd' \(str\)"):
        load_checkpoint(path, optimizer="sgd")
    with pytest.raises(TypeError, match=r"load_param_into_net: strict_load must be a bool, got "
                       r"'yes' \(str\)"):
        load_param_into_net(net, {"weight": numpy.ones((2, 3))}, strict_load="yes")
    with pytest.raises(TypeError, match=r"save_checkpoint: optimizer must be an Optimizer or "
                       r"None, got 'sgd' \(str\)"):
        save_checkpoint(net, tmp_path / "c", optimizer="sgd")
    with pytest.raises(ValueError, match=r"save_checkpoint: save_obj must be a Cell, a non-empty "
                       r"list of \{'name', 'data'\} dicts or a non-empty dict, got \[\]"):
        save_checkpoint([], tmp_path / "d")
    assert sorted(os.listdir(tmp_path)) == ["b.ckpt"]  # a refused save writes nothing


class _TwoDense(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(2, 2)
        self.head = nn.SequentialCell([nn.Dense(2, 2)])


def test_one_checkpoint_entry_never_loads_into_two_parameters():
    # the dotted-suffix fallback matched each parameter against the entries separately, so the
    # single entry 'weight' went into both fc.weight and head.0.weight, silently; an entry that
    # several parameters (or one exactly-named parameter and another by suffix) would share is
    # ambiguous: it is loaded into none of the suffix matches; when that leaves the whole
    # checkpoint unmatched, loading raises and the network is unchanged
    net = _TwoDense()
    before = {n: p.asnumpy().copy() for n, p in net.parameters_and_names()}
    with pytest.raises(
        ValueError,
        match=r"no parameter of the network matches the checkpoint: "
        r"the network has \['fc.weight', 'fc.bias', "
        r"'head.0.weight', 'head.0.bias'\]",
    ):
        mg.train.load_param_into_net(net, {"weight": np.full((2, 2), 7, np.float32)})
    for n, p in net.parameters_and_names():
        np.testing.assert_array_equal(p.asnumpy(), before[n])

    class Nested(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(2, 2)
            self.inner = _TwoDense()

    net = Nested()
    old_inner = net.inner.fc.weight.asnumpy().copy()
    with pytest.warns(UserWarning, match="not loaded"):
        not_loaded, _ = mg.train.load_param_into_net(
            net, {"fc.weight": np.full((2, 2), 3, np.float32)}
        )
    np.testing.assert_array_equal(net.fc.weight.asnumpy(), np.full((2, 2), 3))
    np.testing.assert_array_equal(net.inner.fc.weight.asnumpy(), old_inner)
    assert "inner.fc.weight" in not_loaded
    # a unique renamed entry still loads by suffix
    net = _TwoDense()
    with pytest.warns(UserWarning, match="not loaded"):
        mg.train.load_param_into_net(net, {"net.head.0.bias": np.full(2, 5, np.float32)})
    np.testing.assert_array_equal(net.head[0].bias.asnumpy(), [5, 5])


def test_load_checkpoint_of_a_directory_says_it_is_a_directory(tmp_path):
    with pytest.raises((ValueError, IsADirectoryError), match="(?i)directory|folder"):
        minigrad.load_checkpoint(str(tmp_path))


@pytest.mark.parametrize("path, error, words", [
    (None, TypeError, "must be a non-empty str or os.PathLike path, got None (NoneType)"),
    (0, TypeError, "must be a non-empty str or os.PathLike path, got 0 (int)"),
    ("", ValueError, "must be a non-empty str or os.PathLike path, got ''"),
])
def test_a_path_that_is_not_a_path_names_ckpt_file_name(path, error, words):
    net = nn.Dense(2, 1)
    for call, owner in ((lambda: save_checkpoint(net, path), "save_checkpoint"),
                        (lambda: load_checkpoint(path), "load_checkpoint")):
        with pytest.raises(error) as info:
            call()
        assert str(info.value).startswith(f"{owner}: ckpt_file_name {words}")
