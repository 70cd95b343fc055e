"""The ops check their arguments by minigrad._checks' rule: a float where an int belongs is a
TypeError (never truncated), an int out of range a ValueError, each naming the argument."""
import math
import warnings

import numpy
import pytest

from minigrad import Tensor, ops
from minigrad._checks import IndexRangeError
from minigrad.testing import assert_forward

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


@pytest.mark.parametrize("bound", ["nan", "", None.__class__, [1.0], Tensor([1.0, 2.0]), True,
                                   numpy.bool_(False)])
def test_clip_bounds_are_numbers(bound):
    with pytest.raises(TypeError, match=r"^clip: min must be a float, got .* \(\w+\)$"):
        ops.clip(X, min=bound)
    with pytest.raises(TypeError, match=r"^clip: max must be a float, got"):
        ops.clip(X, min=0.0, max=bound)


def test_clip_bounds_are_not_nan_but_may_be_infinite():
    with pytest.raises(ValueError, match=r"^clip: min must be a float, got nan$"):
        ops.clip(X, min=math.nan)
    with pytest.raises(ValueError, match=r"^clip: max must be a float, got np.float32\(nan\)$"):
        ops.clip(X, max=numpy.float32("nan"))
    assert_forward(ops.clip(X, min=-math.inf, max=math.inf), X.asnumpy())


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


# ---- operands named by their argument, at the op's boundary -----------------------------------

@pytest.mark.parametrize("call, name", [
    (lambda v: ops.cast(v, numpy.float16), "a"),
    (lambda v: ops.to_device(v, "CPU"), "a"),
    (lambda v: ops.dtype(v), "input"),
    (lambda v: ops.embedding(Tensor(numpy.zeros(2, numpy.int32)), v), "table"),
    (lambda v: ops.im2col(v, 2), "x"),
])
@pytest.mark.parametrize("value", [None, "abc", object()])
def test_an_operand_that_is_no_tensor_is_named(call, name, value):
    with pytest.raises(TypeError, match=rf"\b{name}\b must be .*got"):
        call(value)


def test_numbers_are_operands_of_cast_and_to_device():
    assert ops.cast(3, numpy.float16).dtype == numpy.float16
    assert ops.to_device(1.5, "CPU").asnumpy() == 1.5


@pytest.mark.parametrize("ids", [None, "abc", True, 1.5, [1.5], numpy.ones(2), [[0], [0, 1]],
                                 Tensor(numpy.ones(2, numpy.float32))])
def test_embedding_ids_are_integers_shown_when_refused(ids):
    table = Tensor(numpy.ones((4, 3), numpy.float32))
    with pytest.raises(TypeError, match=r"^embedding: ids must be an integer Tensor or array "
                                        r".*got "):
        ops.embedding(ids, table)


@pytest.mark.parametrize("ids", [-1, [0, -3], numpy.array([4]), 2 ** 63])
def test_embedding_ids_out_of_range_are_index_and_value_errors(ids):
    table = Tensor(numpy.ones((4, 3), numpy.float32))
    with pytest.raises(IndexRangeError, match=r"is out of range for a table of 4 rows: ids must be "
                                              r"in \[0, 4\), got .*\(min -?\d+, max -?\d+\)"):
        ops.embedding(ids, table)
    assert issubclass(IndexRangeError, IndexError) and issubclass(IndexRangeError, ValueError)


def test_negation_of_bools_is_a_type_error_naming_x():
    with pytest.raises(TypeError, match=r"^neg: x must be a numeric Tensor \(negation is not "
                                        r"defined on bools; use logical_not\)"):
        ops.neg(True)
    with pytest.raises(TypeError, match=r"^neg: x must be a numeric Tensor"):
        -Tensor(numpy.array([True, False]))


@pytest.mark.parametrize("op", [ops.concat, ops.stack])
def test_joined_tensors_are_named(op):
    with pytest.raises(ValueError, match=rf"^{op.__name__}: tensors must be a non-empty list or "
                                         r"tuple of Tensors, got \[\]"):
        op([])
    with pytest.raises(TypeError, match=r"tensors\[1\] must be a Tensor, a number or an array of "
                                        r"numbers, got None"):
        op([Tensor([1.0]), None])


def test_concat_refuses_0d_tensors_naming_them():
    with pytest.raises(ValueError, match=r"^concat: tensors must be .* of at least 1 dimension "
                                         r"\(0-d tensors have no axis to join along; stack them\), "
                                         r"got \[2, 3\]"):
        ops.concat([2, 3])
    assert ops.stack([2.0, 3.0]).shape == (2,)


@pytest.mark.parametrize("value, error, match", [
    (True, TypeError, r"sections_or_indices must be a positive int or None|sections_or_indices "
                      r"must be a tuple or list of ints, got True"),
    (0, ValueError, r"sections_or_indices must be a positive int, got 0"),
    (3, ValueError, r"sections_or_indices must be a divisor of the length 4 of axis 0 "
                    r"\(shape \(4,\)\), got 3"),
    (numpy.array(2.0), TypeError, r"sections_or_indices must be a tuple or list of ints"),
    ([1, 2.0], TypeError, r"sections_or_indices must be a tuple or list of ints"),
])
def test_split_sections_or_indices(value, error, match):
    with pytest.raises(error, match=match):
        ops.split(Tensor(numpy.arange(4.0)), value)


