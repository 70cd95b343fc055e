"""Embedding lookup: rows of a table gathered by integer ids."""
import numpy

from minigrad import backend
from minigrad._checks import IndexRangeError, check_relation, describe
from minigrad.ops.arithmetic import as_tensor
from minigrad.ops.shape import GetItem
from minigrad.tensor import Tensor


def embedding(ids, table):
    """``table[ids]``: shape ``ids.shape + (D,)`` for a (V, D) table.

    The gradient is scatter-added into a zero table (rows of repeated ids add up); ids get none.
    This is integer-array indexing, so it reuses ``getitem``'s Function after checking the ids.

    ``ids``: an integer Tensor or array, nested lists of ints, or an int (NumPy's integer
    indexing).

    Raises:
        TypeError: if ``ids`` is not an integer tensor/array (a bool, a float, None, a str).
        ValueError: if ``table`` is not 2-D.
        IndexError: naming the offending id and the table size if an id is outside [0, V) (an
            ``_checks.IndexRangeError``, a ValueError too); on the GPU at the next read of the
            device (``backend.defer_check``: checking here would wait for the device at every
            lookup), with the rows of the lookup undefined.
    """
    table = as_tensor(table, name="table")
    given = ids
    ids = ids.data if isinstance(ids, Tensor) else ids
    xp = backend.get_array_module(table.data)
    expected = "an integer Tensor or array (or nested lists of ints)"
    try:
        ids = xp.asarray(ids)
    except (TypeError, ValueError, OverflowError):  # ragged lists, an object NumPy cannot hold
        check_relation("ids", given, False, expected, error=TypeError, owner="embedding")
    if ids.dtype.kind not in "iu":
        check_relation("ids", given, False, f"{expected}, not of dtype {ids.dtype}",
                       error=TypeError, owner="embedding")
    if table.ndim != 2:
        raise ValueError(f"embedding table must be 2-D (vocab_size, dim), got shape {table.shape}")
    rows = table.shape[0]
    if ids.size and xp is numpy:
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= rows:
            raise _id_error(rows, low, high, describe(given))
    elif ids.size:  # on the GPU the check rides on the next read of the device
        values = xp.stack([((ids < 0) | (ids >= rows)).any().astype(xp.int64),
                           -ids.min().astype(xp.int64), ids.max().astype(xp.int64)])
        backend.defer_check(("embedding ids", rows), values.astype(xp.float64),
                            lambda part: _id_error(rows, int(-part[1]), int(part[2])))
    return GetItem.apply(table, index=ids)


def _id_error(rows, low, high, shown=None):
    bad = low if low < 0 else high
    shown = f"min {low}, max {high}" if shown is None else f"{shown} (min {low}, max {high})"
    return IndexRangeError(f"embedding id {bad} is out of range for a table of {rows} rows: ids "
                           f"must be in [0, {rows}), got {shown}")
