"""Containers: SequentialCell (runs its cells in order) and CellList (holds cells)."""
from collections import OrderedDict

from minigrad._checks import check_int, check_items, check_type
from minigrad.nn.cell import Cell


def _check_cell(cell, where):
    if not isinstance(cell, Cell):
        raise TypeError(f"{where} accepts only Cells, got {type(cell).__name__}")
    return cell


class _CellSequence(Cell):
    """Cells kept as sub-cells named "0", "1", ... (or the keys of an OrderedDict).

    Parameter names are identities (checkpoints use them), so when ``append``/``insert``/``del``
    move a cell to another key, its auto-named parameters are renamed to match the new key, and
    a new cell's parameters get the container's prefix (found from its existing parameters, as
    MindSpore does).
    """

    def _set_cells(self, cells, rename=True):
        """Make ``cells`` [(key, cell)] the children, renaming parameters of moved or new cells."""
        for _, cell in cells:  # refuse before anything changes
            _check_cell(cell, type(self).__name__)
        old_keys = {id(cell): key for key, cell in self._cells.items()}
        prefix = self._prefix()
        if prefix is None:  # no auto-named parameter shows it (e.g. still empty): the path we hold
            prefix = self._scope
        for key in list(self._cells):
            delattr(self, key)
        auto_prefix, self._auto_prefix = self._auto_prefix, False
        try:
            for key, cell in cells:
                setattr(self, key, _check_cell(cell, type(self).__name__))
        finally:
            self._auto_prefix = auto_prefix
        if not (rename and auto_prefix):
            return
        for key, cell in cells:
            old = old_keys.get(id(cell))
            if old is None:
                cell._prefix_names(f"{prefix}{key}.")
            elif old != key:
                for path, param in cell.parameters_and_names():
                    if not param._user_named and param.name == f"{prefix}{old}.{path}":
                        param.name = f"{prefix}{key}.{path}"
                for _, sub in cell.cells_and_names():
                    if sub._scope.startswith(f"{prefix}{old}."):
                        rest = sub._scope[len(f"{prefix}{old}."):]
                        sub.__dict__["_scope"] = f"{prefix}{key}." + rest

    def _prefix(self):
        """The prefix of this container's auto-named parameter names (None if none shows it)."""
        for key, cell in self._cells.items():
            for path, param in cell.parameters_and_names():
                end = f"{key}.{path}"
                head = param.name[:-len(end)]
                if (not param._user_named and param.name.endswith(end)
                        and (not head or head.endswith("."))):
                    return head
        return None

    def _renumbered(self, cells):
        return [(str(i), cell) for i, cell in enumerate(cells)]

    def __getitem__(self, index):
        if isinstance(index, slice):
            part = type(self)()
            part._set_cells(self._renumbered(list(self._cells.values())[index]), rename=False)
            return part
        return list(self._cells.values())[self._position(index)]

    def __setitem__(self, index, cell):
        cells = list(self._cells.items())
        position = self._position(index)
        cells[position] = (cells[position][0], cell)
        self._set_cells(cells)

    def __delitem__(self, index):
        cells = list(self._cells.values())
        if isinstance(index, slice):
            del cells[index]
        else:
            del cells[self._position(index)]
        self._set_cells(self._renumbered(cells))

    def _position(self, index):
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"{type(self).__name__} index must be an int or a slice, got "
                            f"{type(index).__name__}")
        if not -len(self) <= index < len(self):
            raise IndexError(f"{type(self).__name__} index {index} is out of range for length "
                             f"{len(self)}")
        return index % len(self)

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(list(self._cells.values()))

    def append(self, cell):
        """Add ``cell`` at the end (named by its position).

        Raises:
            TypeError: if ``cell`` is not a Cell (nothing changes).
        """
        check_type("cell", cell, Cell, owner=f"{type(self).__name__}.append")
        self._set_cells(self._renumbered(list(self._cells.values()) + [cell]))
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
    It has no ``construct``: calling it raises NotImplementedError.

    Raises:
        TypeError: for ``cells`` that is a str or not iterable, or an element that is not a Cell.
    """

    def __init__(self, cells=()):
        super().__init__()
        self.extend(cells)

    def extend(self, cells):
        """Append each cell of ``cells`` (an iterable of Cells; one that is not a Cell is a
        TypeError, and nothing is appended)."""
        cells = check_items("cells", cells, Cell, expected="an iterable of Cells",
                            owner=type(self).__name__)
        self._set_cells(self._renumbered(list(self._cells.values()) + cells))
        return self

    def insert(self, index, cell):
        """Insert ``cell`` before position ``index`` (as ``list.insert``: an index past the end
        appends, a negative one counts from the end).

        Raises:
            TypeError: if ``index`` is not an int or ``cell`` not a Cell (nothing changes).
        """
        check_int("index", index, owner="CellList.insert")
        check_type("cell", cell, Cell, owner="CellList.insert")
        cells = list(self._cells.values())
        cells.insert(index, cell)
        self._set_cells(self._renumbered(cells))
