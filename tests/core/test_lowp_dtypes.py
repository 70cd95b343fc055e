"""bfloat16 and the FP8 formats as minigrad dtypes: names, finfo, casts, printing, checkpoints,
argument checks, and the ImportError without the optional ml_dtypes package."""
import os
import subprocess
import sys

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

ml_dtypes = pytest.importorskip("ml_dtypes")

import minigrad  # noqa: E402
from minigrad import Parameter, Tensor  # noqa: E402
from minigrad import dtype as mstype  # noqa: E402
from minigrad.train import load_checkpoint, save_checkpoint  # noqa: E402

LOWP = [("bfloat16", ml_dtypes.bfloat16), ("float8_e4m3fn", ml_dtypes.float8_e4m3fn),
        ("float8_e5m2", ml_dtypes.float8_e5m2)]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("name,ml", LOWP, ids=[n for n, _ in LOWP])
def test_names_are_the_ml_dtypes_dtypes(name, ml):
    assert getattr(minigrad, name) == getattr(mstype, name) == numpy.dtype(ml)
    assert mstype.as_dtype(name) == numpy.dtype(ml) and mstype.as_dtype(ml) == numpy.dtype(ml)
    assert name in dir(minigrad)


def test_dtype_classes():
    # ml_dtypes gives bfloat16 the kind "V" and float8_e5m2 the kind "f": the one owner decides
    assert mstype.is_float(mstype.bfloat16) and mstype.is_low_precision(mstype.bfloat16)
    assert mstype.is_low_precision(mstype.float16) and not mstype.is_low_precision(mstype.float32)
    for fp8 in (mstype.float8_e4m3fn, mstype.float8_e5m2):
        assert mstype.is_fp8(fp8) and not mstype.is_float(fp8)
        assert mstype.acc_dtype(fp8) == mstype.float32
    assert mstype.acc_dtype(mstype.bfloat16) == mstype.float32
    assert mstype.acc_dtype(mstype.float16) == mstype.float32
    assert mstype.acc_dtype(mstype.float64) == mstype.float64
    assert mstype.promote_types(mstype.bfloat16, mstype.int64) == mstype.bfloat16
    assert mstype.promote_types(mstype.bfloat16, mstype.float16) == mstype.float32
    assert mstype.promote_types(mstype.bfloat16, mstype.float32) == mstype.float32


@pytest.mark.parametrize("name,ml", LOWP, ids=[n for n, _ in LOWP])
def test_finfo(name, ml):
    info, ref = mstype.finfo(name), ml_dtypes.finfo(ml)
    assert float(info.max) == float(ref.max) and float(info.tiny) == float(ref.tiny)
    assert float(info.eps) == float(ref.eps)
    assert float(info.smallest_subnormal) == float(ref.smallest_subnormal)


def test_finfo_values():
    assert float(mstype.finfo(mstype.float8_e4m3fn).max) == 448.0
    assert float(mstype.finfo(mstype.float8_e5m2).max) == 57344.0
    assert float(mstype.finfo(mstype.float8_e4m3fn).smallest_subnormal) == 2.0 ** -9
    assert float(mstype.finfo(mstype.bfloat16).eps) == 2.0 ** -7
    assert float(mstype.finfo(mstype.float16).max) == 65504.0
    with pytest.raises(ValueError, match="float dtype"):
        mstype.finfo("int32")


# adversarial values: +-max, max*(1 +- eps), ties, subnormals, +-0, inf, NaN
ADVERSARIAL = numpy.array([0.0, -0.0, 1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 448.0, 464.0, 480.0,
                           -448.0, 57344.0, 61440.0, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11,
                           2.0 ** -16, 2.0 ** -17, 2.0 ** -133, 3.0e38, 3.4e38, numpy.inf,
                           -numpy.inf, numpy.nan, 1e-45, 0.1, -7.3], numpy.float32)


@pytest.mark.parametrize("name,ml", LOWP, ids=[n for n, _ in LOWP])
@pytest.mark.parametrize("source", ["float32", "float64"])
def test_cast_is_bit_exact_against_ml_dtypes(name, ml, source):
    values = ADVERSARIAL.astype(source)
    with numpy.errstate(all="ignore"):
        got = Tensor(values).astype(name)
        expected = values.astype(ml)
    assert got.dtype == numpy.dtype(ml)
    width = f"u{numpy.dtype(ml).itemsize}"
    numpy.testing.assert_array_equal(got.data.view(width), expected.view(width))
    with numpy.errstate(all="ignore"):
        back = got.astype(minigrad.float32)
    assert back.dtype == mstype.float32
    numpy.testing.assert_array_equal(back.data, expected.astype(numpy.float32))


@given(st.lists(st.integers(0, 2 ** 32 - 1), min_size=1, max_size=64))
def test_cast_of_any_float32_bits_is_ml_dtypes_cast(patterns):
    """Every float32 bit pattern (NaNs with payloads, infs, subnormals, values between two
    representable ones) casts to each format as ml_dtypes casts it, and back."""
    values = numpy.array(patterns, numpy.uint32).view(numpy.float32)
    for name, ml in LOWP:
        width = f"u{numpy.dtype(ml).itemsize}"
        with numpy.errstate(all="ignore"):
            got, want = Tensor(values).astype(name), values.astype(ml)
            back = got.astype(minigrad.float32)
        numpy.testing.assert_array_equal(got.data.view(width), want.view(width))
        numpy.testing.assert_array_equal(back.data.view(numpy.uint32),
                                         want.astype(numpy.float32).view(numpy.uint32))


