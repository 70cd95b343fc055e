"""The per-tensor report of a network run under fp8_autocast, the what-if table and the history
plot."""
import sys

import numpy
import pytest

import minigrad
from minigrad import Tensor, fp8, nn
from minigrad.fp8 import plots


def run_steps(recipe, steps=3, jump_at=None):
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(8, 4), nn.ReLU(), nn.Dense(4, 2)])
    rng = numpy.random.default_rng(0)
    for step in range(steps):
        x = rng.standard_normal((5, 8)).astype(numpy.float32)
        if step == jump_at:
            x *= 1000.0
        with fp8.fp8_autocast(fp8_recipe=recipe):
            y = net(Tensor(x))
        y.sum().backward()
    return net


def test_tensor_report_names_each_tensor_and_counts_its_casts():
    net = run_steps(fp8.CurrentScaling())
    rows = fp8.tensor_report(net)
    assert [r["tensor"] for r in rows] == [
        f"{layer}.{t}" for layer in ("0", "2") for t in fp8.gemm.TENSORS]
    assert all(r["casts"] == 3 for r in rows)
    assert rows[2]["format"] == "float8_e5m2" and rows[0]["format"] == "float8_e4m3fn"
    assert rows[0]["scale_min"] == pytest.approx(448 / rows[0]["amax"], rel=1e-6)
    text = fp8.format_report(rows)
    assert text.splitlines()[0].split()[:3] == ["tensor", "format", "amax"]
    assert "0.input" in text and "dB" in text and "%" in text


def test_a_delayed_scale_lags_an_amax_jump_and_the_report_shows_the_clip():
    net = run_steps(fp8.DelayedScaling(amax_history_len=4), steps=2, jump_at=1)
    row = fp8.tensor_report(net)[0]
    assert row["tensor"] == "0.input" and row["clipped"] > 0.5
    data = plots.history(net)["0.input"]
    assert data["amax"][1] * data["scale"][1] > 448  # the jump, cast with the old scale


def test_what_if_covers_every_recipe_and_format():
    rng = numpy.random.default_rng(1)
    tensors = {"w": rng.standard_normal((4, 64)).astype(numpy.float32),
               "b": Tensor(rng.standard_normal(10).astype(numpy.float32))}
    rows = fp8.what_if(tensors, delayed_scales={"w": 1.0})
    seen = {(r["tensor"], r["recipe"], r["format"][-4:]) for r in rows}
    for recipe in ("delayed", "current", "tensorwise", "rowwise", "mxfp8"):
        assert ("w", recipe, "e5m2") in seen and ("w", recipe, "m3fn") in seen
    assert ("b", "mxfp8", "e5m2") not in seen and ("b", "delayed", "e5m2") not in seen
    current = [r for r in rows if r["tensor"] == "w" and r["recipe"] == "current"]
    delayed = [r for r in rows if r["tensor"] == "w" and r["recipe"] == "delayed"]
    assert current[0]["sqnr_db"] > delayed[0]["sqnr_db"]  # scale 1 wastes E4M3's top binades
    with pytest.raises(ValueError, match="recipes"):
        fp8.what_if(tensors, recipes=["nearest"])


def test_the_history_plot_is_drawn(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    net = run_steps(fp8.DelayedScaling(amax_history_len=4), steps=3, jump_at=1)
    axes = plots.plot_history(net)
    assert len(axes) == 2 and [a.get_title() for a in axes] == ["0", "2"]
    assert len(axes[0].get_lines()) == 6  # amax and max / scale of 3 tensors
    axes[0].figure.savefig(tmp_path / "history.png")
    with pytest.raises(ValueError, match="no FP8 tensor"):
        plots.plot_history(nn.Dense(2, 2))


def test_without_matplotlib_the_error_says_what_to_install(monkeypatch):
    net = run_steps(fp8.CurrentScaling(), steps=1)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"minigrad\[plots\]"):
        plots.plot_history(net)


def test_the_step_report_lists_the_fp8_tensors_that_clipped():
    from minigrad.amp import DynamicLossScaleManager
    from minigrad.nn import Momentum, SoftmaxCrossEntropyWithLogits, TrainOneStepWithLossScaleCell
    from minigrad.nn import WithLossCell

    minigrad.set_seed(0)
    dense = nn.Dense(8, 4)

    class FP8Dense(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = dense

        def construct(self, x):
            with fp8.fp8_autocast(fp8_recipe=fp8.DelayedScaling(amax_history_len=2)):
                return self.dense(x)

    net = FP8Dense()
    loss = WithLossCell(net, SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"))
    opt = Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    manager = DynamicLossScaleManager(init_loss_scale=1.0)
    step = TrainOneStepWithLossScaleCell(loss, opt, manager.get_update_cell())
    x = Tensor(numpy.full((2, 8), 1000.0, dtype=numpy.float32))  # beyond 448 at scale 1
    fp8.autocast.take_step_stats()  # forget the casts of the tests before (no report took them)
    step(x, Tensor(numpy.array([0, 1], dtype=numpy.int32)))
    report = step.last_report
    assert set(report.fp8) == {"dense.input", "dense.weight", "dense.grad_output"}
    assert report.fp8["dense.input"]["clipped"] == 1.0
    assert report.fp8["dense.input"]["saturated"] == 16
    assert "FP8 clipped in [dense.input 100 %" in str(report)
