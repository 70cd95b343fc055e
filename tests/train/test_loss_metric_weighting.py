"""``Model.eval``'s ``Loss`` is the mean over samples, whatever the batch split or the order."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.dataset import NumpySlicesDataset
from minigrad.train import Loss, Model


def test_model_eval_loss_is_the_per_sample_mean_on_every_call():
    minigrad.set_seed(0)
    rng = numpy.random.default_rng(0)
    x = rng.normal(size=(10, 4)).astype(numpy.float32)
    y = rng.integers(0, 3, 10).astype(numpy.int32)
    net = nn.Dense(4, 3)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss_fn, metrics={"loss": Loss()})
    per_sample = nn.SoftmaxCrossEntropyWithLogits(sparse=True)(net(Tensor(x)), Tensor(y))
    expected = float(per_sample.asnumpy().astype(numpy.float64).mean())
    shuffled = NumpySlicesDataset((x, y)).batch(4)  # shuffles (MindSpore's default): 4, 4, 2
    results = [model.eval(shuffled)["loss"] for _ in range(5)]
    assert results == pytest.approx([expected] * 5, rel=1e-6)
    for batch_size in (1, 3, 10):
        ds = NumpySlicesDataset((x, y), shuffle=False).batch(batch_size)
        assert model.eval(ds)["loss"] == pytest.approx(expected, rel=1e-6)


def test_loss_update_weights_scalars_by_num_samples():
    loss = Loss()
    loss.update(numpy.float32(1.0), num_samples=3)
    loss.update(numpy.array([5.0]))
    assert loss.eval() == 2.0
    with pytest.raises((TypeError, ValueError), match="num_samples"):
        loss.update(numpy.float32(1.0), num_samples=0)
