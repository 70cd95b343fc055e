"""Differentiable ops as lowercase functions (``ops.matmul``) and MindSpore primitives
(``ops.MatMul()``).

``composite`` holds MindSpore's helpers for hand-written training steps (``depend``, ``fill``,
``dtype``, ``partial``, ``MultitypeFuncGraph``, ``HyperMap``; ``minigrad.jit``).

Importing this package installs the Tensor's operators and op methods (``ops/tensor_methods.py``)
and the casts ``Function.apply`` makes under autocast (``arithmetic.autocast_inputs``).
MindSpore's float-status primitives (``ops.NPUAllocFloatStatus`` and its siblings, the 2.x
``NPUClearFloatStatusV2`` and ``NPUGetFloatStatusV2`` too) belong to the loss-scaling layer above
the ops (``minigrad.amp.npu_ops``); they are looked up
there on first use.
"""
# MindSpore spells them ops.GradOperation, ops.grad and ops.value_and_grad too
from minigrad.autograd.api import GradOperation, grad, value_and_grad
from minigrad.autograd.function import Function as _Function
from minigrad.ops import arithmetic as _arithmetic
from minigrad.ops import tensor_methods as _tensor_methods
from minigrad.ops.activation import erf, gelu, leaky_relu, log_softmax, softmax
from minigrad.ops.attention import scaled_dot_product_attention
from minigrad.ops.arithmetic import (
    add,
    cast,
    div,
    equal,
    greater,
    greater_equal,
    less,
    less_equal,
    maximum,
    minimum,
    mul,
    not_equal,
    pow,
    sub,
    to_device,
)
from minigrad.ops.composite import HyperMap, MultitypeFuncGraph, depend, dtype, fill, partial
from minigrad.ops.conv import conv2d, im2col, same_padding
from minigrad.ops.creation import (
    arange,
    full,
    full_like,
    ones,
    ones_like,
    square,
    zeros,
    zeros_like,
)
from minigrad.ops.dropout import dropout
from minigrad.ops.embedding import embedding
from minigrad.ops.global_norm import clip_by_global_norm
from minigrad.ops.join import concat, split, stack
from minigrad.ops.linalg import dense, matmul
from minigrad.ops.math import (abs, clip, exp, log, neg, reciprocal, relu, sigmoid, sqrt, tanh,
                               where)
from minigrad.ops.normalization import batch_norm, layer_norm
from minigrad.ops.pooling import avg_pool2d, max_pool2d
from minigrad.ops.primitives import (
    Abs,
    Add,
    Argmax,
    AvgPool,
    BatchMatMul,
    Cast,
    Concat,
    Conv2D,
    Div,
    DType,
    Equal,
    Exp,
    ExpandDims,
    Fill,
    Flatten,
    Gather,
    GeLU,
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
    Log,
    LogSoftmax,
    MatMul,
    Maximum,
    MaxPool,
    Minimum,
    Mul,
    Neg,
    NotEqual,
    OneHot,
    Ones,
    OnesLike,
    Pow,
    Primitive,
    RealDiv,
    Reciprocal,
    ReduceMax,
    ReduceMean,
    ReduceMin,
    ReduceSum,
    ReLU,
    Reshape,
    Select,
    Shape,
    Sigmoid,
    Softmax,
    Split,
    Sqrt,
    Square,
    Squeeze,
    Stack,
    Sub,
    Tanh,
    Transpose,
    Zeros,
    ZerosLike,
)
from minigrad.ops.reduction import max, mean, min, sum
from minigrad.ops.shape import (
    broadcast_to,
    expand_dims,
    getitem,
    reshape,
    squeeze,
    swapaxes,
    transpose,
)

_tensor_methods.install()
_Function.autocast_inputs = staticmethod(_arithmetic.autocast_inputs)

_FLOAT_STATUS = ("NPUAllocFloatStatus", "NPUClearFloatStatus", "NPUGetFloatStatus",
                 "NPUClearFloatStatusV2", "NPUGetFloatStatusV2")


def __getattr__(name):
    if name in _FLOAT_STATUS:
        import minigrad.amp.npu_ops as npu_ops  # the layer above the ops
        return getattr(npu_ops, name)
    raise AttributeError(f"module 'minigrad.ops' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_FLOAT_STATUS))
