"""Embedding lookup: rows of a table gathered by integer ids."""
from minigrad import backend
from minigrad.ops.arithmetic import as_tensor
from minigrad.ops.shape import GetItem


def embedding(ids, table):
    """``table[ids]``: shape ``ids.shape + (D,)`` for a (V, D) table.

    The gradient is scatter-added into a zero table (rows of repeated ids add up); ids get none.
    This is integer-array indexing, so it reuses ``getitem``'s Function after checking the ids.

    Raises:
        TypeError: if ``ids`` is not an integer tensor/array.
        ValueError: if ``table`` is not 2-D.
        IndexError: naming the offending id and the table size if an id is outside [0, V).
    """
    table = as_tensor(table)
    ids = ids.data if hasattr(ids, "requires_grad") else ids
    xp = backend.get_array_module(table.data)
    ids = xp.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"embedding ids must be integers, got dtype {ids.dtype}")
    if table.ndim != 2:
        raise ValueError(f"embedding table must be 2-D (vocab_size, dim), got shape {table.shape}")
    if ids.size:
        low, high = xp.stack([ids.min(), ids.max()]).tolist()  # one host read (a GPU sync)
        if low < 0 or high >= table.shape[0]:
            bad = low if low < 0 else high
            raise IndexError(f"embedding id {bad} is out of range for a table of {table.shape[0]} "
                             f"rows: ids must be in [0, {table.shape[0]}), got min {low}, "
                             f"max {high}")
    return GetItem.apply(table, index=ids)
