#!/usr/bin/env bash
# Everything that needs a GPU, in one run that ends within 8 minutes:
#   1. the GPU tests of the whole repository (pytest -m gpu),
#   2. every benchmark in benchmarks/ that takes --device gpu (overflow.py first).
# Results go to the folder given as the first argument (default: $OUT):
#   gpu_tests.xml / gpu_tests.json   pytest's report and a JSON summary of it
#   <benchmark>_gpu.json             each benchmark's own JSON
#   nvidia_smi.txt, suite.json       the device, and each step's exit code and duration
# Usage: benchmarks/gpu_suite.sh [OUT_DIR]
set -u

out="${1:-${OUT:-}}"
if [ -z "$out" ]; then
    echo "usage: $0 OUT_DIR (or set OUT)" >&2
    exit 2
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
BUDGET=470   # seconds for everything, under the 8-minute limit
TEST_CAP=200 # seconds at most for the tests, so the benchmarks always get their turn
start=$SECONDS
steps=()
failed=0

remaining() { echo $((BUDGET - (SECONDS - start))); }

# run NAME CAP COMMAND...: run with a timeout of min(CAP, time left) and record the outcome;
# the timeout sends $SIGNAL (default TERM; INT lets pytest stop and still write its report)
run() {
    local name=$1 cap=$2 left t0 code
    shift 2
    left=$(remaining)
    [ "$cap" -gt "$left" ] && cap=$left
    if [ "$cap" -le 5 ]; then
        echo "== $name: skipped, out of time" >&2
        failed=1
        steps+=("{\"step\": \"$name\", \"exit_code\": null, \"seconds\": 0, \"note\": \"out of time\"}")
        return
    fi
    echo "== $name (limit ${cap}s)"
    t0=$SECONDS
    timeout --signal="${SIGNAL:-TERM}" --kill-after=10 "$cap" "$@"
    code=$?
    [ "$code" -ne 0 ] && failed=1
    steps+=("{\"step\": \"$name\", \"exit_code\": $code, \"seconds\": $((SECONDS - t0))}")
}

nvidia-smi > "$out/nvidia_smi.txt" 2>&1 || echo "nvidia-smi not available" > "$out/nvidia_smi.txt"
if ! "$PYTHON" -c "from minigrad import backend; import sys; sys.exit(not backend.CUDA_AVAILABLE)"; then
    "$PYTHON" -c "from minigrad import backend; print('no usable GPU:', backend.CUPY_IMPORT_ERROR)" >&2
    echo '{"error": "CuPy or the GPU is not usable; nothing was run"}' > "$out/suite.json"
    exit 1
fi

per_test=()  # one hung test must not take the whole test budget
"$PYTHON" -c "import pytest_timeout" 2>/dev/null && per_test=(--timeout 60)
SIGNAL=INT run gpu_tests "$TEST_CAP" "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider "${per_test[@]}" \
    --junitxml "$out/gpu_tests.xml" tests
"$PYTHON" - "$out/gpu_tests.xml" "$out/gpu_tests.json" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError) as error:
    summary = {"error": f"no pytest report: {error}"}
else:
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    failed = [f"{c.get('classname')}::{c.get('name')}" for c in suite.iter("testcase")
              if c.find("failure") is not None or c.find("error") is not None]
    summary = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    summary.update(seconds=float(suite.get("time", 0)), failed=failed)
json.dump(summary, open(sys.argv[2], "w"), indent=2)
print("gpu tests:", {k: v for k, v in summary.items() if k != "failed"})
EOF

benchmarks="benchmarks/overflow.py $(grep -l -- '"--device"' benchmarks/*.py | grep -v overflow.py)"
for script in $benchmarks; do
    name="$(basename "$script" .py)"
    run "$name" 240 "$PYTHON" "$script" --device gpu --json "$out/${name}_gpu.json"
done

{
    echo "{\"seconds\": $((SECONDS - start)), \"steps\": ["
    (IFS=,; echo "${steps[*]}")
    echo "]}"
} > "$out/suite.json"
cat "$out/suite.json"
exit $failed
