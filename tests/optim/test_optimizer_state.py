"""The optimizers' ``state_dict`` / ``load_state_dict``: bit-identical continuation, a copy,
validation before any change, rates kept."""
import numpy
import pytest

from helpers.optim import params
from minigrad import Parameter
from minigrad.optim import SGD, Adam, AdamWeightDecay, Momentum


A = "Adam.load_state_dict: "


def run(opt, steps, seed):
    rng = numpy.random.default_rng(seed)
    for _ in range(steps):
        opt(tuple(rng.standard_normal(p.shape).astype(p.dtype) for p in opt.parameters))


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: Adam(ps, learning_rate=[0.01, 0.02, 0.005], weight_decay=0.01, loss_scale=8.0),
        lambda ps: Momentum(ps, 0.1, 0.9, use_nesterov=True),
        lambda ps: SGD(ps, 0.1, momentum=0.5, dampening=0.1),
        lambda ps: AdamWeightDecay(ps, 0.01, weight_decay=0.1),
    ],
    ids=["Adam", "Momentum", "SGD", "AdamWeightDecay"],
)
def test_state_dict_round_trip_continues_bit_identically(make):
    ps = params((3, 2), (2,), names=["fc.weight", "fc.bias"])
    ps.append(Parameter(numpy.linspace(-1, 1, 4).astype(numpy.float16), name="half.weight"))
    opt = make(ps)
    run(opt, 3, seed=1)
    saved_state, saved_params = opt.state_dict(), [p.data.copy() for p in ps]
    assert saved_state["global_step"] == 3 and "master.half.weight" in saved_state
    assert all(isinstance(v, (int, numpy.ndarray)) for v in saved_state.values())
    run(opt, 3, seed=2)

    fresh = [Parameter(d.copy(), name=p.name) for d, p in zip(saved_params, ps)]
    resumed = make(fresh)
    resumed.load_state_dict(saved_state)
    run(resumed, 3, seed=2)
    for p, q in zip(ps, fresh):
        numpy.testing.assert_array_equal(p.data, q.data)
    for key, value in opt.state_dict().items():
        numpy.testing.assert_array_equal(resumed.state_dict()[key], value)


def test_state_dict_is_a_copy():
    ps = params((2,))
    opt = Momentum(ps, 0.1, 0.9)
    run(opt, 1, seed=0)
    saved = opt.state_dict()
    copy = saved["moments.p0"].copy()
    run(opt, 1, seed=1)
    numpy.testing.assert_array_equal(saved["moments.p0"], copy)


def _good_state():
    ps = params((3, 2), (2,), names=["fc.weight", "fc.bias"])
    ps.append(Parameter(numpy.ones(2, numpy.float16), name="h"))
    opt = Adam(ps)
    run(opt, 2, seed=0)
    return ps, opt, opt.state_dict()


@pytest.mark.parametrize(
    "corrupt, error, words",
    [
        (lambda d: d.pop("global_step"), ValueError, ["global_step"]),
        (lambda d: d.update(global_step=1.5), TypeError, ["global_step", "1.5"]),
        (lambda d: d.update(global_step=-1), ValueError, ["global_step", "-1"]),
        (
            lambda d: d.update({"moment1.fc.bias": numpy.zeros(3, numpy.float32)}),
            ValueError,
            [A + "the shape and dtype of state_dict['moment1.fc.bias'] must be ((2,), 'float32') "
             "(for parameter 'fc.bias'), got ((3,), 'float32')"],
        ),
        (
            lambda d: d.update({"moment2.fc.weight": numpy.zeros((3, 2), numpy.float64)}),
            ValueError,
            [A + "the shape and dtype of state_dict['moment2.fc.weight'] must be ((3, 2), "
             "'float32') (for parameter 'fc.weight'), got ((3, 2), 'float64')"],
        ),
        (
            lambda d: d.update({"moments.fc.bias": numpy.zeros(2, numpy.float32)}),
            ValueError,
            ["'moments.fc.bias'"],
        ),
        (
            lambda d: d.update({"moment1.nope": numpy.zeros(2, numpy.float32)}),
            ValueError,
            ["'moment1.nope'"],
        ),
        (
            lambda d: d.pop("moment2.fc.bias"),
            ValueError,
            [A + "the state entries of parameter 'fc.bias' must be none or all of "
             "['moment1.fc.bias', 'moment2.fc.bias'], got ['moment1.fc.bias']"],
        ),
        (
            lambda d: d.update({"master.fc.bias": numpy.zeros(2, numpy.float32)}),
            ValueError,
            [A + "state_dict key must be the master of a float16 (or bfloat16) parameter "
             "('fc.bias' is float32), got 'master.fc.bias'"],
        ),
        (
            lambda d: d.update({"master.h": numpy.zeros(2, numpy.float16)}),
            ValueError,
            [A + "the shape and dtype of state_dict['master.h'] must be ((2,), 'float32') (for "
             "parameter 'h'), got ((2,), 'float16')"],
        ),
    ],
)
def test_load_state_dict_validates_everything_before_changing_anything(corrupt, error, words):
    ps, opt, good = _good_state()
    run(opt, 1, seed=5)
    current = opt.state_dict()
    bad = dict(good)
    corrupt(bad)
    with pytest.raises(error) as info:
        opt.load_state_dict(bad)
    for word in words:
        assert word in str(info.value)
    after = opt.state_dict()
    assert after.keys() == current.keys()
    for key in current:
        numpy.testing.assert_array_equal(after[key], current[key])


