"""The Optimizer base refuses bad arguments, gradients and hyper-parameters, naming the argument,
the value and what was expected, and changes nothing."""
import numpy
import pytest

import minigrad
from helpers.optim import params
from minigrad import Parameter, Tensor, nn
from minigrad.optim import (
    SGD,
    Adam,
    AdamWeightDecay,
    Momentum,
    Optimizer,
)

F32 = numpy.float32


G = "['params', 'lr', 'weight_decay', 'grad_centralization', 'order_params']"


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda ps: SGD(ps, learning_rate=-0.1), ValueError, ["learning_rate", "-0.1"]),
        (lambda ps: SGD(ps, learning_rate=[0.1, -0.2]), ValueError, ["learning_rate[1]", "-0.2"]),
        (
            lambda ps: SGD(ps, learning_rate=Tensor(numpy.ones((2, 2), numpy.float32))),
            ValueError,
            ["learning_rate", "(2, 2)"],
        ),
        (lambda ps: SGD(ps, learning_rate="fast"), TypeError, ["learning_rate", "str"]),
        (lambda ps: SGD(ps, learning_rate=[]), ValueError, ["learning_rate", "empty"]),
        (lambda ps: Momentum(ps, 0.1, momentum=-0.9), ValueError, ["momentum", "-0.9"]),
        (lambda ps: Momentum(ps, 0.1, momentum="0.9"), TypeError, ["momentum", "str"]),
        (lambda ps: Momentum(ps, 0.1, 0.9, use_nesterov=1), TypeError, ["use_nesterov"]),
        (lambda ps: SGD(ps, momentum=-1.0), ValueError, ["momentum", "-1.0"]),
        (lambda ps: SGD(ps, dampening=-1.0), ValueError, ["dampening", "-1.0"]),
        (lambda ps: SGD(ps, momentum=0.0, nesterov=True), ValueError, ["nesterov", "momentum=0.0"]),
        (
            lambda ps: SGD(ps, momentum=0.9, dampening=0.1, nesterov=True),
            ValueError,
            ["dampening=0.1"],
        ),
        (lambda ps: SGD(ps, loss_scale=0.0), ValueError, ["loss_scale", "0.0"]),
        (lambda ps: SGD(ps, loss_scale="1"), TypeError, ["loss_scale", "str"]),
        (lambda ps: SGD(ps, weight_decay=-0.01), ValueError, ["weight_decay", "-0.01"]),
        (lambda ps: SGD(ps, weight_decay=None), TypeError, ["weight_decay", "NoneType"]),
        (lambda ps: Adam(ps, beta1=1.0), ValueError, ["beta1", "1.0"]),
        (lambda ps: Adam(ps, beta2=0.0), ValueError, ["beta2", "0.0"]),
        (lambda ps: Adam(ps, eps=0.0), ValueError, ["eps", "0.0"]),
        (lambda ps: Adam(ps, beta1=1), ValueError, ["beta1", "1.0"]),
        (lambda ps: AdamWeightDecay(ps, eps=-1e-6), ValueError, ["eps"]),
        (lambda ps: Adam(ps, use_locking="no"), TypeError, ["use_locking"]),
        (
            lambda ps: SGD(None),
            ValueError,
            ["SGD: params must be an iterable of Parameters or group dicts, got None"],
        ),
        (lambda ps: SGD([]), ValueError, ["SGD: params must be non-empty, got []"]),
        (
            lambda ps: SGD(ps[0]),
            TypeError,
            ["SGD: params must be an iterable of Parameters or group dicts, got Parameter(",
             "(Parameter)"],
        ),
        (
            lambda ps: SGD([ps[0], numpy.zeros(3)]),
            TypeError,
            ["SGD: params[1] must be a Parameter or a group dict, got array([0., 0., 0.]) "
             "(ndarray)"],
        ),
        (
            lambda ps: SGD([ps[0], {"params": ps[1:]}]),
            TypeError,
            ["SGD: params must be all Parameters or all group dicts, got ['Parameter', "
             "'dict'] (list)"],
        ),
        (
            lambda ps: SGD([ps[0], ps[0]]),
            ValueError,
            ["SGD: params[1] must be a Parameter not given before, got 'p0'"],
        ),
        (
            lambda ps: SGD([{"params": ps, "momentum": 0.9}]),
            KeyError,
            [f"SGD: the keys of group 0 must be a subset of {G} (unknown ['momentum']), "
             "got ['params', 'momentum']"],
        ),
        (
            lambda ps: SGD([{"lr": 0.1}]),
            ValueError,
            ["SGD: the keys of group 0 must be a list including 'params', got ['lr']"],
        ),
        (
            lambda ps: SGD([{"params": [ps[0], 3]}]),
            TypeError,
            ["SGD: group 0 'params'[1] must be a Parameter, got 3 (int)"],
        ),
        (lambda ps: SGD([{"params": ps, "lr": -1.0}]), ValueError, ["group 0 'lr'", "-1.0"]),
        (
            lambda ps: SGD([{"params": ps[:1]}, {"params": ps[:1]}]),
            ValueError,
            ["SGD: the groups' parameters[1] must be a Parameter not given before, got 'p0'"],
        ),
        (
            lambda ps: SGD([{"params": ps}, {"order_params": ps[:1]}]),
            ValueError,
            ["SGD: order_params must be the 2 parameters of the groups, each once "
             "(['p0', 'p1']), got ['p0']"],
        ),
        (
            lambda ps: SGD([{"params": ps}, {"order_params": [ps[0], ps[0]]}]),
            ValueError,
            ["SGD: order_params must be the 2 parameters of the groups, each once "
             "(['p0', 'p1']), got ['p0', 'p0']"],
        ),
        (
            lambda ps: SGD([{"params": ps}, {"order_params": [ps[0], 3]}]),
            TypeError,
            ["SGD: order_params[1] must be a Parameter, got 3 (int)"],
        ),
        (
            lambda ps: SGD([{"params": ps}, {"order_params": 5}]),
            TypeError,
            ["SGD: order_params must be an iterable of Parameters, got 5 (int)"],
        ),
        (
            lambda ps: SGD([{"params": ps}, {"order_params": ps, "lr": 0.1}]),
            ValueError,
            ["SGD: the keys of group 1 must be ['order_params'] alone, got ['order_params', "
             "'lr']"],
        ),
        (
            lambda ps: SGD([{"order_params": ps}]),
            ValueError,
            ["SGD: the number of Parameters in the groups must be >= 1, got 0"],
        ),
        (
            lambda ps: SGD([{"params": ps, "grad_centralization": 1}]),
            TypeError,
            ["grad_centralization"],
        ),
        (
            lambda ps: SGD(numpy.array(1.0), 0.1),
            TypeError,
            ["SGD: params must be an iterable of Parameters or group dicts, got array(1.)"],
        ),
        (
            lambda ps: Optimizer(0.1, ps, decay_filter="beta"),
            TypeError,
            ["Optimizer: decay_filter must be callable, got 'beta' (str)"],
        ),
    ],
)
def test_bad_arguments_name_argument_and_value(make, error, words):
    with pytest.raises(error) as info:
        make(params((2, 3), (3,)))
    for word in words:
        assert word in str(info.value)


