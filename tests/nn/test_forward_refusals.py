"""A layer's forward pass refuses an input that is not a Tensor (None, a str) or that has no axis
the layer needs (a 0-d Tensor) with a TypeError or ValueError naming it, never an
AttributeError or IndexError from inside the layer."""
import numpy as np
import pytest

from minigrad import Parameter, Tensor, nn

SCALAR = Tensor(np.float32(1.0))


def _update_cell(kind):
    return nn.DynamicLossScaleUpdateCell(2.0 ** 10, 2, 10) if kind == "dynamic" else \
        nn.FixedLossScaleUpdateCell(2.0 ** 10)


@pytest.mark.parametrize("make, value, error, match", [
    (lambda: nn.Dense(3, 2), SCALAR, ValueError, r"Dense\(in_channels=3\) got an input of "
                                                 r"shape \(\)"),
    (lambda: nn.Flatten(), SCALAR, ValueError, "Flatten: x must be a Tensor of at least 1"),
    (lambda: nn.Flatten(), None, TypeError, "Flatten.*x"),
    (lambda: nn.Conv2d(1, 2, 3), "abc", TypeError, "Conv2d.*x"),
    (lambda: nn.BatchNorm1d(3), None, TypeError, "BatchNorm1d.*x"),
    (lambda: nn.Embedding(4, 3), None, TypeError, "Embedding.*ids"),
], ids=["dense-0d", "flatten-0d", "flatten-none", "conv-str", "batchnorm-none", "embedding-none"])
def test_layers_refuse_by_name(make, value, error, match):
    with pytest.raises(error, match=match):
        make()(value)


def test_cross_entropy_refuses_logits_without_a_class_axis():
    with pytest.raises(ValueError, match=r"CrossEntropyLoss: logits.shape must be \(C,\)"):
        nn.CrossEntropyLoss()(SCALAR, Tensor(np.int32(0)))


@pytest.mark.parametrize("kind", ["dynamic", "fixed"])
def test_update_cells_refuse_a_loss_scale_that_is_not_a_parameter(kind):
    cell = _update_cell(kind)
    with pytest.raises(TypeError, match="loss_scale must be a Parameter"):
        cell(Tensor(np.float32(1024.0)), False)
    with pytest.raises(TypeError, match="overflow must be a bool"):
        cell(Parameter(Tensor(np.float32(1024.0)), name="scale"), "yes")


def test_grad_reducer_refuses_gradients_that_are_not_tensors():
    net = nn.Dense(3, 2)
    reducer = nn.DistributedGradReducer(net.trainable_params())
    with pytest.raises(TypeError, match="DistributedGradReducer: grads must be"):
        reducer("abc")
    with pytest.raises(TypeError, match="DistributedGradReducer: grads must be Tensors"):
        reducer(["a", "b"])
