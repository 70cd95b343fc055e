"""The Cell boundary: float64 inputs, NumPy arrays and lists, bool flags, constructor checks, and
the names PyTorch users reach for."""
import re

import numpy
import pytest

from minigrad import Tensor, nn


# ---- float64 inputs run an fp32 network in fp32 -------------------------------------------------
def test_a_float64_batch_runs_an_fp32_network_in_fp32():
    net = nn.SequentialCell([nn.Dense(4, 3), nn.ReLU(), nn.Dense(3, 2)])
    x64 = numpy.random.default_rng(0).normal(size=(5, 4))          # scikit-learn's dtype
    out = net(Tensor(x64))
    assert out.dtype == numpy.float32
    assert net(x64).dtype == numpy.float32                          # a NumPy array too
    expected = net(Tensor(x64.astype(numpy.float32))).asnumpy()
    assert numpy.array_equal(out.asnumpy(), expected)


def test_float64_networks_and_parameterless_cells_keep_float64():
    net = nn.Dense(4, 2)
    net.cast_parameters(numpy.float64)                              # a float64 gradient check
    assert net(Tensor(numpy.ones((1, 4)))).dtype == numpy.float64
    assert nn.ReLU()(Tensor(numpy.ones(3))).dtype == numpy.float64


def test_a_float64_batch_trains_an_fp32_model_in_fp32():
    from minigrad.train import Model
    net = nn.Dense(4, 1)
    model = Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.01, 0.9))
    x, y = numpy.ones((8, 4)), numpy.ones((8, 1))                   # float64 arrays
    model.train(1, [(Tensor(x), Tensor(y))])
    assert net.weight.dtype == numpy.float32
    assert model.predict(Tensor(x)).dtype == numpy.float32


# ---- one rule for non-Tensor inputs ------------------------------------------------------------
@pytest.mark.parametrize("cell, args, name, shown", [
    (nn.Dense(2, 2), ([[1.0, 2.0]],), "Dense: x", "[[1.0, 2.0]]"),
    (nn.MSELoss(), ([1.0, 2.0], Tensor(numpy.ones(2, numpy.float32))), "MSELoss: logits",
     "[1.0, 2.0]"),
    (nn.MSELoss(), (Tensor(numpy.ones(2, numpy.float32)), [1.0, 2.0]), "MSELoss: labels",
     "[1.0, 2.0]"),
    (nn.SoftmaxCrossEntropyWithLogits(sparse=True),
     ([[1.0, 2.0]], Tensor(numpy.zeros(1, numpy.int32))), "SoftmaxCrossEntropyWithLogits: logits",
     "[[1.0, 2.0]]"),
], ids=["Dense", "MSELoss-logits", "MSELoss-labels", "cross-entropy"])
def test_lists_are_refused_by_layers_and_losses_naming_the_argument(cell, args, name, shown):
    words = f"{name} must be a Tensor (or a NumPy array), got {shown} (list)"
    with pytest.raises(TypeError, match=f"^{re.escape(words)}$"):
        cell(*args)


def test_numpy_arrays_are_converted_at_the_boundary():
    loss = nn.MSELoss()(numpy.ones(3, numpy.float32), numpy.zeros(3, numpy.float32))
    assert float(loss.asnumpy()) == 1.0
    logits = numpy.array([[2.0, 0.0]], numpy.float32)
    ce = nn.SoftmaxCrossEntropyWithLogits(sparse=True)(logits, numpy.array([0], numpy.int32))
    assert ce.shape == (1,)


def test_model_train_given_one_batch_says_a_dataset_is_expected():
    from minigrad.train import Model
    net = nn.Dense(4, 1)
    model = Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.01, 0.9))
    x, y = Tensor(numpy.ones((8, 4), numpy.float32)), Tensor(numpy.ones((8, 1), numpy.float32))
    with pytest.raises(TypeError, match=r"train_dataset must be a dataset, got a tuple of 2 "
                                        r"arrays; wrap them: NumpySlicesDataset"):
        model.train(1, (x, y))
    with pytest.raises(TypeError, match="train_dataset must be a minigrad.dataset dataset"):
        model.train(1, 5)


