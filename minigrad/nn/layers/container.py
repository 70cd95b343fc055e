"""Containers: SequentialCell (runs its cells in order) and CellList (holds cells)."""
from collections import OrderedDict

from minigrad.nn.cell import Cell


def _check_cell(cell, where):
    if not isinstance(cell, Cell):
        raise TypeError(f"{where} accepts only Cells, got {type(cell).__name__}")
    return cell


class _CellSequence(Cell):
    """Cells kept as sub-cells named "0", "1", ... (or the keys of an OrderedDict)."""

    def _set_cells(self, cells):
        """Replace the children by ``cells`` [(key, cell)] without renaming their parameters."""
        for key in list(self._cells):
            delattr(self, key)
        auto_prefix, self._auto_prefix = self._auto_prefix, False
        try:
            for key, cell in cells:
                setattr(self, key, cell)
        finally:
            self._auto_prefix = auto_prefix

    def _renumbered(self, cells):
        return [(str(i), cell) for i, cell in enumerate(cells)]

    def __getitem__(self, index):
        if isinstance(index, slice):
            part = type(self)()
            part._set_cells(self._renumbered(list(self._cells.values())[index]))
            return part
        return list(self._cells.values())[self._position(index)]

    def __setitem__(self, index, cell):
        _check_cell(cell, type(self).__name__)
        key = list(self._cells)[self._position(index)]
        setattr(self, key, cell)

    def __delitem__(self, index):
        cells = list(self._cells.values())
        if isinstance(index, slice):
            del cells[index]
        else:
            del cells[self._position(index)]
        self._set_cells(self._renumbered(cells))

    def _position(self, index):
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"{type(self).__name__} index must be an int or a slice, got {type(index).__name__}")
        if not -len(self) <= index < len(self):
            raise IndexError(f"{type(self).__name__} index {index} is out of range for length {len(self)}")
        return index % len(self)

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(list(self._cells.values()))

    def append(self, cell):
        """Add ``cell`` at the end (named by its position)."""
        setattr(self, str(len(self)), _check_cell(cell, type(self).__name__))
        return self


class SequentialCell(_CellSequence):
    """Calls its cells in order, each on the previous one's output.

    ``SequentialCell([Dense(4, 8), ReLU()])``, ``SequentialCell(Dense(4, 8), ReLU())`` or
    ``SequentialCell(OrderedDict(fc=Dense(4, 8), act=ReLU()))``. Supports indexing, slicing
    (a new SequentialCell sharing the cells), ``len``, iteration and ``append``.

    Raises:
        TypeError: for an element that is not a Cell.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            items = list(args[0].items())
        else:
            cells = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
            items = self._renumbered(cells)
        for key, cell in items:
            setattr(self, key, _check_cell(cell, "SequentialCell"))

    def construct(self, x):
        for cell in self._cells.values():
            x = cell(x)
        return x


class CellList(_CellSequence):
    """A list of cells registered as sub-cells (their parameters belong to the owner).

    Supports indexing, slicing, ``len``, iteration, ``append``, ``extend`` and ``insert``.
    Not callable: a CellList has no ``construct``.
    """

    def __init__(self, cells=()):
        super().__init__()
        self.extend(cells)

    def extend(self, cells):
        """Append each cell of ``cells``."""
        for cell in cells:
            self.append(cell)
        return self

    def insert(self, index, cell):
        """Insert ``cell`` before position ``index``."""
        cells = list(self._cells.values())
        position = min(max(index + len(cells) if index < 0 else index, 0), len(cells))
        cells.insert(position, _check_cell(cell, "CellList"))
        self._set_cells(self._renumbered(cells))
        if self._auto_prefix:  # only the new cell's parameters get a prefix: names are identities
            cell._prefix_names(f"{position}.")
