"""The README's tour and Lessons section say what the code does: the printed step report is the
one a user sees, the figure exists, the name map of the three faces (docs/loss-scaling.md) names
real arguments and methods, and the Lessons list names every lesson file."""
import inspect
import re

import pytest

from helpers import REPO_ROOT
from minigrad import amp, mixed_precision, nn

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
TOUR = README.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
LESSONS = README.split("\n## Lessons", 1)[1].split("\n## ", 1)[0]
FACES = (REPO_ROOT / "docs" / "loss-scaling.md").read_text(encoding="utf-8")


def test_the_two_set_up_commands_come_first():
    first, second = re.findall(r"```(\w+)\n(.*?)```", README, re.DOTALL)[:2]
    assert first[0] == second[0] == "bash"
    assert "examples/train_digits.py" in first[1] and "-m pytest" in second[1]
    assert README.index("## A five-minute tour") > README.index(second[1])


def test_tour_prints_the_step_report_it_shows(capsys):
    (code,) = re.findall(r"```python\n(.*?)```", TOUR, re.DOTALL)
    (shown,) = re.findall(r"```text\n(.*?)```", TOUR, re.DOTALL)
    exec(compile(code, "README.md tour", "exec"), {})  # noqa: S102 (the README's own code)
    assert capsys.readouterr().out == shown


def test_tour_figure_is_committed_and_a_real_image():
    from matplotlib import image
    (path,) = re.findall(r"!\[[^\]]+\]\((docs/[^)]+\.png)\)", TOUR)
    pixels = image.imread(str(REPO_ROOT / path))
    assert pixels.shape[0] >= 400 and pixels.shape[1] >= 800


def _table_row(concept):
    (row,) = [line for line in FACES.splitlines() if line.startswith(f"| {concept} |")]
    return [cell.strip() for cell in row.strip("|").split("|")][1:]


@pytest.mark.parametrize("concept", ["initial scale", "growth factor", "backoff on overflow",
                                     "clean steps before growth"])
def test_name_map_arguments_are_the_constructors_arguments(concept):
    classes = ([nn.DynamicLossScaleUpdateCell, amp.DynamicLossScaleManager],
               [mixed_precision.DynamicLossScale], [amp.GradScaler])
    for cell, group in zip(_table_row(concept), classes):
        names = re.findall(r"`(?:1 / )?(\w+)`", cell)
        assert names, (concept, cell)
        accepted = {p for cls in group for p in inspect.signature(cls).parameters}
        assert set(names) <= accepted, (concept, cell, sorted(accepted))


def test_name_map_methods_exist():
    net = nn.Dense(2, 1)
    optimizer = mixed_precision.LossScaleOptimizer(nn.SGD(net.trainable_params()))
    for name in ("get_scaled_loss", "get_unscaled_gradients", "apply_gradients", "last_report"):
        assert hasattr(optimizer, name), name
    assert callable(optimizer.loss_scale)
    for name in ("scale", "unscale_", "step", "update", "get_scale"):
        assert callable(getattr(amp.GradScaler, name)), name
    for name in (_table_row("fixed scale")[0] + _table_row("fixed scale")[1]).split("`"):
        if name.startswith(("nn.", "mixed_precision.")) or name.endswith("Manager"):
            owner = {"nn": nn, "mixed_precision": mixed_precision}.get(name.split(".")[0], amp)
            assert hasattr(owner, name.split(".")[-1]), name


def test_lessons_section_lists_every_lesson_once():
    files = sorted(p.name for p in (REPO_ROOT / "lessons").glob("0*.py"))
    listed = re.findall(r"^\d\. `(0\d_\w+\.py)`", LESSONS, re.MULTILINE)
    assert listed == files and len(files) == 8
    assert "--out" in LESSONS and "--quick" in LESSONS and '".[datasets,plots]"' in LESSONS