def test_bad_gradients_name_parameter_and_shapes_and_change_nothing():
    ps = params((2, 3), (3,))
    before = [p.data.copy() for p in ps]
    opt = Momentum(ps, 0.1, 0.9)
    with pytest.raises(
        ValueError, match=r"^Momentum: grads must be 2 gradients, one per parameter \(not 1\), "
                          r"got \(array\("
    ):
        opt((numpy.ones((2, 3), numpy.float32),))
    with pytest.raises(
        ValueError,
        match=r"^Momentum: the shape of grads\[1\] \(of parameter 'p1'\) must be the "
        r"parameter's \(3,\), got \(4,\)$",
    ):
        opt((numpy.ones((2, 3), numpy.float32), numpy.ones(4, numpy.float32)))
    with pytest.raises(
        TypeError,
        match=r"^Momentum: grads\[1\] \(of parameter 'p1'\) must be a float Tensor or array, "
        r"got array\(\[1, 1, 1\]\) \(ndarray\)$",
    ):
        opt((numpy.ones((2, 3), numpy.float32), numpy.ones(3, numpy.int64)))
    with pytest.raises(
        TypeError, match=r"^Momentum: grads\[0\] \(of parameter 'p0'\) must be a float Tensor or "
        r"array, got \[1, 2\] \(list\)$"
    ):
        opt(([1, 2], None))
    with pytest.raises(
        TypeError,
        match=r"^Momentum: grads must be a tuple or list with one gradient per parameter, "
        r"got ndarray of shape \(2, 3\) and dtype float32 \(ndarray\)$",
    ):
        opt(numpy.ones((2, 3), numpy.float32))
    for p, b in zip(ps, before):
        numpy.testing.assert_array_equal(p.data, b)
    assert opt.global_step == 0 and opt.state_dict() == {
        "global_step": 0,
        "learning_rate": numpy.float32(0.1),
    }


def test_int_hyperparameters_are_converted():
    opt = Momentum(params((2,)), learning_rate=1, momentum=0, weight_decay=0, loss_scale=2)
    assert opt.get_lr() == 1.0 and opt.momentum == 0.0 and opt.loss_scale == 2.0


