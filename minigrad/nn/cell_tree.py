"""``CellTree``: what a tree of Cells answers about itself: its sub-cells and parameters by
attribute path, in definition order, each once (a cell or parameter shared by two branches
is listed at its first path), and the operations over all of them (``apply``, renaming).

``Cell`` inherits it; the tree is held in each cell's ``_cells``, ``_params`` and
``_param_tuples`` registries, which ``Cell.__setattr__`` fills.
"""
from collections import OrderedDict

from minigrad._checks import check_bool, check_callable, check_type


class CellTree:
    """Traversal of a Cell and its sub-cells (see the module docstring)."""

    def cells_and_names(self, name_prefix=""):
        """An iterator of ``(path, cell)`` for this cell (path ``name_prefix``) and every
        sub-cell, once each.

        Raises:
            TypeError: if ``name_prefix`` is not a str (when called, before any iteration).
        """
        check_type("name_prefix", name_prefix, str, owner="Cell.cells_and_names")
        return self._cells_and_names(name_prefix)

    def _cells_and_names(self, name_prefix):
        seen = set()
        stack = [(name_prefix, self)]
        while stack:  # iterative depth-first, children in definition order
            path, cell = stack.pop()
            if id(cell) in seen:
                continue
            seen.add(id(cell))
            yield path, cell
            children = [(f"{path}.{name}" if path else name, child)
                        for name, child in cell._cells.items() if child is not None]
            stack.extend(reversed(children))

    def name_cells(self):
        """OrderedDict of the direct sub-cells by attribute name."""
        return OrderedDict((k, v) for k, v in self._cells.items() if v is not None)

    def cells(self):
        """The direct sub-cells, in definition order."""
        return list(self.name_cells().values())

    def parameters_and_names(self, name_prefix="", expand=True):
        """Yield ``(path, parameter)`` for every parameter, once each, in definition order.

        Args:
            name_prefix: prepended to the paths.
            expand: include the parameters of sub-cells (default True).

        Raises:
            TypeError: if ``name_prefix`` is not a str or ``expand`` not a bool (when called,
                before any iteration).
            ValueError: while iterating, if two different Parameters have the same ``name``
                (naming both paths).
        """
        owner = "Cell.parameters_and_names"
        check_type("name_prefix", name_prefix, str, owner=owner)
        return self._parameters_and_names(name_prefix, check_bool("expand", expand, owner=owner))

    def _parameters_and_names(self, name_prefix, expand):
        cells = self._cells_and_names(name_prefix) if expand else [(name_prefix, self)]
        seen = set()
        paths_by_name = {}
        for cell_path, cell in cells:
            members = [(name, p) for name, p in cell._params.items()]
            for attr, params in cell._param_tuples.items():
                members.extend((f"{attr}.{i}", p) for i, p in enumerate(params))
            for name, param in members:
                if id(param) in seen:
                    continue
                seen.add(id(param))
                path = f"{cell_path}.{name}" if cell_path else name
                other = paths_by_name.setdefault(param.name, path)
                if other != path:
                    raise ValueError(f"two different parameters are both named {param.name!r}: at "
                                     f"{other!r} and {path!r}; give them distinct names (or call "
                                     f"update_parameters_name on one sub-network)")
                yield path, param

    def get_parameters(self, expand=True):
        """An iterator of every parameter once, in definition order (``expand``: a bool, those
        of the sub-cells too)."""
        expand = check_bool("expand", expand, owner="Cell.get_parameters")
        return (param for _, param in self._parameters_and_names("", expand))

    def trainable_params(self, recurse=True):
        """List of the parameters with ``requires_grad=True`` (what an optimizer takes);
        ``recurse``: a bool, those of the sub-cells too."""
        recurse = check_bool("recurse", recurse, owner="Cell.trainable_params")
        return [p for _, p in self._parameters_and_names("", recurse) if p.requires_grad]

    def untrainable_params(self, recurse=True):
        """List of the parameters with ``requires_grad=False`` (e.g. BatchNorm's moving
        statistics); ``recurse``: a bool, those of the sub-cells too."""
        recurse = check_bool("recurse", recurse, owner="Cell.untrainable_params")
        return [p for _, p in self._parameters_and_names("", recurse) if not p.requires_grad]

    def parameters_dict(self, recurse=True):
        """OrderedDict ``param.name -> Parameter``; ``recurse``: a bool, those of the sub-cells
        too."""
        recurse = check_bool("recurse", recurse, owner="Cell.parameters_dict")
        return OrderedDict((p.name, p) for _, p in self._parameters_and_names("", recurse))

    def update_parameters_name(self, prefix="", recurse=True):
        """Rename every parameter to ``prefix + its attribute path`` (user-given names included).

        Use it to give a second copy of a network distinct names before checkpointing both.

        Raises:
            TypeError: if ``prefix`` is not a str or ``recurse`` not a bool (nothing renamed).
        """
        check_type("prefix", prefix, str, owner="Cell.update_parameters_name")
        recurse = check_bool("recurse", recurse, owner="Cell.update_parameters_name")
        for path, param in self._parameters_and_names("", recurse):
            param.name = prefix + path
        for path, cell in (self._cells_and_names("") if recurse else [("", self)]):
            cell.__dict__["_scope"] = prefix + (f"{path}." if path else "")

    def apply(self, fn):
        """Call ``fn(cell)`` on every sub-cell and then on this cell (MindSpore's order: children
        first); returns ``self``. E.g. a custom initialisation of every Dense layer.

        Raises:
            TypeError: if ``fn`` is not callable.
        """
        check_callable("fn", fn, owner="Cell.apply")
        for _, cell in reversed(list(self.cells_and_names())):
            fn(cell)
        return self
