"""Losses, computed and returned in float32 whatever the input dtype (the dtype policy):
``MSELoss``, ``L1Loss``, ``SoftmaxCrossEntropyWithLogits`` (MindSpore's), and MindSpore 2.x's
``CrossEntropyLoss`` and ``BCELoss`` (PyTorch's definitions).

Inputs are cast to float32 on entry (the cast is differentiable, so an fp16 network receives
fp16 gradients). ``reduction`` is "mean", "sum" or "none" (per-element loss).
"""
import numpy

from minigrad import backend, dtype as dtypes, ops
from minigrad._checks import (check_bool, check_broadcast, check_float, check_in, check_int,
                              check_operand, check_relation)
from minigrad.autograd.function import Function
from minigrad.ops._rules import exp, where
from minigrad.ops.shape import scatter
from minigrad.nn.cell import Cell, check_tensor
from minigrad.tensor import Tensor

_REDUCTIONS = ("mean", "sum", "none")


def _fp32(x):
    if isinstance(x, Tensor) and x.data.dtype == dtypes.float32:
        return x
    return ops.cast(x if isinstance(x, Tensor) else Tensor(x), dtypes.float32)


class LossBase(Cell):
    """Base class of losses: ``get_loss(x, weights=1.0)`` applies the weights and the reduction.

    Args:
        reduction: "mean" (default), "sum" or "none".

    Raises:
        TypeError: for a ``reduction`` that is not a str (a Tensor, a number).
        ValueError: for another ``reduction``.
    """
    _takes_policy = False  # not a layer: no Keras dtype policy

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = check_in("reduction", reduction, _REDUCTIONS, owner=type(self).__name__)

    def get_loss(self, x, weights=1.0):
        """float32 ``x · weights`` reduced by ``self.reduction`` (mean/sum over all elements).

        Raises:
            TypeError / ValueError: for an ``x`` or ``weights`` that is not a Tensor, a number or
                an array of numbers (``check_operand``), or weights whose shape does not
                broadcast with ``x``'s.
        """
        owner = f"{type(self).__name__}.get_loss"
        if not isinstance(x, Tensor):
            x = check_operand("x", x, owner=owner)
        x = _fp32(x)
        if not (isinstance(weights, (int, float)) and weights == 1.0):
            if not isinstance(weights, Tensor):
                weights = check_operand("weights", weights, owner=owner)
            weights = _fp32(weights)
            check_broadcast(("x", "weights"), (x.shape, weights.shape), owner=owner)
            x = x * weights
        if self.reduction == "mean":
            return ops.mean(x)
        if self.reduction == "sum":
            return ops.sum(x)
        return x

    def extend_repr(self):
        return f"reduction={self.reduction}"


def _difference(owner, logits, labels):
    """fp32 ``logits - labels``; shapes that do not broadcast are a ValueError naming both."""
    logits = _fp32(check_tensor(owner, "logits", logits))
    labels = _fp32(check_tensor(owner, "labels", labels))
    try:
        numpy.broadcast_shapes(logits.shape, labels.shape)
        fits = True
    except ValueError:
        fits = False
    check_relation("labels.shape", labels.shape, fits,
                   f"logits.shape {logits.shape} or a shape that broadcasts with it", owner=owner)
    return logits - labels


class MSELoss(LossBase):
    """ℓ = (x - y)², reduced (default "mean"); x and y of the same or broadcastable shapes."""

    def construct(self, logits, labels):
        diff = _difference("MSELoss", logits, labels)
        return self.get_loss(diff * diff)


class L1Loss(LossBase):
    """ℓ = |x - y|, reduced (default "mean"); x and y of the same or broadcastable shapes."""

    def construct(self, logits, labels):
        return self.get_loss(ops.abs(_difference("L1Loss", logits, labels)))


