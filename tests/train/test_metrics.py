"""minigrad.train.metrics against MindSpore's documented behaviour: Accuracy (classification
and multilabel, label shapes), TopKCategoricalAccuracy and the metric names."""
import numpy
import pytest

from minigrad import Tensor
from minigrad.train.metrics import Accuracy, TopKCategoricalAccuracy, get_metric_fn


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


def test_top_k_categorical_accuracy_as_mindspore_documents():
    # MindSpore's TopKCategoricalAccuracy(k) (TypeError for a non-int k, ValueError for k < 1),
    # Top5CategoricalAccuracy and the metric name 'top_5_accuracy'.
    from minigrad.train.metrics import Top5CategoricalAccuracy, TopKCategoricalAccuracy
    x = numpy.array(
        [[0.2, 0.5, 0.3, 0.6, 0.2], [0.1, 0.35, 0.5, 0.2, 0.0], [0.9, 0.6, 0.2, 0.01, 0.3]],
        numpy.float32,
    )
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


def test_accuracy_refuses_column_labels_instead_of_scoring_them_as_one_hot():
    y_pred = numpy.eye(3)[[0, 1, 2, 1]]
    metric = Accuracy()
    with pytest.raises(ValueError, match=r"\(4, 1\)"):
        metric.update(y_pred, numpy.array([[0], [1], [2], [1]]))  # not 0.25


def test_accuracy_refuses_one_hot_labels_of_another_class_count():
    metric = Accuracy()
    with pytest.raises(ValueError, match=r"\(4, 5\)"):
        metric.update(numpy.eye(3)[[0, 1, 2, 1]], numpy.eye(5)[[0, 1, 2, 1]])  # not 1.0


def test_accuracy_one_hot_and_class_count_across_updates():
    metric = Accuracy()
    metric.update(numpy.eye(3)[[0, 1, 2, 1]], numpy.eye(3)[[0, 1, 1, 1]])
    assert metric.eval() == 0.75
    with pytest.raises(ValueError, match="3 classes.*4 classes|4.*3"):  # MindSpore's class check
        metric.update(numpy.eye(4)[[0, 1]], numpy.array([0, 1]))
    assert metric.eval() == 0.75  # the refused batch counted nothing
    metric.clear()
    metric.update(numpy.eye(4)[[0, 1]], numpy.array([0, 1]))  # clear() forgets the class count
    assert metric.eval() == 1.0


def test_metric_arguments_are_named_with_their_value():
    with pytest.raises(ValueError, match=r"Accuracy: eval_type must be one of \['classification', "
                                         r"'multilabel'\], got 'binary'"):
        Accuracy("binary")
    with pytest.raises(TypeError,
                       match=r"eval_type must be one of .*, got array\(\[1\]\) \(ndarray"):
        Accuracy(numpy.array([1]))
    with pytest.raises(ValueError, match=r"TopKCategoricalAccuracy: k must be a positive int that "
                                         r"fits in int64"):
        TopKCategoricalAccuracy(2 ** 63)
