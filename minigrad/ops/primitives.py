"""MindSpore primitive classes: ``ops.MatMul()(a, b)``, ``ops.ReduceSum(keep_dims=True)(x, 1)``, ...

Each is a thin callable over a lowercase op: the constructor takes the primitive's attributes
(checked there), ``__call__`` its inputs. Argument-free primitives are made by one factory,
``_primitive``.

Names: a primitive and the autograd ``Function`` that computes it often share MindSpore's name,
but they are different objects. ``ops.Exp`` (this module) is the primitive user code calls;
``ops.math.Exp`` is the graph node that ``ops.exp`` applies, reached only through its module.
``SAME_NAMED_FUNCTIONS`` is the one mapping from each such primitive name to its Function class.
"""
from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import (
    check_axis,
    check_bool,
    check_in,
    check_int,
    check_int_tuple,
    check_positive_int,
    check_relation,
    check_type,
)
from minigrad.ops import (
    activation,
    arithmetic,
    conv,
    creation,
    join,
    linalg,
    math,
    pooling,
    reduction,
    shape,
)
from minigrad.ops.arithmetic import as_tensor, leaf


class Primitive:
    """Base class: a primitive is configured once and then called like a function."""
    def __repr__(self):
        attrs = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({attrs})"


def _primitive(name, fn, doc):
    def __call__(self, *args):
        return fn(*args)
    __call__.__wrapped__ = fn  # inspect.signature and help() show the op's own arguments
    return type(name, (Primitive,), {"__call__": __call__, "__doc__": doc})


def _shape_of(x):
    return tuple(as_tensor(x).shape)


# ---- argument-free primitives: the call arguments are the op's --------------------------------
Exp = _primitive("Exp", math.exp, "eˣ elementwise: ``Exp()(x)``.")
Log = _primitive("Log", math.log, "ln x elementwise: ``Log()(x)``.")
Sqrt = _primitive("Sqrt", math.sqrt, "√x elementwise: ``Sqrt()(x)``.")
Square = _primitive("Square", creation.square, "x² elementwise: ``Square()(x)``.")
Abs = _primitive("Abs", math.abs, "|x| elementwise: ``Abs()(x)``.")
Neg = _primitive("Neg", math.neg, "-x elementwise: ``Neg()(x)``.")
Reciprocal = _primitive("Reciprocal", math.reciprocal, "1 / x elementwise: ``Reciprocal()(x)``.")
ReLU = _primitive("ReLU", math.relu, "max(x, 0): ``ReLU()(x)``.")
Sigmoid = _primitive("Sigmoid", math.sigmoid, "1 / (1 + e⁻ˣ): ``Sigmoid()(x)``.")
Tanh = _primitive("Tanh", math.tanh, "tanh x: ``Tanh()(x)``.")
GeLU = _primitive("GeLU", activation.gelu,
                  "GeLU, tanh form (as MindSpore's kernel): ``GeLU()(x)``.")
Add = _primitive("Add", arithmetic.add, "a + b with broadcasting: ``Add()(a, b)``.")
Sub = _primitive("Sub", arithmetic.sub, "a - b with broadcasting: ``Sub()(a, b)``.")
Mul = _primitive("Mul", arithmetic.mul, "a * b with broadcasting: ``Mul()(a, b)``.")
RealDiv = _primitive("RealDiv", arithmetic.div, "a / b (true division): ``RealDiv()(a, b)``.")
Div = _primitive("Div", arithmetic.div, "a / b (true division): ``Div()(a, b)``.")
Pow = _primitive("Pow", arithmetic.pow, "a ** b with broadcasting: ``Pow()(a, b)``.")
Maximum = _primitive("Maximum", arithmetic.maximum, "Elementwise max: ``Maximum()(a, b)``.")
Minimum = _primitive("Minimum", arithmetic.minimum, "Elementwise min: ``Minimum()(a, b)``.")
Select = _primitive("Select", math.where, "x where cond else y: ``Select()(cond, x, y)``.")
Cast = _primitive("Cast", lambda x, dtype: arithmetic.cast(as_tensor(x), dtype),
                  "Convert dtype: ``Cast()(x, mstype.float16)``.")
Reshape = _primitive("Reshape", shape.reshape, "New shape: ``Reshape()(x, (2, -1))``.")
Transpose = _primitive("Transpose", shape.transpose, "Permute axes: ``Transpose()(x, (1, 0))``.")
ExpandDims = _primitive("ExpandDims", shape.expand_dims,
                        "Insert a size-1 axis: ``ExpandDims()(x, 0)``.")
