"""Data types and the dtype policy.

``from minigrad import dtype as mstype`` gives the MindSpore-style names. Dtypes are plain
``numpy.dtype`` objects, so ``tensor.dtype == mstype.float16`` and ``numpy.float16`` both work.

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
losses                                      computed and returned in fp32
gradient of a tensor                        always that tensor's dtype
==========================================  ==================================================
"""
import numpy

from minigrad._checks import check_dtype

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

SUPPORTED = (float16, float32, float64, int8, int32, int64, uint8, bool_)
FLOATS = (float16, float32, float64)

FP16_MAX = 65504.0
FP16_TINY = 2.0 ** -14  # smallest normal fp16
FP16_SUBNORMAL_MIN = 2.0 ** -24


def as_dtype(dtype, name="dtype", *, allow_none=False, owner=None):
    """The ``numpy.dtype`` for ``dtype`` (a dtype, a scalar type or a dtype's name), one of
    ``SUPPORTED`` (``_checks.check_dtype``'s rule).

    None is refused unless ``allow_none`` (NumPy would read it as float64), and so is a value
    that has a dtype (``numpy.float32(3.0)``, an array, a Tensor).

    Raises:
        TypeError: for a value that is not a dtype, a scalar type or a str.
        ValueError: for a name that is no dtype, or a dtype minigrad does not support.
    """
    return check_dtype(name, dtype, SUPPORTED, allow_none=allow_none, owner=owner)


def is_float(dtype):
    """Whether a ``numpy.dtype`` (not a scalar type such as ``numpy.float16``) is a float dtype."""
    return dtype.kind == "f"


def acc_dtype(dtype):
    """Accumulation dtype for reductions and fragile ops: float32 for float16, else ``dtype``."""
    return float32 if dtype == float16 else dtype


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
    conversion rule), while a bool value keeps bool.
    """
    kind = getattr(value, "dtype", None)
    if kind is not None:
        kind = kind.kind
    else:
        kind = "b" if isinstance(value, bool) else "f" if isinstance(value, float) else "i"
    if is_float(tensor_dtype) or kind == "b":
        return tensor_dtype
    if kind in "iu":
        return int32 if tensor_dtype == bool_ else tensor_dtype
    return float32
