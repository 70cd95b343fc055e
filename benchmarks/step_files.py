"""How many minigrad files one O2 training step runs code in, and how many file-to-file hops.

A reader who follows one ``Model(..., amp_level="O2")`` training step through the source meets
every file this counts. The step (a Dense-BatchNorm-ReLU-Dense network, softmax cross-entropy,
Momentum, the O2 level's ``DynamicLossScaleManager``) is warmed up first, until a step is
applied (the first steps at the default 2**24 overflow and skip), so that imports,
compilation and first-step state building are not counted; then one more step runs under
``sys.settrace`` and every Python call is recorded (the traced step is checked to be an
applied one).

Two steps are traced: one call of the train cell (``model.train_network(x, y)``) and one
``model.train(1, data)`` over a dataset of one batch (the loop, callbacks and dataset included).

* files: the distinct ``minigrad/`` files whose code ran in that step;
* hops: the distinct (caller file, callee file) pairs of calls between two different minigrad
  files (a call from a file into itself is not a hop); ``--calls`` also prints how many such
  calls ran in total.

    python benchmarks/step_files.py [--json benchmarks/results/step_files.json] [--list]

It runs in well under a second (one traced step); there is no slower mode.
"""
import argparse
import collections
import json
import os
import sys

import numpy

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, ROOT)
import minigrad  # noqa: E402
from minigrad import nn  # noqa: E402
from minigrad.dataset import NumpySlicesDataset  # noqa: E402
from minigrad.train import Model  # noqa: E402

PACKAGE = os.path.join(ROOT, "minigrad") + os.sep


def build():
    """An O2 ``Model``, one batch ``(x, y)`` and a dataset holding that one batch."""
    minigrad.set_seed(0)
    net = nn.SequentialCell([nn.Dense(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dense(32, 4)])
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    model = Model(net, loss, opt, amp_level="O2")
    rng = numpy.random.default_rng(0)
    x = minigrad.Tensor(rng.standard_normal((8, 16)).astype(numpy.float32))
    y = minigrad.Tensor(rng.integers(0, 4, 8).astype(numpy.int32))
    data = NumpySlicesDataset({"x": x.asnumpy(), "y": y.asnumpy()}, shuffle=False).batch(8)
    return model, x, y, data


def trace_step(step):
    """Run ``step()`` under a tracer: ``(files, hops, calls)`` of the minigrad code it ran."""
    files, hops, calls = set(), collections.Counter(), 0

    def tracer(frame, event, arg):
        nonlocal calls
        if event != "call":
            return
        callee = frame.f_code.co_filename
        if not callee.startswith(PACKAGE):
            return
        callee = os.path.relpath(callee, ROOT)
        files.add(callee)
        caller = frame.f_back
        # the nearest minigrad frame below: a hop through NumPy still goes file to file
        while caller is not None and not caller.f_code.co_filename.startswith(PACKAGE):
            caller = caller.f_back
        if caller is not None:
            source = os.path.relpath(caller.f_code.co_filename, ROOT)
            if source != callee:
                hops[(source, callee)] += 1
                calls += 1
        return

    sys.settrace(tracer)
    try:
        step()
    finally:
        sys.settrace(None)
    return files, hops, calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--list", action="store_true", help="print the files and the hops")
    args = parser.parse_args()
    model, x, y, data = build()
    cell = model.train_network
    steps = {"train cell": lambda: cell(x, y), "Model.train": lambda: model.train(1, data)}
    result = {}
    for name, step in steps.items():
        for _ in range(60):  # warm up: the scale settles (2**24 first overflows), state, caches
            step()
            if not cell.last_report.skipped:
                break
        files, hops, calls = trace_step(step)
        if cell.last_report.skipped:
            raise RuntimeError(f"the traced step was skipped: {cell.last_report}")
        print(f"one O2 step ({name}): {len(files)} minigrad files, {len(hops)} file-to-file hops "
              f"({calls} calls between files)")
        if args.list:
            for path in sorted(files):
                print("  ", path)
            for (a, b), n in sorted(hops.items()):
                print(f"   {a} -> {b}  x{n}")
        result[name] = {"files": len(files), "hops": len(hops), "calls_between_files": calls,
                        "file_list": sorted(files),
                        "hop_list": [f"{a} -> {b}" for a, b in sorted(hops)]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
