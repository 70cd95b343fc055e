"""A train cell or Model whose optimizer holds none of the network's parameters is refused;
``opt.step()`` without gradients says so; ``lr=`` names ``learning_rate``."""
import numpy
import pytest

from minigrad import Tensor, nn
from minigrad.optim import SGD, Adam, Momentum
from minigrad.train import Model


def test_model_refuses_an_optimizer_of_another_network_naming_both():
    net, other = nn.Dense(4, 3), nn.Dense(4, 3)
    other.update_parameters_name("other.")
    opt = Momentum(other.trainable_params(), 0.1, 0.9)
    for level in ("O0", "O2"):
        with pytest.raises(ValueError, match=r"build_train_network: optimizer must be built "
                                             r"from the parameters of the network Dense \(.*\); "
                                             r"it holds \['other.weight', 'other.bias'\], got "
                                             r"Momentum\("):
            Model(net, nn.MSELoss(), opt, amp_level=level)
    with pytest.raises(ValueError, match="TrainOneStepCell: optimizer must be built from the"):
        nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    with pytest.raises(ValueError, match="TrainOneStepWithLossScaleCell: optimizer must be"):
        nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt,
                                         Tensor(numpy.float32(1024)))


def test_an_optimizer_over_part_of_the_network_is_fine():
    net = nn.SequentialCell([nn.Dense(4, 3), nn.Dense(3, 2)])
    opt = SGD(net[1].trainable_params(), 0.1)                      # fine-tuning the head only
    Model(net, nn.MSELoss(), opt)


def test_step_without_gradients_warns_and_moves_no_parameter():
    net = nn.Dense(2, 2)
    opt = Adam(net.trainable_params(), 0.1)
    before = [p.asnumpy().copy() for p in net.trainable_params()]
    with pytest.warns(UserWarning, match=r"Adam.step\(\): none of its 2 parameters has a gradient "
                                         r".*no parameter was updated \(the step still counts\)"):
        opt.step()
    assert opt.global_step == 1
    assert all(numpy.array_equal(b, p.asnumpy()) for b, p in zip(before, net.trainable_params()))


def test_pytorch_lr_keyword_names_learning_rate():
    net = nn.Dense(2, 2)
    for cls in (SGD, Momentum, Adam):
        with pytest.raises(TypeError, match=rf"{cls.__name__} has no argument 'lr' \(a PyTorch "
                                            r"name\); minigrad optimizers take learning_rate="):
            cls(net.trainable_params(), lr=0.1)
