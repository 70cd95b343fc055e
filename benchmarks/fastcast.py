"""fp16/bf16 <-> fp32 conversion: ``minigrad._fp16_host.convert`` vs ``astype`` vs a float32 copy.

The claim behind it (README, ``_fp16_host``): the native conversion runs at the speed of a copy,
where ``astype`` converts element by element in software (NumPy's for float16, ml_dtypes' cast
for bfloat16). PyTorch's ``Tensor.to`` is the peer when torch is installed. The bfloat16 rows
need ml_dtypes (they are left out without it). Before timing, every case checks that
``convert`` gives ``astype``'s bits.

    python benchmarks/fastcast.py [--sizes 65536,1M,16M] [--json benchmarks/results/fastcast.json]
    python benchmarks/fastcast.py --sizes 4096 --repeat 1     # a quick check that it runs
"""
import argparse
import os
import sys

import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minigrad import dtype as dtypes  # noqa: E402
from minigrad._fp16_host import convert  # noqa: E402
import _timing  # noqa: E402

F16, F32 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)
PAIRS = [(F16, F32), (F32, F16)] + ([(dtypes.bfloat16, F32), (F32, dtypes.bfloat16)]
                                    if dtypes.HAS_LOWP else [])


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def astype_name(src, dst):
    """The ``astype`` row's name: ml_dtypes' cast does bfloat16, NumPy's float16."""
    return "ml_dtypes astype" if dtypes.HAS_LOWP and dtypes.bfloat16 in (src, dst) \
        else "numpy astype"


def torch_tensor(torch, x):
    """``x`` as a torch tensor sharing its memory (bfloat16 through its 16-bit pattern: torch
    does not read ml_dtypes' bfloat16 arrays)."""
    if x.dtype == F16 or x.dtype == F32:
        return torch.from_numpy(x)
    return torch.from_numpy(x.view(numpy.int16)).view(torch.bfloat16)


def cases(n, torch):
    """Name -> {method: callable}, for each pair of ``PAIRS``; ``convert``'s bits are checked
    against ``astype``'s first (AssertionError if they differ)."""
    rng = numpy.random.default_rng(0)
    out = {}
    for src, dst in PAIRS:
        x = rng.standard_normal(n).astype(src)
        if convert(x, dst).tobytes() != x.astype(dst).tobytes():
            raise AssertionError(f"convert {src.name}->{dst.name} differs from astype")
        fns = {"minigrad convert": lambda x=x, dst=dst: convert(x, dst),
               astype_name(src, dst): lambda x=x, dst=dst: x.astype(dst),
               "numpy float32 copy": lambda y=x.astype(F32): y.copy()}
        if torch is not None:
            t, tdst = torch_tensor(torch, x), getattr(torch, dst.name)
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
            astype = next(t for m, t in times.items() if m.endswith("astype"))
            for method, seconds in times.items():
                rows.append({"n": n, "conversion": name, "method": method,
                             "ns_per_element": seconds / n * 1e9,
                             "x_vs_astype": astype / seconds,
                             "time_vs_fp32_copy": seconds / copy})
    _timing.print_table(rows, ["n", "conversion", "method", "ns_per_element", "x_vs_astype",
                               "time_vs_fp32_copy"])
    if not dtypes.HAS_LOWP:
        print("ml_dtypes not installed: no bfloat16 rows (pip install ml_dtypes)")
    if torch is None:
        print("PyTorch not installed: no torch .to column (pip install torch==2.13.0)")
    if args.json:
        _timing.write_json(args.json, {"benchmark": "fastcast", "rows": rows,
                                       "torch_available": torch is not None})


if __name__ == "__main__":
    main()
