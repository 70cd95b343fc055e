"""benchmarks/thor.py --quick runs every part of the protocol and writes the JSON it promises."""
import importlib.util
import json

import pytest

from helpers import REPO_ROOT

pytest.importorskip("sklearn")


def load_benchmark():
    spec = importlib.util.spec_from_file_location("thor_benchmark",
                                                  REPO_ROOT / "benchmarks" / "thor.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_mode_writes_the_protocol_and_every_measurement(tmp_path):
    module = load_benchmark()
    path = tmp_path / "thor.json"
    module.main(["--quick", "--tasks", "inverse,autoencoder,mlp", "--json", str(path)])
    payload = json.loads(path.read_text())
    assert "same initial weights" in payload["protocol"]
    assert {"loadavg", "blas"} <= set(payload["environment"]["before"])
    inverse = payload["batched_inverse"]
    assert inverse["max_abs_XS_minus_I"] < 1e-3 and inverse["ratio"] > 0
    assert len(inverse["ratio_quartiles"]) == 3
    ae, mlp = payload["tasks"]["autoencoder"], payload["tasks"]["mlp"]
    for task in (ae, mlp):
        for kind in ("momentum", "adam", "thor"):
            assert task[kind]["runs"] and "hp" in task[kind]
        thor_run = task["thor"]["runs"][0]
        assert set(thor_run["phase_seconds"]) == {"factors", "inverses", "precondition", "update"}
        assert thor_run["refreshes"] >= 1
    trace_rule = ae["trace_rule"]
    assert set(trace_rule) >= {"every_step", "trace", "refresh_ratio", "steps_ratio", "omega1",
                               "paper_omega1"}
    assert set(trace_rule["trace"]) == {"0.01", "0.03", "0.1"}  # JSON keys
    assert trace_rule["omega1"] in (0.01, 0.03, 0.1)
    assert mlp["step_costs"]["reuse_over_momentum"] > 0
    assert set(mlp["step_costs"]["refresh_extra_ms_per_layer"]) == {"0.weight", "2.weight",
                                                                   "4.weight"}


def test_quick_linear_regression_compares_both_fishers(tmp_path):
    module = load_benchmark()
    path = tmp_path / "thor.json"
    module.main(["--quick", "--tasks", "linreg", "--json", str(path)])
    payload = json.loads(path.read_text())
    assert payload["batched_inverse"] is None  # not asked for
    linreg = payload["tasks"]["linreg"]
    assert set(linreg["thor"]["best_by_fisher"]) == {"empirical", "mc"}
    assert set(linreg["thor_steps_ratio_by_fisher"]) == {"empirical", "mc"}
    assert linreg["thor"]["hp"]["fisher"] in ("empirical", "mc")
