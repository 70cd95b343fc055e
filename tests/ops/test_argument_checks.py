"""The ops check their arguments by minigrad._checks' rule: a float where an int belongs is a
TypeError (never truncated), an int out of range a ValueError, each naming the argument."""
import warnings

import numpy
import pytest

from minigrad import Tensor, ops

X = Tensor(numpy.ones((1, 2, 6, 6), numpy.float32))
W = Tensor(numpy.ones((4, 2, 3, 3), numpy.float32))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(stride=1.5), "stride"),
        (dict(stride=(1, 1.5)), "stride"),
        (dict(stride=True), "stride"),
        (dict(dilation=2.0), "dilation"),
        (dict(padding=1.0), "padding"),
        (dict(padding=None), "padding"),
        (dict(groups=1.0), "groups"),
        (dict(groups="1"), "groups"),
    ],
)
def test_conv2d_refuses_non_ints_with_type_error(kwargs, name):
    with pytest.raises(TypeError, match=f"^{name} must be .*int.*, got "):
        ops.conv2d(X, W, **kwargs)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(stride=0), "stride"),
        (dict(stride=(1, 2, 3)), "stride"),
        (dict(padding=-1), "padding"),
        (dict(padding=(1, 2, 3)), "padding"),
        (dict(groups=0), "groups"),
        (dict(stride=2**70), "stride"),
    ],
)
def test_conv2d_refuses_ints_out_of_range_with_value_error(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} must be "):
        ops.conv2d(X, W, **kwargs)


@pytest.mark.parametrize("op", [ops.max_pool2d, ops.avg_pool2d])
def test_pooling_refuses_float_sizes(op):
    with pytest.raises(
        TypeError, match=r"^kernel_size must be a positive int .*got 2\.0 \(float\)"
    ):
        op(X, 2.0)
    with pytest.raises(TypeError, match=r"^stride must be a positive int .*got 1\.5 \(float\)"):
        op(X, 2, stride=1.5)
    with pytest.raises(ValueError, match=r"^stride must be a positive int.*int64"):
        op(X, 2, stride=2**70)


def test_conv2d_still_takes_numpy_ints_and_pairs():
    out = ops.conv2d(X, W, stride=numpy.int64(1), padding=(numpy.int32(1), 1), groups=numpy.int8(1))
    assert out.shape == (1, 4, 6, 6)


# ---- None and strings are not numbers ---------------------------------------------------------

@pytest.mark.parametrize("value", [None, "nan", "1", b"1", {}, object(), 1j, [None], ["a"]])
@pytest.mark.parametrize("op", [ops.add, ops.sub, ops.mul, ops.div, ops.pow, ops.maximum])
def test_operands_that_are_not_numbers_are_refused(op, value):
    x = Tensor(numpy.ones(2, numpy.float32))
    with pytest.raises(TypeError, match="must be a Tensor, a number or an array of numbers"):
        op(x, value)
    with pytest.raises(TypeError, match="must be a Tensor, a number or an array of numbers"):
        op(value, x)


def test_operators_refuse_none_and_strings():
    x = Tensor(numpy.ones(2, numpy.float32))
    for bad in (lambda: x + None, lambda: x * "nan", lambda: None - x, lambda: x / "2",
                lambda: x < None, lambda: x >= "1"):
        with pytest.raises(TypeError, match="got (None|'nan'|'1'|'2') \\("):
            bad()


