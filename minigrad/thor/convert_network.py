"""``ConvertNetUtils`` (MindSpore's name): turn a network's layers into THOR layers.

``convert_to_thor_net(net)`` walks ``net`` and turns every ``Dense``, ``Conv2d`` and
``Embedding`` whose weight is trainable into ``DenseThor``, ``Conv2dThor`` and ``EmbeddingThor``
in place: the object's class becomes the THOR subclass, so it keeps its parameters (the same
objects, so an optimizer built before still holds them), names, hooks, input casts, activation
and every setting (stride, padding, dilation, non-square kernels). ``LayerNorm`` cells are
tagged ``thor_diagonal`` so THOR gives their gamma and beta its diagonal rule. Subclasses of the
three layers are left alone (their own ``construct`` would be replaced), as are layers already
converted. ``nn.thor`` is ``optim.thor``, which calls this converter (registered below:
``optim`` sits under ``nn`` and cannot import it). The label samplers of THOR's Monte-Carlo
Fisher for the losses of ``nn.loss`` are registered here for the same reason.
"""
import numpy

from minigrad.nn.cell import Cell
from minigrad.nn.layers.basic import Dense
from minigrad.nn.layers.conv import Conv2d
from minigrad.nn.layers.embedding import Embedding
from minigrad.nn.layers.normalization import LayerNorm
from minigrad.thor.layers import Conv2dThor, DenseThor, EmbeddingThor
from minigrad.nn.loss import MSELoss, SoftmaxCrossEntropyWithLogits
from minigrad.thor.fisher import (
    register_sampler,
    sample_categorical,
    sample_gaussian,
)
from minigrad.thor.build import register_converter
from minigrad._checks import check_type

_THOR_CLASS = {Dense: DenseThor, Conv2d: Conv2dThor, Embedding: EmbeddingThor}


class ConvertNetUtils:
    """Convert a network to THOR layers (see the module docstring)."""

    def convert_to_thor_net(self, net):
        """Convert ``net`` in place and return it.

        Raises:
            TypeError: ``net`` is not a Cell.
            ValueError: a ``Conv2d`` with ``group`` > 1 (THOR's factor A treats the input
                channels as one block); nothing is converted then.
        """
        if not isinstance(net, Cell):
            check_type("net", net, Cell, owner="convert_to_thor_net")
        cells = [(path, cell) for path, cell in net.cells_and_names()]
        for path, cell in cells:
            if type(cell) is Conv2d and cell.group != 1 and cell.weight.requires_grad:
                raise ValueError(f"convert_to_thor_net: {path or 'net'} is a Conv2d with "
                                 f"group={cell.group}; THOR supports group=1 only (its factor A "
                                 f"treats all input channels as one Kronecker block)")
        for _, cell in cells:
            target = _THOR_CLASS.get(type(cell))
            weight = getattr(cell, "embedding_table", None) if target is EmbeddingThor \
                else getattr(cell, "weight", None)
            if target is not None and weight is not None and weight.requires_grad:
                object.__setattr__(cell, "__class__", target)  # Cell.__setattr__ registers
                cell._init_recording()
            elif isinstance(cell, LayerNorm):
                cell.thor_diagonal = True
        return net


register_converter(ConvertNetUtils().convert_to_thor_net)


def _sample_cross_entropy(loss, logits, labels, rng):
    """Labels ~ Categorical(softmax(logits)): ids of the labels' dtype, or one-hot rows."""
    if logits.ndim != 2:
        raise ValueError(f"THOR(fisher='mc'): {type(loss).__name__} logits must have shape "
                         f"(N, C), got {logits.shape}")
    dtype = labels.data.dtype if loss.sparse else numpy.float32
    return sample_categorical(logits, rng, not loss.sparse, dtype)


def _sample_squared_error(loss, output, labels, rng):
    """Labels ~ N(output, 1 / (2c)): c = 1 / (elements per sample) for "mean", else 1."""
    per_sample = int(numpy.prod(output.shape[1:])) if output.ndim > 1 else 1
    variance = per_sample / 2.0 if loss.reduction == "mean" else 0.5
    return sample_gaussian(output, rng, variance, numpy.float32)


register_sampler(SoftmaxCrossEntropyWithLogits, _sample_cross_entropy)
register_sampler(MSELoss, _sample_squared_error)
