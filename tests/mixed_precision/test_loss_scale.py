"""minigrad.mixed_precision: TensorFlow's loss-scale face (FixedLossScale, DynamicLossScale,
get, their configs and reports) against the behaviour TensorFlow documents for
``tf.compat.v1.mixed_precision``."""
import numpy
import numpy as np
import pytest

from minigrad import Tensor
from minigrad.mixed_precision import DynamicLossScale, FixedLossScale, get

f32 = np.float32


def test_tf_loss_scale_update_report_names_the_gradients():
    # mixed_precision/loss_scale.py LossScale.update: StepReport.inf_params / nan_params are
    # "names of the parameters"; not (None,), which would print "NaN in [None]"
    from minigrad import mixed_precision
    scale = mixed_precision.DynamicLossScale(8.0)
    grads = [Tensor(numpy.ones(2, numpy.float32)), None,
             Tensor(numpy.array([numpy.nan, numpy.inf], numpy.float32))]
    assert scale.update(grads) == (None, False)
    report = scale.last_report
    assert report.inf_params == ("grads[2]",) and report.nan_params == ("grads[2]",)
    assert "None" not in str(report)


def test_fixed_loss_scale_non_number_raises_value_error_as_tf():
    """TensorFlow's ``FixedLossScale(loss_scale_value)`` raises ``ValueError('loss_scale_value
    must be a Python int or float.')``; minigrad's own convention for a wrong type is
    TypeError, so the error is both."""
    for bad in ("8", None, [8]):
        with pytest.raises(ValueError, match="loss_scale_value") as info:
            FixedLossScale(bad)
        assert isinstance(info.value, TypeError)
        assert repr(bad) in str(info.value)


def test_fixed_loss_scale_config_is_the_python_value():
    """TensorFlow's ``get_config()`` is ``{'loss_scale_value': float(loss_scale_value)}``, so a
    value that float32 cannot hold (3.3) comes back as given, not as 3.2999999523."""
    fixed = FixedLossScale(3.3)
    assert fixed.get_config() == {"loss_scale_value": 3.3}
    assert repr(fixed) == "FixedLossScale(3.3)"
    assert FixedLossScale.from_config(fixed.get_config()).get_config() == fixed.get_config()
    assert fixed().dtype == np.float32 and float(fixed().data) == float(f32(3.3))
    assert FixedLossScale(8).get_config() == {"loss_scale_value": 8.0}


@pytest.mark.parametrize("identifier", [Tensor(np.float32(8.0)), np.array([1.0, 2.0]), np.int64(8)])
def test_get_refuses_any_other_identifier_with_tfs_message(identifier):
    """TensorFlow's ``get``: anything other than int/float, 'dynamic', a LossScale or None gives
    ``ValueError('Could not interpret loss scale identifier: ...')``, a Tensor or an array too
    (not an error from inside ``identifier == "dynamic"``)."""
    with pytest.raises(ValueError, match="Could not interpret loss scale identifier"):
        get(identifier)


def test_dynamic_update_flattens_nested_gradients_like_tf():
    """TensorFlow's ``DynamicLossScale.update`` starts with ``grads = nest.flatten(grads)``
    (tensorflow python/training/experimental/loss_scale.py; None entries ignored): a nested
    structure, a dict or a lone Tensor are all gradients."""
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
    """TensorFlow's ``from_config(config)`` is ``cls(**config)``: it rebuilds the loss scale. The
    default config is TensorFlow's three keys; minigrad's extras (floor, cap, hysteresis,
    max_consecutive_skips) are in it when set, so a round trip keeps them."""
    assert DynamicLossScale().get_config() == {
        "initial_loss_scale": 32768.0,
        "increment_period": 2000,
        "multiplier": 2.0,
    }
    ls = DynamicLossScale(16, 3, 2.0, floor=2.0, cap=64.0, hysteresis=2, max_consecutive_skips=9)
    config = ls.get_config()
    for again in (DynamicLossScale.from_config(config), get(config)):
        assert again.get_config() == config
        core, ref = again.core, ls.core
        assert (
            (core.floor, core.cap, core.hysteresis, core.max_consecutive_skips)
            == (ref.floor, ref.cap, ref.hysteresis, ref.max_consecutive_skips)
            == (2.0, 64.0, 2, 9)
        )


def test_tf_loss_scale_last_report_describes_the_step_that_raised():
    """The TF face shares the skip guard: the step that trips it leaves its own report."""
    from minigrad.mixed_precision import DynamicLossScale

    loss_scale = DynamicLossScale(initial_loss_scale=8.0, max_consecutive_skips=2)
    grads = [Tensor(np.array([np.inf, 1.0], np.float32))]
    loss_scale.update(grads)
    assert loss_scale.last_report.step == 1
    with pytest.raises(RuntimeError):
        loss_scale.update(grads)
    assert loss_scale.last_report.step == 2 and loss_scale.last_report.skipped
