"""Second derivatives of every op: the ``create_graph`` backward of each op, differentiated again,
against the float64 checker (``check_double_backward``) in float64, float32 and float16.

``CASES`` holds one or more calls per op; ``test_every_op_has_a_second_derivative_case`` walks
the Function classes of ``minigrad.ops`` and fails for one that no case reaches or whose
backward runs on arrays only (``saves`` None). Inputs keep away from kinks and ties, as the
first-order tests do.
"""
import numpy
import pytest

import minigrad
from minigrad import Tensor, ops
from minigrad.autograd.function import Function
from minigrad.ops.shape import scatter
from minigrad.testing import check_double_backward

F16, F32, F64 = numpy.float16, numpy.float32, numpy.float64


def _away(shape, seed=0, low=0.3, high=1.5):
    rng = numpy.random.RandomState(seed)
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


def _positive(shape, seed=0):
    return numpy.random.RandomState(seed).uniform(0.5, 2.0, shape)


def _distinct(shape, seed=0):
    """Values at least 2/n apart (no ties for max, min, maximum, minimum)."""
    n = int(numpy.prod(shape))
    return (numpy.random.RandomState(seed).permutation(n) - n / 2).reshape(shape) * (2.0 / n)


def _running(x):
    return ops.batch_norm(x, None, None, numpy.full(3, 0.2, numpy.float32),
                          numpy.full(3, 1.5, numpy.float32), training=False) ** 2


def _dropout(x):
    minigrad.set_seed(7)  # the same mask on every call of the checker
    return ops.dropout(x, 0.3)


# keys each query may see (with is_causal, query 0 sees none: its row is zeros)
_KEYS = numpy.array([[False, True, True, True], [True, False, True, True],
                     [True, True, True, False]])


def _attention(q, k, v):
    return ops.scaled_dot_product_attention(q, k, v, Tensor(_KEYS), is_causal=True)


def _attention_weights(q, k, v, mask):
    minigrad.set_seed(7)  # the same dropout mask on every call of the checker
    out, w = ops.scaled_dot_product_attention(q, k, v, mask, dropout_p=0.3, need_weights=True)
    return out.sum(axis=-1) + (w * w).sum(axis=-1)


_IDS = numpy.array([[0, 3, 3], [4, 0, 1]])
_MASK = numpy.array([[True, False, True], [False, True, True]])
_COND = numpy.array([[True, False, False], [True, True, False]])

