"""``benchmarks/amp_step.py``'s phase breakdown: every phase timed, the step's methods restored."""
import sys

import pytest

from helpers import REPO_ROOT  # noqa: I001  (before the benchmark import it enables)

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import amp_step  # noqa: E402

from minigrad import amp, nn  # noqa: E402


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(amp_step, "SIZES", (12, 8, 8, 3))
    monkeypatch.setattr(amp_step, "BATCH", 4)


@pytest.mark.parametrize("level", ["O0", "O2"])
def test_phases_time_every_phase_and_restore_the_cell(small, level):
    x, y = amp_step.batch()
    net = amp_step.mlp()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    cell = amp.build_train_network(net, nn.SGD(net.trainable_params(), 0.01), loss, level=level)
    medians = amp_step.phases(cell, x, y, repeat=3)
    expected = {"step", "forward_backward", "optimizer", "rest"} | (
        {"overflow_check"} if level == "O2" else set()
    )
    assert set(medians) == expected | {"cpu_per_wall_second"}
    assert medians.pop("cpu_per_wall_second") > 0
    assert all(medians[k] > 0 for k in expected - {"rest"})
    # each step's sample contains its phases' samples, so no phase's median exceeds the step's
    assert all(medians[k] <= medians["step"] for k in expected - {"rest", "step"})
    assert "loss_and_grads" not in cell.__dict__ and "get_overflow_status" not in cell.__dict__
    assert "apply_gradients" not in cell.optimizer.__dict__
