"""Matrix product (batched, broadcasting) and the fused dense layer. fp16 inputs are multiplied
in fp32 and stored fp16.

On the host NumPy has no fp16 BLAS: the operands are widened to fp32 and the product rounded
once to fp16. ``half_gemm`` is the product of fp16 values with an fp32 result (on the GPU:
cuBLAS with fp16 operands, tensor cores, fp32 accumulation and output), for products whose
fp32 result is summed further before it is rounded (a convolution's).

On the GPU two 2-D fp16 CuPy arrays are multiplied as they are (``tensor_cores``):
``cupy.matmul`` calls ``cublasGemmEx`` with fp16 inputs and output, ``CUBLAS_COMPUTE_32F`` and
``CUBLAS_GEMM_DEFAULT_TENSOR_OP`` (CuPy 14's default compute type for float16; only
``cupy._core.set_compute_type(float16, COMPUTE_TYPE_PEDANTIC)`` would keep the fp32 accumulation
and forbid the tensor cores), so the tensor cores accumulate in fp32 and the result is rounded
once, the same rule. Batched (3-D and more) fp16 products keep the host's path (widened
operands, an fp32 product rounded once).

Every rule also runs on Tensors, for higher-order gradients (``saves``:
``minigrad.autograd.function``): the rules widen and reshape the inputs they read, which under
``create_graph`` are the input Tensors themselves (and take the general path there).
"""
import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_bool, check_broadcast
from minigrad._fp16_host import convert, widen
from minigrad.autograd.function import Function
from minigrad import _fp16_host
from minigrad.ops._util import unbroadcast
from minigrad.ops.arithmetic import binary_operands, check_same_float_dtype
from minigrad.tensor import Tensor


def tensor_cores(*arrays):
    """Whether the product of ``arrays`` runs on fp16 tensor cores as they are: 2-D float16 CuPy
    arrays (see the module docstring)."""
    return (backend.device_of(arrays[0]) == "GPU"
            and all(a.ndim == 2 and a.dtype == dtypes.float16 for a in arrays))


# cuBLAS enum values (library_types.h, cublas_api.h), where CuPy does not name them
_CUDA_R_32F, _CUDA_R_16F = 0, 2


def half_gemm(a, b):
    """The float32 product ``a @ b`` of 2-D arrays that hold float16 values: float16 arrays, or
    float32 arrays widened from float16 (a convolution's patch and weight matrices).

    On the GPU the operands go to cuBLAS as float16 (exact: they hold float16 values) and
    ``cublasGemmEx`` multiplies them on the tensor cores with ``CUBLAS_COMPUTE_32F``, fp32
    accumulation, and writes an fp32 result (``cupy.matmul`` of fp16 operands would round it to
    fp16); elsewhere it is the fp32 product of the widened operands. Either way
    ``out = Σ_k fp32(a_ik) · fp32(b_kj)`` summed in fp32; only the order of the sums differs.

    Raises:
        ValueError: naming both shapes, for operands that are not 2-D or do not fit.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"half_gemm: a and b must be 2-D with a.shape[1] == b.shape[0], got "
                         f"{a.shape} and {b.shape}")
    cublas = _cublas() if backend.device_of(a) == "GPU" else None
    if cublas is None:
        return widen(a) @ widen(b)
    cupy = backend.cupy
    from cupy.cuda import device, runtime  # the GPU path only: CuPy is there
    a = cupy.ascontiguousarray(a, dtype=numpy.float16)
    b = cupy.ascontiguousarray(b, dtype=numpy.float16)
    (m, k), n = a.shape, b.shape[1]
    out = cupy.zeros((m, n), numpy.float32)
    if out.size == 0 or k == 0:
        return out
    one, zero = numpy.ones(1, numpy.float32), numpy.zeros(1, numpy.float32)
    half = getattr(runtime, "CUDA_R_16F", _CUDA_R_16F)
    single = getattr(runtime, "CUDA_R_32F", _CUDA_R_32F)
    # the row-major (m, n) product is the column-major (n, m) product bᵀ aᵀ of the same memory
    cublas.gemmEx(device.get_cublas_handle(), cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, m, k,
                  one.ctypes.data, b.data.ptr, half, n, a.data.ptr, half, k, zero.ctypes.data,
                  out.data.ptr, single, n, cublas.CUBLAS_COMPUTE_32F,
                  cublas.CUBLAS_GEMM_DEFAULT_TENSOR_OP)
    return out


def _cublas():
    """CuPy's cuBLAS binding, or None (no CuPy, or an array module without cuBLAS such as
    ``minigrad.testing.strict_device``'s)."""
    if backend.cupy is None or not hasattr(backend.cupy, "cuda") or \
            not hasattr(backend.cupy.cuda, "device"):
        return None
    try:
        from cupy_backends.cuda.libs import cublas
    except ImportError:
        return None
    return cublas


