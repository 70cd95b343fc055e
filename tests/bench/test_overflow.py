"""``python -m minigrad.bench overflow`` run whole on the CPU: the table, the JSON (rows with raw
samples, shares, environment, load), the plot; a wrong kernel, a missing peer, a missing GPU
and an interruption; the shares and goals arithmetic; ``benchmarks/overflow.py`` as an entry to
the same tool; and the ``kernels`` command without a GPU."""
import json
import subprocess
import sys

import pytest

from helpers import REPO_ROOT
from minigrad import backend
from minigrad.amp import float_status as fs
from minigrad.bench import cli, overflow, report

FAST = ["--device", "cpu", "--peers", "none", "--warmup", "0.001", "--min-samples", "2",
        "--max-samples", "4", "--max-time", "0.05"]


def bench(argv):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    return stop.value.code


def test_a_cpu_run_writes_every_row_sample_and_share(tmp_path, capsys):
    path, picture = tmp_path / "o.json", tmp_path / "o.png"
    code = bench(["overflow", *FAST, "--sizes", "4K", "--lists", "8x1K", "--cold", "4K",
                  "--json", str(path), "--plot", str(picture)])
    assert code == 0
    out = capsys.readouterr().out
    assert "minigrad check+unscale" in out and "read ceiling" in out
    result = json.loads(path.read_text())
    assert result["complete"] and not result["interrupted"] and result["errors"] == []
    assert result["machine"]["load_average_start"] is not None
    assert result["environment"]["device"] == "cpu" and result["peers"] == []
    rows = result["rows"]
    inputs = {(r["input"], r["dtype"], r["case"], r["mode"]) for r in rows}
    assert len(inputs) == (2 + 1) * 2 * 2  # 4 KiB hot and cold, the list hot; dtypes; cases
    for row in rows:
        assert row["error"] is None and len(row["samples_us"]) == row["samples"] >= 2
        assert len(row["host_samples_us"]) == row["samples"]
        assert row["checked_calls"] >= row["samples"] * row["calls"]
        assert row["us_min"] <= row["us_median"] <= row["us_p90"]
        assert row["gb_s"] == pytest.approx(row["traffic_bytes"] / row["us_median"] / 1e3)
        assert row["share_read"] == pytest.approx(
            row["gb_s"] / next(r["gb_s"] for r in rows if r["method"] == "read ceiling"
                               and overflow_key(r) == overflow_key(row)))
        assert row["enqueue_bias_removed"] is False and row["share_rated"] is None
    assert picture.stat().st_size > 0
    assert result["goals"] == []  # the goals are stated for a GPU


def overflow_key(row):
    return row["input"], row["dtype"], row["case"], row["mode"]


def test_a_wrong_kernel_fails_the_run_and_says_which(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fs, "check_overflow", lambda status, *arrays: status)  # never flags
    path = tmp_path / "o.json"
    code = bench(["overflow", *FAST, "--sizes", "4K", "--lists", "none", "--dtypes", "float32",
                  "--json", str(path)])
    assert code == 1
    assert "WRONG RESULT: 4 KiB float32 one-inf hot: minigrad check: call 0" in (
        capsys.readouterr().err)
    rows = json.loads(path.read_text())["rows"]
    wrong = [r for r in rows if r["error"]]
    assert [(r["method"], r["case"]) for r in wrong] == [("minigrad check", "one-inf")]


