"""Learning-rate schedules and list generators: MindSpore's documented examples and formulas."""
import math

import numpy
import pytest

from minigrad import Tensor
from minigrad.optim import (
    CosineDecayLR,
    ExponentialDecayLR,
    InverseDecayLR,
    NaturalExpDecayLR,
    PolynomialDecayLR,
    WarmUpLR,
    cosine_decay_lr,
    exponential_decay_lr,
    inverse_decay_lr,
    lr_schedule,
    natural_exp_decay_lr,
    piecewise_constant_lr,
    polynomial_decay_lr,
    warmup_lr,
)


# the outputs printed in MindSpore's docstrings
def test_list_generators_match_mindspore_examples():
    assert (
        piecewise_constant_lr([2, 5, 10], [0.1, 0.05, 0.01])
        == [0.1, 0.1, 0.05, 0.05, 0.05] + [0.01] * 5
    )
    assert exponential_decay_lr(0.1, 0.9, 6, 2, 1) == pytest.approx(
        [0.1, 0.1, 0.09, 0.09, 0.081, 0.081]
    )
    assert natural_exp_decay_lr(0.1, 0.9, 6, 2, 2, True) == pytest.approx(
        [0.1, 0.1, 0.1, 0.1, 0.016529888822158657, 0.016529888822158657]
    )
    assert inverse_decay_lr(0.1, 0.5, 6, 1, 1, True) == pytest.approx(
        [0.1, 0.06666666666666667, 0.05, 0.04, 0.03333333333333333, 0.028571428571428574]
    )
    assert cosine_decay_lr(0.01, 0.1, 6, 2, 2) == pytest.approx(
        [0.1, 0.1, 0.055, 0.055, 0.01, 0.01]
    )
    assert polynomial_decay_lr(0.1, 0.01, 6, 2, 2, 0.5) == pytest.approx(
        [0.1, 0.1, 0.07363961030678928, 0.07363961030678928, 0.01, 0.01]
    )
    assert warmup_lr(0.1, 6, 2, 2) == pytest.approx([0.0, 0.0, 0.05, 0.05, 0.1, 0.1])
    assert all(isinstance(v, float) for v in exponential_decay_lr(0.1, 0.9, 6, 2, 1))


@pytest.mark.parametrize(
    "schedule, formula",
    [
        (ExponentialDecayLR(0.1, 0.9, 4), lambda s: 0.1 * 0.9 ** (s / 4)),
        (ExponentialDecayLR(0.1, 0.9, 4, is_stair=True), lambda s: 0.1 * 0.9 ** (s // 4)),
        (NaturalExpDecayLR(0.1, 0.9, 4), lambda s: 0.1 * math.exp(-0.9 * s)),
        (InverseDecayLR(0.1, 0.5, 4), lambda s: 0.1 / (1 + 0.5 * s / 4)),
        (
            CosineDecayLR(0.01, 0.1, 4),
            lambda s: 0.01 + 0.045 * (1 + math.cos(math.pi * min(s, 4) / 4)),
        ),
        (PolynomialDecayLR(0.1, 0.01, 4, 0.5), lambda s: 0.09 * (1 - min(s, 4) / 4) ** 0.5 + 0.01),
        (
            PolynomialDecayLR(0.1, 0.01, 4, 2.0, update_decay_steps=True),
            lambda s: 0.09 * (1 - s / (4 * max(math.ceil(s / 4), 1))) ** 2 + 0.01,
        ),
        (WarmUpLR(0.1, 4), lambda s: 0.1 * min(s, 4) / 4),
    ],
    ids=[
        "exponential",
        "exponential-stair",
        "natural-exp",
        "inverse",
        "cosine",
        "polynomial",
        "polynomial-update",
        "warmup",
    ],
)
def test_schedules_follow_their_formula(schedule, formula):
    for step in range(10):
        assert schedule(step) == pytest.approx(formula(step))
    assert isinstance(schedule(Tensor(numpy.array(3, numpy.int32))), float)


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: ExponentialDecayLR(0.1, 0.9, 0), ValueError, ["decay_steps", "0"]),
        (lambda: ExponentialDecayLR(0.1, -0.9, 4), ValueError, ["decay_rate", "-0.9"]),
        (lambda: ExponentialDecayLR(0.1, 0.9, 4.0), TypeError, ["decay_steps", "float"]),
        (lambda: ExponentialDecayLR(0.1, 0.9, 4, is_stair=1), TypeError, ["is_stair"]),
        (
            lambda: CosineDecayLR(0.2, 0.1, 4),
            ValueError,
            ["CosineDecayLR: max_lr must be > min_lr (0.2), got 0.1"],
        ),
        (lambda: CosineDecayLR(-0.1, 0.1, 4), ValueError, ["min_lr", "-0.1"]),
        (lambda: PolynomialDecayLR(0.1, 0.01, 4, 0.0), ValueError, ["power", "0.0"]),
        (lambda: WarmUpLR(-0.1, 4), ValueError, ["learning_rate", "-0.1"]),
        (
            lambda: piecewise_constant_lr([2, 1], [0.1, 0.2]),
            ValueError,
            ["piecewise_constant_lr: milestone[1] must be >= milestone[0] (2), got 1"],
        ),
        (
            lambda: piecewise_constant_lr([2], [0.1, 0.2]),
            ValueError,
            ["piecewise_constant_lr: learning_rates must be one rate per milestone "
             "(milestone=[2]), got [0.1, 0.2]"],
        ),
        (
            lambda: piecewise_constant_lr(["a"], [0.1, 0.2]),
            TypeError,
            ["piecewise_constant_lr: milestone[0] must be a positive int, got 'a' (str)"],
        ),
        (
            lambda: CosineDecayLR(10 ** 30, 0.1, 4),
            ValueError,
            ["CosineDecayLR: max_lr must be > min_lr (1000000000000000000000000000000), got 0.1"],
        ),
        (
            lambda: piecewise_constant_lr(2, [0.1]),
            TypeError,
            ["piecewise_constant_lr: milestone must be a list or tuple, got 2 (int)"],
        ),
        (lambda: exponential_decay_lr(0.1, 0.9, 0, 2, 1), ValueError, ["total_step"]),
        (lambda: cosine_decay_lr(0.01, 0.1, 6, 0, 2), ValueError, ["step_per_epoch"]),
        (
            lambda: exponential_decay_lr(0.1, 0.9, 6, 2, 0),
            ValueError,
            ["exponential_decay_lr", "decay_epoch"],
        ),
        (lambda: warmup_lr(0.1, 6, 2, 0), ValueError, ["warmup_lr", "warmup_epoch"]),
    ],
)
def test_schedule_arguments_are_checked(make, error, words):
    with pytest.raises(error) as info:
        make()
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(
    "step",
    [Tensor(numpy.array([2])), numpy.array([2], numpy.int32), Tensor(numpy.array(2, numpy.int32))],
)
def test_schedule_accepts_a_one_element_step(step):
    schedule = lr_schedule.CosineDecayLR(0.0, 1.0, 4)
    assert schedule(step) == schedule(2) == pytest.approx(0.5)


def test_schedule_names_a_step_with_several_elements():
    with pytest.raises(
        ValueError,
        match=r"^WarmUpLR: the shape of global_step must be of one element \(global_step an int "
        r"or a one-element Tensor\), got \(2,\)$",
    ):
        lr_schedule.WarmUpLR(0.1, 4)(Tensor(numpy.array([1, 2])))
