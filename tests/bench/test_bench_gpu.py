"""The benchmark tools on a GPU, small and fast: ``kernels`` compiles every kernel with no local
memory; ``overflow`` runs every method behind the hold kernel and checks every call, fails on a
wrong kernel, and refuses a torch without CUDA when torch is asked for."""
import json

import pytest

from helpers import NO_GPU
from minigrad import _native
from minigrad.amp import float_status as fs
from minigrad.bench import cli

pytestmark = [pytest.mark.gpu, NO_GPU]
SMALL = ["overflow", "--device", "gpu", "--sizes", "64K", "--lists", "16x1K", "--cold", "64K",
         "--warmup", "0.01", "--min-samples", "3", "--max-time", "0.1"]


def bench(argv):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    return stop.value.code


def peers():
    try:
        import torch
    except ImportError:
        return "cupy"
    return "torch,cupy" if torch.cuda.is_available() else "cupy"


def test_kernels_compile_through_cupy_without_local_memory(tmp_path):
    path = tmp_path / "k.json"
    assert bench(["kernels", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    listed = {(k["source"], k["kernel"]) for k in result["kernels"]}
    assert listed == {(s, k) for s, names in _native.CUDA_SOURCES.items() for k in names}
    assert all(k["local_size_bytes"] == 0 and 0 < k["num_regs"] <= 64
               for k in result["kernels"])


def test_every_method_runs_held_and_checked(tmp_path):
    path = tmp_path / "o.json"
    assert bench([*SMALL, "--peers", peers(), "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    assert result["complete"] and result["errors"] == []
    assert result["environment"]["gpu"] and result["environment"]["rated_bandwidth_gb_s"]
    rows = result["rows"]
    assert {r["mode"] for r in rows} == {"hot", "cold"}
    for row in rows:
        assert row["error"] is None and row["checked_calls"] >= row["samples"] * row["calls"]
        assert row["us_median"] > 0 and row["share_rated"] > 0
    minigrad_rows = [r for r in rows if r["role"] == "minigrad"]
    assert all(r["enqueue_bias_removed"] for r in minigrad_rows)
    methods = {r["method"] for r in rows}
    assert {"cupy isfinite(x).all()", "read ceiling", "copy ceiling",
            "minigrad fp16->fp32 check+unscale"} <= methods


def test_a_wrong_kernel_fails_the_gpu_run(tmp_path, monkeypatch):
    real = fs.check_and_unscale
    monkeypatch.setattr(fs, "check_and_unscale",
                        lambda status, arrays, inv_scale: real(status, arrays, 1.0))
    assert bench([*SMALL, "--peers", "cupy", "--lists", "none", "--cold", "none",
                  "--dtypes", "float32", "--cases", "finite"]) == 1