def test_load_state_dict_rejects_non_dicts_and_resets_absent_state():
    ps, opt, good = _good_state()
    with pytest.raises(TypeError, match=r"Adam.load_state_dict: state_dict must be a dict, got "
                                        r"\[\('global_step', 1\)\] \(list\)"):
        opt.load_state_dict([("global_step", 1)])
    opt.load_state_dict({"global_step": 7})  # the rate, absent, keeps its value
    assert opt.state_dict() == {"global_step": 7, "learning_rate": numpy.float32(opt.get_lr())}


def test_duplicate_names_are_reported_by_state_dict():
    ps = params((2,), (2,), names=["w", "w"])
    with pytest.raises(
        ValueError,
        match=r"^SGD: the name of parameter #1 must be unique \(state_dict keys the state by "
        r"parameter name\), got 'w'$",
    ):
        SGD(ps).state_dict()


def test_a_state_dict_replaces_the_whole_state_matched_by_name():
    """PyTorch's semantics (``load_state_dict`` replaces the state; minigrad matches parameters by
    name, as MindSpore's checkpoints do): Adam's moments load into AdamWeightDecay (a legitimate
    switch), and a parameter absent from the dict starts afresh. Unknown slots are refused."""
    ps = [
        Parameter(numpy.ones(3, numpy.float32), name="a"),
        Parameter(numpy.ones(2, numpy.float32), name="b"),
    ]
    grads = tuple(numpy.ones(p.shape, numpy.float32) for p in ps)
    adam = Adam(ps)
    adam(grads)
    switched = AdamWeightDecay(ps, 0.1)
    switched.load_state_dict(adam.state_dict())
    for key, value in adam.state_dict().items():
        if key != "learning_rate":
            numpy.testing.assert_array_equal(switched.state_dict()[key], value)
    one = Momentum(ps[:1], 0.1, 0.9)
    one(grads[:1])
    two = Momentum(ps, 0.1, 0.9)
    two(grads)
    two.load_state_dict(one.state_dict())
    assert sorted(two.state_dict()) == ["global_step", "learning_rate", "moments.a"]
    before = two.state_dict()
    with pytest.raises(ValueError, match=r"Momentum.load_state_dict: state_dict key must be "
                                         r"'global_step', .*, got 'moment1.a'"):
        two.load_state_dict(adam.state_dict())
    assert two.state_dict().keys() == before.keys()


def test_optimizer_state_dict_keeps_a_changed_learning_rate():
    ps = [Parameter(numpy.ones(2, numpy.float32), name="w")]
    trained = Momentum(ps, 0.1, 0.9)
    trained.learning_rate.set_data(numpy.array(0.01, numpy.float32))
    resumed = Momentum(ps, 0.1, 0.9)
    resumed.load_state_dict(trained.state_dict())
    assert resumed.get_lr() == trained.get_lr()


def test_group_learning_rates_round_trip_and_bad_rates_change_nothing():
    ps = [
        Parameter(numpy.ones(2, numpy.float32), name="w"),
        Parameter(numpy.ones(2, numpy.float32), name="b"),
    ]
    groups = [{"params": ps[:1], "lr": 0.5}, {"params": ps[1:]}]
    trained = Momentum(groups, 0.1, 0.9)
    trained.learning_rate[0].set_data(numpy.array(0.25, numpy.float32))
    resumed = Momentum(groups, 0.1, 0.9)
    resumed.load_state_dict(trained.state_dict())
    assert [float(r.data) for r in resumed.get_lr_parameter(ps)] == [
        0.25,
        float(numpy.float32(0.1)),
    ]
    for bad in (
        numpy.array(-1.0, numpy.float32),
        numpy.array([0.1], numpy.float32),
        numpy.array(numpy.nan),
    ):
        state = dict(trained.state_dict(), global_step=9)
        state[next(k for k in state if k.startswith("learning_rate"))] = bad
        with pytest.raises(ValueError, match="must be a finite float >= 0 of shape"):
            resumed.load_state_dict(state)
        assert resumed.global_step == 0 and float(resumed.learning_rate[0].data) == 0.25
