"""``mpirun -np 2 python examples/train_parallel.py``: the ranks agree bit for bit, and learn."""
import re

import pytest

from helpers import REPO_ROOT
from helpers.mpi import launch

pytest.importorskip("sklearn")

SCRIPT = REPO_ROOT / "examples" / "train_parallel.py"


@pytest.mark.parametrize("optimizer", ["momentum", "thor"])
def test_two_ranks_agree_and_learn_the_digits(optimizer):
    returncode, output = launch(SCRIPT, "--epochs", "2", "--optimizer", optimizer, timeout=120)
    assert returncode == 0, output
    digests = re.findall(r"rank (\d): parameters sha256 (\w+), loss scale (\d+) -> (\d+), "
                         r"(\d+) of (\d+) steps skipped", output)
    assert [d[0] for d in digests] == ["0", "1"], output
    assert digests[0][1:] == digests[1][1:]  # same parameters, scales and skips on both ranks
    assert int(digests[0][5]) == 2 * 23       # 1437 images, 719 per rank, batches of 32
    assert "ranks agree: True (2 ranks)" in output
    accuracy = float(re.search(r"global: test accuracy (\S+) on 359 images; 2 ranks x batch 32 "
                               rf"= global batch 64, {optimizer}, O2", output).group(1))
    assert accuracy > 0.85, output
