"""Weight initializers: distributions, names, reproducibility, errors."""
import math

import numpy
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.nn import init

SHAPE = (200, 100, 3, 3)  # fan_in 900, fan_out 1800


def _draw(init, shape=SHAPE):
    minigrad.set_seed(3)
    return nn.initializer(init, shape).asnumpy().astype(numpy.float64)


@pytest.mark.parametrize("init, std, bound", [
    (nn.Normal(sigma=0.5), 0.5, None),
    (nn.Uniform(scale=0.2), 0.2 / math.sqrt(3), 0.2),
    (nn.HeUniform(), math.sqrt(2 / 900), math.sqrt(6 / 900)),
    (nn.HeNormal(mode="fan_out", nonlinearity="relu"), math.sqrt(2 / 1800), None),
    (nn.XavierUniform(gain=2.0), 2 * math.sqrt(2 / 2700), 2 * math.sqrt(6 / 2700)),
    (nn.TruncatedNormal(sigma=0.1), 0.1 * 0.8796, 0.2),  # std of N(0, 1) cut at ±2 is 0.8796
])
def test_random_initializers_have_the_documented_distribution(init, std, bound):
    values = _draw(init)
    assert abs(values.mean()) < 0.01 * std
    assert values.std() == pytest.approx(std, rel=0.02)
    if bound is not None:
        assert numpy.abs(values).max() <= bound + 1e-7


def test_normal_mean_and_constants():
    assert _draw(nn.Normal(sigma=0.01, mean=3.0), (1000,)).mean() == pytest.approx(3.0, abs=1e-3)
    assert (_draw("ones", (2, 3)) == 1).all() and (_draw("zeros", (2, 3)) == 0).all()
    assert (_draw(2.5, (2,)) == 2.5).all() and (_draw(nn.Constant(-1), (2,)) == -1).all()


@pytest.mark.parametrize(
    "name, cls",
    [
        ("normal", nn.Normal),
        ("he_uniform", nn.HeUniform),
        ("HeNormal", nn.HeNormal),
        ("xavier_uniform", nn.XavierUniform),
        ("truncatedNormal", nn.TruncatedNormal),
        ("uniform", nn.Uniform),
        ("zero", nn.Zero),
        ("one", nn.One),
    ],
)
def test_names_resolve_to_initializers(name, cls):
    numpy.testing.assert_array_equal(_draw(name, (4, 5)), _draw(cls(), (4, 5)))


def test_seed_makes_draws_reproducible_and_dtype_is_respected():
    minigrad.set_seed(7)
    a = nn.Dense(4, 3).weight.asnumpy()
    minigrad.set_seed(7)
    b = nn.Dense(4, 3).weight.asnumpy()
    assert numpy.array_equal(a, b)
    assert nn.initializer("normal", 3, minigrad.float16).dtype == minigrad.float16


def test_tensor_init_is_copied_and_shape_checked():
    source = Tensor(numpy.ones((2, 3), numpy.float32))
    dense = nn.Dense(3, 2, weight_init=source)
    dense.weight.data[0, 0] = 5
    assert source.asnumpy()[0, 0] == 1
    with pytest.raises(ValueError,
                       match=r"init must have shape \(2, 3\), got .* of shape \(3, 2\)"):
        nn.Dense(3, 2, weight_init=numpy.ones((3, 2)))


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: nn.initializer("glorot", (2,)), ValueError, "init must be one of .*'glorot'"),
        (
            lambda: nn.initializer(object(), (2,)),
            TypeError,
            "init must be an Initializer.*\\(object\\)",
        ),
        (lambda: nn.initializer("zeros", (2, -1)), ValueError, r"non-negative ints, got \(2, -1\)"),
        (
            lambda: nn.Normal(sigma=-1),
            ValueError,
            r"sigma must be a finite float in \[0.0, inf\), "
            r"got -1",
        ),
        (
            lambda: nn.HeUniform(mode="fan_avg"),
            ValueError,
            r"mode must be one of \['fan_in', 'fan_out'\], got 'fan_avg'",
        ),
        (
            lambda: nn.HeNormal(nonlinearity="swish"),
            ValueError,
            "nonlinearity must be one of .*'swish'",
        ),
    ],
)
def test_bad_initializer_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_initializer_takes_numpy_numbers():
    """mindspore.common.initializer.initializer: init (Union[Tensor, str, Initializer,
    numbers.Number]). A NumPy scalar (numpy.float32(0.5), numpy.int64(2)) is a numbers.Number,
    so it is accepted."""
    numpy.testing.assert_array_equal(
        init.initializer(numpy.float32(0.5), (2,)).asnumpy(), [0.5, 0.5]
    )
    numpy.testing.assert_array_equal(init.initializer(numpy.int64(2), (2,)).asnumpy(), [2.0, 2.0])


def test_initializer_shape_must_hold_ints():
    """mindspore.common.initializer.initializer: shape (Union[tuple, list, int]) of integers. A
    float dimension is refused, never truncated to an int; by minigrad's one argument rule a
    value of the wrong type is a TypeError (MindSpore raises ValueError here)."""
    with pytest.raises(TypeError, match=r"shape must be .*ints, got \(2\.5, 3\)"):
        init.initializer("zeros", (2.5, 3))
    assert init.initializer("zeros", (numpy.int64(2), 3)).shape == (2, 3)
