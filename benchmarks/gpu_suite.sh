#!/usr/bin/env bash
# Everything that needs a GPU, in one run of under 8 minutes (BUDGET seconds at most):
#   0. preflight: CuPy sees a GPU, and every CUDA kernel compiles through CuPy (NVRTC); else it
#      stops with one line saying why. Registers and local memory per kernel go to kernels.json.
#   1. the GPU tests of the whole repository (pytest -m gpu), capped at TEST_CAP seconds, each
#      test at PER_TEST seconds (more than the 120 s a 2-rank test gives its ranks);
#   2. the overflow benchmark's short run (python -m minigrad.bench overflow --quick);
#   3. every other benchmark in benchmarks/ that takes --device (with --quick where it takes
#      that), each capped at BENCH_CAP seconds: among them gpu_step.py, the O2 step against the
#      fp32 step of the GEMM-bound MLP (4096 wide, batch 1024) beside PyTorch CUDA's fp32 and
#      autocast + GradScaler steps, and cnn_step.py's minigrad steps on the GPU;
#   4. gpu_step.py on the conv nets of cnn_step.py (vgg, resnet8): the same four steps.
# One failing or timed-out step does not stop the others; a timed-out step gets SIGINT first, so
# pytest and the overflow benchmark still write what they have. Everything goes to OUT_DIR:
#   suite.json            each step's exit code and seconds (written even if a step hangs)
#   nvidia_smi.txt        the device before the run; nvidia_smi_log.csv: clocks, power,
#                         temperature and load every second during it
#   kernels.json          registers, local and shared memory per kernel (preflight)
#   gpu_tests.xml/.json   pytest's report and a summary of it
#   overflow_gpu.json     the overflow benchmark (raw samples, environment, goals), overflow_gpu.png
#   <benchmark>_gpu.json  each other benchmark's JSON (gpu_step_gpu.json: the MLP)
#   gpu_step_<net>_gpu.json  gpu_step.py on conv net <net>
#   <step>.log            each step's output
# Usage: bash benchmarks/gpu_suite.sh OUT_DIR   (exit 0: all passed; 1: a step failed; 2: no GPU
# or a kernel does not compile, nothing else run)
set -u

out="${1:-${OUT:-}}"
if [ -z "$out" ]; then
    echo "usage: $0 OUT_DIR (or set OUT)" >&2
    exit 2
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
BUDGET=${BUDGET:-450}     # seconds for everything: the whole suite fits in under 8 minutes
TEST_CAP=${TEST_CAP:-150} # seconds at most for the tests
PER_TEST=${PER_TEST:-130} # seconds at most for one test
OVERFLOW_CAP=${OVERFLOW_CAP:-60}
BENCH_CAP=${BENCH_CAP:-50}
start=$SECONDS
steps=()
failed=0

remaining() { echo $((BUDGET - (SECONDS - start))); }

write_summary() {  # suite.json: what ran so far
    {
        echo "{\"seconds\": $((SECONDS - start)), \"budget\": $BUDGET, \"steps\": ["
        (IFS=,; echo "${steps[*]}")
        echo "]${1:+, \"error\": \"$1\"}}"
    } > "$out/suite.json"
}

# run NAME CAP COMMAND...: run with a timeout of min(CAP, time left), output to NAME.log too,
# and record the outcome. The timeout sends SIGINT (pytest and the benchmarks write their
# results on it), then SIGKILL 15 s later.
run() {
    local name=$1 cap=$2 left t0 code
    shift 2
    left=$(remaining)
    [ "$cap" -gt "$left" ] && cap=$left
    if [ "$cap" -le 5 ]; then
        echo "== $name: skipped, out of time" >&2
        failed=1
        steps+=("{\"step\": \"$name\", \"exit_code\": null, \"seconds\": 0, \"note\": \"out of time\"}")
        write_summary
        return
    fi
    echo "== $name (limit ${cap}s)"
    t0=$SECONDS
    timeout --signal=INT --kill-after=15 "$cap" "$@" > >(tee "$out/$name.log") 2>&1
    code=$?
    [ "$code" -ne 0 ] && failed=1
    steps+=("{\"step\": \"$name\", \"exit_code\": $code, \"seconds\": $((SECONDS - t0))$( \
        [ "$code" -eq 124 ] && echo ', "note": "timed out"')}")
    write_summary
}

nvidia-smi > "$out/nvidia_smi.txt" 2>&1 || echo "nvidia-smi not available" > "$out/nvidia_smi.txt"

# 0. preflight: one clear line and stop if the GPU or a kernel's compile is not there
"$PYTHON" -m minigrad.bench kernels --json "$out/kernels.json" > "$out/kernels.log" 2>&1
code=$?
cat "$out/kernels.log"
if [ "$code" -ne 0 ]; then
    reason="$(grep -E '^kernels: ' "$out/kernels.log" | head -1)"
    reason="${reason:-kernels: exit code $code, see kernels.log}"
    echo "gpu_suite: stopped before the tests: ${reason#kernels: }" >&2
    write_summary "$(printf '%s' "${reason#kernels: }" | tr '"\\' "'/")"
    exit 2
fi

monitor=""
if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
        --format=csv -l 1 > "$out/nvidia_smi_log.csv" 2>&1 &
    monitor=$!
fi
stop_monitor() { [ -n "$monitor" ] && kill "$monitor" 2> /dev/null; }
trap stop_monitor EXIT

# 1. the GPU tests
per_test=()
"$PYTHON" -c "import pytest_timeout" 2> /dev/null && per_test=(--timeout "$PER_TEST")
run gpu_tests "$TEST_CAP" "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider "${per_test[@]}" \
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

# 2. the overflow benchmark, short run
run overflow "$OVERFLOW_CAP" "$PYTHON" -m minigrad.bench overflow --device gpu --quick \
    --json "$out/overflow_gpu.json" --plot "$out/overflow_gpu.png"

# 3. every other benchmark that takes --device
for script in $(grep -l -- '"--device"' benchmarks/*.py); do
    name="$(basename "$script" .py)"
    quick=()
    grep -q -- '"--quick"' "$script" && quick=(--quick)
    run "$name" "$BENCH_CAP" "$PYTHON" "$script" --device gpu "${quick[@]}" \
        --json "$out/${name}_gpu.json"
done

# 4. the GPU training benchmark on the conv nets
for net in ${CNN_NETS:-vgg resnet8}; do
    run "gpu_step_$net" "$BENCH_CAP" "$PYTHON" benchmarks/gpu_step.py --device gpu --net "$net" \
        --json "$out/gpu_step_${net}_gpu.json"
done

write_summary
cat "$out/suite.json"
exit $failed
