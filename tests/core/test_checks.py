"""minigrad._checks: one rule for every argument (TypeError for a wrong type, ValueError out of
range, the message naming the argument, the value and what was expected)."""
import math
import re

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigrad import _checks as c

NOT_NUMBERS = [None, "1", "nan", "", b"1", [1], (1,), {}, object(), 1j]
BOOLS = [True, False, numpy.bool_(True), numpy.bool_(False)]


# ---- ints ---------------------------------------------------------------------------------------

@given(st.integers(min_value=c.INT64_MIN, max_value=c.INT64_MAX))
def test_check_int_returns_python_ints(value):
    for given_value in (value, numpy.int64(value)):
        out = c.check_int("n", given_value)
        assert out == value and type(out) is int


@pytest.mark.parametrize("value", [1.0, 1.5, numpy.float32(2.0), *BOOLS, *NOT_NUMBERS])
def test_check_int_refuses_non_ints_with_type_error(value):
    with pytest.raises(TypeError, match=r"^stride must be a positive int, got .*\(\w+\)$"):
        c.check_int("stride", value, low=1)


@given(st.integers(), st.integers(), st.integers())
def test_check_int_range(value, a, b):
    low, high = min(a, b), max(a, b)
    inside = low <= value <= high and c.INT64_MIN <= value <= c.INT64_MAX
    if inside:
        assert c.check_int("n", value, low=low, high=high) == value
    else:
        with pytest.raises(
            ValueError, match=rf"^n must be an int in \[{low}, {high}\].*got {value}"
        ):
            c.check_int("n", value, low=low, high=high)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**70])
def test_check_int_refuses_ints_beyond_int64_without_bounds(value):
    with pytest.raises(ValueError, match=rf"stride must be an int that fits in int64.*got {value}"):
        c.check_int("stride", value)


@pytest.mark.parametrize(
    "low, words",
    [(None, "an int"), (1, "a positive int"), (0, "a non-negative int"), (3, "an int >= 3")],
)
def test_int_messages_say_what_was_expected(low, words):
    with pytest.raises(TypeError, match=f"^k must be {words}, got 'x' \\(str\\)$"):
        c.check_int("k", "x", low=low)


def test_allow_none_and_owner():
    assert c.check_positive_int("n", None, allow_none=True) is None
    assert c.check_non_negative_int("n", 0) == 0
    with pytest.raises(TypeError, match=r"^n must be a positive int, got None \(NoneType\)$"):
        c.check_positive_int("n", None)
    with pytest.raises(TypeError, match=r"^n must be a positive int or None, got 1\.0 \(float\)"):
        c.check_positive_int("n", 1.0, allow_none=True)
    with pytest.raises(ValueError, match=r"^Model\.train: epoch must be a positive int, got 0$"):
        c.check_positive_int("epoch", 0, owner="Model.train")


# ---- floats -------------------------------------------------------------------------------------


@given(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**60), 2**60))
def test_check_float_takes_ints_and_floats(value):
    out = c.check_float("x", value)
    assert out == float(value) and type(out) is float
    assert c.check_float("x", numpy.float32(0.5)) == 0.5


@pytest.mark.parametrize("value", [*BOOLS, *NOT_NUMBERS])
def test_check_float_refuses_non_numbers_with_type_error(value):
    with pytest.raises(TypeError, match=r"^lr must be a finite float in \[0\.0, inf\), got .*\("):
        c.check_float("lr", value, low=0.0)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, numpy.float16("inf")])
def test_check_float_refuses_nan_and_inf(value):
    with pytest.raises(ValueError, match="must be a finite float"):
        c.check_float("x", value)


def test_check_float_inf_only_when_allowed():
    assert c.check_float("x", math.inf, finite=False) == math.inf
    with pytest.raises(ValueError, match=r"^x must be a float, got nan$"):
        c.check_float("x", math.nan, finite=False)


@given(st.floats(-10, 10), st.booleans(), st.booleans())
def test_check_float_interval_ends(value, low_open, high_open):
    ok = (value > -1 if low_open else value >= -1) and (value < 1 if high_open else value <= 1)
    interval = ("(" if low_open else "[") + "-1, 1" + (")" if high_open else "]")
    if ok:
        assert (
            c.check_float("p", value, low=-1, high=1, low_open=low_open, high_open=high_open)
            == value
        )
    else:
        with pytest.raises(ValueError, match="p must be a finite float in " + re.escape(interval)):
            c.check_float("p", value, low=-1, high=1, low_open=low_open, high_open=high_open)


def test_positive_and_non_negative():
    assert c.check_positive("eps", 1e-8) == 1e-8
    assert c.check_non_negative("wd", 0) == 0.0
    with pytest.raises(ValueError, match=r"^eps must be a finite float in \(0\.0, inf\), got 0$"):
        c.check_positive("eps", 0)
    with pytest.raises(ValueError, match=r"wd must be a finite float in \[0\.0, inf\), got -1"):
        c.check_non_negative("wd", -1)



