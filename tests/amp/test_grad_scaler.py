"""minigrad.amp.GradScaler, PyTorch's face: state_dict checks, explicit scales, pickling and
copies, and the report of the step that raised."""
import copy
import pickle

import numpy as np
import pytest

from minigrad import Parameter, Tensor, nn
from minigrad.amp import GradScaler


def test_grad_scaler_pickle_and_deepcopy_get_their_own_status():
    scaler = GradScaler(init_scale=8.0)
    net = nn.Dense(3, 2)
    opt = nn.SGD(net.trainable_params(), 0.1)
    scaler.scale(net(Tensor(np.ones((2, 3), np.float32))).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert repr(scaler).startswith("GradScaler(scale=8.0")
    restored = pickle.loads(pickle.dumps(scaler))
    assert restored.state_dict() == scaler.state_dict()
    twin = copy.deepcopy(scaler)
    assert twin._status is not scaler._status
    for s in (restored, twin):  # a full step on the copy works and leaves the original alone
        opt.zero_grad()
        s.scale(net(Tensor(np.ones((2, 3), np.float32))).sum()).backward()
        assert s.step(opt)
        s.update()
    assert scaler._per_optimizer == {}
    # mid-iteration the per-optimizer records name optimizers by id: refuse, as PyTorch does
    scaler.scale(net(Tensor(np.ones((2, 3), np.float32))).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="update"):
        pickle.dumps(scaler)


@pytest.mark.parametrize("new_scale", [1e39, 1e-50, Tensor(np.array([1e-50]))])
def test_update_new_scale_outside_float32_is_refused(new_scale):
    """PyTorch keeps the scale as a 0-dim float32 tensor; minigrad refuses a scale that is inf
    or 0 in float32 (as ``ScaleCore`` does) because no backoff or growth can leave it, on the
    ``update(new_scale)`` path too: 1e39 would be inf, 1e-50 would be 0."""
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
    """A corrupt or mismatched checkpoint gives a clear error and never half-loads: every one of
    PyTorch's five keys (``torch.amp.GradScaler.state_dict``: scale, growth_factor,
    backoff_factor, growth_interval, _growth_tracker) is checked as the constructor checks it,
    naming the key, before anything is set."""
    gs = GradScaler(init_scale=2.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=10)
    before = gs.state_dict()
    with pytest.raises(error, match=key):
        gs.load_state_dict(dict(_GOOD, **{key: value}))
    assert gs.state_dict() == before
    gs.load_state_dict(_GOOD)
    assert gs.state_dict() == _GOOD
    with pytest.raises(TypeError, match=r"GradScaler.load_state_dict: state_dict must be a dict, "
                                        r"got \[\('scale', 4.0\)\] \(list\)"):
        gs.load_state_dict([("scale", 4.0)])
    with pytest.raises(KeyError, match=r"state_dict keys must be a superset of \[.*\] \(missing "
                                       r"\['_growth_tracker', 'growth_interval'\]\), got"):
        gs.load_state_dict({k: v for k, v in _GOOD.items() if k not in ("_growth_tracker",
                                                                        "growth_interval")})
    assert gs.state_dict() == _GOOD


def test_grad_scaler_last_report_describes_the_step_that_raised():
    from minigrad.amp import GradScaler
    p = Parameter(Tensor(np.ones(3, np.float32)), name="p")
    opt = nn.SGD([p], 0.1)
    scaler = GradScaler(init_scale=4.0, max_consecutive_skips=2)
    p.grad = Tensor(np.array([np.inf, 1, 1], np.float32))
    scaler.step(opt)
    scaler.update()
    p.grad = Tensor(np.array([np.inf, 1, 1], np.float32))
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="max_consecutive_skips=2"):
        scaler.update()
    assert scaler.last_report.step == 2


@pytest.mark.parametrize("call", [
    lambda s, opt: s.update(new_scale="abc"),
    lambda s, opt: s.update(new_scale=0.0),
    lambda s, opt: s.step("not an optimizer"),
    lambda s, opt: s.scale("loss"),
    lambda s, opt: s.load_state_dict({}),
], ids=["update-str", "update-zero", "step", "scale", "load-empty"])
def test_refused_calls_leave_the_scaler_as_it_was(call):
    """Nothing half-applied: a refused call mid-iteration (after step, before update) changes
    nothing reachable from the scaler or the optimizer, and the iteration then finishes."""
    from helpers.state import reachable_state
    net = nn.Dense(3, 2)
    opt = nn.SGD(net.trainable_params(), 0.1)
    scaler = GradScaler(init_scale=8.0, growth_interval=1)
    scaler.scale(net(Tensor(np.ones((2, 3), np.float32))).sum()).backward()
    scaler.step(opt)
    before = reachable_state(scaler, opt)
    with pytest.raises((TypeError, ValueError)):
        call(scaler, opt)
    assert reachable_state(scaler, opt) == before
    scaler.update()
    assert scaler.get_scale() == 16.0