def _narrow(x, dtype):
    return convert(x, dtype) if x.dtype != dtype else x


def add_bias_narrow(y, b, dtype):
    """dtype(y + b) for the fp32 (or fp64) product ``y`` (fresh: written in place), ``b`` None or
    of ``dtype``. An fp16 bias on the host is widened, added and the sum rounded in one pass.
    The epilogue of Dense and conv2d."""
    if b is None:
        return _narrow(y, dtype)
    if b.dtype == dtypes.float16:
        out = _fp16_host.add_bias_to_half(y, b)
        if out is not None:
            return out
    y += widen(b)
    return _narrow(y, dtype)


def _widen_sum_rows(g, dtype):
    """(g widened, Σ over the rows of g rounded to dtype) for a 2-D ``g``: the product's operand
    and the bias gradient of Dense's backward; fp16 on the host in one pass."""
    if g.dtype == dtypes.float16:
        native = _fp16_host.widen_sum_rows(g)
        if native is not None:
            return native
    g = widen(g)
    return g, _narrow(g.sum(axis=0), dtype)


class MatMul(Function):
    """out = a @ b;  da = g @ bᵀ, db = aᵀ @ g (batch axes summed back to each input's shape).

    1-D operands follow NumPy: a vector ``a`` is a row, a vector ``b`` a column, and the added
    axis is removed from the result. ``transpose_b`` multiplies by bᵀ (a view, no copy: Dense
    keeps its weight as (out, in)). fp16 operands are widened to fp32 once: the forward keeps
    the fp32 copies for the backward, and every product is rounded once to fp16.
    """
    autocast = "low"
    saves = {"a": 0, "b": 1}

    def forward(self, a, b, transpose_b=False):
        self.transpose_b = transpose_b
        self.dtype = a.dtype
        if tensor_cores(a, b):  # fp32 accumulation in cuBLAS, rounded once to fp16
            self.a, self.b = a, b
            return a @ (b.swapaxes(-1, -2) if transpose_b else b)
        self.a, self.b = widen(a), widen(b)
        a2, b2 = _matrices(self.a, self.b, transpose_b)
        out = _narrow(a2 @ b2, self.dtype)
        if b.ndim == 1:
            out = out[..., 0]
        if a.ndim == 1:
            out = out[..., 0, :] if b.ndim > 1 else out[..., 0]
        return out

    def backward(self, g):
        a, b = self.a, self.b  # the input Tensors under create_graph
        if not isinstance(g, Tensor) and tensor_cores(a, b, g):
            a2, b2 = _matrices(a, b, self.transpose_b)
            ga = g @ b2.swapaxes(-1, -2) if self.needs_grad[0] else None
            gb = None
            if self.needs_grad[1]:
                gb = g.swapaxes(-1, -2) @ a2 if self.transpose_b else a2.swapaxes(-1, -2) @ g
            return ga, gb
        a, b = widen(a), widen(b)
        a2, b2 = _matrices(a, b, self.transpose_b)
        g = widen(g)
        if b.ndim == 1:
            g = g.reshape(g.shape + (1,))
        if a.ndim == 1:
            g = g.reshape(g.shape[:-1] + (1,) + g.shape[-1:])
        # A broadcast operand's gradient sums the products over the batch: the sum is taken on
        # the fp32 products and rounded to fp16 once (rounding each product first rounds twice,
        # and turns products beyond 65504 that cancel in the sum into inf - inf = NaN).
        ga = gb = None
        if self.needs_grad[0]:
            ga = unbroadcast(g @ b2.swapaxes(-1, -2), a2.shape)
            ga = _narrow(ga, self.dtype).reshape(a.shape)
        if self.needs_grad[1]:
            if self.transpose_b:  # d(bᵀ) computed directly as gᵀ @ a: C-ordered like b itself
                gb = _narrow(unbroadcast(g.swapaxes(-1, -2) @ a2, b.shape), self.dtype)
            else:
                gb = unbroadcast(a2.swapaxes(-1, -2) @ g, b2.shape)
                gb = _narrow(gb, self.dtype).reshape(b.shape)
        return ga, gb


def _matrices(a, b, transpose_b):
    """``a`` and ``b`` as the operands of one batched matrix product: b transposed (a view) for
    ``transpose_b``, a vector ``a`` as a row and a vector ``b`` as a column."""
    if transpose_b:
        b = b.swapaxes(-1, -2)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if b.ndim == 1:
        b = b.reshape(-1, 1)
    return a, b


