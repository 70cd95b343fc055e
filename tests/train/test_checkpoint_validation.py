"""Checkpoint loading accounts for every name, refuses crafted files by name, closes what it opens,
and saving removes the temporary files of killed writers."""
import json
import os
import subprocess
import sys
import textwrap
import warnings
import zipfile

import numpy
import pytest

from minigrad import Parameter, nn
from minigrad.optim import Adam, Momentum
from minigrad.train import load_checkpoint, load_param_into_net, save_checkpoint
from minigrad.train.checkpoint import CheckpointMismatchWarning
from minigrad.train.checkpoint_file import MANIFEST, remove_stale_temp_files

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 8)
        self.fc2 = nn.Dense(8, 3)

    def construct(self, x):
        return self.fc2(self.fc1(x))


class Other(nn.Cell):
    def __init__(self):
        super().__init__()
        self.head = nn.Dense(4, 8)

    def construct(self, x):
        return self.head(x)


def _snapshot(net):
    return {p.name: p.asnumpy().copy() for p in net.get_parameters()}


def _unchanged(net, before):
    after = _snapshot(net)
    return after.keys() == before.keys() and all(numpy.array_equal(after[k], before[k])
                                                 for k in after)


# ---- every name is accounted for ----------------------------------------------------------------
def test_load_param_into_net_returns_both_lists_like_mindspore_and_warns():
    net = Net()
    values = {k: v + 1 for k, v in _snapshot(net).items()}
    assert load_param_into_net(net, values) == ([], [])
    partial = {k: v for k, v in values.items() if k != "fc2.bias"}
    partial["extra.w"] = numpy.zeros(2, numpy.float32)
    with pytest.warns(CheckpointMismatchWarning) as record:
        result = load_param_into_net(net, partial)
    assert result == (["fc2.bias"], ["extra.w"])
    message = str(record[0].message)
    assert "['fc2.bias']" in message and "['extra.w']" in message
    assert "3 parameters loaded" in message


def test_a_checkpoint_matching_no_parameter_raises_naming_both_sides(tmp_path):
    path = save_checkpoint(Net(), tmp_path / "net")
    other = Other()
    before = _snapshot(other)
    with pytest.raises(ValueError, match=r"no parameter of the network matches the checkpoint: "
                                         r"the network has \['head.weight', 'head.bias'\], the "
                                         r"checkpoint has \['fc1.weight', 'fc1.bias', "
                                         r"'fc2.weight', 'fc2.bias'\]"):
        load_checkpoint(path, net=other)
    assert _unchanged(other, before)
    with pytest.raises(ValueError, match=r"load_param_into_net: parameter_dict must be a "
                                         r"non-empty dict \{name: value\}, got \{\}"):
        load_param_into_net(other, {})


def test_load_checkpoint_reports_what_it_did_not_load(tmp_path):
    class Wider(Net):
        def __init__(self):
            super().__init__()
            self.fc3 = nn.Dense(3, 3)
    path = save_checkpoint(Net(), tmp_path / "net", append_dict={"epoch_num": 3})
    with pytest.warns(CheckpointMismatchWarning, match=r"not loaded: \['fc3.weight', 'fc3.bias'\]"):
        params = load_checkpoint(path, net=Wider())
    assert params.param_not_load == ["fc3.weight", "fc3.bias"]
    assert params.ckpt_not_load == []  # the append_dict values are not network parameters
    assert int(params["epoch_num"].asnumpy()) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exact = load_checkpoint(path, net=Net())
    assert exact.param_not_load == [] and exact.ckpt_not_load == []
    assert load_checkpoint(path).param_not_load == ()  # no net: nothing was loaded into one


def test_strict_load_raises_on_any_mismatch_and_changes_nothing(tmp_path):
    net = Net()
    values = _snapshot(net)
    values["unused"] = numpy.zeros(1, numpy.float32)
    before = _snapshot(net)
    with pytest.raises(ValueError, match=r"checkpoint entries matching no parameter: \['unused'\]"):
        load_param_into_net(net, values, strict_load=True)
    path = save_checkpoint(values, tmp_path / "extra")
    with pytest.raises(ValueError, match=r"strict_load=True"):
        load_checkpoint(path, net=net, strict_load=True)
    assert _unchanged(net, before)


def test_loading_a_train_cell_checkpoint_into_the_backbone_names_the_loss_scale(tmp_path):
    net = Net()
    opt = Momentum(net.trainable_params(), 0.1, 0.9)
    cell = nn.TrainOneStepWithLossScaleCell(
        nn.WithLossCell(net, nn.MSELoss()), opt,
        nn.DynamicLossScaleUpdateCell(2.0 ** 10, 2.0, 5))
    path = save_checkpoint(cell, tmp_path / "cell")
    with pytest.warns(CheckpointMismatchWarning, match="scale_sense"):
        params = load_checkpoint(path, net=Net())
    assert "scale_sense" in params.ckpt_not_load and "current_iterator_step" in params.ckpt_not_load


