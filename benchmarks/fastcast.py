"""fp16 <-> fp32 conversion: ``minigrad._fp16_host.convert`` vs NumPy ``astype`` vs a float32 copy.

The claim behind it (README, ``_fp16_host``): the native conversion runs at the speed of a copy,
where NumPy's ``astype`` converts element by element in software. PyTorch's ``Tensor.to`` is the
peer when torch is installed.

    python benchmarks/fastcast.py [--sizes 65536,1M,16M] [--json benchmarks/results/fastcast.json]
"""
import argparse
import os
import sys

import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minigrad._fp16_host import convert  # noqa: E402
import _timing  # noqa: E402

F16, F32 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def cases(n, torch):
    """Name -> (source dtype, target dtype, {method: callable})."""
    rng = numpy.random.default_rng(0)
    out = {}
    for src, dst in ((F16, F32), (F32, F16)):
        x = rng.standard_normal(n).astype(src)
        fns = {"minigrad convert": lambda x=x, dst=dst: convert(x, dst),
               "numpy astype": lambda x=x, dst=dst: x.astype(dst),
               "numpy float32 copy": lambda y=x.astype(F32): y.copy()}
        if torch is not None:
            t, tdst = torch.from_numpy(x), getattr(torch, dst.name)
            fns["torch .to"] = lambda t=t, tdst=tdst: t.to(tdst)
        out[f"{src.name}->{dst.name}"] = fns
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="65536,1M,16M", help="comma-separated element counts")
    parser.add_argument("--repeat", type=int, default=15, help="timing rounds (median reported)")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    _timing.warn_if_busy()

    torch = _timing.optional_torch()
    rows = []
    for n in (size(s) for s in args.sizes.split(",")):
        for name, fns in cases(n, torch).items():
            number = max(1, (1 << 22) // n)
            times = _timing.time_interleaved(fns, repeat=args.repeat, number=number)
            copy = times["numpy float32 copy"]
            for method, seconds in times.items():
                rows.append({"n": n, "conversion": name, "method": method,
                             "ns_per_element": seconds / n * 1e9,
                             "x_vs_numpy_astype": times["numpy astype"] / seconds,
                             "time_vs_fp32_copy": seconds / copy})
    _timing.print_table(rows, ["n", "conversion", "method", "ns_per_element", "x_vs_numpy_astype",
                               "time_vs_fp32_copy"])
    if torch is None:
        print("PyTorch not installed: no torch .to column (pip install torch==2.13.0)")
    if args.json:
        _timing.write_json(args.json, {"benchmark": "fastcast", "rows": rows,
                                       "torch_available": torch is not None})


if __name__ == "__main__":
    main()
