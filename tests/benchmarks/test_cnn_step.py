"""``benchmarks/cnn_step.py``: the nets are the same in both frameworks, the phase timing
restores what it wraps, and a short run writes every table."""
import json
import subprocess
import sys

import numpy
import pytest

from helpers import GPU_KINDS, REPO_ROOT, gpu_of  # noqa: I001  (before the benchmark import)

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import _cnn_nets  # noqa: E402
import cnn_step  # noqa: E402

from minigrad import Tensor, nn  # noqa: E402
from minigrad.ops import _image_host, conv, math, normalization, pooling  # noqa: E402


@pytest.mark.parametrize("name", _cnn_nets.NETS)
def test_both_frameworks_build_the_same_net(name):
    # the same weights and batch: the same loss, and one SGD step moves the weights alike
    torch = pytest.importorskip("torch")
    x, y = _cnn_nets.batch(name)
    net = _cnn_nets.minigrad_net(name)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss), nn.SGD(net.trainable_params(), 0.01))
    ours = float(step.set_train()(Tensor(x), Tensor(y.astype(numpy.int32))).asnumpy())
    reference = _cnn_nets.torch_net(torch, name)
    theirs = torch.nn.functional.cross_entropy(reference(torch.from_numpy(x)),
                                               torch.from_numpy(y))
    theirs.backward()
    numpy.testing.assert_allclose(ours, theirs.item(), rtol=1e-5)
    # each parameter's update agrees within fp32 rounding: PyTorch's CPU conv gradients are
    # themselves up to 0.2 % off their float64 values here (a swapped or misplaced weight
    # would be off by 100 %)
    for p, q, before in zip(net.trainable_params(), reference.parameters(),
                            _cnn_nets.weights(name), strict=True):
        ours, theirs = p.asnumpy() - before, -0.01 * q.grad.numpy()
        assert numpy.linalg.norm(ours - theirs) <= 1e-2 * numpy.linalg.norm(theirs)


@pytest.mark.parametrize("precision", cnn_step.PRECISIONS)
def test_phases_time_every_phase_and_restore_what_they_wrap(precision):
    originals = [conv.Conv2d.forward, pooling.MaxPool2d.backward, normalization.Normalize.forward,
                 math.ReLU.backward, conv._products]
    step, cell = cnn_step.minigrad_step("digits", precision)
    medians, gemms = cnn_step.minigrad_phases(step, cell, 2)
    assert set(medians) == set(cnn_step.PHASES)
    for phase in ("conv forward", "conv backward", "pooling forward", "pooling backward",
                  "activations forward", "activations backward", "optimizer", "step"):
        assert 0 < medians[phase] <= medians["step"], phase
    assert medians["batchnorm forward"] == 0  # the digits CNN has no BatchNorm
    # the 1-to-16-channel conv: a forward product and dW (no dx for the input); the
    # 16-to-32-channel conv: forward, dW and dx; a conv the direct kernel takes makes none
    first = numpy.ones((1, 1, 8, 8), numpy.float32), numpy.ones((16, 1, 3, 3), numpy.float32)
    second = numpy.ones((1, 16, 4, 4), numpy.float32), numpy.ones((32, 16, 3, 3), numpy.float32)
    products = sum(0 if _image_host.direct_applies(*conv_args, 1, (1, 1)) else count
                   for conv_args, count in ((first, 2), (second, 3)))
    assert len(gemms) == products
    assert originals == [conv.Conv2d.forward, pooling.MaxPool2d.backward,
                         normalization.Normalize.forward, math.ReLU.backward, conv._products]
    assert "apply_gradients" not in cell.optimizer.__dict__
    if products:
        assert 0 < medians["conv GEMMs"] <= medians["step"]
        assert cnn_step.gemms_alone(gemms, repeat=2) > 0
    else:
        assert medians["conv GEMMs"] == 0


def test_step_memory_is_measured_where_the_os_allows():
    kept = []
    peak = cnn_step.step_peak_mb(lambda: kept.append(numpy.ones(8 << 20, numpy.uint8)))
    assert peak is None or 6 < peak < 40  # an 8 MB array written in the step


def test_a_short_run_writes_every_table(tmp_path):
    out = tmp_path / "cnn.json"
    subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "cnn_step.py"), "--nets",
                    "digits", "--rounds", "1", "--block-seconds", "0.001", "--json", str(out)],
                   check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert {"machine", "steps", "phases", "gemms", "memory", "threads"} <= set(result)
    assert [(r["net"], r["precision"]) for r in result["steps"]] == [("digits", "fp32"),
                                                                     ("digits", "O2")]
    assert result["steps"][1]["ratio_O2_to_fp32"] > 0


@pytest.mark.parametrize("kind", GPU_KINDS)
@pytest.mark.parametrize("precision", cnn_step.PRECISIONS)
def test_the_gpu_run_builds_and_steps_every_net_on_the_device(kind, precision):
    # what --device gpu times, through CuPy's code paths (the strict device on any machine)
    with gpu_of(kind):
        for name in _cnn_nets.NETS:
            step, cell = cnn_step.minigrad_step(name, precision)
            out = step()
            loss = out[0] if isinstance(out, tuple) else out
            assert loss.device == "GPU" and numpy.isfinite(float(loss.item()))