# ---- values and optimizer state that would load wrongly -----------------------------------------
def test_fp32_values_float16_cannot_hold_are_refused():
    net = nn.Dense(2, 2)
    net.cast_parameters(numpy.float16)
    before = _snapshot(net)
    big = {"weight": numpy.array([[1.0, 70000.0], [2.0, 3.0]], numpy.float32),
           "bias": numpy.zeros(2, numpy.float32)}
    with pytest.raises(ValueError, match=r"'weight': 1 float32 values \(largest magnitude 70000\) "
                                         r"exceed float16's largest finite value 65504"):
        load_param_into_net(net, big)
    assert _unchanged(net, before)
    fits = {"weight": numpy.array([[65504.0, -1.0], [numpy.inf, 3.0]], numpy.float32),
            "bias": numpy.zeros(2, numpy.float32)}  # an inf saved as inf is not a cast overflow
    assert load_param_into_net(net, fits) == ([], [])
    assert net.weight.asnumpy()[0, 0] == 65504


def test_another_optimizer_class_state_is_refused_before_anything_changes(tmp_path):
    net = Net()
    momentum = Momentum(net.trainable_params(), 0.1, 0.9)
    path = save_checkpoint(net, tmp_path / "m", optimizer=momentum)
    other = Net()
    adam = Adam(other.trainable_params(), 0.001)
    before, lr = _snapshot(other), float(adam.learning_rate.asnumpy())
    with pytest.raises(ValueError, match=r"holds the state of a Momentum optimizer; it cannot be "
                                         r"loaded into Adam"):
        load_checkpoint(path, net=other, optimizer=adam)
    assert _unchanged(other, before) and float(adam.learning_rate.asnumpy()) == lr

    class MyMomentum(Momentum):
        pass
    mine = MyMomentum(other.trainable_params(), 0.5, 0.9)
    load_checkpoint(path, net=other, optimizer=mine)  # a subclass takes its base's state
    assert float(mine.learning_rate.asnumpy()) == pytest.approx(0.1)


