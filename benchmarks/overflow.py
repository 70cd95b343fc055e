"""Overflow check (float status) throughput: ``python -m minigrad.bench overflow`` run from a
checkout. The tool ships with the package (``minigrad/bench/overflow.py`` says what it measures
and how); this script takes the same arguments:

    python benchmarks/overflow.py --device cpu --json benchmarks/results/overflow_cpu.json
    python benchmarks/overflow.py --device gpu --quick --json $OUT/overflow_gpu.json
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from minigrad.bench.cli import main  # noqa: E402

if __name__ == "__main__":
    main(["overflow", *sys.argv[1:]])
