"""nn.TrainOneStepWithLossScaleCell and the update cells (nn/loss_scale.py): the loss-scaled
step's skip rule and report, its hand-over to the optimizer, and the scale update formulas."""
import numpy
import pytest
import minigrad
from minigrad import nn
import numpy as np
from minigrad import Tensor

F32 = numpy.dtype(numpy.float32)


def _loss_scaled_step(optimizer_class):
    minigrad.set_seed(0)
    net = nn.Dense(3, 2)
    opt = optimizer_class(net.trainable_params(), 0.1, 0.9)
    cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt,
                                            minigrad.Tensor(numpy.float32(1024.0)))
    cell(minigrad.Tensor(numpy.ones((2, 3), F32)), minigrad.Tensor(numpy.zeros((2, 2), F32)))
    return opt, net


@pytest.mark.requires_native
def test_loss_scale_cell_with_an_optimizer_whose_apply_gradients_takes_no_scale():
    class AllReduced(nn.Momentum):  # e.g. a data-parallel all-reduce right before the update
        def apply_gradients(self, grads):
            self.reduced = True
            return super().apply_gradients(grads)

    opt, _ = _loss_scaled_step(AllReduced)
    assert opt.reduced and opt.global_step == 1


@pytest.mark.requires_native
def test_loss_scale_cell_calls_an_optimizer_that_overrides_call():
    class Clipping(nn.Momentum):
        def __call__(self, grads):
            self.clipped = [numpy.abs(g.data).max() for g in grads]
            return super().__call__(tuple(numpy.clip(g.data, -1e-3, 1e-3) for g in grads))

    opt, net = _loss_scaled_step(Clipping)
    assert opt.global_step == 1 and max(opt.clipped) < 1e3  # it saw unscaled gradients


def test_set_sense_scale_with_a_wrong_shape_names_sens():
    net = nn.Dense(4, 2)
    cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()),
                                            nn.Momentum(net.trainable_params(), 0.1, 0.9),
                                            Tensor(np.ones((1,), np.float32)))
    with pytest.raises(ValueError, match=r"sens.*\(3,\).*\(1,\)"):
        cell.set_sense_scale(Tensor(np.ones((3,), np.float32)))
