"""Each optimizer's update, step by step, against a float64 NumPy re-implementation of its formula.

Covered per case: fp32 parameters and fp16 parameters (whose fp32 master must follow the formula),
Nesterov, Adam's bias correction, L2 / decoupled weight decay with the default decay filter
(``bn.gamma`` gets no decay) and loss-scale division.
"""
import math

import numpy
import pytest

from minigrad import Parameter, Tensor
from minigrad.optim import SGD, Adam, AdamWeightDecay, Momentum

SHAPES = {"fc.weight": (3, 4), "bn.gamma": (4,)}
STEPS = 5


# ---- float64 references: ref(state, w, g, lr, t) updates w and state in place --------------------
def ref_sgd(momentum=0.0, dampening=0.0, nesterov=False):
    def step(state, w, g, lr, t):
        if momentum > 0:
            if "accum" not in state:
                state["accum"] = g.copy()
            else:
                state["accum"] = momentum * state["accum"] + (1 - dampening) * g
            g = g + momentum * state["accum"] if nesterov else state["accum"]
        w -= lr * g
    return step


def ref_momentum(momentum, nesterov=False):
    def step(state, w, g, lr, t):
        v = state["v"] = momentum * state.get("v", 0.0) + g
        w -= lr * (g + momentum * v) if nesterov else lr * v
    return step


def ref_adam(b1=0.9, b2=0.999, eps=1e-8, nesterov=False):
    def step(state, w, g, lr, t):
        m = state["m"] = b1 * state.get("m", 0.0) + (1 - b1) * g
        v = state["v"] = b2 * state.get("v", 0.0) + (1 - b2) * g * g
        lr_t = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        num = b1 * m + (1 - b1) * g if nesterov else m
        w -= lr_t * num / (numpy.sqrt(v) + eps)
    return step


def ref_adamw(wd, b1=0.9, b2=0.999, eps=1e-6):
    def step(state, w, g, lr, t):
        m = state["m"] = b1 * state.get("m", 0.0) + (1 - b1) * g
        v = state["v"] = b2 * state.get("v", 0.0) + (1 - b2) * g * g
        w -= lr * (m / (numpy.sqrt(v) + eps) + wd * w)
    return step


# (id, factory(params) -> optimizer, reference, weight_decay applied as L2, decays 'gamma', loss_scale)
CASES = [
    ("sgd", lambda p: SGD(p, 0.1), ref_sgd(), 0.0, False, 1.0),
    ("sgd-momentum-dampening", lambda p: SGD(p, 0.05, momentum=0.9, dampening=0.3), ref_sgd(0.9, 0.3), 0.0, False, 1.0),
    ("sgd-nesterov-wd", lambda p: SGD(p, 0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
     ref_sgd(0.8, 0.0, True), 0.01, True, 1.0),
    ("momentum", lambda p: Momentum(p, 0.1, 0.9), ref_momentum(0.9), 0.0, False, 1.0),
    ("momentum-nesterov", lambda p: Momentum(p, 0.1, 0.9, use_nesterov=True), ref_momentum(0.9, True), 0.0, False, 1.0),
    ("momentum-wd-loss_scale", lambda p: Momentum(p, 0.1, 0.9, weight_decay=0.05, loss_scale=128.0),
     ref_momentum(0.9), 0.05, False, 128.0),
    ("adam", lambda p: Adam(p, 0.01), ref_adam(), 0.0, False, 1.0),
    ("adam-nesterov", lambda p: Adam(p, 0.01, beta1=0.8, beta2=0.99, use_nesterov=True),
     ref_adam(0.8, 0.99, nesterov=True), 0.0, False, 1.0),
    ("adam-wd-loss_scale", lambda p: Adam(p, 0.01, weight_decay=0.1, loss_scale=1024), ref_adam(), 0.1, False, 1024.0),
]


def make_params(dtype, seed=0):
    rng = numpy.random.default_rng(seed)
    return [Parameter(rng.standard_normal(shape).astype(dtype), name=name) for name, shape in SHAPES.items()]


def gradients(rng, dtype, scale):
    return [(rng.standard_normal(shape) * scale).astype(dtype) for shape in SHAPES.values()]


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_update_matches_formula(case, dtype):
    _, factory, reference, wd, decay_gamma, loss_scale = case
    params = make_params(dtype)
    opt = factory(params)
    ref_w = [p.data.astype(numpy.float64) for p in params]
    ref_state = [{} for _ in params]
    rng = numpy.random.default_rng(1)
    for t in range(1, STEPS + 1):
        grads = gradients(rng, dtype, loss_scale)
        assert opt(tuple(Tensor(g) for g in grads)) is True
        for k, (name, w, g) in enumerate(zip(SHAPES, ref_w, grads)):
            g = g.astype(numpy.float64) / loss_scale
            if wd and (decay_gamma or "gamma" not in name):
                g = g + wd * w
            reference(ref_state[k], w, g, opt.get_lr(), t)
        for p, w in zip(params, ref_w):
            weight = opt.state_dict()[f"master.{p.name}"] if dtype == numpy.float16 else p.data
            numpy.testing.assert_allclose(weight, w, rtol=2e-5, atol=2e-6, err_msg=f"{p.name}, step {t}")
            if dtype == numpy.float16:  # the fp16 parameter is its master rounded
                numpy.testing.assert_array_equal(p.data, weight.astype(numpy.float16))
    assert opt.global_step == STEPS


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float16], ids=["fp32", "fp16"])
def test_adam_weight_decay_matches_formula(dtype):
    params = make_params(dtype)
    opt = AdamWeightDecay(params, 0.01, weight_decay=0.1)
    ref_w = [p.data.astype(numpy.float64) for p in params]
    refs = [ref_adamw(0.1), ref_adamw(0.0)]  # 'bn.gamma' is filtered out of the decay
    states = [{}, {}]
    rng = numpy.random.default_rng(1)
    for t in range(1, STEPS + 1):
        grads = gradients(rng, dtype, 1.0)
        opt(grads)
        for ref, state, w, g in zip(refs, states, ref_w, grads):
            ref(state, w, g.astype(numpy.float64), 0.01, t)
    for p, w in zip(params, ref_w):
        weight = opt.state_dict()[f"master.{p.name}"] if dtype == numpy.float16 else p.data
        numpy.testing.assert_allclose(weight, w, rtol=2e-5, atol=2e-6)


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
    assert numpy.float16(1.0) - numpy.float16(1e-4) == 1.0  # a single step is below fp16's spacing at 1
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
        grads = gradients(rng, numpy.float32, 1.0)
        scaled([g * 64 for g in grads])
        plain(grads)
    for p, q in zip(a, b):
        numpy.testing.assert_array_equal(p.data, q.data)  # power-of-two scale: exact


def test_none_gradients_skip_their_parameter():
    params = make_params(numpy.float32)
    before = params[1].data.copy()
    opt = Momentum(params, 0.1, 0.9)
    opt((numpy.ones(SHAPES["fc.weight"], numpy.float32), None))
    numpy.testing.assert_array_equal(params[1].data, before)
    assert set(opt.state_dict()) == {"global_step", "learning_rate", "moments.fc.weight"}
