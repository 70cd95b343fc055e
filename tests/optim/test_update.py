"""Each optimizer's update, step by step, against a float64 NumPy re-implementation of its
documented formula (``helpers.optim``), on the fused native step and on the NumPy path.

Covered per case: fp32 parameters, and fp16 parameters (whose fp32 master must follow the formula
and be what the parameter rounds), Nesterov, Adam's bias correction, L2 and decoupled weight decay
with the default decay filter (``bn.gamma``, ``bn.beta`` get no decay), per-group rates and
decays, learning-rate lists and schedules, loss-scale division, and parameters without a
gradient on some steps.
"""
import numpy
import numpy as np
import pytest

import minigrad
from helpers.optim import (
    NAMES,
    NO_BETA_GAMMA,
    SHAPES,
    adam,
    adam_weight_decay,
    initial_weights,
    make_params,
    momentum,
    numpy_path,
    run_reference,
    sgd,
)
from minigrad import Parameter, Tensor, nn
from minigrad.optim import SGD, Adam, Momentum

F16, F32 = numpy.float16, numpy.float32
GROUPED = (True, True, False, False)
LR_LIST = [0.1, 0.05, 0.02, 0.01]
SCHEDULE = nn.CosineDecayLR(0.001, 0.1, 4)


def _grad_steps(dtype=F32, scale=1.0, steps=5):
    rng = numpy.random.default_rng(8)
    out = [[(rng.standard_normal(s) * scale).astype(dtype) for s in SHAPES] for _ in range(steps)]
    out[1][3] = None  # fc.bias has no gradient on step 1
    out[0][1] = None  # bn.gamma's first gradient comes on step 1 (SGD's buffer starts there)
    return out


def _groups(params):
    return [{"params": params[:2], "lr": 0.2, "weight_decay": 0.1},
            {"params": params[2:], "weight_decay": 0.0}]


def _fixed(rate):
    return lambda t, i: rate


def _listed(t, i):
    return LR_LIST[min(t, 3)]


def _grouped(rate):
    return lambda t, i: 0.2 if i < 2 else rate


def _scheduled(t, i):
    return SCHEDULE(t)


