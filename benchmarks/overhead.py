"""Per-op overhead: a tiny graph (mul, add, sum, backward on 4-element tensors).

minigrad against PyTorch CPU eager, side by side in one run; the tensors are so small that the
time is all framework overhead (graph recording, dispatch, the backward walk).

    python benchmarks/overhead.py [--json benchmarks/results/overhead.json]

PyTorch is optional (``pip install torch==2.13.0``); without it only minigrad is timed and the
table says so. Goal: minigrad / PyTorch <= 1.0.
"""
import argparse
import os
import sys

import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minigrad  # noqa: E402
import _timing  # noqa: E402


def minigrad_step():
    a = minigrad.Tensor(numpy.arange(4, dtype=numpy.float32), requires_grad=True)
    b = minigrad.Tensor(numpy.ones(4, numpy.float32), requires_grad=True)

    def step():
        a.grad = b.grad = None
        ((a * b) + a).sum().backward()
    return step


def torch_step(torch):
    a = torch.arange(4, dtype=torch.float32, requires_grad=True)
    b = torch.ones(4, requires_grad=True)

    def step():
        a.grad = b.grad = None
        ((a * b) + a).sum().backward()
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--number", type=int, default=2000, help="steps per timing repeat")
    parser.add_argument("--repeat", type=int, default=15,
                        help="timing repeats (median is reported)")
    args = parser.parse_args()
    _timing.warn_if_busy()

    steps = {"minigrad": minigrad_step()}
    torch = _timing.optional_torch()
    if torch is not None:
        steps[f"torch {torch.__version__}"] = torch_step(torch)
    times = _timing.time_interleaved(steps, args.repeat, args.number)
    rows = [{"framework": name, "us_per_step": 1e6 * t} for name, t in times.items()]
    base = rows[-1]["us_per_step"]
    for row in rows:
        row["ratio_to_torch"] = row["us_per_step"] / base if torch is not None else None
    _timing.print_table(rows, ["framework", "us_per_step", "ratio_to_torch"])
    if torch is None:
        print("PyTorch not installed: minigrad timed alone "
              "(pip install torch==2.13.0 for the peer)")
    if args.json:
        _timing.write_json(args.json, {"benchmark": "overhead",
                                       "graph": "sum(a*b + a), 4 elements, backward",
                                       "rows": rows, "torch_available": torch is not None})


if __name__ == "__main__":
    main()