OnesLike = _primitive("OnesLike", creation.ones_like, "Ones shaped like x: ``OnesLike()(x)``.")
ZerosLike = _primitive("ZerosLike", creation.zeros_like, "Zeros shaped like x: ``ZerosLike()(x)``.")
Fill = _primitive("Fill", lambda dtype, shape_, value: creation.full(
    shape_, value, dtypes.as_dtype(dtype)),
    "Constant tensor: ``Fill()(mstype.float32, (2, 3), 1.5)``.")
Ones = _primitive("Ones", lambda shape_, dtype=dtypes.float32: creation.ones(
    shape_, dtypes.as_dtype(dtype)), "Ones: ``Ones()((2, 3), mstype.float32)``.")
Zeros = _primitive("Zeros", lambda shape_, dtype=dtypes.float32: creation.zeros(
    shape_, dtypes.as_dtype(dtype)), "Zeros: ``Zeros()((2, 3), mstype.float32)``.")
Equal = _primitive("Equal", arithmetic.equal, "a == b as a bool tensor: ``Equal()(a, b)``.")
NotEqual = _primitive("NotEqual", arithmetic.not_equal,
                      "a != b as a bool tensor: ``NotEqual()(a, b)``.")
Less = _primitive("Less", arithmetic.less, "a < b as a bool tensor: ``Less()(a, b)``.")
LessEqual = _primitive("LessEqual", arithmetic.less_equal,
                       "a <= b as a bool tensor: ``LessEqual()(a, b)``.")
Greater = _primitive("Greater", arithmetic.greater, "a > b as a bool tensor: ``Greater()(a, b)``.")
GreaterEqual = _primitive("GreaterEqual", arithmetic.greater_equal,
                          "a >= b as a bool tensor: ``GreaterEqual()(a, b)``.")
Flatten = _primitive("Flatten", lambda x: _flatten(as_tensor(x)),
                     "Keep axis 0 and flatten the rest: ``Flatten()(x)`` is (N, -1).")
Shape = _primitive("Shape", _shape_of, "The shape as a tuple: ``Shape()(x)``.")
DType = _primitive("DType", lambda x: as_tensor(x).dtype, "The dtype: ``DType()(x)``.")
Gather = _primitive("Gather", lambda params, indices, axis=0: _gather(
    as_tensor(params, name="params"), as_tensor(indices, name="indices"), axis),
    "Take ``indices`` along ``axis``: ``Gather()(params, indices, axis)``.")


def _flatten(x):
    if x.ndim == 0:
        check_relation("x", x, False, "a Tensor of at least 1 dimension (N, ...)")
    return shape.reshape(x, (x.shape[0], -1) if x.size else x.shape[:1] + (0,))


def _gather(params, indices, axis):
    axis = check_axis("axis", axis, params.ndim)
    if params.ndim == 0 or indices.dtype.kind not in "iu":
        check_relation("indices" if params.ndim else "params", indices if params.ndim else params,
                       False, "an int Tensor" if params.ndim else "a Tensor of at least 1 "
                       "dimension", error=TypeError if params.ndim else ValueError)
    return shape.getitem(params, (slice(None),) * axis + (indices,))


# ---- primitives with attributes ------------------------------------------------------------------
class MatMul(Primitive):
    """a @ b for 2-D a, b, each optionally transposed first: ``MatMul(transpose_b=True)(a, b)``."""
    def __init__(self, transpose_a=False, transpose_b=False):
        self.transpose_a = check_bool("transpose_a", transpose_a)
        self.transpose_b = check_bool("transpose_b", transpose_b)

    def __call__(self, a, b):
        a, b = as_tensor(a, name="a"), as_tensor(b, name="b")
        if self.transpose_a:
            a = shape.swapaxes(a, -1, -2)
        return linalg.matmul(a, b, transpose_b=self.transpose_b)


class BatchMatMul(MatMul):
    """Batched a @ b over leading axes, each optionally transposed in its last two axes."""


class Argmax(Primitive):
    """Index of the maximum along ``axis`` (not differentiable): ``Argmax(axis=-1)(x)``."""
    def __init__(self, axis=-1, output_type=dtypes.int32):
        self.axis = check_int("axis", axis)
        self.output_type = dtypes.as_dtype(output_type, "output_type")

    def __call__(self, x):
        x = as_tensor(x)
        axis = check_axis("axis", self.axis, x.ndim, owner="Argmax")
        if x.shape[axis] == 0 if x.ndim else False:
            check_relation("x", x, False, f"a Tensor with elements along axis {self.axis}")
        return leaf(x.data.argmax(axis=axis if x.ndim else None).astype(self.output_type))


