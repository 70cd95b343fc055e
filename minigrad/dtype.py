"""Data types and the dtype policy.

``from minigrad import dtype as mstype`` gives the MindSpore-style names. Dtypes are plain
``numpy.dtype`` objects, so ``tensor.dtype == mstype.float16`` and ``numpy.float16`` both work.

``bfloat16``, ``float8_e4m3fn`` and ``float8_e5m2`` are the dtypes of the optional package
``ml_dtypes`` (``pip install 'minigrad[lowp]'``); without it these names raise an ImportError
that says so. bfloat16 computes like float16 (``is_low_precision``: fp32 accumulation, one
rounding); the FP8 formats are storage and GEMM-input formats only (``is_fp8``; arithmetic on them
raises a TypeError, cast first). A plain cast to float8_e4m3fn does not saturate: a value beyond
±448 becomes NaN (e4m3fn has no inf), as in ml_dtypes and PyTorch.

The policy, in one table (tested in ``tests/core/test_dtype_policy.py``):

==========================================  ==================================================
situation                                   result
==========================================  ==================================================
tensor (op) Python/NumPy scalar, 0-d array  the tensor's dtype: operands that are not tensors
or other non-tensor array                   are *weak* (no silent upcast of fp16)
fp16 tensor (op) fp32 tensor                fp32 (the wider float wins), gradients cast back
matmul / dense / conv2d of two float dtypes TypeError naming both (as PyTorch and MindSpore);
                                            under autocast both run in its dtype
int tensor (op) Python float                float32
bool tensor (op) Python int / float         int32 / float32 (MindSpore's rule; bool with bool: bool)
int tensor (op) float tensor                the float tensor's dtype (not NumPy's float64)
fp16 matmul / conv                          fp32 accumulation (computed in fp32, stored fp16)
fp16 sum/mean, softmax, log_softmax, log    fp32 accumulation, result fp16
fp16 attention (scaled_dot_product_attention scores, mask, softmax and both products in
and the attention layers)                   fp32, result fp16; a mask value below -65504 (-1e9,
                                            -inf) gives weight 0, a row with no key left zeros
losses                                      computed and returned in fp32
gradient of a tensor                        always that tensor's dtype
bf16: every fp16 row above                  the same, with bfloat16 in place of float16
bf16 tensor (op) fp16 tensor                fp32 (neither holds the other)
FP8 tensor in an op that computes           TypeError naming the op and the dtype (cast,
                                            reshape, transpose, index, concat, stack and split
                                            move FP8 values as they are)
==========================================  ==================================================
"""
import numpy

from minigrad._checks import check_dtype

try:  # the optional extra ``minigrad[lowp]``: bfloat16 and the FP8 formats as NumPy dtypes
    import ml_dtypes as _ml_dtypes
except ImportError:
    _ml_dtypes = None

HAS_LOWP = _ml_dtypes is not None  # bfloat16 and the FP8 formats are available
LOWP_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
LOWP_HINT = ("needs the optional package ml_dtypes (pip install 'minigrad[lowp]', or "
             "pip install ml_dtypes)")

float16 = numpy.dtype("float16")
float32 = numpy.dtype("float32")
float64 = numpy.dtype("float64")
int8 = numpy.dtype("int8")
int32 = numpy.dtype("int32")
int64 = numpy.dtype("int64")
uint8 = numpy.dtype("uint8")
bool_ = numpy.dtype("bool")
# MindSpore spellings
float_ = float32
half = float16
double = float64

if _ml_dtypes is not None:
    bfloat16 = numpy.dtype(_ml_dtypes.bfloat16)
    float8_e4m3fn = numpy.dtype(_ml_dtypes.float8_e4m3fn)
    float8_e5m2 = numpy.dtype(_ml_dtypes.float8_e5m2)
    _BF16 = (bfloat16,)
    FP8 = (float8_e4m3fn, float8_e5m2)
else:
    _BF16 = FP8 = ()

# FLOATS: the float dtypes ops compute in; LOW_PRECISION: those among them that accumulate in
# float32 and round once (the fp16 compute rule); FP8: storage and GEMM-input formats only
FLOATS = (float16, float32, float64, *_BF16)
LOW_PRECISION = (float16, *_BF16)
SUPPORTED = (*FLOATS, *FP8, int8, int32, int64, uint8, bool_)
_FLOAT_SET, _LOW_SET, _FP8_SET = frozenset(FLOATS), frozenset(LOW_PRECISION), frozenset(FP8)

FP16_MAX = 65504.0
FP16_TINY = 2.0 ** -14  # smallest normal fp16
FP16_SUBNORMAL_MIN = 2.0 ** -24


def __getattr__(name):
    """``bfloat16``, ``float8_e4m3fn`` and ``float8_e5m2`` without ml_dtypes: an ImportError
    saying how to install it (never a silent stand-in dtype)."""
    if name in LOWP_NAMES:
        raise ImportError(f"minigrad.{name} {LOWP_HINT}")
    raise AttributeError(f"module 'minigrad.dtype' has no attribute {name!r}")