# name: (function of Tensors, input arrays)
CASES = {
    "add": (ops.add, [_away((2, 3)), _away((3,), 1)]),
    "sub": (ops.sub, [_away((2, 1)), _away((2, 3), 1)]),
    "mul": (ops.mul, [_away((2, 3)), _away((2, 1), 1)]),
    "mul_self": (lambda x: x * x * x, [_away((2, 3))]),
    "div": (ops.div, [_away((2, 3)), _positive((3,), 1)]),
    "pow": (ops.pow, [_positive((2, 3)), _away((3,), 1)]),
    "pow_constant_exponent": (lambda x: x ** 2.5, [_positive((2, 3))]),
    "maximum": (lambda a, b: ops.maximum(a, b) ** 2, [_distinct((2, 3)), _distinct((2, 3), 1)]),
    "minimum": (lambda a, b: ops.minimum(a, b) ** 2, [_distinct((2, 3)), _distinct((3,), 1)]),
    "cast": (lambda x: ops.cast(x, F64) ** 3, [_away((2, 3))]),
    "neg": (lambda x: -x * x, [_away((4,))]),
    "abs": (lambda x: ops.abs(x) ** 3, [_away((2, 3))]),
    "exp": (ops.exp, [_away((2, 3))]),
    "log": (ops.log, [_positive((2, 3))]),
    "sqrt": (ops.sqrt, [_positive((2, 3))]),
    "tanh": (ops.tanh, [_away((2, 3))]),
    "sigmoid": (ops.sigmoid, [_away((2, 3))]),
    "relu": (lambda x: ops.relu(x) ** 2, [_away((2, 3))]),
    "clip": (lambda x: ops.clip(x, -0.5, 0.8) ** 2, [_away((3, 4), 2)]),
    "where": (lambda x, y: ops.where(_COND, x * x, y ** 3), [_away((2, 3)), _away((3,), 1)]),
    "square": (lambda x: ops.square(x) * x, [_away((2, 3))]),
    "erf": (ops.erf, [_away((2, 3))]),
    "gelu_tanh": (ops.gelu, [_away((2, 3))]),
    "gelu_exact": (lambda x: ops.gelu(x, approximate=False), [_away((2, 3))]),
    "leaky_relu": (lambda x: ops.leaky_relu(x, 0.1) ** 2, [_away((2, 3))]),
    "softmax": (lambda x: ops.softmax(x, axis=0), [_away((3, 4))]),
    "log_softmax": (ops.log_softmax, [_away((3, 4))]),
    "reshape": (lambda x: ops.reshape(x * x, (3, 2)), [_away((2, 3))]),
    "transpose": (lambda x: ops.transpose(x, (2, 0, 1)) ** 2, [_away((2, 3, 2))]),
    "swapaxes_T": (lambda x: (x.T @ x).swapaxes(0, 1), [_away((3, 2))]),
    "expand_squeeze": (lambda x: ops.squeeze(ops.expand_dims(x * x, 1)), [_away((2, 3))]),
    "broadcast_to": (lambda x: ops.broadcast_to(x, (2, 2, 3)) ** 2, [_away((1, 3))]),
    "getitem_slice": (lambda x: x[1:, ::2] ** 2, [_away((3, 4))]),
    "getitem_repeated": (lambda x: x[[0, 2, 2, 0]] ** 3, [_away((3, 2))]),
    "getitem_mask": (lambda x: x[_MASK] ** 3, [_away((2, 3))]),
    "embedding": (lambda t: ops.embedding(_IDS, t) ** 2, [_away((5, 2))]),
    "scatter": (lambda g: scatter(g * g, (3, 2), ([0, 2, 2],)), [_away((3, 2))]),
    "sum": (lambda x: ops.sum(x * x, axis=1), [_away((2, 3))]),
    "sum_keepdims": (lambda x: ops.sum(x ** 3, axis=(0, 2), keepdims=True), [_away((2, 3, 2))]),
    "mean": (lambda x: ops.mean(x * x, axis=0), [_away((2, 3))]),
    "max": (lambda x: ops.max(x, axis=1) ** 2, [_distinct((2, 3))]),
    "min": (lambda x: ops.min(x) ** 2, [_distinct((2, 3))]),
    "concat": (lambda a, b: ops.concat([a * b, b], axis=1), [_away((2, 3)), _away((2, 3), 1)]),
    "stack": (lambda a, b: ops.stack([a * a, b], axis=1), [_away((2, 3)), _away((2, 3), 1)]),
    "split": (lambda x: ops.split(x * x, [1], axis=1)[1] * x[:, :2], [_away((2, 3))]),
    "matmul": (ops.matmul, [_away((2, 3)), _away((3, 4), 1)]),
    "matmul_square": (lambda a: a @ a, [_away((3, 3))]),
    "matmul_batched": (ops.matmul, [_away((2, 2, 3)), _away((3, 4), 1)]),
    "matmul_vectors": (lambda a, b: (a @ b) * (b @ a[:2, None]), [_away((3,)), _away((3, 2), 1)]),
    "matmul_transpose_b": (lambda a, b: ops.matmul(a * a, b, transpose_b=True),
                           [_away((2, 3)), _away((4, 3), 1)]),
    "dense": (lambda x, w, b: ops.dense(x * x, w, b), [_away((2, 2, 3)), _away((4, 3), 1),
                                                       _away((4,), 2)]),
    "dense_no_bias": (lambda x, w: ops.dense(x, w * w), [_away((2, 3)), _away((4, 3), 1)]),
    "dropout": (lambda x: _dropout(x) ** 2, [_away((3, 4))]),
    "conv2d": (lambda x, w, b: ops.conv2d(x, w, b, stride=(2, 1), padding=(1, 0, 2, 1), groups=2),
               [_away((2, 4, 5, 5)), _away((6, 2, 3, 3), 1), _away((6,), 2)]),
    "conv2d_dilated_on_a_conv": (lambda x, w: ops.conv2d(ops.conv2d(x, w, padding=1), w,
                                                          dilation=2),
                                 [_away((1, 2, 6, 6)), _away((2, 2, 2, 2), 1)]),
    "conv2d_direct_kernel": (lambda x, w: ops.conv2d(x * x, w, stride=(1, 2), padding=1),
                             [_away((1, 16, 3, 4)), _away((16, 16, 3, 3), 1)]),
    "conv2d_1x1": (lambda x, w: ops.conv2d(x * x, w),
                   [_away((2, 3, 2, 2)), _away((4, 3, 1, 1), 1)]),
    "max_pool2d": (lambda x: ops.max_pool2d(x * x, 2), [_distinct((2, 2, 4, 4))]),
    "max_pool2d_overlapping": (lambda x: ops.max_pool2d(x, 3, stride=1, padding=1) ** 2,
                               [_distinct((1, 2, 4, 5))]),
    "avg_pool2d": (lambda x: ops.avg_pool2d(x * x, 3, stride=2, padding=1,
                                            count_include_pad=False), [_away((2, 2, 5, 5))]),
    "batch_norm": (lambda x, g, b: ops.batch_norm(x, g, b, None, None, training=True),
                   [_away((4, 3, 2, 2)), _away((3,), 1), _away((3,), 2)]),
    "batch_norm_running": (_running, [_away((4, 3, 2, 2))]),
    "layer_norm": (lambda x, g, b: ops.layer_norm(x, g, b, begin_norm_axis=1),
                   [_away((3, 2, 4)), _away((4,), 1), _away((4,), 2)]),
    "attention": (lambda q, k, v: _attention(q, k, v) ** 2,
                  [_away((2, 3, 4)), _away((2, 4, 4), 1), _away((2, 4, 3), 2)]),
    "attention_float_mask_dropout_weights": (
        lambda q, k, v, m: _attention_weights(q, k, v, m),
        [_away((2, 3, 4)), _away((2, 4, 4), 1), _away((2, 4, 3), 2), _away((3, 4), 3)]),
}

