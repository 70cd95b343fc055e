"""TensorFlow's and Keras's own tests of their loss scaling, run on minigrad's TF face.

Each test names the TensorFlow test it follows (tensorflow/python/training/experimental/
loss_scale.py and loss_scale_optimizer_test.py, keras/mixed_precision/
loss_scale_optimizer_test.py) and asserts what that test asserts, with TF's message texts.
"""
import math

import numpy
import pytest

from minigrad import nn
from minigrad.mixed_precision import FixedLossScale, LossScaleOptimizer
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor


# ---- FixedLossScale's argument checks ---------------------------------------------------------
@pytest.mark.parametrize("bad", ["8", None, [8], Tensor(numpy.float32(8)), True])
def test_fixed_loss_scale_refuses_a_non_number_with_tfs_message(bad):
    """TF's ``FixedLossScale.__init__``: ``ValueError('loss_scale_value must be a Python int or
    float.')``. minigrad's error is a ValueError and a TypeError, and names the value."""
    with pytest.raises(ValueError, match=r"loss_scale_value must be a Python int or float") as info:
        FixedLossScale(bad)
    assert isinstance(info.value, TypeError)
    assert "got " in str(info.value)


@pytest.mark.parametrize("bad", [0, 0.5, -3, math.nan])
def test_fixed_loss_scale_below_one_has_tfs_message(bad):
    """TF's ``FixedLossScale.__init__``: ``ValueError('loss_scale_value must be at least 1.')``
    (its docstring: "Raises: ValueError: If loss_scale_value is less than 1")."""
    with pytest.raises(ValueError, match=r"loss_scale_value must be at least 1") as info:
        FixedLossScale(bad)
    assert f"got {bad!r}" in str(info.value)


def test_fixed_loss_scale_takes_what_tf_takes():
    """TF's ``FixedLossScaleTest.test_basic``/``test_serialization``: an int or a float >= 1, a
    float32 Tensor when called, the Python float in the config, and ``update`` always applies."""
    for value in (1, 1000, 123.0, 2.0 ** 100):
        scale = FixedLossScale(value)
        assert scale.get_config() == {"loss_scale_value": float(value)}
        assert scale().dtype == numpy.float32 and float(scale()) == float(numpy.float32(value))
    fixed = FixedLossScale(1000)
    assert fixed.update([Tensor(numpy.float32(numpy.nan))]) == (None, True)
    assert float(fixed()) == 1000.0


def test_fixed_loss_scale_refuses_inf_where_tf_accepts_it():
    """A documented difference: TF accepts ``float('inf')`` (it is >= 1); a scale of inf turns
    every scaled loss and gradient into inf or NaN, so minigrad refuses it."""
    with pytest.raises(ValueError, match=r"must be at least 1 and finite, got inf"):
        FixedLossScale(math.inf)


# ---- LossScaleOptimizer(opt, None) ------------------------------------------------------------
def test_passing_none_as_the_loss_scale_is_a_value_error_as_in_tf():
    """Keras's ``testPassingNoneToLossScale``: ``LossScaleOptimizer(opt, None)`` raises
    ``ValueError`` matching ``'loss_scale cannot be None'``; left out, the loss scale is dynamic
    (TF 2.4's ``dynamic=True`` default)."""
    opt = nn.SGD([Parameter(numpy.ones(2, numpy.float32), name="w")], 0.1)
    with pytest.raises(ValueError, match=r"loss_scale cannot be None"):
        LossScaleOptimizer(opt, None)
    with pytest.raises(ValueError, match=r"loss_scale cannot be None"):
        LossScaleOptimizer(opt, loss_scale=None)
    with pytest.raises(ValueError, match=r"loss_scale cannot be None"):
        LossScaleOptimizer(opt, loss_scale=None, dynamic=True)
    default = LossScaleOptimizer(opt)
    assert default.dynamic and default.initial_scale == 2.0 ** 15
    assert LossScaleOptimizer(opt, dynamic=False, initial_scale=4).initial_scale == 4.0


