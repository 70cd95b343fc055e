"""``benchmarks/parallel.py --quick --thor`` starts its 2 ranks, times every row, writes JSON."""
import json
import subprocess
import sys

from helpers import REPO_ROOT
from helpers.mpi import require_mpi


def test_quick_run_writes_every_ratio(tmp_path):
    require_mpi()
    out = tmp_path / "parallel.json"
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "parallel.py"),
                           "--quick", "--no-torch", "--thor", "--json", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    ratios = result["ratios"]
    assert ratios["bytes_per_step"] == 4 * (784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10)
    assert ratios["buckets_per_step"] == 1  # 2.7 MB in one 25 MB bucket
    assert ratios["buckets_overlap_true"] == 2  # overlap=True: the first closes at 1 MiB
    assert 0 < ratios["allreduce_share_of_step"] < 1
    assert 0 < ratios["allreduce_share_overlap_true"] < 1
    assert 0 < ratios["allreduce_share_mpi_allreduce"] < 1
    assert ratios["mpi_allreduce_step_over_step"] > 0
    assert ratios["shared_memory_allreduce_over_plain"] > 0
    assert ratios["thor_steps_distributed_over_every_rank"] > 0
    assert ratios["thor_inversion_distributed_over_every_rank"] > 0
    shares = ratios["allreduce_share_of_step_per_rank"]
    assert len(shares) == 2 and ratios["allreduce_share_of_step_max_over_ranks"] == max(shares)
    assert ratios["minigrad_step_over_ddp"] is None  # --no-torch
    assert {row["what"] for row in result["rows"]} == {
        "minigrad local step (no all-reduce)", "minigrad 2-rank step",
        "minigrad 2-rank step, overlap=True", "minigrad 2-rank step, MPI Allreduce",
        "mpi4py Allreduce (same bytes)", "shared-memory all-reduce (same bytes)",
        "all-reduce inside the minigrad step",
        "all-reduce inside the overlap=True step", "all-reduce inside the MPI Allreduce step",
        "THOR 2-rank refresh + reuse steps, every rank inverts",
        "THOR 2-rank refresh + reuse steps, distributed_inversion",
        "THOR inversion, every rank", "THOR inversion, distributed_inversion"}
    assert result["ranks"] == 2 and result["threads"]["OPENBLAS_NUM_THREADS"] == "1"
    assert "load_average_before" in result and result["blas"]
    assert "PyTorch not installed (or --no-torch)" in done.stdout
