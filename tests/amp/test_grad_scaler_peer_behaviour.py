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