class SoftmaxCrossEntropy(Function):
    """Sparse softmax cross-entropy in one node, reduced: ℓᵢ = log Σ_c e^xᵢc - xᵢyᵢ.

    Forward: log-softmax of the (N, C) logits x (max subtracted first), then the picked
    -log pᵢyᵢ, then the reduction ("none", "mean" or "sum"). Backward: dx = (softmax(x) - onehot(y))
    · kᵢ with kᵢ the gradient arriving at ℓᵢ, written as p·kᵢ with kᵢ subtracted at the labels.
    The arithmetic is that of log_softmax, getitem, neg and mean/sum as separate nodes, value for
    value; one node saves their bookkeeping and the scatter of the gather's backward. Under
    ``create_graph`` the rule reads log-softmax(x) from a ``log_softmax`` node on x.

    On the GPU the labels are checked on the device (see ``SoftmaxCrossEntropyWithLogits``); a
    label outside [0, C) makes its sample's loss and logit gradients NaN (``valid``) until the
    check is read.
    """
    autocast = "fp32"
    saves = {"log_probs": lambda node: ops.log_softmax(node.inputs[0], axis=1)}

    def forward(self, x, ids, reduction):
        xp = backend.get_array_module(x)
        self.valid = None
        if backend.device_of(ids) == "GPU":
            self.valid = (ids >= 0) & (ids < x.shape[1])
            ids = xp.where(self.valid, ids, 0)
        z = x - x.max(axis=1, keepdims=True)
        self.log_probs = z - xp.log(xp.exp(z).sum(axis=1, keepdims=True))
        self.rows, self.ids, self.reduction = xp.arange(len(ids)), ids, reduction
        losses = -self.log_probs[self.rows, ids]
        if self.valid is not None:
            losses = xp.where(self.valid, losses, numpy.float32(numpy.nan))
        if reduction == "none":
            return losses
        total = losses.sum(axis=0)
        # NumPy's mean, without its wrapper
        return total / len(ids) if reduction == "mean" else total

    def backward(self, g):
        k = g / len(self.ids) if self.reduction == "mean" else g
        k_rows = k.reshape(-1, 1) if k.ndim else k
        dx = exp(self.log_probs) * k_rows
        if isinstance(dx, Tensor):
            dx = dx - scatter(k.broadcast_to(self.ids.shape), dx.shape, (self.rows, self.ids))
        else:
            dx[self.rows, self.ids] -= k
        if self.valid is not None:
            dx = where(self.valid[:, None], dx, numpy.float32(numpy.nan))
        return dx


def _label_range_error(c, low, high):
    return ValueError(f"sparse labels must be in [0, {c}), got values in [{int(low)}, {int(high)}]")


def _defer_label_check(ids, c):
    """Check sparse labels on the device without waiting for it: the flag and the labels' range
    ride on the next device read (``backend.defer_check``)."""
    if ids.size == 0:
        return
    xp = backend.get_array_module(ids)
    bad = ((ids < 0) | (ids >= c)).any()
    values = xp.stack([bad.astype(xp.int64), -ids.min().astype(xp.int64),
                       ids.max().astype(xp.int64)]).astype(xp.float64)
    backend.defer_check(("sparse labels", c), values,
                        lambda part: _label_range_error(c, -part[1], part[2]))


class SoftmaxCrossEntropyWithLogits(LossBase):
    """ℓᵢ = -Σ_c yᵢc · log softmax(xᵢ)_c for logits x of shape (N, C).

    Args:
        sparse: labels are class ids of shape (N,) (any int dtype) instead of (N, C)
            probabilities / one-hot rows. Default False.
        reduction: "none" (default, as MindSpore: a loss per sample), "mean" or "sum".

    Raises:
        ValueError: for another ``reduction``, logits not 2-D, labels of the wrong shape, or
            sparse labels outside [0, C). On the CPU this raises in the call. On the GPU the
            labels are checked on the device and the check travels with the next read of a
            device scalar (``backend.read_scalar``), which raises it: the overflow read of a
            loss-scaled step (before the step changes any parameter or the scale), a loss
            callback of ``Model.train``, ``loss.item()`` or ``float(loss)``. A step that reads
            nothing (O0 with no callback) applies its NaN gradients; the error surfaces at the
            next such read.
        TypeError: for sparse labels that are not integers, or a non-bool ``sparse``.
    """

    def __init__(self, sparse=False, reduction="none"):
        super().__init__(reduction)
        self.sparse = check_bool("sparse", sparse, owner="SoftmaxCrossEntropyWithLogits")

    def construct(self, logits, labels):
        check_tensor("SoftmaxCrossEntropyWithLogits", "logits", logits)
        check_tensor("SoftmaxCrossEntropyWithLogits", "labels", labels)
        if logits.ndim != 2:
            raise ValueError(f"logits must have shape (N, C), got {logits.shape}")
        n, c = logits.shape
        if not self.sparse:
            if labels.shape != logits.shape:
                raise ValueError(f"labels must have the logits' shape {logits.shape}, got "
                                 f"{labels.shape}")
            log_probs = ops.log_softmax(_fp32(logits), -1)
            return self.get_loss(-ops.sum(log_probs * _fp32(labels), -1))
        if labels.shape != (n,):
            raise ValueError(f"sparse labels must have shape ({n},) for logits {logits.shape}, "
                             f"got {labels.shape}")
        ids = labels.data if isinstance(labels, Tensor) else labels
        if ids.dtype.kind not in "iu":
            raise TypeError(f"sparse labels must be integer class ids, got dtype {ids.dtype}")
        if backend.device_of(ids) == "GPU":
            _defer_label_check(ids, c)
        elif bool(((ids < 0) | (ids >= c)).any()):
            raise _label_range_error(c, ids.min(), ids.max())
        return SoftmaxCrossEntropy.apply(_fp32(logits), ids=ids, reduction=self.reduction)

    def extend_repr(self):
        return f"sparse={self.sparse}, reduction={self.reduction}"