def as_dtype(dtype, name="dtype", *, allow_none=False, owner=None):
    """The ``numpy.dtype`` for ``dtype`` (a dtype, a scalar type or a dtype's name), one of
    ``SUPPORTED`` (``_checks.check_dtype``'s rule).

    None is refused unless ``allow_none`` (NumPy would read it as float64), and so is a value
    that has a dtype (``numpy.float32(3.0)``, an array, a Tensor).

    Raises:
        TypeError: for a value that is not a dtype, a scalar type or a str.
        ValueError: for a name that is no dtype, or a dtype minigrad does not support.
        ImportError: for ``"bfloat16"``, ``"float8_e4m3fn"`` or ``"float8_e5m2"`` when ml_dtypes
            is not installed.
    """
    if _ml_dtypes is None and isinstance(dtype, str) and dtype in LOWP_NAMES:
        raise ImportError(f"{owner + ': ' if owner else ''}{name}={dtype!r} {LOWP_HINT}")
    return check_dtype(name, dtype, SUPPORTED, allow_none=allow_none, owner=owner)


def is_float(dtype):
    """Whether a ``numpy.dtype`` (not a scalar type such as ``numpy.float16``) is a float dtype
    that ops compute in: float16, bfloat16, float32, float64 (``FLOATS``). The FP8 formats are
    not (``is_fp8``); NumPy's ``dtype.kind`` cannot tell, since ml_dtypes gives bfloat16 the kind
    ``"V"`` and float8_e5m2 the kind ``"f"``. None (no dtype) is not."""
    return dtype in _FLOAT_SET


def is_fp8(dtype):
    """Whether ``dtype`` is one of the FP8 storage formats (float8_e4m3fn, float8_e5m2)."""
    return dtype in _FP8_SET


def is_low_precision(dtype):
    """Whether ``dtype`` is a low-precision float that follows the fp16 compute rule (float16,
    bfloat16): matmuls, convolutions, reductions, softmax, norms and losses run in float32 and
    round once to ``dtype``."""
    return dtype in _LOW_SET


def acc_dtype(dtype):
    """Accumulation dtype for reductions and fragile ops: float32 for the low-precision floats
    (float16, bfloat16) and the FP8 formats, else ``dtype``."""
    return float32 if dtype in _LOW_SET or dtype in _FP8_SET else dtype


def finfo(dtype):
    """Machine limits of a float dtype (``max``, ``tiny``, ``eps``, ``smallest_subnormal``, ...):
    ``ml_dtypes.finfo`` for bfloat16 and the FP8 formats, ``numpy.finfo`` for the others.

    Raises:
        TypeError / ValueError: as ``as_dtype``, or for a dtype that is not a float.
    """
    dtype = as_dtype(dtype)
    if dtype in FP8 or dtype in _BF16:
        return _ml_dtypes.finfo(dtype)
    if not is_float(dtype):
        raise ValueError(f"finfo: dtype must be a float dtype, got {dtype}")
    return numpy.finfo(dtype)


def check_compute(dtype, op):
    """Refuse arithmetic on an FP8 tensor: FP8 is a storage and GEMM-input format (cast it to a
    float dtype first, with ``astype``).

    Raises:
        TypeError: naming ``op`` and ``dtype`` when ``dtype`` is an FP8 format.
    """
    if dtype in FP8:
        raise TypeError(f"{op} does not compute on {dtype} tensors: FP8 holds values for "
                        f"storage and as quantized GEMM inputs; cast to float32 or bfloat16 first "
                        f"(t.astype(...))")


def default_dtype(value):
    """Dtype of a tensor built from Python data (a scalar or nested lists): float32 for floats,
    int64 for ints, bool for bools. The data is read as a whole, as NumPy does ([1, 2.5] is
    float)."""
    kind = numpy.asarray(value).dtype.kind
    return {"b": bool_, "i": int64, "u": int64}.get(kind, float32)


def promote_types(*dtypes):
    """Dtype of an op's result on tensors of ``dtypes`` (``numpy.dtype`` objects, as
    ``Tensor.dtype``; pass scalar types such as ``numpy.float16`` through ``as_dtype`` first):
    a float dtype beats every integer/bool dtype (int64 with float16 gives float16, where NumPy
    says float64); otherwise NumPy's rule (float16 with float32 gives float32)."""
    floats = [d for d in dtypes if is_float(d)]
    return numpy.result_type(*(floats or dtypes))


def weak_dtype(value, tensor_dtype):
    """Dtype that a non-tensor operand takes next to a tensor of ``tensor_dtype``.

    A float (or int) value beside a float tensor takes the tensor's dtype; beside an integer
    tensor a float value gives float32 and an integer value the tensor's dtype; beside a bool
    tensor an integer value gives int32 and a float value float32 (MindSpore's implicit
    conversion rule), while a bool value keeps bool. Beside an FP8 tensor any value takes the FP8
    dtype, so that the op refuses the FP8 tensor (``check_compute``) instead of promoting it.
    """
    kind = getattr(value, "dtype", None)
    if kind is not None:
        kind = kind.kind
    else:
        kind = "b" if isinstance(value, bool) else "f" if isinstance(value, float) else "i"
    if is_float(tensor_dtype) or kind == "b" or tensor_dtype in _FP8_SET:
        return tensor_dtype  # an FP8 tensor keeps its dtype: the op then refuses it
    if kind in "iu":
        return int32 if tensor_dtype == bool_ else tensor_dtype
    return float32
