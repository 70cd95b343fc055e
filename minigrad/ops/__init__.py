"""Differentiable ops as lowercase functions (``ops.matmul``) and MindSpore primitives
(``ops.MatMul()``).

Importing this package installs the Tensor's operators and op methods (``ops/tensor_methods.py``)
and the casts ``Function.apply`` makes under autocast (``arithmetic.autocast_inputs``).
MindSpore's float-status primitives (``ops.NPUAllocFloatStatus`` and its two siblings) belong
to the loss-scaling layer above the ops (``minigrad.amp.float_status``); they are looked up
there on first use.
"""
from minigrad.ops.arithmetic import (add, sub, mul, div, pow, maximum, minimum, cast, to_device,
                                     equal, not_equal, less, less_equal, greater, greater_equal)
from minigrad.ops.math import neg, abs, exp, log, sqrt, tanh, sigmoid, relu, clip, where
from minigrad.ops.reduction import sum, mean, max, min
from minigrad.ops.shape import (reshape, transpose, swapaxes, expand_dims, squeeze, broadcast_to,
                                getitem)
from minigrad.ops.linalg import matmul, dense
from minigrad.autograd.api import GradOperation  # MindSpore spells it ops.GradOperation
from minigrad.ops.activation import gelu, leaky_relu, softmax, log_softmax
from minigrad.ops.join import concat, stack, split
from minigrad.ops.conv import conv2d, im2col, same_padding
from minigrad.ops.pooling import max_pool2d, avg_pool2d
from minigrad.ops.normalization import batch_norm, layer_norm
from minigrad.ops.dropout import dropout
from minigrad.ops.embedding import embedding
from minigrad.ops.global_norm import clip_by_global_norm
from minigrad.ops.creation import (zeros, ones, full, zeros_like, ones_like, full_like, arange,
                                   square)
from minigrad.ops.primitives import (Primitive, MatMul, BatchMatMul, Cast, ReduceSum, ReduceMean,
                                     ReduceMax, ReduceMin, Reshape, Transpose, ExpandDims, Squeeze,
                                     Concat, Stack, Split, Softmax, LogSoftmax, ReLU, Sigmoid, Tanh,
                                     GeLU, Exp, Log, Sqrt, Square, Abs, Neg, Add, Sub, Mul, RealDiv,
                                     Div, Pow, Maximum, Minimum, Select, OnesLike, ZerosLike, Fill,
                                     Ones, Zeros, Conv2D, MaxPool, AvgPool, Gather, Shape, DType,
                                     Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual,
                                     Flatten, Argmax, OneHot)
from minigrad.autograd.function import Function as _Function
from minigrad.ops import arithmetic as _arithmetic, tensor_methods as _tensor_methods

_tensor_methods.install()
_Function.autocast_inputs = staticmethod(_arithmetic.autocast_inputs)

_FLOAT_STATUS = ("NPUAllocFloatStatus", "NPUClearFloatStatus", "NPUGetFloatStatus")


def __getattr__(name):
    if name in _FLOAT_STATUS:
        import minigrad.amp.float_status as float_status  # the layer above the ops
        return getattr(float_status, name)
    raise AttributeError(f"module 'minigrad.ops' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_FLOAT_STATUS))
