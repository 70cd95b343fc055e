"""Review (session 3h): random/set_seed, backend, context, dtype policy, the digits loader,
Model's eval/predict paths and the metrics."""
import subprocess
import sys
import os

import numpy
import pytest

import minigrad
from minigrad import Tensor, nn, dtype as mstype
from minigrad.train.metrics import Accuracy, Loss, get_metric_fn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- set_seed ---------------------------------------------------------------------------------
def test_set_seed_also_seeds_numpy_global_random():
    # MindSpore's set_seed: "The global seed is used by numpy.random, ..."; a script that makes its
    # data with numpy.random after set_seed(n) must repeat.
    minigrad.set_seed(5)
    first = numpy.random.rand(4)
    minigrad.set_seed(5)
    assert numpy.array_equal(numpy.random.rand(4), first)
    minigrad.set_seed(6)
    assert not numpy.array_equal(numpy.random.rand(4), first)


def test_set_seed_outside_numpy_range_is_a_value_error_and_changes_nothing():
    minigrad.set_seed(3)
    with pytest.raises(ValueError, match="seed"):
        minigrad.set_seed(2 ** 32)
    assert minigrad.get_seed() == 3
    minigrad.set_seed(2 ** 32 - 1)  # the largest numpy.random.seed takes
    assert minigrad.get_seed() == 2 ** 32 - 1


_DRAW = """
import numpy, minigrad
from minigrad import nn, ops, Tensor
minigrad.set_seed(11)
net = nn.Dense(5, 3)
mask = ops.dropout(Tensor(numpy.ones((4, 5), numpy.float32)), p=0.5, training=True).asnumpy()
data = numpy.random.rand(3)
print(repr((net.weight.asnumpy().tolist(), mask.tolist(), data.tolist())))
"""


def test_same_seed_same_weights_masks_and_numpy_draws_across_processes():
    env = dict(os.environ, PYTHONPATH=ROOT)
    runs = [subprocess.run([sys.executable, "-c", _DRAW], capture_output=True, text=True, env=env,
                           check=True).stdout for _ in range(2)]
    assert runs[0] == runs[1] and runs[0].strip()


def test_seeding_before_building_repeats_the_network_and_the_dropout_masks():
    def build_and_draw():
        net = nn.SequentialCell([nn.Dense(4, 4), nn.Dropout(keep_prob=0.5)])
        net.set_train(True)
        out = net(Tensor(numpy.ones((3, 4), numpy.float32)))
        return [p.asnumpy().copy() for p in net.get_parameters()], out.asnumpy()

    minigrad.set_seed(2)
    params_a, out_a = build_and_draw()
    minigrad.set_seed(2)
    params_b, out_b = build_and_draw()
    assert all(numpy.array_equal(a, b) for a, b in zip(params_a, params_b))
    assert numpy.array_equal(out_a, out_b)


# ---- dtype policy -----------------------------------------------------------------------------
def test_as_dtype_refuses_none_instead_of_returning_float64():
    # numpy.dtype(None) is float64: ops.cast(x, None) silently doubled an fp16 tensor's width.
    with pytest.raises(TypeError, match="dtype must be one of"):
        mstype.as_dtype(None)
    with pytest.raises(TypeError, match="dtype"):
        minigrad.ops.cast(Tensor(numpy.ones(2, numpy.float16)), None)


def test_bool_tensor_with_python_int_is_integer_arithmetic():
    # MindSpore's implicit conversion rules: "when Tensor is bool data type and the scalar is int
    # or float, both ... are converted to the Tensor with the data type of int32 or float32".
    # Tensor([True, False]) + 2 was bool [True, True] (2 cast to bool, added as a logical or).
    flags = Tensor(numpy.array([True, False]))
    for value in (2, numpy.int64(2)):
        out = flags + value
        assert out.dtype == mstype.int32
        assert out.asnumpy().tolist() == [3, 2]
    assert (flags * 3).asnumpy().tolist() == [3, 0]
    both = flags + True  # bool with bool stays bool (logical), as NumPy and MindSpore
    assert both.dtype == mstype.bool_ and both.asnumpy().tolist() == [True, True]
    assert (flags + 2.5).dtype == mstype.float32
    assert mstype.weak_dtype(True, mstype.int32) == mstype.int32


