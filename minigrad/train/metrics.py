"""Evaluation metrics (MindSpore's ``nn.metrics``): ``Accuracy``, the top-k accuracies, ``Loss``,
and the ``Metric`` base.

A metric accumulates over batches: ``clear()``, then ``update(*inputs)`` per batch, then
``eval()``. ``Model.eval`` drives them: ``Loss`` receives the loss of each batch, the others
receive ``(logits, labels)``.
"""
import numpy

from minigrad.backend import as_numpy
from minigrad._checks import (check_in, check_operand, check_positive_int, check_relation,
                              check_type)
from minigrad.tensor import Tensor


class Metric:
    """Base class: subclasses define ``clear``, ``update(*inputs)`` and ``eval``."""

    def __init__(self):
        self.clear()

    def clear(self):
        raise NotImplementedError

    def update(self, *inputs):
        raise NotImplementedError

    def eval(self):
        raise NotImplementedError

    def __call__(self, *inputs):
        """Evaluate on one batch alone: ``clear(); update(*inputs); return eval()``."""
        self.clear()
        self.update(*inputs)
        return self.eval()


class Accuracy(Metric):
    """Fraction of samples whose predicted class is the label.

    ``accuracy = (number of samples with argmax(y_pred) == y) / (number of samples)``

    Args:
        eval_type: ``"classification"`` (default): ``y_pred`` holds scores (logits or
            probabilities) of shape ``(N, C)``; ``y`` holds int labels ``(N,)`` or one-hot rows
            ``(N, C)``. ``"multilabel"``: ``y_pred`` and ``y`` both hold 0/1 values of shape
            ``(N, C)``; a sample counts as right when all its ``C`` labels match.

    ``y`` of the same shape as ``y_pred`` is taken as one-hot only if every row is one (0/1 values
    summing to 1), as in MindSpore; other labels of that rank (a column ``(N, 1)`` of class ids)
    are refused rather than scored through ``argmax``. As in MindSpore, every ``update`` after the
    first must have the same number of classes ``C`` (until ``clear``).

    Raises:
        TypeError: for an ``eval_type`` that is not a str.
        ValueError: for another ``eval_type``; from ``update``, for mismatched shapes, labels of
            ``y_pred``'s shape that are not one-hot, a number of classes different from the
            earlier updates', or a wrong number of inputs (nothing is counted then).
            RuntimeError from ``eval``, before any ``update``.
    """

    def __init__(self, eval_type="classification"):
        self._type = check_in("eval_type", eval_type, ("classification", "multilabel"),
                              owner=type(self).__name__)
        super().__init__()

    def clear(self):
        self._correct = 0
        self._total = 0
        self._class_num = None

    def update(self, *inputs):
        """Count the correct predictions of one batch: ``update(y_pred, y)``.

        Raises:
            TypeError / ValueError: for other than 2 inputs, an input that is not a Tensor, an
                array or a number (``check_operand``), or shapes that do not match.
        """
        _check_inputs(inputs, 2, "(y_pred, y)", "Accuracy.update")
        y_pred, y = as_numpy(inputs[0]), as_numpy(inputs[1])
        if self._type == "multilabel":
            return self._update_multilabel(y_pred, y)
        expected = (f"y_pred must have shape (N, C) and y shape (N,) (class ids) or (N, C) "
                    f"(one-hot rows); got y_pred {y_pred.shape} and y {y.shape}")
        if y_pred.ndim != 2:
            raise ValueError(f"Accuracy.update: {expected}")
        if y.ndim == 2:
            if y.shape != y_pred.shape:
                raise ValueError(f"Accuracy.update: {expected}")
            if not (((y == 0) | (y == 1)).all() and (y.sum(axis=1) == 1).all()):
                raise ValueError(f"Accuracy.update: y of shape {y.shape} (the shape of y_pred) "
                                 f"must hold one-hot rows (0/1 values summing to 1); give class "
                                 f"ids with shape ({y_pred.shape[0]},)")
            y = y.argmax(axis=-1)
        if y.shape != y_pred.shape[:1]:
            raise ValueError(f"Accuracy.update: {expected}")
        self._check_class_num(y_pred)
        self._correct += self._count_correct(y_pred, y)
        self._total += len(y)

    def _count_correct(self, y_pred, y):
        return int((y_pred.argmax(axis=-1) == y).sum())

    def _update_multilabel(self, y_pred, y):
        if y_pred.ndim != 2 or y.shape != y_pred.shape:
            raise ValueError(f"Accuracy.update ('multilabel'): y_pred and y must both have shape "
                             f"(N, C); got y_pred {y_pred.shape} and y {y.shape}")
        for name, value in (("y_pred", y_pred), ("y", y)):
            if not ((value == 0) | (value == 1)).all():
                raise ValueError(f"Accuracy.update ('multilabel'): {name} must hold only 0 or 1 "
                                 f"(one column per label)")
        self._check_class_num(y_pred)
        self._correct += int((y_pred == y).all(axis=1).sum())
        self._total += len(y)

    def _check_class_num(self, y_pred):
        if self._class_num is not None and y_pred.shape[1] != self._class_num:
            raise ValueError(f"Accuracy.update: the earlier y_pred had {self._class_num} classes, "
                             f"this one has {y_pred.shape[1]} classes (shape {y_pred.shape}); call "
                             f"clear() to start over")
        self._class_num = y_pred.shape[1]

    def eval(self):
        if self._total == 0:
            raise RuntimeError("Accuracy.eval: no samples; call update first")
        return self._correct / self._total


