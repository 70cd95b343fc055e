"""TODO docstring"""
import copy
import pickle
import numpy as np
import pytest
from minigrad import Tensor, nn
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