def matmul(a, b, transpose_b=False):
    """Matrix product ``a @ b`` (``a @ bᵀ`` with ``transpose_b``, b at least 2-D) with NumPy's
    batching and broadcasting rules.

    Raises:
        ValueError: naming both shapes when the inner dimensions differ.
        TypeError: naming both dtypes for Tensors of two floating dtypes outside autocast.
    """
    check_same_float_dtype("matmul", (("a", a), ("b", b)))
    a, b = binary_operands(a, b)
    check_bool("transpose_b", transpose_b)
    for name, t, least in (("a", a, 1), ("b", b, 2 if transpose_b else 1)):
        if t.ndim < least:
            raise ValueError(f"matmul: {name} must have at least {least} dimension(s), got {name} "
                             f"of shape {t.shape}")
    ka = a.shape[-1]
    kb = b.shape[-1] if transpose_b else b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        axis = "columns (transpose_b=True)" if transpose_b else "rows"
        raise ValueError(f"matmul: b must have {ka} {axis} to multiply a of shape {a.shape}, "
                         f"got b of shape {b.shape}")
    try:
        return MatMul.apply(a, b, transpose_b=transpose_b)
    except ValueError:  # the batch axes
        check_broadcast(("a's batch axes", "b's batch axes"), (a.shape[:-2], b.shape[:-2]),
                        owner="matmul")
        raise


class Dense(Function):
    """out = x Wᵀ + b over the last axis of x (any leading axes), in one node.

    dx = g W,  dW = gᵀ x,  db = Σ g over the leading axes (all with x and g flattened to 2-D).
    Fusing the bias saves an fp16 round trip per layer and, in fp32, the temporary of a separate
    add: the bias is added in place to the fresh product. fp16 on the host: widening b, adding it
    and rounding the sum is one native pass, and so are widening g and summing it for db.
    """
    autocast = "low"
    saves = {"x": 0, "w": 1}

    def forward(self, x, w, b=None):
        self.dtype, self.x_shape = x.dtype, x.shape
        if x.ndim != 2:
            x = x.reshape(-1, x.shape[-1])
        self.tensor_cores = tensor_cores(x, w) and (b is None or b.dtype == dtypes.float16)
        if self.tensor_cores:  # the product rounded to fp16, then the bias added in fp16
            self.x, self.w = x, w
            out = x @ w.T
            if b is not None:
                out += b
        else:
            self.x, self.w = widen(x), widen(w)
            out = add_bias_narrow(self.x @ self.w.T, b, self.dtype)
        return out if len(self.x_shape) == 2 else out.reshape(self.x_shape[:-1] + (w.shape[0],))

    def backward(self, g):
        if g.ndim != 2:
            g = g.reshape(-1, g.shape[-1])
        needs = self.needs_grad
        has_bias = len(needs) == 3
        if self.tensor_cores and not isinstance(g, Tensor):  # fp16 operands, fp32 bias sums
            gb = (g.sum(axis=0, dtype=numpy.float32).astype(self.dtype)
                  if has_bias and needs[2] else None)
            x, w = self.x, self.w
        else:
            g, gb = _widen_sum_rows(g, self.dtype) if has_bias and needs[2] else (widen(g), None)
            x, w = widen(self.x), widen(self.w)  # the input Tensors under create_graph
            if x.ndim != 2:
                x = x.reshape(-1, x.shape[-1])
        gx = _narrow(g @ w, self.dtype).reshape(self.x_shape) if needs[0] else None
        gw = _narrow(g.T @ x, self.dtype) if needs[1] else None
        return (gx, gw, gb) if has_bias else (gx, gw)


def dense(x, weight, bias=None):
    """Fully connected map ``x @ weightᵀ + bias`` over the last axis of ``x``.

    Args:
        x: (..., in) tensor; weight: (out, in); bias: (out,) or None.

    Raises:
        ValueError: naming the shapes when they do not fit.
        TypeError: naming both dtypes when ``x``, ``weight`` and ``bias`` are Tensors of
            different floating dtypes outside autocast.
    """
    check_same_float_dtype("dense", (("x", x), ("weight", weight), ("bias", bias)))
    x, weight = binary_operands(x, weight, ("x", "weight"))
    if x.ndim == 0:
        raise ValueError(f"dense: x must have at least 1 dimension (..., in), got x of shape "
                         f"{x.shape}")
    if weight.ndim != 2 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"dense: weight must have shape (out, {x.shape[-1]}) for x of shape "
                         f"{x.shape}, got weight of shape {weight.shape}")
    if bias is None:
        return Dense.apply(x, weight)
    x, bias = binary_operands(x, bias, ("x", "bias"))
    if bias.shape != (weight.shape[0],):
        raise ValueError(f"dense: bias must have shape ({weight.shape[0]},) for weight of shape "
                         f"{weight.shape}, got bias of shape {bias.shape}")
    return Dense.apply(x, weight, bias)