class Top1CategoricalAccuracy(Accuracy):
    """Top-1 accuracy: the same computation as ``Accuracy``."""

    def __init__(self):
        super().__init__()


class TopKCategoricalAccuracy(Accuracy):
    """Fraction of samples whose label is among the ``k`` highest scores of ``y_pred``.

    Inputs as for ``Accuracy("classification")``: ``y_pred`` ``(N, C)``, ``y`` class ids ``(N,)``
    or one-hot rows ``(N, C)``. Among equal scores the earlier class ranks first.

    Raises:
        TypeError: if ``k`` is not an int; ``update``/``eval`` as ``Accuracy``'s do.
        ValueError: if ``k`` < 1; ``update``/``eval`` as ``Accuracy``'s do.
    """

    def __init__(self, k):
        self.k = check_positive_int("k", k, owner="TopKCategoricalAccuracy")
        super().__init__()

    def _count_correct(self, y_pred, y):
        top = numpy.argsort(-y_pred.astype(numpy.float64), axis=1, kind="stable")[:, :self.k]
        return int((top == y.reshape(-1, 1)).any(axis=1).sum())


class Top5CategoricalAccuracy(TopKCategoricalAccuracy):
    """Top-5 accuracy: ``TopKCategoricalAccuracy(5)``."""

    def __init__(self):
        super().__init__(5)


class Loss(Metric):
    """The mean loss per sample over everything seen: ``sum_i(mean(loss_i) * n_i) / sum_i(n_i)``.

    A 1-d loss (``reduction="none"``) counts one sample per element; a scalar loss (a batch
    mean) counts ``num_samples`` (``Model.eval`` passes the batch size; default 1). MindSpore's
    ``Loss`` averages the batch means unweighted, which makes the result depend on how the data
    is split into batches (a short last batch, a shuffled test set); weighting by sample count
    makes it the mean over the samples, whatever the split.

    Raises:
        ValueError: from ``update``, for not exactly one input or a loss of more than one axis;
            TypeError / ValueError for a loss that is not a Tensor, an array or a number, or a
            ``num_samples`` that is not a positive int (or None); RuntimeError from ``eval``
            before any ``update``.
    """

    def clear(self):
        self._sum = 0.0
        self._samples = 0

    def update(self, *inputs, num_samples=None):
        _check_inputs(inputs, 1, "(the loss)", "Loss.update")
        num_samples = check_positive_int("num_samples", num_samples, allow_none=True,
                                         owner="Loss.update")
        loss = as_numpy(inputs[0])
        if loss.ndim > 1:
            raise ValueError(f"Loss.update: the loss must be a scalar or 1-d, got shape "
                             f"{loss.shape}")
        if loss.ndim == 1:
            count = loss.shape[0]
        elif num_samples is None:
            count = 1
        else:
            count = num_samples
        self._sum += float(loss.astype(numpy.float64).sum()) if loss.ndim else \
            float(loss.astype(numpy.float64)) * count
        self._samples += count

    def eval(self):
        if self._samples == 0:
            raise RuntimeError("Loss.eval: no batches; call update first")
        return self._sum / self._samples


def _check_inputs(inputs, count, meaning, owner):
    """``inputs`` (a metric's ``update(*inputs)``): ``count`` Tensors, arrays or numbers."""
    check_relation("inputs", inputs, len(inputs) == count, f"{count} values {meaning}",
                   owner=owner)
    for index, value in enumerate(inputs):
        if not isinstance(value, (Tensor, numpy.ndarray)):
            check_operand(f"inputs[{index}]", value, owner=owner)


_BY_NAME = {"accuracy": Accuracy, "acc": Accuracy, "top_1_accuracy": Top1CategoricalAccuracy,
            "top_5_accuracy": Top5CategoricalAccuracy, "loss": Loss}


def get_metric_fn(name):
    """A new metric by name: ``"accuracy"`` (or ``"acc"``), ``"top_1_accuracy"``,
    ``"top_5_accuracy"``, ``"loss"``.

    Raises:
        TypeError: for a ``name`` that is not a str.
        ValueError: for an unknown name, listing the known ones.
    """
    return _BY_NAME[check_in("name", name, sorted(_BY_NAME), owner="get_metric_fn")]()


def get_metrics(metrics):
    """``{name: Metric}`` from a dict of metrics or a set/list of names (None → {})."""
    if metrics is None:
        return {}
    if isinstance(metrics, dict):
        for name, metric in metrics.items():
            check_type(f"metrics[{name!r}]", metric, Metric)
        return dict(metrics)
    if isinstance(metrics, (set, list, tuple)):
        names = sorted(_BY_NAME)
        for name in metrics:
            check_in("metrics", name, names)  # the message shows the name that is not known
        return {name: get_metric_fn(name) for name in metrics}
    check_type("metrics", metrics, (dict, set, list, tuple),
               expected="a dict of Metrics or a set of names")