# id: (optimizer factory, loss scale, reference: (lr, rule, weight_decay, decay) for run_reference)
CASES = {
    "sgd": (lambda ps: nn.SGD(ps, 0.1), 1.0, (_fixed(0.1), sgd())),
    "sgd-momentum-dampening": (lambda ps: SGD(ps, 0.05, momentum=0.9, dampening=0.3), 1.0,
                               (_fixed(0.05), sgd(0.9, 0.3))),
    # MindSpore's SGD decays every parameter (no beta/gamma filter)
    "sgd-momentum-dampening-wd-loss-scale": (
        lambda ps: nn.SGD(ps, 0.1, momentum=0.9, dampening=0.3, weight_decay=0.05, loss_scale=4.0),
        4.0, (_fixed(0.1), sgd(0.9, 0.3), 0.05, None)),
    "sgd-nesterov-wd": (lambda ps: SGD(ps, 0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
                        1.0, (_fixed(0.05), sgd(0.8, 0.0, True), 0.01, None)),
    "sgd-nesterov-list-lr": (
        lambda ps: nn.SGD(ps, LR_LIST, momentum=0.9, nesterov=True, weight_decay=0.01), 1.0,
        (_listed, sgd(0.9, 0, True), 0.01, None)),
    "sgd-groups": (lambda ps: nn.SGD(_groups(ps), 0.01, momentum=0.5, weight_decay=0.3), 1.0,
                   (_grouped(0.01), sgd(0.5), 0.1, GROUPED)),
    "momentum": (lambda ps: Momentum(ps, 0.1, 0.9), 1.0, (_fixed(0.1), momentum(0.9))),
    "momentum-nesterov": (lambda ps: Momentum(ps, 0.1, 0.9, use_nesterov=True), 1.0,
                          (_fixed(0.1), momentum(0.9, True))),
    "momentum-wd-filter": (lambda ps: nn.Momentum(ps, 0.1, 0.9, weight_decay=0.05), 1.0,
                           (_fixed(0.1), momentum(0.9), 0.05, NO_BETA_GAMMA)),
    "momentum-wd-loss-scale": (
        lambda ps: Momentum(ps, 0.1, 0.9, weight_decay=0.05, loss_scale=128.0), 128.0,
        (_fixed(0.1), momentum(0.9), 0.05, NO_BETA_GAMMA)),
    "momentum-nesterov-loss-scale-schedule": (
        lambda ps: nn.Momentum(ps, SCHEDULE, 0.9, weight_decay=0.05, use_nesterov=True,
                               loss_scale=2.0),
        2.0, (_scheduled, momentum(0.9, True), 0.05, NO_BETA_GAMMA)),
    "momentum-groups": (lambda ps: nn.Momentum(_groups(ps), 0.1, 0.9, weight_decay=0.3), 1.0,
                        (_grouped(0.1), momentum(0.9), 0.1, GROUPED)),
    "adam-defaults": (lambda ps: nn.Adam(ps, 0.01), 1.0, (_fixed(0.01), adam())),
    "adam-nesterov": (lambda ps: Adam(ps, 0.01, beta1=0.8, beta2=0.99, use_nesterov=True), 1.0,
                      (_fixed(0.01), adam(0.8, 0.99, nesterov=True))),
    "adam-wd-loss-scale": (lambda ps: Adam(ps, 0.01, weight_decay=0.1, loss_scale=1024), 1024.0,
                           (_fixed(0.01), adam(), 0.1, NO_BETA_GAMMA)),
    "adam-list-lr-wd-loss-scale": (
        lambda ps: nn.Adam(ps, LR_LIST, weight_decay=0.05, loss_scale=8.0), 8.0,
        (_listed, adam(), 0.05, NO_BETA_GAMMA)),
    # a large eps shows where it enters: outside the bias correction
    "adam-nesterov-large-eps": (
        lambda ps: nn.Adam(ps, 0.01, beta1=0.8, beta2=0.95, eps=1e-1, use_nesterov=True), 1.0,
        (_fixed(0.01), adam(0.8, 0.95, 1e-1, True))),
    "adam-groups": (lambda ps: nn.Adam(_groups(ps), 0.01, weight_decay=0.3), 1.0,
                    (_grouped(0.01), adam(), 0.1, GROUPED)),
    "adamw": (lambda ps: nn.AdamWeightDecay(ps, 0.01, weight_decay=0.1), 1.0,
              (_fixed(0.01), [adam_weight_decay(0.1 if d else 0.0) for d in NO_BETA_GAMMA])),
    "adamw-schedule": (
        lambda ps: nn.AdamWeightDecay(ps, SCHEDULE, weight_decay=0.1, eps=1e-1), 1.0,
        (_scheduled, [adam_weight_decay(0.1 if d else 0.0, eps=1e-1) for d in NO_BETA_GAMMA])),
    "adamw-groups": (
        lambda ps: nn.AdamWeightDecay(_groups(ps), 0.01, weight_decay=0.3), 1.0,
        (_grouped(0.01), [adam_weight_decay(0.1 if d else 0.0) for d in GROUPED])),
}


@pytest.mark.parametrize("dtype", [F32, F16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("path", [pytest.param("fused", marks=pytest.mark.requires_native),
                                  "numpy"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_update_matches_the_float64_reference_of_the_documented_formula(case, path, dtype):
    """fp32 parameters follow the formula to float32 accuracy; an fp16 parameter's fp32 master
    follows it to the accuracy of fp16 gradients, and the parameter is the master rounded. The
    ``fused`` case runs the native step on every update, the ``numpy`` case never does."""
    make, loss_scale, (lr, rule, *decay) = CASES[case]
    steps = _grad_steps(dtype, loss_scale)
    params = make_params(dtype)
    opt = make(params)
    with numpy_path(path == "numpy"):
        for t, grads in enumerate(steps, 1):
            opt([None if g is None else minigrad.Tensor(g) for g in grads])
            assert opt.last_step_fused is (path == "fused"), f"step {t}"
    assert opt.global_step == len(steps)
    init = [p.astype(dtype) for p in initial_weights()]
    expected = run_reference(init, steps, lr, rule, *decay, loss_scale=loss_scale)
    for p, w in zip(params, expected):
        if dtype == F16:
            master = opt.state_dict()[f"master.{p.name}"]
            numpy.testing.assert_allclose(master, w, rtol=2e-5, atol=2e-6,
                                          err_msg=f"{case}: {p.name}")
            numpy.testing.assert_array_equal(p.data, master.astype(F16))
        else:
            numpy.testing.assert_allclose(
                p.data, w, rtol=2e-6, atol=2e-6, err_msg=f"{case}: {p.name}"
            )


def test_fp16_parameters_follow_the_fp32_master_rule():
    """fp16 parameters: the rule runs on an fp32 master; the parameter is the master rounded."""

    def run(params):
        opt = nn.Adam(params, 0.01, weight_decay=0.05)
        for grads in steps:
            opt([None if g is None else minigrad.Tensor(g) for g in grads])
        return [p.data.astype(numpy.float64) for p in params]

    steps = _grad_steps()
    master = run(make_params(F32))
    got = run(make_params(F16))
    # the fp16 start rounds the weights: compare with a run from the rounded fp32 values
    rounded = [
        Parameter(a.astype(F16).astype(F32), name=n) for a, n in zip(initial_weights(), NAMES)
    ]
    reference = run(rounded)
    for g, r in zip(got, reference):
        numpy.testing.assert_array_equal(g, r.astype(F16).astype(numpy.float64))
    assert any(
        not numpy.array_equal(g, m) for g, m in zip(got, master)
    )  # the test can tell them apart


def test_adam_bias_correction_first_step_moves_by_lr():
    # t = 1: m = (1-b1) g, v = (1-b2) g^2, lr_t = lr sqrt(1-b2)/(1-b1) -> |step| = lr (eps aside)
    w = Parameter(numpy.zeros(3, numpy.float32), name="w")
    opt = Adam([w], learning_rate=0.01)
    opt((numpy.array([0.1, -2.0, 50.0], numpy.float32),))
    numpy.testing.assert_allclose(w.data, [-0.01, 0.01, -0.01], rtol=1e-4)


def test_fp16_master_accumulates_updates_fp16_alone_would_lose():
    w = Parameter(numpy.ones(4, numpy.float16), name="w")
    opt = SGD([w], learning_rate=1e-4)
    one = numpy.ones(4, numpy.float16)
    assert (
        numpy.float16(1.0) - numpy.float16(1e-4) == 1.0
    )  # a single step is below fp16's spacing at 1
    for _ in range(100):
        opt((one,))
    master = opt.state_dict()["master.w"]
    assert master.dtype == numpy.float32
    numpy.testing.assert_allclose(master, 0.99, rtol=1e-5)
    numpy.testing.assert_array_equal(w.data, numpy.float16(0.99))


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float16], ids=["fp32", "fp16"])
def test_parameter_data_is_updated_in_place(dtype):
    w = Parameter(numpy.ones((2, 3), dtype), name="w")
    data, view = w.data, w.data[0]
    Momentum([w], 0.5, 0.9)((numpy.ones((2, 3), dtype),))
    assert w.data is data and w.dtype == dtype
    numpy.testing.assert_array_equal(view, [0.5, 0.5, 0.5])


def test_fp16_master_rereads_a_parameter_written_elsewhere():
    w = Parameter(numpy.ones(2, numpy.float16), name="w")
    opt = SGD([w], learning_rate=0.5)
    opt((numpy.ones(2, numpy.float16),))
    w.set_data(numpy.array([3.0, 4.0], numpy.float16))  # e.g. load_param_into_net
    opt((numpy.ones(2, numpy.float16),))
    numpy.testing.assert_array_equal(w.data, [2.5, 3.5])


def test_loss_scale_divides_gradients():
    a, b = make_params(numpy.float32), make_params(numpy.float32)
    scaled, plain = Adam(a, 0.01, loss_scale=64.0), Adam(b, 0.01)
    rng = numpy.random.default_rng(3)
    for _ in range(3):
        grads = [rng.standard_normal(shape).astype(numpy.float32) for shape in SHAPES]
        scaled([g * 64 for g in grads])
        plain(grads)
    for p, q in zip(a, b):
        numpy.testing.assert_array_equal(p.data, q.data)  # power-of-two scale: exact


def test_none_gradients_skip_their_parameter():
    params = make_params(numpy.float32)
    before = [p.data.copy() for p in params[1:]]
    opt = Momentum(params, 0.1, 0.9)
    opt((numpy.ones(SHAPES[0], numpy.float32), None, None, None))
    for p, b in zip(params[1:], before):
        numpy.testing.assert_array_equal(p.data, b)
    assert set(opt.state_dict()) == {"global_step", "learning_rate", "moments.fc.weight"}


def test_inplace_operator_on_fp16_parameter_is_seen_by_the_optimizer_master():
    p = Parameter(np.ones(2, np.float16), name="w")
    opt = nn.SGD([p], 0.5)
    opt((Tensor(np.ones(2, np.float16)),))  # master 0.5
    p += 2.0  # 2.5: the master must re-read it
    opt((Tensor(np.ones(2, np.float16)),))
    np.testing.assert_array_equal(p.data, np.array([2.0, 2.0], np.float16))
