"""Embedding: a lookup table of vectors indexed by integer ids."""
import numpy

from minigrad import backend, ops
from minigrad.nn.cell import Cell, check_tensor
from minigrad.nn.init import init_tensor
from minigrad._checks import check_bool, check_positive_int
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor


class Embedding(Cell):
    """out[..., :] = embedding_table[ids[...], :]; ids of shape S give an output of shape S + (E,).

    Args:
        vocab_size: a positive int, the table's rows.
        embedding_size: a positive int, the table's columns.
        use_one_hot: compute one_hot(ids) @ table (a matmul, whose input THOR can record)
            instead of a gather. Same result. Default False.
        embedding_table: initializer of the table, default "normal".
        padding_idx: None, or an id in [0, vocab_size) whose row starts at zero.

    Raises:
        TypeError / ValueError: for a non-positive size, a non-bool ``use_one_hot``, or a
            ``padding_idx`` that is not an int (TypeError) or not in [0, vocab_size) (ValueError);
            TypeError for non-integer ids.
    """

    def __init__(self, vocab_size, embedding_size, use_one_hot=False, embedding_table="normal",
                 padding_idx=None):
        super().__init__()
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.embedding_size = check_positive_int("embedding_size", embedding_size)
        self.use_one_hot = check_bool("use_one_hot", use_one_hot)
        table = init_tensor("embedding_table", embedding_table, (vocab_size, embedding_size))
        if padding_idx is not None:
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, numpy.integer)):
                raise TypeError(f"padding_idx must be None or an int, got {padding_idx!r} "
                                f"({type(padding_idx).__name__})")
            if not 0 <= padding_idx < vocab_size:  # MindSpore: [0, vocab_size), no negative ids
                raise ValueError(f"padding_idx must be None or an int in [0, {vocab_size}), got "
                                 f"{padding_idx!r}")
            padding_idx = int(padding_idx)
            table.data[padding_idx] = 0
        self.padding_idx = padding_idx
        self.embedding_table = Parameter(table)

    def construct(self, ids):
        check_tensor(type(self).__name__, "ids", ids)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"Embedding expects integer ids, got dtype {ids.dtype}")
        if not self.use_one_hot:
            return ops.embedding(ids, self.embedding_table)
        xp = backend.get_array_module(ids.data)
        one_hot = (ids.data[..., None] == xp.arange(self.vocab_size))
        one_hot = one_hot.astype(self.embedding_table.dtype)
        return ops.matmul(Tensor(one_hot, device=ids.device), self.embedding_table)

    def extend_repr(self):
        return (f"vocab_size={self.vocab_size}, embedding_size={self.embedding_size}, "
                f"use_one_hot={self.use_one_hot}, padding_idx={self.padding_idx}")