def test_a_missing_peer_fails_loudly(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    code = bench(["overflow", "--device", "cpu", "--sizes", "4K", "--peers", "torch"])
    assert code == 2
    err = capsys.readouterr().err
    assert "the peer torch was asked for (--peers) but does not import" in err
    assert bench(["overflow", "--device", "cpu", "--peers", "cupy"]) == 2
    assert "runs on a GPU only" in capsys.readouterr().err
    assert bench(["overflow", "--device", "cpu", "--peers", "jax"]) == 2
    assert "--peers must name torch, cupy or none, got ['jax']" in capsys.readouterr().err


def test_the_cpu_default_peer_is_torch_and_it_is_required(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert bench(["overflow", "--device", "cpu", "--sizes", "4K"]) == 2
    assert "the peer torch was asked for" in capsys.readouterr().err


@pytest.mark.skipif(backend.CUDA_AVAILABLE, reason="checks the message without a GPU")
def test_the_gpu_without_one_is_a_clear_error(capsys):
    assert bench(["overflow", "--device", "gpu"]) == 2
    assert "--device gpu needs CuPy and a GPU" in capsys.readouterr().err
    assert bench(["kernels"]) == 2
    assert "kernels: compiling through CuPy needs CuPy and a GPU" in capsys.readouterr().err


def test_bad_sizes_and_lists_are_usage_errors(capsys):
    assert bench(["overflow", *FAST, "--sizes", "4Q"]) == 2
    assert "a size must be a positive count like 4K" in capsys.readouterr().err
    assert bench(["overflow", *FAST, "--sizes", "4K", "--lists", "vgg"]) == 2
    assert "a list must be one of" in capsys.readouterr().err
    assert bench(["overflow", *FAST, "--sizes", "4K", "--cases", "finte"]) == 2
    assert "--cases must be a comma-separated choice of finite, one-inf, got 'finte'" in (
        capsys.readouterr().err)
    assert bench(["overflow", *FAST, "--sizes", "4K", "--dtypes", "float64"]) == 2
    assert "--dtypes must be a comma-separated choice of float16, float32" in (
        capsys.readouterr().err)


def test_an_interrupted_run_keeps_its_rows(tmp_path, monkeypatch):
    real = overflow.measure_input
    inputs = []

    def interrupted_on_the_second(*args):
        inputs.append(args[1])
        if len(inputs) == 2:
            raise KeyboardInterrupt
        return real(*args)
    monkeypatch.setattr(overflow, "measure_input", interrupted_on_the_second)
    path = tmp_path / "o.json"
    code = bench(["overflow", *FAST, "--sizes", "4K", "--lists", "none", "--dtypes", "float16",
                  "--json", str(path)])
    assert code == 130
    result = json.loads(path.read_text())
    assert result["interrupted"] and not result["complete"]
    assert {r["case"] for r in result["rows"]} == {"finite"} and result["rows"]


def test_inputs_and_cold_runs_from_the_command_line():
    specs = overflow.input_specs("4K,256M", "resnet50,2x3", "256M,2x3")
    assert [(kind, label, cold) for kind, label, _, cold in specs] == [
        ("array", "4 KiB", False), ("array", "256 MiB", True),
        ("list", "resnet50 (161 tensors)", False), ("list", "2 x 3 elements", True)]
    assert specs[1][2] == 256 << 20 and specs[3][2] == [3, 3]
    assert all(spec[3] for spec in overflow.input_specs("4K", "resnet50", "all"))
    assert not any(spec[3] for spec in overflow.input_specs("4K", "none", "none"))


def shares_rows():
    def row(method, us, traffic, kind="array", tensors=1, nbytes=256 << 20, dtype="float16"):
        return {"input": "x", "kind": kind, "tensors": tensors, "bytes": nbytes, "dtype": dtype,
                "case": "finite", "mode": "hot", "method": method, "us_median": us,
                "gb_s": traffic / us / 1e3}
    n = 256 << 20
    return [row("minigrad check", 60.0, n), row("minigrad check+unscale", 120.0, 2 * n),
            row("torch fused check+unscale", 150.0, 2 * n), row("read ceiling", 57.0, n),
            row("copy ceiling", 125.0, 2 * n),
            row("minigrad fp16->fp32 check+unscale", 250.0, 3 * n)]


def test_shares_and_goals():
    rows = report.add_shares(shares_rows(), rated_bytes_per_s=4.8e12)
    by = {r["method"]: r for r in rows}
    assert by["minigrad check"]["share_read"] == pytest.approx(57 / 60)
    assert by["minigrad check+unscale"]["share_copy"] == pytest.approx(125 / 120)
    assert by["minigrad check+unscale"]["x_vs_torch_fused"] == pytest.approx(150 / 120)
    assert by["minigrad check"]["share_rated"] == pytest.approx((256 << 20) / 60e-6 / 4.8e12)
    goals = {g["goal"]: g for g in report.goals(rows)}
    assert goals["check >= 90% of the read ceiling"]["met"]
    assert goals["check+unscale >= 1.0x torch's fused kernel"]["met"]
    widen = goals["fp16->fp32 check+unscale >= 85% of the copy ceiling"]
    assert widen["worst"] == pytest.approx(3 * 125 / 2 / 250) and not widen["met"]
    small = report.add_shares([dict(r, kind="array", bytes=1 << 20) for r in shares_rows()])
    assert report.goals(small) == []  # the goals are stated for >= 256 MiB only


def test_the_checkout_script_is_the_same_tool(tmp_path):
    path = tmp_path / "o.json"
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "overflow.py"), *FAST, "--sizes", "4K",
         "--lists", "none", "--dtypes", "float16", "--cases", "finite", "--json", str(path)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = json.loads(path.read_text())["rows"]
    assert {r["method"] for r in rows} >= {"minigrad check", "read ceiling", "copy ceiling"}
    module = subprocess.run([sys.executable, "-m", "minigrad.bench", "overflow", "--help"],
                            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert module.returncode == 0 and "--peers" in module.stdout

