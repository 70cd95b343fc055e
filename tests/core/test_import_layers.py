"""minigrad's modules import one another without cycles at module level, and ``import minigrad``
stays light (the layer order is written in the package docstring and the README's Layout).

The import graph is read from the source (``ast``), not by importing: an edge runs from a module
to each minigrad module its body imports when it is executed (module level, including under
``if``/``try``/``with`` and in class bodies; not inside functions, and not under
``if TYPE_CHECKING:``). ``import a.b`` and ``from a import b`` (b a module) point at ``a.b``;
``from a import name`` (name not a module) points at ``a``, whose ``__init__`` must have run.
A package's own ``__init__`` importing its submodules is an edge like any other; the implicit
run of a parent package's ``__init__`` before a submodule is not (Python allows a submodule to
be imported while its parent package is still initialising).
"""
import ast
import subprocess
import sys

from helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "minigrad"


def module_names():
    """{dotted module name: path} for every module of the package."""
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _executed_statements(body):
    """The statements of ``body`` that run when the body runs (functions' bodies do not)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _executed_statements(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody"):
            yield from _executed_statements(getattr(node, field, None) or [])
        for handler in getattr(node, "handlers", None) or []:
            yield from _executed_statements(handler.body)


def imports_of(name, path, modules):
    """The minigrad modules that module ``name`` (at ``path``) imports at module level."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in _executed_statements(tree.body):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in modules else base)
    return {t for t in targets if t in modules and t != name}


def import_graph():
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _one_cycle(graph, component):
    """A closed path through ``component``, for the failure message."""
    members, start = set(component), component[0]
    path, seen, v = [start], {start}, start
    while True:
        v = sorted(graph[v] & members)[0] if not (graph[v] & {start}) else start
        path.append(v)
        if v == start or v in seen:
            return " -> ".join(path)
        seen.add(v)


def test_the_graph_reader_sees_module_level_imports_only(tmp_path):
    source = ("import minigrad.tensor\nfrom minigrad import backend, Tensor\n"
              "from . import dtype\ntry:\n    from minigrad.ops import conv\nexcept ImportError:\n"
              "    pass\nif TYPE_CHECKING:\n    import minigrad.nn\n"
              "def f():\n    import minigrad.train\nclass C:\n    import minigrad.optim\n")
    path = tmp_path / "probe.py"
    path.write_text(source)
    modules = {"minigrad", "minigrad.tensor", "minigrad.backend", "minigrad.dtype",
               "minigrad.ops", "minigrad.ops.conv", "minigrad.nn", "minigrad.train",
               "minigrad.optim", "minigrad.probe"}
    assert imports_of("minigrad.probe", path, modules) == {
        "minigrad.tensor", "minigrad.backend", "minigrad", "minigrad.dtype", "minigrad.ops.conv",
        "minigrad.optim"}


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert _one_cycle(graph, ["a", "b", "c"]) == "a -> b -> c -> a"


def test_no_module_level_import_cycle():
    graph = import_graph()
    assert len(graph) > 50 and graph["minigrad.ops.arithmetic"]  # the reader found the modules
    found = cycles(graph)
    assert not found, "module-level import cycles:\n" + "\n".join(
        f"  {_one_cycle(graph, c)}   (all of: {', '.join(c)})" for c in found)


def _loaded_after(statement):
    code = (f"import sys\n{statement}\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'minigrad'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO_ROOT, check=True).stdout
    return set(ast.literal_eval(out.strip().splitlines()[-1]))


def test_import_minigrad_loads_the_core_layers_only():
    loaded = _loaded_after("import minigrad")
    assert "minigrad.ops" in loaded and "minigrad.tensor" in loaded
    above = {"minigrad.nn", "minigrad.optim", "minigrad.amp", "minigrad.train",
             "minigrad.dataset", "minigrad.mixed_precision", "minigrad.testing"}
    assert not loaded & above, sorted(loaded & above)


def test_subpackages_are_attributes_of_minigrad():
    code = (
        "import minigrad\n"
        "import types\n"
        "for name in ('nn', 'optim', 'amp', 'train', 'dataset', 'mixed_precision', 'testing'):\n"
        "    assert isinstance(getattr(minigrad, name), types.ModuleType), name\n"
        "assert minigrad.Model is minigrad.train.Model\n"
        "assert minigrad.DynamicLossScaleManager is minigrad.amp.DynamicLossScaleManager\n"
        "assert minigrad.mixed_precision.LossScaleOptimizer\n"
        "assert not hasattr(minigrad, 'no_such_name')\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)


def test_import_minigrad_amp_loads_the_amp_core_without_the_layers_above_it():
    loaded = _loaded_after("import minigrad.amp")
    assert {"minigrad.amp.core", "minigrad.amp.float_status", "minigrad.amp.autocast"} <= loaded
    above = {"minigrad.nn", "minigrad.optim", "minigrad.train", "minigrad.dataset",
             "minigrad.mixed_precision", "minigrad.amp.build", "minigrad.amp.grad_scaler"}
    assert not loaded & above, sorted(loaded & above)


def test_the_amp_faces_load_on_first_access():
    code = ("import minigrad.amp as amp, sys\n"
            "assert 'minigrad.nn' not in sys.modules\n"
            "from minigrad.amp import GradScaler, build_train_network\n"
            "assert GradScaler is sys.modules['minigrad.amp.grad_scaler'].GradScaler\n"
            "assert amp.cast_network is sys.modules['minigrad.amp.build'].cast_network\n"
            "assert callable(amp.autocast) and 'GradScaler' in dir(amp)\n"
            "assert set(amp.__all__) <= set(dir(amp))\n"
            "try:\n    amp.no_such_name\nexcept AttributeError as e:\n"
            "    assert 'no_such_name' in str(e)\nelse:\n    raise SystemExit(1)\n")
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)
