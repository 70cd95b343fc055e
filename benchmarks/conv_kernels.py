"""One convolution's passes, kernel by kernel: minigrad's direct kernels against its patch matrix
and BLAS products, beside PyTorch's convolution.

The claims behind it (``minigrad/ops/_image_host.py``, ``minigrad/ops/conv.py``): the direct
kernels, forward and weight gradient together, beat the patch matrix plus the BLAS products up
to 64 channels and lose at 64->128; the weight gradient's product runs faster with the larger of
its two short sides as its output's rows (``(colsᵀ @ g)ᵀ`` for a wide patch matrix,
``gᵀ @ cols`` for a narrow one). Each row is one 3x3, stride-1, padding-1 convolution of a
batch of 64 channels-last images, float32. PyTorch's rows run in the same process, its
threads and the BLAS's contending for the cores, so they are a rough reference only
(``cnn_step.py`` compares whole steps with PyTorch in its own process). Before timing, the
direct kernels' results are checked against the BLAS's (AssertionError if they differ beyond
float32 rounding).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/conv_kernels.py \\
        [--json benchmarks/results/conv_kernels.json]
    python benchmarks/conv_kernels.py --shapes 16x16@8 --repeat 2     # a quick check that it runs
"""
import argparse
import os
import sys

import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minigrad import _native  # noqa: E402
from minigrad.ops import _image_host  # noqa: E402
import _timing  # noqa: E402

BATCH, F32 = 64, numpy.float32
GEOMETRY = ((1, 1), (1, 1, 1, 1), (1, 1), (3, 3))  # stride, padding, dilation, kernel


def shape(text):
    """'CxO@H' -> (C, O, H): C input and O output channels on H x H images."""
    channels, size = text.split("@")
    c, o = channels.split("x")
    return int(c), int(o), int(size)


def cases(c, o, h, torch):
    """{pass: {method: callable}} for one convolution, its results checked first."""
    rng = numpy.random.default_rng(0)
    x = rng.standard_normal((BATCH, h, h, c), dtype=F32).transpose(0, 3, 1, 2)  # channels-last
    w = rng.standard_normal((3, 3, c, o), dtype=F32)  # (kh, kw, C, O)
    g = rng.standard_normal((BATCH, h, h, o), dtype=F32)
    padded = numpy.zeros((BATCH, h + 2, h + 2, c), F32)
    padded[:, 1:-1, 1:-1] = x.transpose(0, 2, 3, 1)
    cols = numpy.empty((BATCH * h * h, 9 * c), F32)
    w_rows = numpy.ascontiguousarray(w.reshape(9 * c, o).T)  # (O, (i, j, c)), as conv.py's
    g_rows = g.reshape(-1, o)

    def patches_forward():
        _image_host.patch_matrix(x, GEOMETRY, (h, h), cols)
        return cols @ w_rows.T
    scale = float(numpy.sqrt(9 * c))
    numpy.testing.assert_allclose(_image_host.direct_conv(padded, w, (1, 1)).reshape(-1, o),
                                  patches_forward(), rtol=1e-4, atol=1e-4 * scale)
    numpy.testing.assert_allclose(_image_host.direct_weight_grad(padded, g, (3, 3), (1, 1)),
                                  (cols.T @ g_rows).reshape(3, 3, c, o), rtol=1e-4,
                                  atol=1e-4 * scale * h * numpy.sqrt(BATCH))
    forward = {"direct kernel": lambda: _image_host.direct_conv(padded, w, (1, 1)),
               "patch matrix + BLAS": patches_forward}
    weight = {"direct kernel": lambda: _image_host.direct_weight_grad(padded, g, (3, 3), (1, 1)),
              "BLAS gᵀ @ cols": lambda: g_rows.T @ cols,
              "BLAS (colsᵀ @ g)ᵀ": lambda: cols.T @ g_rows}
    if torch is not None:
        tx = torch.from_numpy(x).contiguous(memory_format=torch.channels_last)
        tw = torch.from_numpy(numpy.ascontiguousarray(w.transpose(3, 2, 0, 1)))
        tg = torch.from_numpy(g).permute(0, 3, 1, 2)
        forward["torch conv2d"] = lambda: torch.nn.functional.conv2d(tx, tw, padding=1)
        weight["torch conv weight grad"] = lambda: torch.ops.aten.convolution_backward(
            tg, tx, tw, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False])
    return {"forward": forward, "weight gradient": weight}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes",
                        default="3x32@32,16x16@32,16x32@32,32x32@16,32x64@16,64x64@8,64x128@8",
                        help="comma-separated CxO@H: input, output channels and image size")
    parser.add_argument("--repeat", type=int, default=20, help="timing rounds (median reported)")
    parser.add_argument("--threads", type=int, default=None,
                        help="PyTorch's thread count (default: the BLAS's)")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    _timing.warn_if_busy()
    if _native.host_library() is None:
        sys.exit("conv_kernels.py needs minigrad's native host library (a C++ compiler)")
    torch = _timing.optional_torch()
    if torch is not None:
        blas = _timing.blas_info().get("blas") or [{}]
        torch.set_num_threads(args.threads or blas[0].get("num_threads") or 1)
    rows = []
    for c, o, h in (shape(s) for s in args.shapes.split(",")):
        for name, fns in cases(c, o, h, torch).items():
            times = _timing.time_interleaved(fns, repeat=args.repeat)
            direct = times["direct kernel"]
            flop = 2 * BATCH * h * h * 9 * c * o
            for method, seconds in times.items():
                rows.append({"conv": f"{c}->{o} @{h}x{h}", "pass": name, "method": method,
                             "ms": seconds * 1e3, "gflops": flop / seconds / 1e9,
                             "time_vs_direct": seconds / direct})
    _timing.print_table(rows, ["conv", "pass", "method", "ms", "gflops", "time_vs_direct"])
    if torch is None:
        print("PyTorch not installed: no torch rows (pip install torch==2.13.0)")
    if args.json:
        _timing.write_json(args.json, {"benchmark": "conv_kernels", "batch": BATCH, "rows": rows,
                                       "torch_threads": torch and torch.get_num_threads()})


if __name__ == "__main__":
    main()