def test_equality_with_none_compares_identity_as_pytorch():
    x = Tensor(numpy.ones(2, numpy.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NotImplemented in a boolean context (Python 3.9+)
        assert (x == None) is False  # noqa: E711
        assert (x != None) is True  # noqa: E711
        assert x not in [None]
        assert x in [None, x]


@pytest.mark.parametrize("value", [None, "nan", "0", 1j, [1.0]])
def test_full_refuses_values_that_are_not_numbers(value):
    with pytest.raises(TypeError, match=r"^value must be a number \(int, float or bool\), got "):
        ops.full((2,), value)
    with pytest.raises(TypeError, match=r"^value must be a number"):
        ops.full_like(Tensor(numpy.ones(2, numpy.float32)), value)


def test_numbers_and_arrays_still_work_beside_tensors():
    x = Tensor(numpy.ones(2, numpy.float16))
    for other in (2, 2.5, True, numpy.float32(2), numpy.int8(2), [1, 2], numpy.ones(2)):
        assert (x * other).dtype == numpy.float16
    assert ops.full((2,), numpy.float16(1.5)).asnumpy().tolist() == [1.5, 1.5]


@pytest.mark.parametrize("shape", [(2.0,), 2.0, (2, None), "2"])
def test_creation_shapes_that_are_not_ints_are_type_errors(shape):
    with pytest.raises(TypeError, match="^shape must be a non-negative int"):
        ops.zeros(shape)
    with pytest.raises(ValueError, match="^shape must be a non-negative int"):
        ops.ones((2, -1))


# ---- bool flags are real bools ----------------------------------------------------------------

STAND_INS = [0, 1, None, "", "True", 1.0]


@pytest.mark.parametrize("value", STAND_INS)
def test_op_flags_must_be_bools(value):
    x = Tensor(numpy.ones((2, 3), numpy.float32))
    x4 = Tensor(numpy.ones((1, 1, 4, 4), numpy.float32))
    calls = {
        "keepdims": [
            lambda: ops.sum(x, 1, keepdims=value),
            lambda: ops.mean(x, keepdims=value),
            lambda: ops.max(x, keepdims=value),
            lambda: x.sum(keepdims=value),
            lambda: x.argmax(keepdims=value),
        ],
        "training": [
            lambda: ops.batch_norm(x, None, None, None, None, value),
            lambda: ops.dropout(x, 0.5, training=value),
        ],
        "approximate": [lambda: ops.gelu(x, approximate=value)],
        "count_include_pad": [lambda: ops.avg_pool2d(x4, 2, count_include_pad=value)],
        "transpose_b": [lambda: ops.MatMul(transpose_b=value)],
        "keep_dims": [lambda: ops.ReduceSum(keep_dims=value)],
        # None is retain_graph's default (it follows create_graph, as in PyTorch)
        "retain_graph": [
            lambda: ops.sum(Tensor([1.0], requires_grad=True)).backward(retain_graph=value)
        ] if value is not None else [],
        "create_graph": [
            lambda: ops.sum(Tensor([1.0], requires_grad=True)).backward(create_graph=value)
        ],
    }
    for name, fns in calls.items():
        for fn in fns:
            with pytest.raises(TypeError, match=f"{name} must be a bool, got "):
                fn()


def test_op_flags_take_numpy_bools():
    x = Tensor(numpy.ones((2, 3), numpy.float32))
    assert ops.sum(x, 1, keepdims=numpy.bool_(True)).shape == (2, 1)
    assert ops.dropout(x, 0.5, training=numpy.bool_(False)) is x


@pytest.mark.parametrize("kwargs", [dict(momentum=None), dict(momentum="0.1"), dict(eps=None)])
def test_batch_norm_numbers_are_type_errors(kwargs):
    x = Tensor(numpy.ones((2, 3), numpy.float32))
    with pytest.raises(TypeError, match="batch_norm (momentum|eps) must be a finite float"):
        ops.batch_norm(x, None, None, None, None, True, **kwargs)


# ---- axis and sizes: clear errors naming the argument, not IndexError/OverflowError -----------


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda x: ops.swapaxes(x, [], 1), "axis"),
        (lambda x: ops.concat([x, x], []), "axis"),
        (lambda x: ops.split(x, 1, []), "axis"),
        (lambda x: ops.stack([x, x], []), "axis"),
        (lambda x: ops.expand_dims(x, []), "axis"),
        (lambda x: ops.expand_dims(x, 1.0), "axis"),
        (lambda x: ops.layer_norm(x, None, None, []), "begin_norm_axis"),
        (lambda x: ops.softmax(x, []), "axis"),
    ],
)
def test_an_axis_that_is_not_an_int_is_a_type_error(call, name):
    x = Tensor(numpy.ones((2, 3), numpy.float32))
    with pytest.raises(TypeError, match=f"{name}[12]? must be an int"):
        call(x)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: ops.expand_dims(x, 2**70),
        lambda x: ops.swapaxes(x, 0, 2**70),
        lambda x: ops.concat([x, x], -3),
    ],
)
def test_an_axis_out_of_range_is_a_value_error(call):
    with pytest.raises(ValueError, match=r"axis[12]? must be an int in \[.*\] \(an axis of a"
        r" tensor of [23] dimensions\), got "):
        call(Tensor(numpy.ones((2, 3), numpy.float32)))


@pytest.mark.parametrize(
    "make, error, name",
    [
        (lambda: ops.Conv2D(4, 3, pad_mode=Tensor([1.0])), TypeError, "pad_mode"),
        (lambda: ops.Conv2D(4, 3, pad_mode="full"), ValueError, "pad_mode"),
        (lambda: ops.Conv2D(4.0, 3), TypeError, "out_channel"),
        (lambda: ops.Conv2D(4, 3, group=0), ValueError, "group"),
        (lambda: ops.Conv2D(4, 3, stride=2**70), ValueError, "stride"),
        (lambda: ops.Conv2D(4, 3, mode=2), ValueError, "mode"),
        (lambda: ops.MaxPool(2, pad_mode=None), TypeError, "pad_mode"),
        (lambda: ops.AvgPool(2, strides=1.5), TypeError, "strides"),
        (lambda: ops.Argmax(axis=[]), TypeError, "axis"),
        (lambda: ops.Split(axis=0, output_num=0), ValueError, "output_num"),
    ],
)
def test_primitives_check_their_attributes_when_made(make, error, name):
    with pytest.raises(error, match=f"^{name} must be "):
        make()