# ---- iterations after a skipped step ----------------------------------------------------------
def test_iterations_count_a_skipped_step_as_in_keras():
    """Keras's ``testIterationsIncremented``: SGD(1.0) under a dynamic LossScaleOptimizer,
    ``minimize(lambda: var * 2.0, [var])`` takes var from 5 to 3 and ``iterations`` to 1; a NaN
    loss leaves var at 3 and takes ``iterations`` to 2 (Keras adds one on a skipped step)."""
    var = Parameter(numpy.array([5.0], numpy.float32), name="var")
    opt = LossScaleOptimizer(nn.SGD([var], 1.0))
    assert opt.minimize(lambda: var * 2.0, [var]) is True
    assert var.asnumpy().tolist() == [3.0] and opt.iterations == 1
    assert opt.minimize(lambda: var * float("nan"), [var]) is False
    assert var.asnumpy().tolist() == [3.0] and opt.iterations == 2
    assert opt.inner_optimizer.global_step == 1  # the updates applied (see the next tests)


def test_iterations_is_the_inner_optimizers_and_settable_as_in_keras():
    """Keras's ``testIterations``: ``lso.iterations = 7`` sets the inner optimizer's too."""
    inner = nn.SGD([Parameter(numpy.ones(1, numpy.float32), name="w")], 2.0)
    lso = LossScaleOptimizer(inner, dynamic=False, initial_scale=10.0)
    lso.iterations = 7
    assert lso.iterations == 7 and inner.global_step == 7
    with pytest.raises(TypeError, match=r"iterations must be a non-negative int, got '7'"):
        lso.iterations = "7"
    with pytest.raises(ValueError, match=r"iterations must be .*-1"):
        lso.iterations = -1
    assert lso.iterations == 7


def test_a_skipped_step_leaves_adams_bias_correction_where_the_other_faces_leave_it():
    """A documented difference: Keras's schedules and Adam's bias correction read
    ``iterations``, skipped steps included; minigrad's read the inner optimizer's
    ``global_step`` (the updates applied), as MindSpore's cell and PyTorch's GradScaler leave
    them, so the three faces train to the same bits. After one skipped step the first applied
    Adam step uses t = 1."""
    var = Parameter(numpy.array([1.0], numpy.float32), name="var")
    opt = LossScaleOptimizer(nn.Adam([var], 0.1))
    assert opt.minimize(lambda: var * float("inf"), [var]) is False
    assert opt.minimize(lambda: var * 3.0, [var]) is True
    assert opt.iterations == 2 and opt.inner_optimizer.global_step == 1
    g, b1, b2, eps = 3.0, 0.9, 0.999, 1e-8
    m, v = (1 - b1) * g, (1 - b2) * g * g
    lr_t = 0.1 * math.sqrt(1 - b2) / (1 - b1)
    assert var.asnumpy()[0] == pytest.approx(1.0 - lr_t * m / (math.sqrt(v) + eps), rel=1e-6)


def test_fit_counts_a_skipped_step_in_iterations_as_keras():
    """Keras's ``fit`` goes through ``LossScaleOptimizer.apply_gradients``, so a skipped step
    counts in ``iterations`` there too: ``Model.train`` with a LossScaleOptimizer as well."""
    from minigrad.dataset import NumpySlicesDataset
    from minigrad.train import Model
    net = nn.Dense(2, 1)
    lso = LossScaleOptimizer(nn.SGD(net.trainable_params(), 0.01), dynamic=True,
                             initial_scale=8.0)
    x = numpy.ones((4, 2), numpy.float32)
    x[2] = numpy.inf  # the third batch of one overflows
    data = NumpySlicesDataset((x, numpy.zeros((4, 1), numpy.float32)), shuffle=False).batch(1)
    model = Model(net, nn.MSELoss(), lso)
    model.train(1, data)
    report = model.train_network.last_report
    assert report is not None and float(lso.loss_scale()) == 4.0  # one skip, one backoff
    assert lso.iterations == 4 and lso.inner_optimizer.global_step == 3