# ---- context ----------------------------------------------------------------------------------
def test_set_context_refuses_an_unknown_key_instead_of_ignoring_it():
    # MindSpore's set_context raises ValueError for a key that is not a context attribute; a
    # misspelt device_targt="GPU" silently trained on the CPU.
    with pytest.raises(ValueError, match="device_targt"):
        minigrad.set_context(device_targt="CPU")
    with pytest.raises(ValueError, match="devcie_id"):
        minigrad.set_context(device_target="CPU", devcie_id=0)
    minigrad.set_context(mode=1, device_id=0, max_call_depth=10000, save_graphs=False,
                         device_target="CPU")  # MindSpore's own keys stay accepted
    assert minigrad.get_context("device_target") == "CPU"


# ---- metrics ----------------------------------------------------------------------------------
def test_accuracy_multilabel_counts_samples_whose_every_label_matches():
    # MindSpore's Accuracy(eval_type) "Supports 'classification' and 'multilabel'": for
    # 'multilabel' y_pred and y are 0/1 of shape (N, C), a sample is right when all C match.
    metric = Accuracy("multilabel")
    y_pred = numpy.array([[1, 0, 1], [0, 1, 0], [1, 1, 0]], numpy.float32)
    y = numpy.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]], numpy.int32)
    metric.update(Tensor(y_pred), Tensor(y))
    assert metric.eval() == pytest.approx(2 / 3)
    metric.update(y_pred[:1], y[:1])  # a smaller last batch
    assert metric.eval() == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="0 or 1"):
        metric.update(numpy.array([[0.7, 0.2, 0.1]]), numpy.array([[1, 0, 0]]))
    with pytest.raises(ValueError, match="shape"):
        metric.update(y_pred, numpy.array([0, 1, 2]))
    assert metric.eval() == pytest.approx(3 / 4)  # refused updates count nothing
    with pytest.raises(ValueError, match="eval_type"):
        Accuracy("multiclass")


# ---- the digits loader ------------------------------------------------------------------------
def _needs_sklearn():
    import importlib.util
    if importlib.util.find_spec("sklearn") is None:
        pytest.skip("scikit-learn (the digits data) is not installed")


def test_load_digits_refuses_a_split_that_leaves_a_side_empty():
    # split=0.001 rounded every class's test share to 0: an empty (0, 64) test set came back
    # silently (Model.eval then fails far away); split=0.999 emptied the train set.
    _needs_sklearn()
    from minigrad.dataset import load_digits
    with pytest.raises(ValueError, match="test set.*empty"):
        load_digits(split=0.001)
    with pytest.raises(ValueError, match="train set.*empty"):
        load_digits(split=0.999)
    (x_train, _), (x_test, _) = load_digits(split=0.01)  # small but not empty
    assert len(x_test) > 0 and len(x_train) + len(x_test) == 1797


def test_load_digits_missing_scikit_learn_is_an_import_error_with_the_install_hint(monkeypatch):
    import importlib.util
    from minigrad.dataset import digits
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sklearn" else real(name, *a))
    with pytest.raises(ImportError, match=r"pip install minigrad\[datasets\]"):
        digits.load_digits()


def test_load_digits_refuses_a_non_float_dtype_and_names_bad_arguments():
    # dtype=int32 truncated the [0, 1] pixels to 0 (all but the value 16): data destroyed silently.
    _needs_sklearn()
    from minigrad.dataset import load_digits
    with pytest.raises(TypeError, match="dtype"):
        load_digits(dtype=numpy.int32)
    with pytest.raises(TypeError, match="split"):
        load_digits(split="0.2")  # was "'<' not supported between instances of 'int' and 'str'"
    (x, _), _ = load_digits(dtype="float16")
    assert x.dtype == numpy.float16


