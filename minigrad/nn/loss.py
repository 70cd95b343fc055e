"""Losses, computed and returned in float32 whatever the input dtype (the dtype policy).

Inputs are cast to float32 on entry (the cast is differentiable, so an fp16 network receives
fp16 gradients). ``reduction`` is "mean", "sum" or "none" (per-element loss).
"""
from minigrad import backend, dtype as dtypes, ops
from minigrad.nn.cell import Cell
from minigrad.tensor import Tensor

_REDUCTIONS = ("mean", "sum", "none")


def _fp32(x):
    return ops.cast(x if isinstance(x, Tensor) else Tensor(x), dtypes.float32)  # no-op if fp32


class LossBase(Cell):
    """Base class of losses: ``get_loss(x, weights=1.0)`` applies the weights and the reduction.

    Args:
        reduction: "mean" (default), "sum" or "none".

    Raises:
        ValueError: for another ``reduction``.
    """

    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"reduction must be one of {list(_REDUCTIONS)}, got {reduction!r}")
        self.reduction = reduction

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


class MSELoss(LossBase):
    """ℓ = (x - y)², reduced (default "mean")."""

    def construct(self, logits, labels):
        diff = _fp32(logits) - _fp32(labels)
        return self.get_loss(diff * diff)


class L1Loss(LossBase):
    """ℓ = |x - y|, reduced (default "mean")."""

    def construct(self, logits, labels):
        return self.get_loss(ops.abs(_fp32(logits) - _fp32(labels)))


class SoftmaxCrossEntropyWithLogits(LossBase):
    """ℓᵢ = -Σ_c yᵢc · log softmax(xᵢ)_c for logits x of shape (N, C).

    Args:
        sparse: labels are class ids of shape (N,) (any int dtype) instead of (N, C)
            probabilities / one-hot rows. Default False.
        reduction: "none" (default, as MindSpore: a loss per sample), "mean" or "sum".

    Raises:
        ValueError: for another ``reduction``, logits not 2-D, labels of the wrong shape, or
            sparse labels outside [0, C).
        TypeError: for sparse labels that are not integers, or a non-bool ``sparse``.
    """

    def __init__(self, sparse=False, reduction="none"):
        super().__init__(reduction)
        if not isinstance(sparse, bool):
            raise TypeError(f"sparse must be a bool, got {sparse!r}")
        self.sparse = sparse

    def construct(self, logits, labels):
        if logits.ndim != 2:
            raise ValueError(f"logits must have shape (N, C), got {logits.shape}")
        n, c = logits.shape
        log_probs = ops.log_softmax(_fp32(logits), -1)
        if not self.sparse:
            if labels.shape != logits.shape:
                raise ValueError(f"labels must have the logits' shape {logits.shape}, got {labels.shape}")
            return self.get_loss(-ops.sum(log_probs * _fp32(labels), -1))
        if labels.shape != (n,):
            raise ValueError(f"sparse labels must have shape ({n},) for logits {logits.shape}, got {labels.shape}")
        ids = labels.data if isinstance(labels, Tensor) else labels
        if ids.dtype.kind not in "iu":
            raise TypeError(f"sparse labels must be integer class ids, got dtype {ids.dtype}")
        xp = backend.get_array_module(ids)
        if bool(xp.any((ids < 0) | (ids >= c))):  # one host read per step
            raise ValueError(f"sparse labels must be in [0, {c}), got values in "
                             f"[{int(ids.min())}, {int(ids.max())}]")
        return self.get_loss(-ops.getitem(log_probs, (xp.arange(n), ids)))

    def extend_repr(self):
        return f"sparse={self.sparse}, reduction={self.reduction}"