def test_split_takes_cut_indices_as_lists_ranges_and_int_arrays():
    x = Tensor(numpy.arange(5.0))
    for cuts in ([1, 3], (1, 3), range(1, 4, 2), numpy.array([1, 3])):
        assert [p.shape for p in ops.split(x, cuts)] == [(1,), (2,), (2,)]
    with pytest.raises(ValueError, match=r"^split: x must be a Tensor of at least 1 dimension"):
        ops.split(2.0, 1)


@pytest.mark.parametrize("op, expected", [(ops.softmax, 1.0), (ops.log_softmax, 0.0)])
def test_softmax_of_a_0d_tensor_is_one_element(op, expected):
    # as PyTorch: one element along its only axis
    assert_forward(op(Tensor(numpy.float32(1.5))), numpy.float32(expected))
    assert_forward(op(Tensor(numpy.float32(1.5)), axis=0), numpy.float32(expected))


def test_full_names_an_int_value_no_integer_dtype_holds():
    with pytest.raises(ValueError, match=r"^value must be an int that fits in int64 .*got "
                                         r"9223372036854775808"):
        ops.full((2,), 2 ** 63)
    assert ops.full((2,), 2 ** 63, numpy.float32).dtype == numpy.float32


def test_zeros_and_ones_of_dtype_none_are_float32():
    assert ops.zeros((2,), None).dtype == numpy.float32
    assert ops.ones((2,), dtype=None).dtype == numpy.float32


@pytest.mark.parametrize("alpha, error", [(math.inf, ValueError), (math.nan, ValueError),
                                          (True, TypeError), (None, TypeError)])
def test_leaky_relu_alpha_is_a_finite_real(alpha, error):
    with pytest.raises(error, match=r"^leaky_relu: alpha must be a finite float, got"):
        ops.leaky_relu(Tensor([1.0, -1.0]), alpha)
    assert_forward(ops.leaky_relu(Tensor([1.0, -1.0]), -0.5), numpy.float32([1.0, 0.5]))


def test_shape_errors_name_x():
    with pytest.raises(ValueError, match=r"shape must be a shape of 1 elements .* to reshape x of "
                                         r"shape \(\), got \(3, 2\)"):
        ops.reshape(3.0, (3, 2))
    with pytest.raises(ValueError, match=r"shape must be a shape that x of shape \(2,\) "
                                         r"broadcasts to, got \(2, 3\)"):
        ops.broadcast_to([1.0, 2.0], (2, 3))
    with pytest.raises(ValueError, match=r"^min: x must be a non-empty tensor .*shape \(0,\)"):
        ops.min([])
    with pytest.raises(ValueError, match=r"b must have 3 columns \(transpose_b=True\)"):
        ops.matmul(Tensor(numpy.ones((2, 3))), Tensor(numpy.ones((3, 2))), transpose_b=True)


def test_composite_helpers_check_their_settings():
    with pytest.raises(TypeError, match=r"^depend: value must be a Tensor, a number, an array, or "
                                        r"a tuple or list of them, got 'abc' \(str\)"):
        ops.depend("abc", None)
    assert ops.depend((1.0, 2.0), True) == (1.0, 2.0)
    with pytest.raises(TypeError, match=r"^HyperMap: reverse must be a bool, got None"):
        ops.HyperMap(reverse=None)
    with pytest.raises(TypeError, match=r"^MultitypeFuncGraph: read_value must be a bool, got 0"):
        ops.MultitypeFuncGraph("f", read_value=0)
    with pytest.raises(ValueError, match=r"^MultitypeFuncGraph: name must be a non-empty str, "
                                         r"got ''"):
        ops.MultitypeFuncGraph("")


@pytest.mark.parametrize("index", ["abc", 1.5, numpy.float32(1.0), numpy.ones(2), [1.5], ["a"],
                                   [None], object(), (0, 1.5), Tensor(numpy.ones(1))])
def test_an_index_of_another_kind_is_a_type_error_naming_it(index):
    with pytest.raises(TypeError, match=r"^getitem: index must be an int, a slice, None, Ellipsis, "
                                        r"a bool, an integer or bool array or Tensor, or a tuple "
                                        r"of them, got "):
        Tensor(numpy.arange(3.0))[index]


@pytest.mark.parametrize("x, index", [(numpy.arange(3.0), 3), (numpy.arange(3.0), -4),
                                      (numpy.arange(3.0), [0, 5]), (numpy.arange(3.0), (0, 0)),
                                      (numpy.float32(2.0), 0), (numpy.arange(3.0), 2 ** 63),
                                      (numpy.arange(3.0), 10 ** 30)])
def test_an_index_out_of_range_is_an_index_and_value_error(x, index):
    with pytest.raises(IndexRangeError, match=r"^getitem: index must be within x of shape "
                                              r"\(.*\) \(one entry per axis, each in \[-n, n\) "
                                              r"for an axis of n\), got "):
        ops.getitem(x, index)


def test_indices_numpy_takes_still_index():
    x = Tensor(numpy.arange(6.0).reshape(2, 3))
    for index in (-1, True, None, Ellipsis, [1, 0], numpy.array([True, False]),
                  Tensor(numpy.array([1])), (slice(None), [2, 0]), numpy.int64(1), []):
        assert_forward(x[index], x.asnumpy()[index if not isinstance(index, Tensor) else [1]])