# ---- shuffles and set_seed (minigrad/dataset/numpy_slices.py, not owned here) -----------------
_SHUFFLE = """
import numpy, minigrad
from minigrad.dataset import NumpySlicesDataset
ds = NumpySlicesDataset({"x": numpy.arange(64)}, shuffle=True)
minigrad.set_seed(4)   # seeded after building the pipeline, before iterating it
print([int(row[0].asnumpy()) for row in ds.create_tuple_iterator(num_epochs=1)])
"""


def test_set_seed_after_building_a_dataset_still_seeds_its_shuffle():
    env = dict(os.environ, PYTHONPATH=ROOT)
    runs = [subprocess.run([sys.executable, "-c", _SHUFFLE], capture_output=True, text=True,
                           env=env, check=True).stdout for _ in range(2)]
    assert runs[0] == runs[1]


def test_top_k_categorical_accuracy_as_mindspore_documents():
    # MindSpore's TopKCategoricalAccuracy(k) (TypeError for a non-int k, ValueError for k < 1),
    # Top5CategoricalAccuracy and the metric name 'top_5_accuracy' were missing.
    from minigrad.train.metrics import TopKCategoricalAccuracy, Top5CategoricalAccuracy
    x = numpy.array([[0.2, 0.5, 0.3, 0.6, 0.2], [0.1, 0.35, 0.5, 0.2, 0.], [0.9, 0.6, 0.2, 0.01, 0.3]],
                    numpy.float32)
    y = numpy.array([2, 0, 1], numpy.float32)
    topk = TopKCategoricalAccuracy(3)
    topk.update(Tensor(x), Tensor(y))
    assert topk.eval() == pytest.approx(2 / 3)  # the documented example
    topk.update(x[:1], numpy.eye(5)[[4]])  # one-hot label, smaller batch: class 4 is 4th -> miss
    assert topk.eval() == pytest.approx(2 / 4)
    assert TopKCategoricalAccuracy(1)(x, y) == Accuracy()(x, y)
    five = get_metric_fn("top_5_accuracy")
    assert isinstance(five, Top5CategoricalAccuracy) and five(x, y) == 1.0
    # ties: the earlier class ranks first (argmax's choice)
    assert TopKCategoricalAccuracy(1)(numpy.array([[1.0, 1.0, 0.0]]), numpy.array([0])) == 1.0
    with pytest.raises(TypeError, match="k"):
        TopKCategoricalAccuracy(2.0)
    with pytest.raises(ValueError, match="k"):
        TopKCategoricalAccuracy(0)
    with pytest.raises(RuntimeError):
        TopKCategoricalAccuracy(2).eval()


# ---- Model.eval / predict (checked right) -------------------------------------------------------
def test_model_eval_o2_casts_outputs_to_fp32_and_scores_a_short_last_batch():
    from minigrad import Model
    from minigrad.dataset import NumpySlicesDataset
    minigrad.set_seed(0)
    x = numpy.random.rand(10, 4).astype(numpy.float32)
    y = (numpy.arange(10) % 3).astype(numpy.int32)
    net = nn.Dense(4, 3)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss_fn, nn.Momentum(net.trainable_params(), 0.1, 0.9),
                  metrics={"acc": Accuracy(), "loss": Loss()}, amp_level="O2")
    assert model.eval_network.add_cast_fp32
    ds = NumpySlicesDataset((x, y), column_names=["x", "y"], shuffle=False).batch(4)  # 4, 4, 2
    result = model.eval(ds)
    logits = model.predict(Tensor(x))
    assert logits.dtype == mstype.float16
    assert result["acc"] == pytest.approx(float((logits.asnumpy().argmax(1) == y).mean()))
    batch_losses = [float(loss_fn(logits[i:i + 4].astype(mstype.float32), Tensor(y[i:i + 4])).asnumpy())
                    for i in (0, 4, 8)]
    # the Loss metric weights each batch mean by its sample count (4, 4, 2)
    assert result["loss"] == pytest.approx(numpy.average(batch_losses, weights=[4, 4, 2]), rel=1e-6)
    assert model.eval(ds) == result  # metrics are cleared between evals
