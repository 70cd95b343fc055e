"""``benchmarks/fastcast.py``: every conversion row runs and gives the target dtype, and the bits
of ``astype`` (PyTorch's ``.to`` too, on the benchmark's finite data); bfloat16 rows with
ml_dtypes."""
import sys

import numpy
import pytest

from helpers import REPO_ROOT  # noqa: I001  (before the benchmark import it enables)

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import fastcast  # noqa: E402
from minigrad import dtype as dtypes  # noqa: E402
from minigrad._fp16_host import MIN_SIZE  # noqa: E402


def _numpy(result):
    if isinstance(result, numpy.ndarray):
        return result
    if str(result.dtype) == "torch.bfloat16":  # torch's bfloat16 through its 16-bit pattern
        import torch
        return result.view(torch.int16).numpy().view(dtypes.bfloat16)
    return result.numpy()


@pytest.mark.parametrize("torch", [False, True], ids=["numpy", "torch"])
def test_every_row_converts_to_astypes_bits(torch):
    torch = pytest.importorskip("torch") if torch else None
    cases = fastcast.cases(MIN_SIZE, torch)
    names = {"float16->float32", "float32->float16"}
    if dtypes.HAS_LOWP:
        names |= {"bfloat16->float32", "float32->bfloat16"}
    assert set(cases) == names
    for name, fns in cases.items():
        astype = "ml_dtypes astype" if "bfloat16" in name else "numpy astype"
        want = fns[astype]()
        assert want.dtype.name == name.split("->")[1]
        for method, fn in fns.items():
            if method != "numpy float32 copy":
                got = _numpy(fn())
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (name, method)