GPU_ONLY = {"ToDevice"}  # moves between NumPy and CuPy (test_to_device_second_derivative)

# (atol, rtol) of each dtype's check: the first derivative is computed in the dtype under test
# before it is differentiated, so fp16 carries two roundings of each intermediate
TOLERANCE = {F64: (1e-6, 1e-5), F32: (2e-4, 2e-3), F16: (3e-2, 6e-2)}


@pytest.mark.parametrize("dtype", [F64, F32, F16], ids=["float64", "float32", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_second_derivative(name, dtype, device):
    fn, inputs = CASES[name]
    minigrad.set_context(device_target=device)
    xp = minigrad.backend.cupy if device == "GPU" else numpy
    atol, rtol = TOLERANCE[dtype]
    check_double_backward(fn, [xp.asarray(x) for x in inputs], dtype=dtype, atol=atol, rtol=rtol)


def _classes_reached(fn, inputs):
    """The Function classes of the nodes ``fn`` records on ``inputs`` in float32."""
    out = fn(*[Tensor(x.astype(F32), requires_grad=True) for x in inputs])
    stack = [o._ctx for o in (out if isinstance(out, tuple) else (out,))]
    seen, classes = set(), set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        classes.add(type(node).__name__)
        stack.extend(t._ctx for t in node.inputs)
    return classes


def _op_classes():
    found, stack = {}, [Function]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__module__.startswith("minigrad.ops") and not sub.__name__.startswith("_"):
                found[sub.__name__] = sub
    return found


def test_every_op_has_a_second_derivative_case():
    reached = set().union(*(_classes_reached(fn, inputs) for fn, inputs in CASES.values()))
    classes = _op_classes()
    missing = sorted(set(classes) - reached - GPU_ONLY)
    assert not missing, f"ops without a second-derivative case: {missing}"
    arrays_only = sorted(name for name, cls in classes.items() if cls.saves is None)
    assert not arrays_only, f"ops whose backward runs on arrays only: {arrays_only}"


@pytest.mark.gpu
@pytest.mark.skipif(not minigrad.backend.CUDA_AVAILABLE, reason="needs CuPy and a CUDA GPU")
def test_to_device_second_derivative():
    check_double_backward(lambda x: ops.to_device(x * x, "GPU") ** 2, [_away((2, 3))])
