"""Losses, computed and returned in float32 whatever the input dtype (the dtype policy).

Inputs are cast to float32 on entry (the cast is differentiable, so an fp16 network receives
fp16 gradients). ``reduction`` is "mean", "sum" or "none" (per-element loss).
"""
import numpy

from minigrad import backend, dtype as dtypes, ops
from minigrad._checks import check_bool, check_in, check_relation
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

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = check_in("reduction", reduction, _REDUCTIONS, owner=type(self).__name__)

    def get_loss(self, x, weights=1.0):
        """float32 ``x · weights`` reduced by ``self.reduction`` (mean/sum over all elements)."""
        x = _fp32(x)
        if not (isinstance(weights, (int, float)) and weights == 1.0):
            x = x * _fp32(weights)
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