# ---- crafted manifests with valid CRCs ----------------------------------------------------------
def _rewrite_manifest(path, edit):
    """Rewrite the checkpoint at ``path`` with ``edit(manifest)``'s manifest (valid zip CRCs)."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    with zipfile.ZipFile(path) as archive, archive.open(MANIFEST + ".npy") as f:
        manifest = json.loads(numpy.lib.format.read_array(f).tobytes())
    manifest = edit(manifest)
    buffer = __import__("io").BytesIO()
    text = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    numpy.lib.format.write_array(buffer, numpy.frombuffer(text, numpy.uint8))
    members[MANIFEST + ".npy"] = buffer.getvalue()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _set(key, value):
    def edit(manifest):
        manifest[key] = value
        return manifest
    return edit


def _set_spec(key, value):
    def edit(manifest):
        manifest["arrays"]["param_0"][key] = value
        return manifest
    return edit


CRAFTED = {
    "not json": (lambda m: b"{not json", "not JSON"),
    "a list": (lambda m: [1, 2], "expected a JSON object"),
    "no parameters": (lambda m: {k: v for k, v in m.items() if k != "parameters"}, "'parameters'"),
    "parameters not a list": (_set("parameters", {"a": 1}), "'parameters'"),
    "entry not a pair": (_set("parameters", [["fc1.weight"]]), "entry of the manifest"),
    "name not a str": (_set("parameters", [[5, "param_0"]]), "entry of the manifest"),
    "unknown key": (_set("parameters", [["w", "param_99"]]), "entry of the manifest"),
    "arrays not a dict": (_set("arrays", []), "'arrays'"),
    "shape not a list": (_set_spec("shape", 3), "array 'param_0'"),
    "negative dim": (_set_spec("shape", [-1]), "array 'param_0'"),
    "bad dtype": (_set_spec("dtype", "nonsense"), "dtype 'nonsense'"),
    "object dtype": (_set_spec("dtype", "|O"), "dtype '|O'"),
    "missing member": (lambda m: {**m, "arrays": {**m["arrays"], "ghost": {"shape": [],
                                  "dtype": "<f4"}}}, "lacks"),
    "duplicate name": (lambda m: {**m, "append": [m["parameters"][0]]}, "twice"),
    "optimizer node": (_set("optimizer", {"list": 3}), "optimizer-state node"),
    "optimizer ref": (_set("optimizer", {"tensor": "nowhere"}), "optimizer-state node"),
    "optimizer deep": (_set("optimizer", json.loads('{"list": [' * 80 + ']}' * 80)), "deeper"),
    "optimizer class": (lambda m: {**m, "optimizer": {"value": 1}, "optimizer_class": 3},
                        "optimizer_class"),
    "shape differs": (_set_spec("shape", [9, 9]), "the manifest says"),
}


@pytest.mark.parametrize("kind", sorted(CRAFTED))
def test_a_crafted_manifest_is_a_value_error_naming_the_file(tmp_path, kind):
    edit, expected = CRAFTED[kind]
    net = Net()
    optimizer = Momentum(net.trainable_params(), 0.1, 0.9)
    path = save_checkpoint(net, tmp_path / "crafted", optimizer=optimizer)
    _rewrite_manifest(path, edit)
    before = _snapshot(net)
    with pytest.raises(ValueError) as info:
        load_checkpoint(path, net=net)
    message = str(info.value)
    assert f"checkpoint file {path!r}" in message and expected in message, message
    assert _unchanged(net, before)


# ---- refused files are closed -------------------------------------------------------------------
def _open_fds():
    return len(os.listdir(f"/proc/{os.getpid()}/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
@pytest.mark.parametrize("how", ["truncated", "bitflip", "garbage", "crafted"])
def test_kept_errors_of_refused_checkpoints_hold_no_file_open(tmp_path, how):
    path = save_checkpoint(nn.Dense(64, 64), tmp_path / "bad")
    data = bytearray(open(path, "rb").read())
    if how == "truncated":
        open(path, "wb").write(bytes(data[:len(data) // 2]))
    elif how == "bitflip":
        data[len(data) // 3] ^= 0xFF
        open(path, "wb").write(bytes(data))
    elif how == "garbage":
        open(path, "wb").write(b"PK\x03\x04" + b"x" * 200)
    else:
        _rewrite_manifest(path, _set("parameters", 7))
    before = _open_fds()
    errors = []
    for _ in range(30):
        with pytest.raises(ValueError) as info:
            load_checkpoint(path)
        errors.append(info.value)
    assert _open_fds() == before
    assert all(e.__cause__ is None and e.__context__ is None for e in errors)


# ---- temporary files of killed writers ----------------------------------------------------------
def _dead_pid():
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_the_next_save_removes_temp_files_of_dead_writers_only(tmp_path):
    dead = tmp_path / f".net.ckpt.{_dead_pid()}.0123abcd.tmp"
    mine = tmp_path / f".net.ckpt.{os.getpid()}.0123abcd.tmp"
    parent = tmp_path / f".net.ckpt.{os.getppid()}.89abcdef.tmp"
    unrelated = tmp_path / ".notes.tmp"
    for path in (dead, mine, parent, unrelated):
        path.write_bytes(b"partial")
    save_checkpoint(nn.Dense(2, 2), tmp_path / "net")
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["net.ckpt", mine.name, parent.name, unrelated.name])
    assert remove_stale_temp_files(str(tmp_path)) == []


_KILLED_WRITER = textwrap.dedent("""
    import os, sys
    import numpy
    from minigrad.train import save_checkpoint
    def die_mid_write(f, **arrays):
        f.write(b"half an archive")
        f.flush()
        os._exit(9)  # as kill -9 mid-write: no cleanup runs
    numpy.savez = die_mid_write
    save_checkpoint({"w": numpy.ones(4, numpy.float32)}, sys.argv[1])
""")


def test_model_checkpoint_rotation_leaves_no_orphans_of_killed_saves(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for k in range(3):
        proc = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(tmp_path / f"CKP-1_{k}")],
                              env=env)
        assert proc.returncode == 9
    # each killed save removed the orphan of the one before it; the last orphan is left
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] != []
    assert len(os.listdir(tmp_path)) == 1
    from minigrad.dataset import NumpySlicesDataset
    from minigrad.train import CheckpointConfig, Model, ModelCheckpoint
    net = nn.Dense(4, 1)
    model = Model(net, nn.MSELoss(), Momentum(net.trainable_params(), 0.01, 0.9))
    columns = (numpy.ones((8, 4), numpy.float32), numpy.ones((8, 1), numpy.float32))
    data = NumpySlicesDataset(columns, shuffle=False).batch(2)
    ckpt = ModelCheckpoint(directory=str(tmp_path),
                           config=CheckpointConfig(save_checkpoint_steps=1, keep_checkpoint_max=2))
    model.train(1, data, callbacks=[ckpt])
    assert sorted(os.listdir(tmp_path)) == ["CKP-1_3.ckpt", "CKP-1_4.ckpt"]


def test_load_param_into_net_keeps_exact_parameter_objects():
    net = Net()
    weight = net.fc1.weight
    load_param_into_net(net, {k: Parameter(v * 0, name=k) for k, v in _snapshot(net).items()})
    assert net.fc1.weight is weight and not weight.asnumpy().any()
