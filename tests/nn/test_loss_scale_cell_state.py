"""One loss-scale state per train cell: the manager, the update cell, the cell's Parameters
and ``set_sense_scale`` show the same scale and counter; the cell's MindSpore entry points."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, nn, ops
from minigrad.amp import DynamicLossScaleManager, FixedLossScaleManager, build_train_network


def _cell(manager):
    minigrad.set_seed(0)
    net = nn.Dense(4, 2)
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    train = build_train_network(net, opt, nn.MSELoss(), level="O2", loss_scale_manager=manager)
    x = Tensor(np.ones((3, 4), np.float32))
    y = Tensor(np.zeros((3, 2), np.float32))
    return train, x, y


def test_set_sense_scale_and_the_manager_agree_across_steps():
    manager = DynamicLossScaleManager(init_loss_scale=1024.0, scale_window=2)
    train, x, y = _cell(manager)
    train(x, y)
    train.set_sense_scale(Tensor(np.float32(8.0)))
    assert manager.get_loss_scale() == 8.0 == float(train.scale_sense.asnumpy())
    for _ in range(3):
        train(x, y)
        assert manager.get_loss_scale() == float(train.scale_sense.asnumpy())
    # one clean step before set_sense_scale: growth after 1 and 3 more clean steps (as MindSpore,
    # setting the scale keeps the clean-step count)
    assert manager.get_loss_scale() == 32.0
    assert train.core is manager.core is train.loss_scaling_manager.core


def test_the_iteration_parameters_show_the_core():
    manager = DynamicLossScaleManager(init_loss_scale=64.0, scale_window=3)
    train, x, y = _cell(manager)
    update = train.loss_scaling_manager
    for _ in range(2):
        train(x, y)
    assert int(update.cur_iter.asnumpy()) == 3 == manager.core.updates + 1
    assert int(update.cur_iter.asnumpy()) - int(update.last_overflow_iter.asnumpy()) - 1 == \
        manager.core.counter == 2


def test_a_scale_written_into_the_parameter_reaches_the_core():
    """A checkpoint loads ``scale_sense`` with ``set_data``: the next step uses that scale."""
    manager = DynamicLossScaleManager(init_loss_scale=1024.0)
    train, x, y = _cell(manager)
    train.scale_sense.set_data(np.float32(32.0))
    _, _, used = train(x, y)
    assert float(used.asnumpy()) == 32.0 and manager.get_loss_scale() == 32.0


def test_fixed_manager_shares_its_scale_too():
    manager = FixedLossScaleManager(256.0)
    train, x, y = _cell(manager)
    train.set_sense_scale(Tensor(np.float32(4.0)))
    train(x, y)
    assert manager.get_loss_scale() == 4.0 == float(train.scale_sense.asnumpy())


def test_set_sense_scale_refuses_a_scale_that_is_not_positive():
    train, _, _ = _cell(DynamicLossScaleManager())
    with pytest.raises(ValueError, match=r"sens must be a finite float in \(0\.0, inf\), got 0\.0"):
        train.set_sense_scale(Tensor(np.float32(0.0)))
    assert float(train.scale_sense.asnumpy()) == 2.0 ** 24


def test_get_overflow_status_takes_a_plain_status_tensor_as_mindspore():
    train, _, _ = _cell(DynamicLossScaleManager())
    status = ops.NPUAllocFloatStatus()()
    clean = (Tensor(np.ones(3, np.float32)),)
    assert train.get_overflow_status(status, clean) is False
    bad = (Tensor(np.array([1.0, np.inf], np.float32)),)
    assert train.get_overflow_status(status, bad) is True
    assert float(status.asnumpy().sum()) > 0  # the flag was set in the caller's buffer
    with pytest.raises(ValueError, match="shape"):
        train.get_overflow_status(Tensor(np.zeros(3, np.float32)), clean)


@pytest.mark.parametrize("sens, error", [(0, ValueError), (-1.0, ValueError),
                                         (float("inf"), ValueError), (True, TypeError),
                                         ("1", TypeError), (None, TypeError)])
def test_train_one_step_cell_refuses_a_seed_that_is_not_positive(sens, error):
    net = nn.Dense(2, 1)
    expected = r"TrainOneStepCell: sens must be a finite float in \(0\.0, inf\), got "
    with pytest.raises(error, match=expected):
        nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                            nn.SGD(net.trainable_params(), 0.1), sens=sens)


def test_track_underflow_must_be_a_bool():
    net = nn.Dense(2, 1)
    with pytest.raises(TypeError, match="track_underflow"):
        nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()),
                                         nn.SGD(net.trainable_params(), 0.1),
                                         nn.FixedLossScaleUpdateCell(8.0), track_underflow=1)
