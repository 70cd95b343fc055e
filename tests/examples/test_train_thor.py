"""examples/train_thor.py: THOR and Momentum from the same weights; THOR needs fewer steps."""
import importlib.util

import pytest

from helpers import REPO_ROOT

pytest.importorskip("sklearn")


def test_thor_reaches_the_target_in_fewer_steps(tmp_path, capsys):
    path = REPO_ROOT / "examples" / "train_thor.py"
    spec = importlib.util.spec_from_file_location("train_thor", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plot = str(tmp_path / "c.png")
    results = module.main(["--target", "0.1", "--max-steps", "400", "--plot", plot])
    assert results["THOR"]["steps"] and results["Momentum"]["steps"]
    assert results["THOR"]["steps"] < results["Momentum"]["steps"]
    assert results["THOR"]["accuracy"] > 0.8
    out = capsys.readouterr().out
    assert "THOR's last refresh" in out and (tmp_path / "c.png").stat().st_size > 0