class OneHot(Primitive):
    """One-hot encoding along a new ``axis``:
    ``OneHot(axis=-1)(indices, depth, on_value, off_value)``.

    The result takes the dtype of ``on_value`` (a float32 Tensor or a Python float).
    """
    def __init__(self, axis=-1):
        self.axis = check_int("axis", axis, owner="OneHot")

    def __call__(self, indices, depth, on_value=1.0, off_value=0.0):
        ids = as_tensor(indices, name="indices").data
        if ids.dtype.kind not in "iu":
            check_relation("indices", indices, False, "an int Tensor or array", error=TypeError,
                           owner="OneHot")
        depth = check_positive_int("depth", depth, owner="OneHot")
        check_axis("axis", self.axis, ids.ndim + 1, owner="OneHot")
        # on/off given as Python numbers are made on the default device: bring them to ids'
        on, off = (backend.to_device(as_tensor(v, name=name).data, backend.device_of(ids))
                   for name, v in (("on_value", on_value), ("off_value", off_value)))
        for name, v, array in (("on_value", on_value, on), ("off_value", off_value, off)):
            if array.size != 1:
                check_relation(name, v, False, "a number or a one-element Tensor",
                               owner="OneHot")
        on, off = on.reshape(()), off.reshape(())
        xp = backend.get_array_module(ids)
        hot = xp.arange(depth) == ids[..., None]
        out = xp.where(hot, on, off.astype(on.dtype))
        return leaf(xp.moveaxis(out, -1, self.axis))


class _Reduce(Primitive):
    reduce = None

    def __init__(self, keep_dims=False):
        self.keep_dims = check_bool("keep_dims", keep_dims)

    def __call__(self, x, axis=()):
        # MindSpore: axis=() reduces every axis
        axis = None if isinstance(axis, (tuple, list)) and len(axis) == 0 else axis
        return type(self).reduce(x, axis, self.keep_dims)


class ReduceSum(_Reduce):
    """Σ over ``axis`` (default (): all axes): ``ReduceSum(keep_dims=False)(x, axis)``."""
    reduce = staticmethod(reduction.sum)


class ReduceMean(_Reduce):
    """Mean over ``axis`` (default (): all axes): ``ReduceMean(keep_dims=False)(x, axis)``."""
    reduce = staticmethod(reduction.mean)


class ReduceMax(_Reduce):
    """Maximum over ``axis`` (default (): all axes): ``ReduceMax(keep_dims=False)(x, axis)``."""
    reduce = staticmethod(reduction.max)


class ReduceMin(_Reduce):
    """Minimum over ``axis`` (default (): all axes): ``ReduceMin(keep_dims=False)(x, axis)``."""
    reduce = staticmethod(reduction.min)


class _AlongAxis(Primitive):
    op = None

    def __init__(self, axis=-1):
        # the axis's range waits for the input; its type is known now
        self.axis = check_int("axis", axis, owner=type(self).__name__)

    def __call__(self, x):
        return type(self).op(x, self.axis)


class Softmax(_AlongAxis):
    """Softmax along ``axis`` (default -1): ``Softmax(axis)(x)``."""
    op = staticmethod(activation.softmax)


class LogSoftmax(_AlongAxis):
    """Log-softmax along ``axis`` (default -1): ``LogSoftmax(axis)(x)``."""
    op = staticmethod(activation.log_softmax)


class Squeeze(_AlongAxis):
    """Remove size-1 axes (``axis=()``: all of them): ``Squeeze(axis)(x)``."""
    op = staticmethod(lambda x, axis: shape.squeeze(x, axis or None))

    def __init__(self, axis=()):
        self.axis = check_int_tuple("axis", axis, owner="Squeeze")


class Concat(_AlongAxis):
    """Join a tuple of tensors along ``axis`` (default 0): ``Concat(axis)((a, b))``."""
    op = staticmethod(join.concat)

    def __init__(self, axis=0):
        super().__init__(axis)


class Stack(Concat):
    """Stack a tuple of tensors on a new ``axis`` (default 0): ``Stack(axis)((a, b))``."""
    op = staticmethod(join.stack)


class Split(Primitive):
    """Cut x into ``output_num`` equal pieces along ``axis``: ``Split(axis=0, output_num=1)(x)``."""
    def __init__(self, axis=0, output_num=1):
        self.axis = check_int("axis", axis)
        self.output_num = check_positive_int("output_num", output_num)

    def __call__(self, x):
        return join.split(x, self.output_num, self.axis)