@pytest.mark.parametrize(
    "bounds, finite, interval",
    [
        ({"low": 0.0, "low_open": True}, True, "(0.0, inf)"),
        ({"low": 0.0, "low_open": True}, False, "(0.0, inf]"),
        ({"low": 0.0}, True, "[0.0, inf)"),
        ({"low": 0.0}, False, "[0.0, inf]"),
        ({"high": 1.0}, True, "(-inf, 1.0]"),
        ({"high": 1.0, "high_open": True}, False, "[-inf, 1.0)"),
    ],
)
def test_an_unbounded_end_is_open_exactly_when_the_infinity_is_refused(bounds, finite, interval):
    words = ("a finite float" if finite else "a float") + " in " + re.escape(interval)
    with pytest.raises(ValueError, match=f"^x must be {words}, got nan$"):
        c.check_float("x", math.nan, finite=finite, **bounds)
    inf = math.inf if "low" in bounds else -math.inf
    if finite:
        with pytest.raises(ValueError, match=f"^x must be {words}, got -?inf$"):
            c.check_float("x", inf, finite=finite, **bounds)
    else:
        assert c.check_float("x", inf, finite=finite, **bounds) == inf


# ---- bools, choices, types ----------------------------------------------------------------------


@pytest.mark.parametrize("value", BOOLS)
def test_check_bool_takes_bools(value):
    out = c.check_bool("flag", value)
    assert out is bool(value)


@pytest.mark.parametrize("value", [0, 1, None, "", "True", 1.0, numpy.int8(1), [True]])
def test_check_bool_refuses_truthy_stand_ins(value):
    with pytest.raises(TypeError, match=r"^requires_grad must be a bool, got "):
        c.check_bool("requires_grad", value)


def test_check_in():
    assert c.check_in("pad_mode", "same", ("same", "valid")) == "same"
    with pytest.raises(ValueError, match=r"^pad_mode must be one of \['same', 'valid'\], got 'x'$"):
        c.check_in("pad_mode", "x", ("same", "valid"))
    with pytest.raises(TypeError, match=r"pad_mode must be one of .*got array\(1\) \(ndarray\)"):
        c.check_in("pad_mode", numpy.array(1), ("same", "valid"))
    assert c.check_in("level", 2, (1, 2)) == 2
    with pytest.raises(ValueError, match=r"level must be one of \[1, 2\], got True"):
        c.check_in("level", True, (1, 2))  # True == 1, but a bool is not the level 1


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_check_relation(low, high):
    if low <= high:
        assert c.check_relation("low", low, low <= high, f"<= high ({high})") == low
    else:
        message = f"low must be <= high ({high}), got {low!r}"
        with pytest.raises(ValueError, match=re.escape(message)):
            c.check_relation("low", low, low <= high, f"<= high ({high})")


def test_check_relation_error_types_and_owner():
    with pytest.raises(TypeError, match=re.escape("f: fn must be an instance, got <class 'int'> "
                                                  "(type)")):
        c.check_relation("fn", int, False, "an instance", error=TypeError, owner="f")
    with pytest.raises(KeyError, match=re.escape("d must be a dict with 'a', got ['b']")):
        c.check_relation("d", ["b"], False, "a dict with 'a'", error=KeyError)
    assert c.check_relation("x", None, True, "anything") is None


def test_check_type_and_callable():
    assert c.check_type("x", 3, int) == 3
    with pytest.raises(TypeError, match=r"^x must be a str or bytes, got 3 \(int\)$"):
        c.check_type("x", 3, (str, bytes))
    with pytest.raises(TypeError, match=r"^x must be a Cell, got 3 \(int\)$"):
        c.check_type("x", 3, str, expected="a Cell")
    assert c.check_callable("fn", len) is len
    with pytest.raises(TypeError, match=r"^fn must be callable, got 3 \(int\)$"):
        c.check_callable("fn", 3)


def test_long_values_are_shortened_in_messages():
    with pytest.raises(TypeError) as info:
        c.check_int("n", "x" * 500)
    assert len(str(info.value)) < 150 and "..." in str(info.value)


# ---- int tuples ---------------------------------------------------------------------------------


@given(st.integers(1, 100), st.integers(1, 100))
def test_check_int_tuple(a, b):
    assert c.check_int_tuple("stride", a, 2, low=1) == (a, a)
    assert c.check_int_tuple("stride", [a, numpy.int32(b)], 2, low=1) == (a, b)
    assert c.check_int_tuple("axes", (a, b)) == (a, b)


