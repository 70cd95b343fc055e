"""GradScaler as PyTorch 2.x users write it: the device argument, a scale that keeps backing
off, a step before backward, a state dict through minigrad's checkpoint, and bool flags."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad._config import using_config
from minigrad.amp import GradScaler
from minigrad.amp.core import SCALE_MIN
from minigrad.train.checkpoint import load_checkpoint, save_checkpoint


def _net_and_opt():
    minigrad.set_seed(0)
    net = nn.Dense(4, 2)
    return net, nn.SGD(net.trainable_params(), 0.1)


def _loss(net, scale_input=1.0):
    x = Tensor(np.full((3, 4), scale_input, np.float32))
    return (net(x) ** 2).mean()


@pytest.mark.parametrize("make", [
    lambda: GradScaler("cpu"),
    lambda: GradScaler("cpu", 1024.0),
    lambda: GradScaler(device="cpu", init_scale=1024.0, growth_interval=10),
    lambda: GradScaler(device="CPU"),
    lambda: GradScaler(1024.0, 2.0, 0.5, 10),
])
def test_pytorch_2_device_spellings_are_accepted(make):
    scaler = make()
    assert scaler.get_scale() in (1024.0, 2.0 ** 16)


def test_positional_device_shifts_the_rest_as_pytorch_2_does():
    scaler = GradScaler("cpu", 8.0, 3.0, 0.25, 7, False)
    assert not scaler.is_enabled()
    enabled = GradScaler("cpu", 8.0, 3.0, 0.25, 7)
    assert (enabled.get_scale(), enabled.get_growth_factor(), enabled.get_backoff_factor(),
            enabled.get_growth_interval()) == (8.0, 3.0, 0.25, 7)


def test_a_device_that_is_not_the_contexts_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match=r"GradScaler: device must be 'cpu' as the context's "
                                         r"device_target is 'CPU' \(.*pass device='cpu'.*\), "
                                         r"got 'cuda'$"):
        GradScaler("cuda")
    with pytest.raises(ValueError, match=r"device must be 'cpu' or 'cuda' \(or 'CPU'/'GPU'\), "
                                         r"got 'tpu'"):
        GradScaler(device="tpu")
    with pytest.raises(TypeError, match=r"device must be a str such as 'cpu' or 'cuda', got 0 "
                                        r"\(int\)"):
        GradScaler(device=0)
    with pytest.raises(TypeError, match="both positionally and by keyword"):
        GradScaler("cpu", device="cpu")
    with pytest.raises(TypeError, match="both positionally and by keyword"):
        GradScaler(8.0, init_scale=16.0)


@pytest.mark.parametrize("kwargs, error", [
    (dict(growth_interval=None), TypeError),
    (dict(growth_interval=2.0), TypeError),
    (dict(enabled=1), TypeError),
    (dict(enabled=None), TypeError),
    (dict(track_underflow="yes"), TypeError),
    (dict(growth_interval=0), ValueError),
])
def test_flags_and_interval_must_be_what_they_say(kwargs, error):
    with pytest.raises(error, match=next(iter(kwargs))):
        GradScaler(**kwargs)


def test_a_growth_interval_that_is_not_an_int_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"GradScaler: growth_interval must be a positive int, got "
                                        r"2\.0 \(float\)"):
        GradScaler(growth_interval=2.0)


def test_scale_backs_off_to_the_smallest_normal_float32_and_keeps_skipping():
    """PyTorch's scaler has no floor and keeps skipping; minigrad's scale stops at float32's
    smallest normal value, whose inverse is finite, instead of reaching 0 (ZeroDivisionError)."""
    net, opt = _net_and_opt()
    scaler = GradScaler(init_scale=2.0 ** 16)
    before = [p.asnumpy().copy() for p in net.trainable_params()]
    for _ in range(200):
        opt.zero_grad()
        with np.errstate(all="ignore"):
            scaler.scale(_loss(net, np.inf)).backward()
        assert scaler.step(opt) is False
        scaler.update()
    assert scaler.get_scale() == np.float32(SCALE_MIN) > 0
    assert all((p.asnumpy() == b).all() for p, b in zip(net.trainable_params(), before))
    opt.zero_grad()  # a finite step at the floor still runs: the scale stays usable
    scaler.scale(_loss(net)).backward()
    assert scaler.step(opt) is True
    scaler.update()


def test_max_consecutive_skips_is_the_way_to_stop_a_run_that_keeps_skipping():
    net, opt = _net_and_opt()
    scaler = GradScaler(max_consecutive_skips=3)
    with pytest.raises(RuntimeError, match="skipped 3 steps in a row"):
        for _ in range(5):
            opt.zero_grad()
            with np.errstate(all="ignore"):
                scaler.scale(_loss(net, np.inf)).backward()
            scaler.step(opt)
            scaler.update()


def test_a_step_before_backward_does_not_poison_later_steps():
    net, opt = _net_and_opt()
    scaler = GradScaler(init_scale=8.0)
    opt.zero_grad()
    with pytest.raises(AssertionError, match=r"scale\(loss\)\.backward\(\) before"):
        scaler.step(opt)
    with pytest.raises(AssertionError, match="No inf checks were recorded prior to update"):
        scaler.update()
    scaler.scale(_loss(net)).backward()
    assert scaler.step(opt) is True
    scaler.update()
    opt.zero_grad()
    scaler.scale(_loss(net)).backward()
    assert scaler.step(opt) is True
    scaler.update()
    assert scaler.last_report.step == 2 and not scaler.last_report.skipped


def test_state_dict_round_trips_through_minigrads_checkpoint(tmp_path):
    net, opt = _net_and_opt()
    scaler = GradScaler(init_scale=8.0, growth_interval=3)
    for _ in range(2):
        opt.zero_grad()
        scaler.scale(_loss(net)).backward()
        scaler.step(opt)
        scaler.update()
    path = str(tmp_path / "run.ckpt")
    save_checkpoint(net, path, append_dict=scaler.state_dict())
    restored = GradScaler()
    restored.load_state_dict(load_checkpoint(path))  # network entries beside it are ignored
    assert restored.state_dict() == scaler.state_dict()
    assert type(restored.state_dict()["growth_interval"]) is int


def test_load_state_dict_still_refuses_a_wrong_value_inside_a_tensor():
    scaler = GradScaler()
    state = dict(scaler.state_dict(), growth_interval=Tensor(np.array(2.5)))
    with pytest.raises(TypeError, match="growth_interval"):
        scaler.load_state_dict(state)
    assert scaler.get_growth_interval() == 2000


def test_a_cuda_device_with_an_index_names_the_device_and_the_context():
    with using_config(device_target="CPU"):
        with pytest.raises(ValueError, match=r"'cuda:0' is minigrad's 'GPU'"):
            GradScaler(device="cuda:0")


# ---- growth_interval lowered below the growth tracker ------------------------------------------
def _torch_trajectory(torch, events, init_scale, growth_interval):
    """(scale, growth tracker) after each step of a PyTorch CPU GradScaler driven by ``events``:
    ``("step", overflow)`` or ``("interval", n)``."""
    p = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([p], lr=0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    out = []
    for kind, value in events:
        if kind == "interval":
            scaler.set_growth_interval(value)
            continue
        opt.zero_grad()
        scaler.scale((p * (float("inf") if value else 1.0)).sum()).backward()
        scaler.step(opt)
        scaler.update()
        out.append((scaler.get_scale(), scaler._get_growth_tracker()))
    return out


def _minigrad_trajectory(events, init_scale, growth_interval):
    minigrad.set_seed(0)
    net = nn.Dense(2, 1)
    opt = nn.SGD(net.trainable_params(), 0.0)
    scaler = GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    x = Tensor(np.ones((1, 2), np.float32))
    out = []
    for kind, value in events:
        if kind == "interval":
            scaler.set_growth_interval(value)
            continue
        opt.zero_grad()
        scaler.scale(net(x).sum() * (float("inf") if value else 1.0)).backward()
        scaler.step(opt)
        scaler.update()
        out.append((scaler.get_scale(), scaler._get_growth_tracker()))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_lowering_growth_interval_below_the_tracker_follows_pytorch_bit_for_bit(seed):
    """PyTorch's ``_amp_update_scale_`` grows the scale when ``growth_tracker + 1 ==
    growth_interval`` (torch/amp/grad_scaler.py, aten/src/ATen/native/cpu/AmpGradScalerKernels):
    after ``set_growth_interval`` lowers the interval below the tracker, the tracker keeps
    counting and the scale does not grow until an overflow resets it. Random steps and interval
    changes, the scale and the tracker after each step compared exactly with torch's CPU
    GradScaler."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    events = []
    for _ in range(300):
        if rng.random() < 0.08:
            events.append(("interval", int(rng.integers(1, 12))))
        else:
            events.append(("step", bool(rng.random() < 0.06)))
    theirs = _torch_trajectory(torch, events, 2.0 ** 10, 5)
    ours = _minigrad_trajectory(events, 2.0 ** 10, 5)
    assert ours == theirs
    lowered = [k for k, (kind, n) in enumerate(events) if kind == "interval"]
    assert lowered  # the sequence changes the interval at least once


def test_a_lowered_growth_interval_waits_for_the_next_overflow():
    """The case spelled out: 4 clean steps with interval 5, interval lowered to 2, 6 clean steps
    (no growth, the tracker goes to 10), an overflow (backoff, tracker 0), then growth every 2."""
    events = ([("step", False)] * 4 + [("interval", 2)] + [("step", False)] * 6
              + [("step", True)] + [("step", False)] * 4)
    scales = [s for s, _ in _minigrad_trajectory(events, 8.0, 5)]
    assert scales == [8.0] * 10 + [4.0, 4.0, 8.0, 8.0, 16.0]
    trackers = [t for _, t in _minigrad_trajectory(events, 8.0, 5)]
    assert trackers == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 0, 1, 0]
