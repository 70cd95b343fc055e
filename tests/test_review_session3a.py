"""Session 3a review: the three loss-scaling faces against their peers' documented behaviour.

Each test cites the reference line it checks (/work/shared/reference/loss-scalers.md = LS,
/work/shared/reference/mindspore-loss-scale.md = MS, the peers' sources/docs where quoted there).
"""
import numpy as np
import pytest

from minigrad import Tensor, Parameter, nn, ops
from minigrad import amp
from minigrad.amp import GradScaler, DynamicLossScaler, autocast
from minigrad.mixed_precision import DynamicLossScale, FixedLossScale, get

from helpers.doubles import StepCountingOptimizer

f32 = np.float32


@pytest.mark.parametrize("make, name", [
    (lambda: GradScaler(init_scale="big"), "'init_scale'"),
    (lambda: GradScaler(init_scale=1e39), "'init_scale'"),
    (lambda: DynamicLossScale(initial_loss_scale="x"), "'initial_loss_scale'"),
    (lambda: DynamicLossScale(initial_loss_scale=1e-60), "'initial_loss_scale'"),
    (lambda: DynamicLossScale(increment_period=0), "'increment_period'"),
    (lambda: DynamicLossScale(increment_period=2.5), "'increment_period'"),
    (lambda: FixedLossScale(1e39), "'loss_scale_value'"),
    (lambda: amp.DynamicLossScaleManager(1e39), "'init_loss_scale'"),
    (lambda: amp.FixedLossScaleManager(1e39), "'loss_scale'"),
    (lambda: amp.StaticLossScaler(1e39), "'scale_value'"),
    (lambda: DynamicLossScaler(1e39, 2, 10), "'scale_value' .* but got 1e\\+39"),
])
def test_errors_name_the_faces_own_argument(make, name):
    """SPEC §7: errors name *the argument*. GradScaler's is ``init_scale`` (LS §1.1), TF's are
    ``initial_loss_scale`` / ``increment_period`` (LS §2.1); the shared core called them
    'scale' and 'growth_interval', names the user never wrote."""
    with pytest.raises((TypeError, ValueError), match=name):
        make()


@pytest.mark.parametrize("make", [lambda: nn.DynamicLossScaleUpdateCell(1e39, 2, 10),
                                  lambda: nn.FixedLossScaleUpdateCell(1e39)])
def test_update_cells_refuse_a_scale_that_is_inf_in_float32_naming_loss_scale_value(make):
    """SPEC §7 (errors name the argument) and the float32 scale every face keeps: MindSpore's
    argument is ``loss_scale_value`` (MS §2.1/§2.2). A 1e39 scale is inf in float32, where the
    cells multiply (the dynamic cell's error said 'scale'; the fixed cell accepted it)."""
    with pytest.raises(ValueError, match="'loss_scale_value'"):
        make()


def test_fixed_loss_scale_non_number_raises_value_error_as_tf():
    """LS §2.1: ``FixedLossScale(loss_scale_value)``: "ValueError if not int/float or < 1" (TF:
    ``raise ValueError('loss_scale_value must be a Python int or float.')``). minigrad's own
    convention is TypeError, so the error must be both."""
    for bad in ("8", None, [8]):
        with pytest.raises(ValueError, match="loss_scale_value") as info:
            FixedLossScale(bad)
        assert isinstance(info.value, TypeError)
        assert repr(bad) in str(info.value)


def test_fixed_loss_scale_config_is_the_python_value():
    """LS §2.1 "get_config() == {'loss_scale_value': v}"; TF keeps ``float(loss_scale_value)``,
    so a value that float32 cannot hold (3.3) comes back as given, not as 3.2999999523."""
    fixed = FixedLossScale(3.3)
    assert fixed.get_config() == {"loss_scale_value": 3.3}
    assert repr(fixed) == "FixedLossScale(3.3)"
    assert FixedLossScale.from_config(fixed.get_config()).get_config() == fixed.get_config()
    assert fixed().dtype == np.float32 and float(fixed().data) == float(f32(3.3))
    assert FixedLossScale(8).get_config() == {"loss_scale_value": 8.0}


@pytest.mark.parametrize("identifier", [Tensor(np.float32(8.0)), np.array([1.0, 2.0]), np.int64(8)])
def test_get_refuses_any_other_identifier_with_tfs_message(identifier):
    """LS §2.1 ``get``: anything other than int/float, 'dynamic', a LossScale or None gives
    ``ValueError('Could not interpret loss scale identifier: ...')``. A Tensor or array reached
    ``identifier == "dynamic"`` and failed inside the comparison instead."""
    with pytest.raises(ValueError, match="Could not interpret loss scale identifier"):
        get(identifier)