@pytest.mark.parametrize(
    "value, error",
    [
        (1.5, TypeError),
        ((1, 1.5), TypeError),
        ((1, True), TypeError),
        (None, TypeError),
        ((1, 2, 3), ValueError),
        ((0, 1), ValueError),
        ((1, 2**70), ValueError),
    ],
)
def test_check_int_tuple_refuses(value, error):
    with pytest.raises(
        error,
        match=r"^stride must be a positive int or a 2-tuple or list of positive "
        r"ints( that fit in int64)?, got ",
    ):
        c.check_int_tuple("stride", value, 2, low=1)


def test_a_sequence_of_ints_is_a_tuple_or_a_list():
    assert c.check_int_tuple("shape", [2, numpy.int64(3)], low=0) == (2, 3)
    assert c.check_int_tuple("shape", 4, low=0) == (4,)
    for value in ("23", {2, 3}, numpy.array([2, 3]), range(2), None, 2.0):
        with pytest.raises(TypeError, match=r"^shape must be .*tuple or list of .*ints, got "):
            c.check_int_tuple("shape", value, low=0)
    with pytest.raises(TypeError, match=r"^shape must be a tuple or list of ints, got 2 \(int\)$"):
        c.check_int_tuple("shape", 2, scalar=False)
    with pytest.raises(ValueError, match=r"^sections must be .*ints in \[1, 4\], got \[2, 5\]$"):
        c.check_int_tuple("sections", [2, 5], low=1, high=4)


# ---- axes ---------------------------------------------------------------------------------------

@given(st.integers(0, 4), st.data())
def test_check_axes_counts_negative_axes_from_the_end(ndim, data):
    span = max(ndim, 1)
    axes = data.draw(st.lists(st.integers(-span, span - 1), max_size=span,
                              unique_by=lambda a: a % span))
    assert c.check_axes("axis", axes, ndim) == tuple(a % span for a in axes)
    if axes:
        assert c.check_axis("axis", axes[0], ndim) == axes[0] % span


@pytest.mark.parametrize("value, error", [(2, ValueError), (-3, ValueError), ((0, 0), ValueError),
                                          ((0, -2), ValueError), (0.0, TypeError),
                                          (None, TypeError), ((0, True), TypeError)])
def test_check_axes_refuses(value, error):
    with pytest.raises(error, match=r"^axis must be an int or a tuple/list of ints in \[-2, 1\] "
                                    r"\(the axes of a tensor of 2 dimensions\)"):
        c.check_axes("axis", value, 2)


def test_check_axis_takes_one_int():
    with pytest.raises(TypeError, match=r"^axis must be an int in \[-2, 1\] \(an axis of a tensor "
                                        r"of 2 dimensions\), got \(0,\) \(tuple\)$"):
        c.check_axis("axis", (0,), 2)
    with pytest.raises(ValueError, match=r"^softmax: axis must be an int in \[-1, 0\].*got 1$"):
        c.check_axis("axis", 1, 0, owner="softmax")


# ---- dtypes, paths, names, operands -------------------------------------------------------------

SUPPORTED = (numpy.dtype("float16"), numpy.dtype("float32"))


@pytest.mark.parametrize("value", [numpy.float16, "float16", numpy.dtype("float16"), "half"])
def test_check_dtype_takes_dtypes_types_and_names(value):
    assert c.check_dtype("dtype", value, SUPPORTED) == numpy.dtype("float16")


@pytest.mark.parametrize("value", [numpy.float32(3.0), numpy.uint8(3), None, 16, True, object(),
                                   numpy.ones(2, numpy.float16)])
def test_a_value_that_has_a_dtype_is_not_a_dtype(value):
    with pytest.raises(TypeError, match=r"^dtype must be one of \['float16', 'float32'\] \(a "
                                        r"dtype, a scalar type or a dtype's name\), got "):
        c.check_dtype("dtype", value, SUPPORTED)
    assert c.check_dtype("dtype", None, SUPPORTED, allow_none=True) is None


@pytest.mark.parametrize("value", ["float64", numpy.int8, "no such type", numpy.complex64])
def test_a_dtype_outside_the_supported_ones_is_a_value_error(value):
    with pytest.raises(ValueError, match=r"^dtype must be one of \['float16', 'float32'\], got "):
        c.check_dtype("dtype", value, SUPPORTED)


def test_check_path(tmp_path):
    assert c.check_path("ckpt_file_name", tmp_path / "a.ckpt") == str(tmp_path / "a.ckpt")
    assert c.check_path("directory", "d") == "d"
    for value in (None, 0, b"a.ckpt", ["a"]):
        with pytest.raises(TypeError, match=r"^ckpt_file_name must be a non-empty str or "
                                            r"os.PathLike path, got "):
            c.check_path("ckpt_file_name", value)
    with pytest.raises(ValueError, match=r"^directory must be .*, got ''$"):
        c.check_path("directory", "")
    assert c.check_path("directory", None, allow_none=True) is None