def test_primitives_with_valid_attributes_still_run():
    x = Tensor(numpy.ones((1, 2, 6, 6), numpy.float32))
    w = Tensor(numpy.ones((4, 2, 3, 3), numpy.float32))
    assert ops.Conv2D(4, 3, pad_mode="SAME")(x, w).shape == (1, 4, 6, 6)
    assert ops.Conv2D(4, 3, pad_mode="pad", pad=1)(x, w).shape == (1, 4, 6, 6)
    assert ops.MaxPool(2, 2, pad_mode="valid")(x).shape == (1, 2, 3, 3)


def test_same_named_primitives_and_functions_are_mapped_in_one_place():
    import importlib
    import inspect
    import pkgutil

    from minigrad.autograd.function import Function
    from minigrad.ops import primitives

    functions = {}
    for info in pkgutil.iter_modules(ops.__path__):
        module = importlib.import_module(f"minigrad.ops.{info.name}")
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Function)
                and obj.__module__ == module.__name__
            ):
                functions[name] = obj
    same = {
        name
        for name, obj in vars(ops).items()
        if inspect.isclass(obj) and issubclass(obj, ops.Primitive) and name in functions
    }
    assert set(primitives.SAME_NAMED_FUNCTIONS) == same
    for name, fn in primitives.SAME_NAMED_FUNCTIONS.items():
        assert fn is functions[name] and getattr(ops, name) is not fn


# ---- the families of refused values, one rule each (minigrad._checks) ---------------------------

@pytest.mark.parametrize("op", [lambda s: ops.reshape(X, s), lambda s: ops.broadcast_to(X, s),
                                lambda s: ops.zeros(s)])
@pytest.mark.parametrize("shape", [None, "2", 2.0, {2}, numpy.array([2, 3]), (2, None)])
def test_a_shape_that_is_not_ints_is_a_type_error_naming_shape(op, shape):
    with pytest.raises(TypeError, match=r"^shape must be an? .*int.* or a tuple or list of .*ints"):
        op(shape)


def test_a_shape_entry_below_its_bound_is_a_value_error():
    with pytest.raises(ValueError, match=r"^shape must be .*ints >= -1, got \(-2, 36\)"):
        ops.reshape(X, (-2, 36))
    with pytest.raises(ValueError, match=r"^shape must be .*, got \(-9223372036854775807,\)"):
        ops.zeros((-2 ** 63 + 1,))


@pytest.mark.parametrize("axes", [0, None, "01", (0, 1.0)])
def test_transpose_axes_are_a_tuple_or_list_of_ints(axes):
    if axes is None:
        assert ops.transpose(X, axes).shape == (6, 6, 2, 1)
        return
    with pytest.raises(TypeError, match=r"^axes must be a tuple or list of ints, got "):
        ops.transpose(X, axes)


@pytest.mark.parametrize("dtype", [numpy.float32(3.0), numpy.uint8(3), Tensor(1.0), X])
def test_a_value_with_a_dtype_is_not_a_dtype(dtype):
    for make in (lambda: Tensor([1.0], dtype=dtype), lambda: ops.cast(X, dtype),
                 lambda: ops.zeros(2, dtype=dtype)):
        with pytest.raises(TypeError, match=r"^dtype must be one of \[.*\] \(a dtype, a scalar "
                                            r"type or a dtype's name\), got "):
            make()
    with pytest.raises(TypeError, match=r"^dtype must be one of .*got None"):
        ops.cast(X, None)


@pytest.mark.parametrize("bound", ["nan", "", None.__class__, [1.0], Tensor([1.0, 2.0])])
def test_clip_bounds_are_numbers(bound):
    with pytest.raises(TypeError, match=r"^clip: min must be a number \(int, float or bool\)"):
        ops.clip(X, min=bound)
    with pytest.raises(TypeError, match=r"^clip: max must be a number"):
        ops.clip(X, min=0.0, max=bound)


@pytest.mark.parametrize("name, value, error", [
    ("step", None, TypeError), ("step", numpy.float16(numpy.inf), ValueError),
    ("step", True, TypeError), ("stop", "9", TypeError), ("start", float("nan"), ValueError),
    ("stop", 2 ** 70, ValueError), ("step", 0, ValueError), ("step", 0.0, ValueError)])
def test_arange_bounds_are_finite_numbers(name, value, error):
    arguments = {"start": 0, "stop": 5, "step": 1, name: value}
    with pytest.raises(error, match=rf"^arange: {name} must be .*, got "):
        ops.arange(**arguments)


def test_dense_and_matmul_name_the_operand_that_is_missing():
    with pytest.raises(TypeError, match=r"^weight must be a Tensor, a number or an array of "
                                        r"numbers, got None \(NoneType\)$"):
        ops.dense(Tensor(numpy.ones((2, 3), numpy.float32)), weight=None)
    with pytest.raises(TypeError, match=r"^bias must be a Tensor, .*got 'b' \(str\)$"):
        ops.dense(Tensor(numpy.ones((2, 3), numpy.float32)), numpy.ones((4, 3)), bias="b")
    with pytest.raises(ValueError, match=r"^b must have a shape that broadcasts with a of shape "
                                         r"\(1, 2, 6, 6\), got b of shape \(5,\)$"):
        ops.add(X, numpy.ones(5))