def test_cast_round_trip_and_gradient():
    x = Tensor(numpy.array([1.0, 2.5, -3.0], numpy.float32), requires_grad=True)
    y = minigrad.ops.cast(x, minigrad.bfloat16)
    assert y.dtype == mstype.bfloat16
    y.astype(minigrad.float32).sum().backward()
    assert x.grad.dtype == mstype.float32
    numpy.testing.assert_array_equal(x.grad.asnumpy(), numpy.ones(3, numpy.float32))


def test_e4m3fn_overflow_is_nan_as_ml_dtypes_casts():
    # the plain cast does not saturate (as ml_dtypes and PyTorch): 1000 has no e4m3fn value
    out = Tensor(numpy.array([1000.0], numpy.float32)).astype(minigrad.float8_e4m3fn)
    assert numpy.isnan(out.data.astype(numpy.float32)).all()


def test_bfloat16_method():
    t = Tensor([1.0, 2.5]).bfloat16()  # MindSpore 2.x's and PyTorch's Tensor.bfloat16()
    assert t.dtype == mstype.bfloat16 and t.float().dtype == mstype.float32


def test_tensor_constructor_takes_the_names():
    t = Tensor([1.0, 2.0, 3.0], dtype="bfloat16")
    assert t.dtype == mstype.bfloat16
    t = Tensor(numpy.ones(2, ml_dtypes.float8_e5m2))
    assert t.dtype == mstype.float8_e5m2


@pytest.mark.parametrize("name", [n for n, _ in LOWP])
def test_repr_shows_the_dtype_name(name):
    t = Tensor([1.5, -2.0], dtype=name)
    assert f"dtype={name}," in repr(t) and "[1.5, -2]" in repr(t)


def test_checks_name_the_low_precision_dtypes():
    with pytest.raises(ValueError, match="bfloat16"):
        mstype.as_dtype("complex64")
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        mstype.as_dtype("float8_e4m3fnuz")


def test_checkpoint_round_trip_is_bit_exact(tmp_path):
    bits = numpy.arange(0, 2 ** 16, 97, dtype=numpy.uint16)
    bf16 = Parameter(Tensor(bits.view(ml_dtypes.bfloat16)), name="w")
    e4m3 = numpy.arange(256, dtype=numpy.uint8).view(ml_dtypes.float8_e4m3fn)
    e5m2 = numpy.arange(256, dtype=numpy.uint8).view(ml_dtypes.float8_e5m2)

    class Net(minigrad.nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = bf16

    path = str(tmp_path / "lowp.ckpt")
    save_checkpoint(Net(), path, append_dict={"e4m3": e4m3, "e5m2": Tensor(e5m2)})
    params = load_checkpoint(path)
    assert params["w"].dtype == mstype.bfloat16 and params["w"].requires_grad
    assert params["e4m3"].dtype == mstype.float8_e4m3fn and not params["e4m3"].requires_grad
    assert params["e5m2"].dtype == mstype.float8_e5m2
    numpy.testing.assert_array_equal(params["w"].data.view(numpy.uint16), bits)
    numpy.testing.assert_array_equal(params["e4m3"].data.view(numpy.uint8), numpy.arange(256))
    numpy.testing.assert_array_equal(params["e5m2"].data.view(numpy.uint8), numpy.arange(256))


def test_checkpoint_loads_fp32_into_bf16_and_refuses_overflow(tmp_path):
    net32, net16 = minigrad.nn.Dense(3, 2), minigrad.nn.Dense(3, 2)
    net16.to_float(minigrad.bfloat16)
    net16.cast_parameters(minigrad.bfloat16)
    path = str(tmp_path / "fp32.ckpt")
    save_checkpoint(net32, path)
    minigrad.train.load_param_into_net(net16, load_checkpoint(path))
    assert net16.weight.dtype == mstype.bfloat16
    numpy.testing.assert_array_equal(net16.weight.data, net32.weight.data.astype(mstype.bfloat16))
    huge = minigrad.nn.Dense(3, 2)
    huge.cast_parameters(minigrad.float64)
    huge.weight.set_data(numpy.full((2, 3), 1e300))
    save_checkpoint(huge, path)
    with pytest.raises(ValueError, match="exceed bfloat16's largest finite value 3.38953e"):
        minigrad.train.load_param_into_net(net16, load_checkpoint(path))


MISSING = """
import sys
sys.modules["ml_dtypes"] = None  # import ml_dtypes raises ImportError
import minigrad, numpy
from minigrad import dtype as mstype
assert mstype.FP8 == () and mstype.FLOATS == (mstype.float16, mstype.float32, mstype.float64)
for use in (lambda: minigrad.bfloat16, lambda: mstype.float8_e5m2,
            lambda: minigrad.Tensor([1.0], dtype="bfloat16"),
            lambda: minigrad.Tensor([1.0]).astype("float8_e4m3fn"),
            lambda: minigrad.Tensor([1.0]).bfloat16(),
            lambda: minigrad.mixed_precision.Policy("mixed_bfloat16")):
    try:
        use()
    except ImportError as error:
        assert "pip install 'minigrad[lowp]'" in str(error), error
    else:
        raise AssertionError("no ImportError")
print(minigrad.Tensor([1.0], dtype="float16").dtype)
"""


def test_without_ml_dtypes_the_names_raise_import_error_with_the_extra():
    result = subprocess.run([sys.executable, "-c", MISSING], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "float16"