class CrossEntropyLoss(LossBase):
    r"""Softmax cross-entropy of logits against class ids or class probabilities (MindSpore 2.x
    ``nn.CrossEntropyLoss``, PyTorch's ``nn.CrossEntropyLoss``).

    Logits ``x`` of shape (N, C), (C,) or (N, C, d1, ...), classes on axis 1 (axis 0 for 1-D);
    ``p = softmax(x)`` over the classes. With class ids ``y`` (integers, shape (N,) or (N, d1,
    ...)) and ``ε = label_smoothing``::

        ℓₙ = (1 - ε) · w[yₙ] · (-log pₙ,yₙ) + ε / C · Σ_c w_c · (-log pₙ,c)     (yₙ ≠ ignore_index)
        ℓₙ = 0                                                                 (yₙ = ignore_index)
        mean = Σ ℓₙ / Σ_{yₙ ≠ ignore_index} w[yₙ]

    With class probabilities ``y`` (floats, the logits' shape)::

        ℓₙ = -Σ_c w_c · ỹₙ,c · log pₙ,c,   ỹ = (1 - ε) · y + ε / C,   mean = Σ ℓₙ / N

    (N counts every position for inputs with extra axes.) Computed and returned in float32.

    Args:
        weight: None (every class 1) or a Tensor of C class weights.
        ignore_index: a class id whose targets count for nothing (ids only). Default -100.
        reduction: "mean" (default), "sum" or "none".
        label_smoothing: ε in [0, 1]. Default 0.0.

    Raises:
        TypeError: ``weight`` not a Tensor or None, ``ignore_index`` not an int,
            ``label_smoothing`` not a float, logits or labels not Tensors.
        ValueError: an unknown ``reduction``, ``label_smoothing`` outside [0, 1], shapes that do
            not fit, ids outside [0, C) other than ``ignore_index``, or a weight of another
            length than C.
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        owner = "CrossEntropyLoss"
        if weight is not None:
            check_tensor(owner, "weight", weight)
        self.weight = weight
        self.ignore_index = check_int("ignore_index", ignore_index, owner=owner)
        self.label_smoothing = check_float("label_smoothing", label_smoothing, low=0.0, high=1.0,
                                           owner=owner)

    def construct(self, logits, labels):
        owner = "CrossEntropyLoss"
        check_tensor(owner, "logits", logits)
        if not logits.shape:  # the classes are an axis: (C,), (N, C) or (N, C, d1, ...)
            check_relation("logits.shape", logits.shape, False, "(C,), (N, C) or (N, C, d1, "
                           "...): the classes are an axis", owner=owner)
        logits = _classes_last(_fp32(logits))
        labels = check_tensor(owner, "labels", labels)
        c = logits.shape[-1]
        w = None
        if self.weight is not None:
            check_relation("weight.shape", self.weight.shape, self.weight.shape == (c,),
                           f"({c},), one weight per class of the logits", owner=owner)
            w = _fp32(self.weight).data  # on the weight's device: read nothing
        log_probs = ops.log_softmax(logits, -1)
        eps = self.label_smoothing
        if labels.dtype.kind == "f":  # class probabilities
            labels = _classes_last(_fp32(labels))
            check_relation("labels.shape", labels.shape, labels.shape == logits.shape,
                           f"the logits' shape {logits.shape} (probabilities)", owner=owner)
            if eps:
                labels = labels * (1.0 - eps) + eps / c
            if w is not None:
                labels = labels * Tensor(backend.to_device(w, labels.device))
            return self.get_loss(-ops.sum(log_probs * labels, -1))
        return self._loss_of_ids(log_probs, labels, w, c, owner)

    def _loss_of_ids(self, log_probs, labels, w, c, owner):
        check_relation("labels.shape", labels.shape, labels.shape == log_probs.shape[:-1],
                       f"{log_probs.shape[:-1]}, one class id per row of the logits", owner=owner)
        if log_probs.device == "GPU":
            return self._loss_of_ids_on_device(log_probs, labels, w, c, owner)
        ids = backend.as_numpy(labels.data)
        w = None if w is None else backend.as_numpy(w)
        kept = ids != self.ignore_index
        if bool(((ids < 0) | (ids >= c))[kept].any()):
            raise ValueError(f"{owner}: class ids must be in [0, {c}) or the ignore_index "
                             f"{self.ignore_index}, got values in [{ids.min()}, {ids.max()}]")
        weights = numpy.ones(c, numpy.float32) if w is None else w
        safe = numpy.where(kept, ids, 0)
        picked = numpy.zeros(log_probs.shape, numpy.float32)   # w[y] at y, 0 where ignored
        numpy.put_along_axis(picked, safe[..., None], (weights[safe] * kept)[..., None], -1)
        targets = picked * (1.0 - self.label_smoothing)
        if self.label_smoothing:
            targets += kept[..., None] * weights * (self.label_smoothing / c)
        losses = -ops.sum(log_probs * Tensor(targets, device=log_probs.device), -1)
        if self.reduction != "mean":
            return self.get_loss(losses)
        return ops.sum(losses) / float((weights[safe] * kept).sum())

    def _loss_of_ids_on_device(self, log_probs, labels, w, c, owner):
        """``_loss_of_ids`` on the GPU, reading nothing: the targets are built on the device,
        the mean divides by a device sum, and the ids' range is checked at the next read of
        the device (``backend.defer_check``)."""
        xp = backend.get_array_module(log_probs.data)
        ids = backend.to_device(labels.data, "GPU")
        kept = ids != self.ignore_index
        if ids.size:
            values = xp.stack([(((ids < 0) | (ids >= c)) & kept).any().astype(xp.float64),
                               -ids.min().astype(xp.float64), ids.max().astype(xp.float64)])
            ignore = self.ignore_index
            backend.defer_check(("class ids", c, ignore), values, lambda part: ValueError(
                f"{owner}: class ids must be in [0, {c}) or the ignore_index {ignore}, got "
                f"values in [{int(-part[1])}, {int(part[2])}]"))
        weights = xp.ones(c, numpy.float32) if w is None else backend.to_device(w, "GPU")
        safe = xp.where(kept, ids, 0)
        scale = weights[safe] * kept                              # w[y], 0 where ignored
        targets = (safe[..., None] == xp.arange(c)) * scale[..., None]
        targets = targets * (1.0 - self.label_smoothing)
        if self.label_smoothing:
            targets += kept[..., None] * weights * (self.label_smoothing / c)
        losses = -ops.sum(log_probs * Tensor(targets.astype(numpy.float32)), -1)
        if self.reduction != "mean":
            return self.get_loss(losses)
        return ops.sum(losses) / Tensor(scale.sum(dtype=numpy.float32))

    def extend_repr(self):
        return (f"ignore_index={self.ignore_index}, reduction={self.reduction}, "
                f"label_smoothing={self.label_smoothing}")


def _classes_last(x):
    """(N, C, d1, ...) as (N, d1, ..., C); (N, C) and (C,) as they are."""
    return ops.transpose(x, (0,) + tuple(range(2, x.ndim)) + (1,)) if x.ndim > 2 else x


class BinaryCrossEntropy(Function):
    """ℓ = -w (y log x + (1 - y) log(1 - x)), each log clamped at -100 (PyTorch's rule: a
    probability of exactly 0 or 1 gives a finite loss); elementwise, in one node.

    dx = g · w · (x - y) / max(x (1 - x), 1e-12).
    """

    def forward(self, x, y, w):
        xp = backend.get_array_module(x)
        self.x, self.y, self.w = x, y, w
        with numpy.errstate(divide="ignore"):  # log 0 = -inf, clamped next
            log_x = xp.maximum(xp.log(x), -100.0)
            log_1mx = xp.maximum(xp.log1p(-x), -100.0)
        return -w * (y * log_x + (1.0 - y) * log_1mx)

    def backward(self, g):
        xp = backend.get_array_module(g)
        x = self.x
        return g * self.w * (x - self.y) / xp.maximum(x * (1.0 - x), 1e-12)


class BCELoss(LossBase):
    """Binary cross-entropy of probabilities ``x`` in [0, 1] against targets ``y`` (MindSpore 2.x
    ``nn.BCELoss``, PyTorch's ``nn.BCELoss``)::

        ℓ = -w · (y · log x + (1 - y) · log(1 - x)),   each log clamped at -100

    reduced by ``reduction`` (mean over all elements). Computed and returned in float32.

    Args:
        weight: None, or a Tensor broadcastable to the inputs' shape (a weight per element).
        reduction: "mean" (default), "sum" or "none".

    Raises:
        TypeError: ``weight`` neither a Tensor nor None; logits or labels not Tensors.
        ValueError: an unknown ``reduction``; labels of another shape than the logits.
    """

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        if weight is not None:
            check_tensor("BCELoss", "weight", weight)
        self.weight = weight

    def construct(self, logits, labels):
        owner = "BCELoss"
        x = _fp32(check_tensor(owner, "logits", logits))
        y = _fp32(check_tensor(owner, "labels", labels)).detach()
        check_relation("labels.shape", labels.shape, labels.shape == logits.shape,
                       f"the logits' shape {logits.shape}", owner=owner)
        w = numpy.float32(1.0) if self.weight is None else _fp32(self.weight).detach().data
        return self.get_loss(BinaryCrossEntropy.apply(x, y=y.data, w=w))