# ---- constructor checks -------------------------------------------------------------------------
@pytest.mark.parametrize("build, error, match", [
    (lambda: nn.Dense(2, 2, activation="bad"), ValueError, r"activation must be one of .*'bad'"),
    (lambda: nn.Conv2d(1, 1, 3, pad_mode=Tensor(numpy.ones(1))), TypeError,
     r"(?s)pad_mode must be one of .*\(Tensor\)"),
    (lambda: nn.MaxPool2d(pad_mode=3), TypeError, r"pad_mode must be one of .*\(int\)"),
    (lambda: nn.MSELoss(reduction=Tensor(numpy.ones(1))), TypeError,
     r"(?s)MSELoss: reduction must be one of .*\(Tensor\)"),
    (lambda: nn.Softmax(1.5), TypeError, r"Softmax: axis must be an int, got 1.5 \(float\)"),
    (lambda: nn.LogSoftmax("0"), TypeError, "LogSoftmax: axis must be an int"),
    (lambda: nn.LayerNorm((4,), begin_norm_axis=[1]), TypeError,
     r"LayerNorm: begin_norm_axis must be an int, got \[1\]"),
    (lambda: nn.LayerNorm((4,), begin_params_axis=-2), ValueError,
     r"begin_params_axis=-2 makes gamma and beta cover the last 2 axes, but normalized_shape "
     r"\(4,\) has 1"),
    (lambda: nn.GELU(approximate=1), TypeError, "approximate must be a bool, got 1"),
], ids=["activation", "conv-pad-mode", "pool-pad-mode", "reduction", "softmax-axis",
        "logsoftmax-axis", "layernorm-norm-axis", "layernorm-params-axis", "gelu"])
def test_constructor_arguments_are_checked_when_the_cell_is_built(build, error, match):
    with pytest.raises(error, match=match):
        build()


# ---- bool flags are real bools ------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda: nn.Dense(2, 2).set_train(1),
    lambda: nn.Dense(2, 2).set_train(None),
    lambda: nn.Dense(2, 2).set_grad(""),
    lambda: nn.Cell(auto_prefix=0),
    lambda: nn.SoftmaxCrossEntropyWithLogits(sparse=1),
], ids=["set_train-1", "set_train-None", "set_grad-empty", "auto_prefix", "sparse"])
def test_cell_flags_refuse_truthy_stand_ins(call):
    with pytest.raises(TypeError, match="must be a bool"):
        call()


def test_dataset_and_train_flags_refuse_truthy_stand_ins():
    from minigrad.dataset import NumpySlicesDataset
    from minigrad.train import CheckpointConfig, ProgressBar
    data = numpy.arange(6, dtype=numpy.float32)
    bad = [
        lambda: NumpySlicesDataset(data, shuffle=0),
        lambda: NumpySlicesDataset(data, shuffle="yes"),
        lambda: NumpySlicesDataset(data).batch(2, drop_remainder=None),
        lambda: NumpySlicesDataset(data).batch(2, drop_remainder=1),
        lambda: NumpySlicesDataset(data).create_tuple_iterator(output_numpy=1),
        lambda: NumpySlicesDataset(data).create_dict_iterator(do_copy=None),
        lambda: CheckpointConfig(save_optimizer=0),
        lambda: CheckpointConfig(async_save=""),
        lambda: ProgressBar(use_tqdm=0),
    ]
    for call in bad:
        with pytest.raises(TypeError, match="must be a bool"):
            call()
    assert NumpySlicesDataset(data, shuffle=False).shuffled is False
    assert NumpySlicesDataset(data).batch(4, drop_remainder=True).get_dataset_size() == 1


def test_model_train_flags_and_counts_follow_the_one_rule():
    from minigrad.train import Model
    net = nn.Dense(1, 1)
    model = Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.01, 0.9))
    ones = Tensor(numpy.ones((2, 1), numpy.float32))
    batches = [(ones, ones)]
    with pytest.raises(TypeError, match="epoch must be a positive int, got 2.0"):
        model.train(2.0, batches)
    with pytest.raises(TypeError, match="dataset_sink_mode must be a bool"):
        model.train(1, batches, dataset_sink_mode=1)


# ---- PyTorch names ------------------------------------------------------------------------------
@pytest.mark.parametrize("name, hint", [
    ("parameters", "trainable_params()"), ("named_parameters", "parameters_and_names()"),
    ("train", r"set_train\(True\)"), ("eval", r"set_train\(False\)"), ("forward", "construct"),
    ("state_dict", "parameters_dict()"), ("load_state_dict", "load_param_into_net"),
])
def test_pytorch_module_names_name_the_minigrad_equivalent(name, hint):
    with pytest.raises(AttributeError, match=rf"Dense has no attribute '{name}' \(a PyTorch "
                                             rf"nn.Module name\); in minigrad use .*{hint}"):
        getattr(nn.Dense(2, 2), name)
    with pytest.raises(AttributeError, match="'Dense' object has no attribute 'nothing_here'"):
        nn.Dense(2, 2).nothing_here
    assert not hasattr(nn.Dense(2, 2), name)


def test_mindspore_cell_names():
    net = nn.SequentialCell([nn.Dense(2, 2), nn.ReLU()])
    seen = []
    assert net.apply(lambda cell: seen.append(cell.cls_name)) is net
    assert seen == ["ReLU", "Dense", "SequentialCell"]             # children first, as MindSpore
    assert net.auto_prefix is True and nn.WithLossCell(net, nn.MSELoss()).auto_prefix is False
    with pytest.raises(TypeError, match="fn must be callable"):
        net.apply(3)
