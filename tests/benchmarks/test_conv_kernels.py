"""``benchmarks/conv_kernels.py``: every method of each pass computes the same convolution (the
forward output, the weight gradient in its layout), and a short run writes its table."""
import json
import subprocess
import sys

import numpy
import pytest

from helpers import REPO_ROOT  # noqa: I001  (before the benchmark import it enables)

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import conv_kernels  # noqa: E402
from minigrad import _native  # noqa: E402

pytestmark = pytest.mark.skipif(_native.host_library() is None,
                                reason="needs the native host library")


def _numpy(result):
    return result if isinstance(result, numpy.ndarray) else result[1].numpy()


def test_every_method_computes_the_same_pass():
    c, o, h = 16, 32, 5
    fns = conv_kernels.cases(c, o, h, None)
    direct = fns["forward"]["direct kernel"]().reshape(-1, o)
    numpy.testing.assert_allclose(fns["forward"]["patch matrix + BLAS"](), direct, rtol=1e-4,
                                  atol=1e-4)
    weight = fns["weight gradient"]
    want = weight["direct kernel"]().reshape(9 * c, o)  # (i, j, c) rows, o columns
    numpy.testing.assert_allclose(weight["BLAS (colsᵀ @ g)ᵀ"](), want, rtol=1e-4, atol=1e-3)
    numpy.testing.assert_allclose(weight["BLAS gᵀ @ cols"]().T, want, rtol=1e-4, atol=1e-3)


def test_torch_methods_compute_the_same_pass():
    torch = pytest.importorskip("torch")
    c, o, h = 16, 16, 4
    fns = conv_kernels.cases(c, o, h, torch)
    want = fns["forward"]["direct kernel"]()  # (N, H, W, O)
    got = fns["forward"]["torch conv2d"]().permute(0, 2, 3, 1).numpy()
    numpy.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    dw = fns["weight gradient"]["direct kernel"]()  # (kh, kw, C, O)
    torch_dw = _numpy(fns["weight gradient"]["torch conv weight grad"]())  # (O, C, kh, kw)
    numpy.testing.assert_allclose(torch_dw.transpose(2, 3, 1, 0), dw, rtol=1e-4, atol=1e-3)


def test_a_short_run_writes_its_table(tmp_path):
    out = tmp_path / "conv.json"
    subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "conv_kernels.py"),
                    "--shapes", "16x16@4", "--repeat", "1", "--json", str(out)],
                   check=True, capture_output=True, timeout=600)
    rows = json.loads(out.read_text())["rows"]
    assert {(r["pass"], r["method"]) for r in rows} >= {
        ("forward", "direct kernel"), ("forward", "patch matrix + BLAS"),
        ("weight gradient", "BLAS gᵀ @ cols"), ("weight gradient", "BLAS (colsᵀ @ g)ᵀ")}
    assert all(r["ms"] > 0 for r in rows)