def _check_pad_mode(pad_mode):
    """MindSpore's ``pad_mode`` in lower case, checked when the primitive is made."""
    check_type("pad_mode", pad_mode, str, expected="one of ['valid', 'same', 'pad']")
    return check_in("pad_mode", pad_mode, ("valid", "same", "pad"), fold=str.lower)


def _pad_mode_padding(pad_mode, pad, in_hw, kernel, stride, dilation):
    """MindSpore's pad_mode ('valid', 'same', 'pad') as conv2d/pooling padding."""
    mode = pad_mode
    if mode == "valid":
        return 0
    if mode == "same":
        return conv.same_padding(in_hw, kernel, stride, dilation)
    if mode == "pad":
        return pad
    raise ValueError(f"pad_mode must be 'valid', 'same' or 'pad', got {pad_mode!r}")


class Conv2D(Primitive):
    """2-D convolution of x (N, C, H, W) by weight (out_channel, C/group, kh, kw):
    ``Conv2D(...)(x, w)``.

    ``pad_mode``: 'valid' (no padding), 'same' (output ceil(H / stride)) or 'pad' (``pad``: an
    int or (top, bottom, left, right)). ``mode`` must be 1 (cross-correlation).
    """
    def __init__(self, out_channel, kernel_size, mode=1, pad_mode="valid", pad=0, stride=1,
                 dilation=1, group=1):
        check_in("mode", mode, (1,))  # 1: cross-correlation, the only mode
        self.out_channel = check_positive_int("out_channel", out_channel)
        self.kernel_size = conv.pair("kernel_size", kernel_size)
        self.pad_mode, self.pad = _check_pad_mode(pad_mode), conv.padding4(pad, "pad")
        self.stride, self.dilation = conv.pair("stride", stride), conv.pair("dilation", dilation)
        self.group = check_positive_int("group", group)

    def __call__(self, x, weight):
        x, weight = as_tensor(x), as_tensor(weight, name="weight")
        if weight.ndim != 4 or weight.shape[0] != self.out_channel or \
                tuple(weight.shape[2:]) != self.kernel_size:
            raise ValueError(f"Conv2D: weight must have shape ({self.out_channel}, C/group, "
                             f"{self.kernel_size[0]}, {self.kernel_size[1]}) (out_channel="
                             f"{self.out_channel}, kernel_size={self.kernel_size}), got weight "
                             f"of shape {weight.shape}")
        padding = _pad_mode_padding(self.pad_mode, self.pad, x.shape[2:], self.kernel_size,
                                    self.stride, self.dilation)
        return conv.conv2d(x, weight, None, self.stride, padding, self.dilation, self.group)


class _Pool(Primitive):
    def __init__(self, kernel_size=1, strides=1, pad_mode="valid"):
        self.kernel_size = conv.pair("kernel_size", kernel_size)
        self.strides = conv.pair("strides", strides)
        self.pad_mode = _check_pad_mode(pad_mode)

    def padding(self, x):
        return _pad_mode_padding(self.pad_mode, 0, as_tensor(x).shape[2:], self.kernel_size,
                                 self.strides, 1)


class MaxPool(_Pool):
    """Max pooling of x (N, C, H, W): ``MaxPool(kernel_size=1, strides=1, pad_mode='valid')(x)``."""
    def __call__(self, x):
        return pooling.max_pool2d(x, self.kernel_size, self.strides, self.padding(x))


class AvgPool(_Pool):
    """Average pooling of x (N, C, H, W); with pad_mode='same' padding is not counted."""
    def __call__(self, x):
        return pooling.avg_pool2d(x, self.kernel_size, self.strides, self.padding(x),
                                  count_include_pad=False)


# primitive name -> the Function class of the same name that computes it (see the docstring)
SAME_NAMED_FUNCTIONS = {
    "Abs": math.Abs, "Exp": math.Exp, "Log": math.Log, "Neg": math.Neg, "ReLU": math.ReLU,
    "Sigmoid": math.Sigmoid, "Sqrt": math.Sqrt, "Tanh": math.Tanh,
    "Add": arithmetic.Add, "Sub": arithmetic.Sub, "Mul": arithmetic.Mul, "Div": arithmetic.Div,
    "Pow": arithmetic.Pow, "Maximum": arithmetic.Maximum, "Minimum": arithmetic.Minimum,
    "Cast": arithmetic.Cast, "Concat": join.Concat, "Stack": join.Stack, "Split": join.Split,
    "GeLU": activation.GeLU, "Softmax": activation.Softmax, "LogSoftmax": activation.LogSoftmax,
    "MatMul": linalg.MatMul, "Reshape": shape.Reshape, "Transpose": shape.Transpose,
    "Square": creation.Square,
}