def test_dynamic_update_flattens_nested_gradients_like_tf():
    """TF ``DynamicLossScale.update`` starts with ``grads = nest.flatten(grads)`` (tensorflow
    python/training/experimental/loss_scale.py; LS §2.1 "update(grads)", None ignored): a
    nested structure, a dict or a lone Tensor are all gradients."""
    ok = Tensor(np.ones(3, np.float32))
    bad = Tensor(np.array([1.0, np.inf], np.float32))
    ls = DynamicLossScale(initial_loss_scale=8, increment_period=100)
    assert ls.update([[ok, None], (ok, [ok])]) == (None, True)
    assert ls.update([[ok], (None, [bad])]) == (None, False)
    assert float(ls().data) == 4.0
    assert ls.update({"a": ok, "b": (bad,)}) == (None, False)
    assert ls.update(bad) == (None, False)
    assert ls.update(ok) == (None, True)
    assert float(ls().data) == 1.0 and ls.core.counter == 1
    with pytest.raises(TypeError, match="grads"):
        ls.update([ok, "x"])


def test_dynamic_loss_scale_config_round_trips_the_extras():
    """LS §2.1: ``from_config(config) = cls(**config)`` rebuilds the loss scale; TF's three keys
    stay the whole config by default, but minigrad's extras (floor, cap, hysteresis,
    max_consecutive_skips) were dropped, so a round trip silently lost the cap and the floor."""
    assert DynamicLossScale().get_config() == {"initial_loss_scale": 32768.0, "increment_period": 2000,
                                               "multiplier": 2.0}
    ls = DynamicLossScale(16, 3, 2.0, floor=2.0, cap=64.0, hysteresis=2, max_consecutive_skips=9)
    config = ls.get_config()
    for again in (DynamicLossScale.from_config(config), get(config)):
        assert again.get_config() == config
        core, ref = again.core, ls.core
        assert (core.floor, core.cap, core.hysteresis, core.max_consecutive_skips) == \
               (ref.floor, ref.cap, ref.hysteresis, ref.max_consecutive_skips) == (2.0, 64.0, 2, 9)


def test_non_power_of_two_backoff_divides_as_tf_and_mindspore_scaler():
    """TF: ``maximum(current_loss_scale / multiplier, 1)`` (LS §2.1; tensorflow loss_scale.py
    ``update_if_not_finite_grads``); MindSpore ``amp.DynamicLossScaler.adjust``:
    ``maximum(one, scale_value / scale_factor)`` (MS §6.5). Both divide in float32; multiplying
    by float32(1/m) differs by one ulp for about a third of the scales when m is 10."""
    scale, m = f32(9.9318454e29), 10
    expected = max(f32(scale / f32(m)), f32(1))
    assert expected != f32(scale * f32(1 / m))       # the two roundings really differ here
    ls = DynamicLossScale(float(scale), 10, float(m))
    ls.update([Tensor(np.array([np.inf], np.float32))])
    assert ls().data.item() == expected
    scaler = DynamicLossScaler(float(scale), m, 10)
    scaler.adjust(False)
    assert scaler.scale_value.data.item() == expected
    # PyTorch multiplies by backoff_factor (LS §1.6 "scale *= backoff_factor"): unchanged
    p = Parameter(Tensor(np.zeros(1, np.float32)), name="w")
    gs = GradScaler(float(scale), growth_factor=10.0, backoff_factor=1 / m)
    p.grad = Tensor(np.array([np.inf], np.float32))
    gs.step(StepCountingOptimizer([p]))
    gs.update()
    assert gs.get_scale() == float(f32(scale * f32(1 / m)))


def test_tf_and_mindspore_scaler_trajectories_with_factor_three():
    """The same division rule over a sequence with growth and backoff (LS §2.1, MS §6.5)."""
    seq = [False, True, True, False, False, True, False, False, False, True, True]
    s_tf = s_ms = f32(3.0 ** 9 + 1)
    ls, sc = DynamicLossScale(float(s_tf), 2, 3.0), DynamicLossScaler(float(s_ms), 3, 2)
    good = 0
    for of in seq:
        if of:
            s_tf, good = max(f32(s_tf / f32(3)), f32(1)), 0
        elif good + 1 >= 2:
            s_tf, good = f32(s_tf * f32(3)), 0
        else:
            good += 1
        ls.update([Tensor(np.array([np.inf if of else 1.0], np.float32))])
        sc.adjust(not of)
        assert ls().data.item() == s_tf == sc.scale_value.data.item()


@pytest.mark.parametrize("new_scale", [1e39, 1e-50, Tensor(np.array([1e-50]))])
def test_update_new_scale_outside_float32_is_refused(new_scale):
    """The scale is float32 (LS §1.1 "_scale (0-dim float32)"); minigrad refuses a scale that is
    inf or 0 there (ScaleCore, session 2b) because no backoff or growth can leave it. The
    ``update(new_scale)`` path bypassed that check: 1e39 became inf, 1e-50 became 0."""
    gs = GradScaler(init_scale=8.0)
    with pytest.raises(ValueError, match="new_scale"):
        gs.update(new_scale)
    assert gs.get_scale() == 8.0