@pytest.mark.parametrize(
    "make, error, words",
    [
        (
            lambda w: nn.SGD(w, momentum=-0.1),
            ValueError,
            ["momentum must be", "-0.1", "[0.0, inf)"],
        ),
        (lambda w: nn.SGD(w, momentum="0.9"), TypeError, ["momentum must be", "'0.9'", "float"]),
        (
            lambda w: nn.SGD(w, momentum=0.9, dampening=-1.0),
            ValueError,
            ["dampening must be", "-1.0"],
        ),
        (
            lambda w: nn.SGD(w, momentum=0.0, nesterov=True),
            ValueError,
            ["SGD: nesterov must be False unless momentum > 0 and dampening == 0",
             "momentum=0.0", "got True"],
        ),
        (
            lambda w: nn.SGD(w, momentum=0.9, dampening=0.1, nesterov=True),
            ValueError,
            ["dampening=0.1"],
        ),
        (lambda w: nn.Momentum(w, 0.1, -0.5), ValueError, ["momentum must be", "-0.5"]),
        (
            lambda w: nn.Momentum(w, 0.1, 0.9, use_nesterov=1),
            TypeError,
            ["use_nesterov must be", "bool"],
        ),
        (lambda w: nn.Adam(w, beta1=1.0), ValueError, ["beta1 must be", "1.0", "(0.0, 1.0)"]),
        (lambda w: nn.Adam(w, beta2=0.0), ValueError, ["beta2 must be", "0.0", "(0.0, 1.0)"]),
        (lambda w: nn.Adam(w, eps=0.0), ValueError, ["eps must be", "0.0", "(0.0, inf)"]),
        (lambda w: nn.AdamWeightDecay(w, eps=-1e-6), ValueError, ["eps must be", "-1e-06"]),
        (lambda w: nn.AdamWeightDecay(w, beta1=float("nan")), ValueError, ["beta1 must be", "nan"]),
        (lambda w: nn.Adam(w, weight_decay=-1e-4), ValueError, ["weight_decay must be", "-0.0001"]),
        (
            lambda w: nn.Adam(w, loss_scale=0.0),
            ValueError,
            ["loss_scale must be", "0.0", "(0.0, inf)"],
        ),
        (lambda w: nn.Adam(w, learning_rate=-1.0), ValueError, ["learning_rate must be", "-1.0"]),
    ],
)
def test_bad_arguments_name_argument_value_and_expectation(make, error, words):
    with pytest.raises(error) as info:
        make([minigrad.Parameter(numpy.zeros(2, F32), name="w")])
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: nn.Momentum(ps, float("inf"), 0.9),
        lambda ps: nn.Momentum(ps, 0.1, float("inf")),
        lambda ps: nn.SGD(ps, 0.1, loss_scale=float("inf")),
        lambda ps: nn.Adam(ps, 0.1, eps=float("inf")),
        lambda ps: nn.AdamWeightDecay(ps, 0.1, weight_decay=float("inf")),
    ],
)
def test_infinite_hyperparameters_are_refused(make):
    """An inf learning rate, momentum, eps, weight decay or loss scale only yields inf, NaN or
    zero updates (loss_scale=inf would zero every gradient without a word): a ValueError naming
    it."""
    ps = [minigrad.Parameter(numpy.ones(2, numpy.float32), name="w")]
    with pytest.raises(ValueError, match="must be a finite float"):
        make(ps)


def _param():
    return Parameter(Tensor(numpy.ones(3, numpy.float32)), name="w")


@pytest.mark.parametrize(
    "rate",
    [
        numpy.array([numpy.inf, 0.1]),
        numpy.array(numpy.inf),
        Tensor(numpy.array([0.1, numpy.inf], numpy.float32)),
    ],
)
def test_optimizer_rejects_inf_learning_rate_array(rate):
    # optim/optimizer.py Optimizer: learning_rate must be finite (a float or a list with inf is
    # refused); a Tensor/array holding inf too, which would make every step inf/NaN
    with pytest.raises(ValueError, match="learning_rate.*inf"):
        SGD([_param()], learning_rate=rate)


def test_optimizer_rejects_inf_group_learning_rate_array():
    with pytest.raises(ValueError, match="group 0 'lr'.*inf"):
        SGD([{"params": [_param()], "lr": numpy.array([0.1, numpy.inf])}])


@pytest.mark.parametrize(
    "scale", [3, 3.0, numpy.float32(3.0), numpy.float64(3.0), Tensor(numpy.float32(3.0))]
)
def test_every_spelling_of_a_scale_divides_by_the_same_fp32_inverse(scale):
    ps = params((5,))
    expected = ps[0].data - numpy.float32(0.5) * (numpy.float32(6.0) * numpy.float32(1.0 / 3.0))
    SGD(ps, 0.5).apply_gradients([numpy.full(5, 6.0, numpy.float32)], scale=scale)
    numpy.testing.assert_array_equal(ps[0].data, expected)
