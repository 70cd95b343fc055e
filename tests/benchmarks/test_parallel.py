"""``benchmarks/parallel.py --quick`` starts its 2 ranks, times every row and writes the JSON."""
import json
import subprocess
import sys

from helpers import REPO_ROOT
from helpers.mpi import require_mpi


def test_quick_run_writes_every_ratio(tmp_path):
    require_mpi()
    out = tmp_path / "parallel.json"
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "parallel.py"),
                           "--quick", "--no-torch", "--json", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    ratios = result["ratios"]
    assert ratios["bytes_per_step"] == 4 * (784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10)
    assert ratios["buckets_per_step"] == 2  # the first closes at 1 MiB, the rest in 25 MB
    assert 0 < ratios["allreduce_share_of_step"] < 1
    assert 0 < ratios["allreduce_share_reduced_after_backward"] < 1
    shares = ratios["allreduce_share_of_step_per_rank"]
    assert len(shares) == 2 and ratios["allreduce_share_of_step_max_over_ranks"] == max(shares)
    assert ratios["minigrad_step_over_ddp"] is None  # --no-torch
    assert {row["what"] for row in result["rows"]} == {
        "minigrad local step (no all-reduce)", "minigrad 2-rank step",
        "minigrad 2-rank step, all-reduce after backward", "mpi4py Allreduce (same bytes)",
        "all-reduce inside the minigrad step",
        "all-reduce inside the step reduced after backward"}
    assert result["ranks"] == 2 and result["threads"]["OPENBLAS_NUM_THREADS"] == "1"
    assert "load_average_before" in result and result["blas"]
    assert "PyTorch not installed (or --no-torch)" in done.stdout