_GOOD = {"scale": 4.0, "growth_factor": 3.0, "backoff_factor": 0.25, "growth_interval": 5,
         "_growth_tracker": 1}


@pytest.mark.parametrize("key, value, error", [
    ("backoff_factor", 2.0, ValueError),
    ("scale", float("inf"), ValueError),
    ("scale", 1e39, ValueError),
    ("scale", "x", TypeError),
    ("_growth_tracker", -3, ValueError),
    ("_growth_tracker", 1.5, TypeError),
    ("growth_interval", 0, ValueError),
])
def test_grad_scaler_load_state_dict_checks_every_value_and_never_half_loads(key, value, error):
    """SPEC §7: "A corrupt or mismatched checkpoint gives a clear error and never half-loads."
    GradScaler.load_state_dict set the scale and the growth factor before the backoff check
    failed, and took an inf scale or a negative tracker without a word. PyTorch's five keys
    (LS §1.7) are checked as the constructor checks them, naming the key."""
    gs = GradScaler(init_scale=2.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=10)
    before = gs.state_dict()
    with pytest.raises(error, match=key):
        gs.load_state_dict(dict(_GOOD, **{key: value}))
    assert gs.state_dict() == before
    gs.load_state_dict(_GOOD)
    assert gs.state_dict() == _GOOD
    with pytest.raises(TypeError, match="dict"):
        gs.load_state_dict([("scale", 4.0)])


class _BNNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 3)
        self.bn = nn.BatchNorm1d(3)

    def construct(self, x):
        return self.bn(self.fc(x))


@pytest.mark.parametrize("kwargs, name", [
    (dict(keep_batchnorm_fp32="yes"), "keep_batchnorm_fp32"),
    (dict(keep_batchnorm_fp32=0), "keep_batchnorm_fp32"),
    (dict(keep_batchnorm_fp32=None), "keep_batchnorm_fp32"),
    (dict(cast_model_type=np.float64), "cast_model_type"),
    (dict(cast_model_type=np.int32), "cast_model_type"),
    (dict(cast_model_type=None), "cast_model_type"),
])
def test_build_train_network_checks_the_kwargs_types(kwargs, name):
    """MS §3.4: "Allowed kwargs: cast_model_type (float16/float32), keep_batchnorm_fp32 (bool),
    loss_scale_manager (LossScaleManager ...)" (MindSpore checks them with check_type_name /
    check_value_type: TypeError). A truthy string kept BatchNorm in fp32; float64 or int32 was
    silently read as 'no cast'."""
    net = _BNNet()
    with pytest.raises(TypeError, match=name):
        amp.build_train_network(net, nn.SGD(net.trainable_params(), 0.1), nn.MSELoss(), level="O2",
                                **kwargs)
    assert net.fc.weight.dtype == np.float32          # nothing was cast before the error


def test_build_train_network_accepts_both_float_names():
    net = _BNNet()
    amp.build_train_network(net, nn.SGD(net.trainable_params(), 0.1), nn.MSELoss(), level="O2",
                            cast_model_type="float32", keep_batchnorm_fp32=False)
    assert net.fc.weight.dtype == np.float32


def test_autocast_leaves_float64_ops_alone():
    """PyTorch amp "Op Eligibility": "Ops that run in float64 or non-floating-point dtypes are not
    eligible, and will run in these types whether or not autocast is enabled." minigrad cast a
    float64 matmul down to fp16."""
    a = Tensor(np.random.default_rng(0).standard_normal((3, 4)))
    b = Tensor(np.random.default_rng(1).standard_normal((4, 2)))
    with autocast():
        y = ops.matmul(a, b)
        z = ops.matmul(a.astype(np.float32), b.astype(np.float32))
    assert y.dtype == np.float64 and z.dtype == np.float16
    np.testing.assert_array_equal(y.asnumpy(), a.asnumpy() @ b.asnumpy())


def test_dynamic_loss_scaler_reads_its_counter_parameter():
    """MS §6.5: ``adjust`` reads the ``counter`` Parameter (``select(counter == scale_window - 1,
    ...)``, then ``counter = ((counter + 1) % scale_window) * grads_finite``), as it reads
    ``scale_value``. A counter restored into the Parameter (a checkpoint, ``set_data``) was
    ignored: the scaler kept its own hidden count."""
    sc = DynamicLossScaler(8, 2, 3)
    sc.counter.set_data(np.int32(2))
    assert sc.adjust(True) is True
    assert float(sc.scale_value.data) == 16.0 and int(sc.counter.data) == 0
    sc.counter.set_data(np.int32(1))
    sc.adjust(True)
    assert float(sc.scale_value.data) == 16.0 and int(sc.counter.data) == 2
    sc.adjust(False)
    assert float(sc.scale_value.data) == 8.0 and int(sc.counter.data) == 0
