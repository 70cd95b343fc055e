"""Differentiable ops as lowercase functions (``ops.matmul``) and MindSpore primitives (``ops.MatMul()``)."""
from minigrad.ops.arithmetic import (add, sub, mul, div, pow, maximum, minimum, cast, to_device,
                                     equal, not_equal, less, less_equal, greater, greater_equal)
from minigrad.ops.math import neg, abs, exp, log, sqrt, tanh, sigmoid, relu, clip, where
from minigrad.ops.reduction import sum, mean, max, min
from minigrad.ops.shape import (reshape, transpose, swapaxes, expand_dims, squeeze, broadcast_to,
                                getitem)
from minigrad.ops.linalg import matmul