def test_check_str_tuple():
    assert c.check_str_tuple("column_names", ["x", "y"]) == ("x", "y")
    assert c.check_str_tuple("column_names", "x") == ("x",)
    for value, error in ((None, TypeError), ((1,), TypeError), (("x", "x"), ValueError),
                         (("",), ValueError)):
        with pytest.raises(error, match=r"^column_names must be a str or a tuple or list of "):
            c.check_str_tuple("column_names", value)


@pytest.mark.parametrize("value", [2, 2.5, True, numpy.float16(1), [1, 2], ((1.0,), (2.0,)),
                                   numpy.ones(3, numpy.int8)])
def test_check_operand_takes_numbers_and_arrays_of_numbers(value):
    c.check_operand("b", value)


@pytest.mark.parametrize("value, error", [(None, TypeError), ("nan", TypeError), (1j, TypeError),
                                          ([None], TypeError), ([[1], [1, 2]], ValueError),
                                          (2 ** 63, ValueError), ([2 ** 70], TypeError)])
def test_check_operand_refuses(value, error):
    with pytest.raises(error, match=r"^b must be a Tensor, a number or an array of numbers"):
        c.check_operand("b", value)


def test_check_broadcast_names_the_operands():
    assert c.check_broadcast(("a", "b"), ((2, 1), (3,))) == (2, 3)
    with pytest.raises(ValueError, match=r"^where: y must have a shape that broadcasts with x of "
                                         r"shape \(2, 3\), got y of shape \(4,\)$"):
        c.check_broadcast(("x", "y"), ((2, 3), (4,)), owner="where")


def test_arrays_are_described_by_shape_and_dtype():
    assert c.describe(numpy.array(2.0)) == "array(2.)"
    assert c.describe(numpy.zeros((20, 20))) == "ndarray of shape (20, 20) and dtype float64"


def test_check_in_folds_the_spelling_and_shows_the_value_as_given():
    assert c.check_in("pad_mode", "SAME", ("same", "valid"), fold=str.lower) == "same"
    with pytest.raises(ValueError, match=r"^pad_mode must be one of \['same', 'valid'\], got 'A'$"):
        c.check_in("pad_mode", "A", ("same", "valid"), fold=str.lower)
    with pytest.raises(TypeError, match=r"got 3 \(int\)$"):
        c.check_in("pad_mode", 3, ("same", "valid"), fold=str.lower)


def test_check_items_takes_any_ordered_iterable_of_the_type():
    assert c.check_items("xs", (1, 2), int, expected="ints") == [1, 2]
    assert c.check_items("xs", (n for n in (3, 4)), int, expected="ints") == [3, 4]
    assert c.check_items("xs", {1: 0}.values(), int, expected="ints") == [0]
    assert c.check_items("xs", [], int, expected="ints") == []


@pytest.mark.parametrize("value", ["ab", b"ab", {1: 2}, {1}, numpy.ones(2), numpy.array(1), 3,
                                   None])
def test_check_items_refuses_non_sequences(value):
    with pytest.raises(TypeError, match=r"^own: xs must be an iterable of ints, got .*\("):
        c.check_items("xs", value, int, expected="an iterable of ints", owner="own")


def test_check_items_names_the_element_and_shows_the_value():
    with pytest.raises(TypeError, match=re.escape(
            "xs must be an iterable of ints (element 1 is a str), got [1, 'a'] (list)")):
        c.check_items("xs", [1, "a"], int, expected="an iterable of ints")
    with pytest.raises(TypeError, match=re.escape(
            "xs must be an iterable of ints (element 0 is a float), got [0.5] (list)")):
        c.check_items("xs", (v for v in [0.5]), int, expected="an iterable of ints")


# ---- flags: a step's verdict -----------------------------------------------------------------

def test_check_flag_takes_bools_and_one_element_bool_tensors():
    from minigrad import Tensor
    for value in BOOLS:
        assert c.check_flag("overflow", value) is bool(value)
    assert c.check_flag("overflow", Tensor(numpy.array(True))) is True
    assert c.check_flag("overflow", numpy.array([False])) is False


@pytest.mark.parametrize("value", [0, 1, None, "True", 1.0, numpy.ones(2, bool),
                                   numpy.array(1.0), [True]])
def test_check_flag_refuses_other_values_by_name(value):
    with pytest.raises(TypeError, match=r"^o: overflow must be a bool or a one-element bool "
                                        r"Tensor, got "):
        c.check_flag("overflow", value, owner="o")


def test_state_value_error_is_both_runtime_and_value_error():
    assert issubclass(c.StateValueError, RuntimeError)
    assert issubclass(c.StateValueError, ValueError)
