"""minigrad's modules import one another without cycles and only downward through the layers, and
``import minigrad`` stays light.

The layer table is ``minigrad._LAYERS`` (read from the source of ``minigrad/__init__.py``); the
package docstring and the README's Layout write it out as a numbered list, and a test checks
that each item names exactly the modules of its layer, so the table, the docstring and the
README cannot drift apart.

The import graph is read from the source (``ast``), not by importing: an edge runs from a module
to each minigrad module its body imports when it is executed (module level, including under
``if``/``try``/``with`` and in class bodies; not inside functions, and not under
``if TYPE_CHECKING:``). ``import a.b`` and ``from a import b`` (b a module) point at ``a.b``;
``from a import name`` (name not a module) points at ``a``, whose ``__init__`` must have run.
A package's own ``__init__`` importing its submodules is an edge like any other; the implicit
run of a parent package's ``__init__`` before a submodule is not (Python allows a submodule to
be imported while its parent package is still initialising).

An import inside a function (run on first use) that goes up the layers is allowed only where
``LAZY_UPWARD`` lists it with its reason. ``importlib.import_module`` of a computed name is not
read; it is allowed only in a package's PEP 562 ``__getattr__`` (checked below).
"""
import ast
import re
import subprocess
import sys

from helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "minigrad"


def module_names(package=PACKAGE):
    """{dotted module name: path} for every module of the package in folder ``package``."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
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


def _targets(node, package, modules):
    """The modules in ``modules`` that the import statement ``node`` (in ``package``) loads."""
    if isinstance(node, ast.Import):
        targets = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[:len(anchor) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        targets = set()
        for alias in node.names:
            full = f"{base}.{alias.name}"
            targets.add(full if full in modules else base)
    return {t for t in targets if t in modules}


def _parse(name, path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return tree, name if path.name == "__init__.py" else name.rpartition(".")[0]


def imports_of(name, path, modules):
    """The minigrad modules that module ``name`` (at ``path``) imports at module level."""
    tree, package = _parse(name, path)
    targets = set()
    for node in _executed_statements(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            targets |= _targets(node, package, modules)
    return targets - {name}


def function_imports_of(name, path, modules):
    """The minigrad modules that the functions and methods of module ``name`` import."""
    tree, package = _parse(name, path)
    targets = set()
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    targets |= _targets(node, package, modules)
    return targets - {name}


def import_graph(package=PACKAGE, reader=imports_of):
    modules = module_names(package)
    return {name: reader(name, path, modules) for name, path in modules.items()}


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


# Function-level imports that go up the layers: (module, imported module) -> why it is there.
LAZY_UPWARD = {
    ("minigrad.ops", "minigrad.amp.npu_ops"):
        "MindSpore spells its float-status primitives ops.NPUAllocFloatStatus, "
        "ops.NPUClearFloatStatus and ops.NPUGetFloatStatus; they wrap the amp core's overflow "
        "status (the layer above the ops), so ops.__getattr__ loads them on first use",
}


def read_layers(package=PACKAGE):
    """The ``_LAYERS`` table of the package's ``__init__``, read from its source."""
    init = package / "__init__.py"
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "_LAYERS" for target in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{init} defines no _LAYERS table")


def layer_of(module, layers):
    """The index in ``layers`` of the layer that places the dotted ``module`` (the longest
    matching path; "" matches the package itself only), or None when no path matches."""
    path = module.partition(".")[2]
    best, best_length = None, -1
    for index, paths in enumerate(layers):
        for entry in paths:
            hit = path == entry or (entry != "" and path.startswith(entry + "."))
            if hit and len(entry) > best_length:
                best, best_length = index, len(entry)
    return best


def layer_violations(graph, layers):
    """``(unplaced modules, upward imports)``: the modules no layer places, and the
    ``(module, imported module)`` pairs whose target sits on a higher layer, both sorted."""
    unplaced = sorted(m for m in graph if layer_of(m, layers) is None)
    upward = sorted((m, t) for m, targets in graph.items() for t in targets
                    if m not in unplaced and t not in unplaced
                    and layer_of(t, layers) > layer_of(m, layers))
    return unplaced, upward


def _describe(pairs, layers):
    return "\n".join(f"  {m} (layer {layer_of(m, layers) + 1}) imports {t} "
                      f"(layer {layer_of(t, layers) + 1})" for m, t in pairs)


def documented_layers(text, quote):
    """The names quoted with ``quote`` in each item of the first numbered list of ``text``."""
    start = re.search(r"^1\. ", text, re.M).start()
    items = re.findall(r"^(\d+)\. (.*?)(?=^\d+\. |^\s*$|\Z)", text[start:], re.M | re.S)
    assert [int(number) for number, _ in items] == list(range(1, len(items) + 1)), items
    pattern = re.escape(quote) + r"([A-Za-z_][\w.]*)" + re.escape(quote) + "(?!`)"
    return [re.findall(r"(?<!`)" + pattern, body) for _, body in items]


def _layer_text_matches_table(text, quote, layers, modules, package="minigrad"):
    named = [{n for n in names if f"{package}.{n}" in modules}
             for names in documented_layers(text, quote)]
    return named == [set(paths) - {""} for paths in layers], named


def test_the_layer_checker_on_a_made_up_package(tmp_path):
    package = tmp_path / "pkg"
    (package / "high").mkdir(parents=True)
    files = {
        "__init__.py": '"""1. ``low``.\n2. ``high``.\n"""\n_LAYERS = (("low",), ("high", ""))\n',
        "low.py": "from pkg import high\ndef f():\n    import pkg.high.deep\n",
        "high/__init__.py": "from pkg import low\n",
        "high/deep.py": "import pkg.low\nfrom pkg import base\n",
        "base.py": "",
        "stray.py": "def g():\n    from . import low\n",
    }
    for name, source in files.items():
        (package / name).write_text(source)
    layers = read_layers(package)
    assert layers == (("low",), ("high", ""))
    assert [layer_of(m, layers) for m in ("pkg", "pkg.low", "pkg.high", "pkg.high.deep")] == [
        1, 0, 1, 1]
    graph = import_graph(package)
    # pkg.high.deep imports pkg (from pkg import base: base is a module, so pkg.base)
    assert layer_violations(graph, layers) == (["pkg.base", "pkg.stray"],
                                               [("pkg.low", "pkg.high")])
    lazy = import_graph(package, function_imports_of)
    assert layer_violations(lazy, layers)[1] == [("pkg.low", "pkg.high.deep")]
    modules = module_names(package)
    docstring = ast.get_docstring(ast.parse(files["__init__.py"]))
    assert _layer_text_matches_table(docstring, "``", layers, modules, "pkg")[0]
    swapped = "1. ``high``.\n2. ``low``.\n"
    assert not _layer_text_matches_table(swapped, "``", layers, modules, "pkg")[0]


def test_no_module_imports_a_module_of_a_higher_layer():
    layers = read_layers()
    unplaced, upward = layer_violations(import_graph(), layers)
    assert not unplaced, f"modules in no layer of minigrad._LAYERS: {unplaced}"
    assert not upward, "module-level imports up the layers:\n" + _describe(upward, layers)


def test_function_level_imports_go_up_only_where_listed():
    layers = read_layers()
    upward = layer_violations(import_graph(reader=function_imports_of), layers)[1]
    unlisted = [pair for pair in upward if pair not in LAZY_UPWARD]
    assert not unlisted, ("function-level imports up the layers (remove them, or list them in "
                          "LAZY_UPWARD with the reason):\n" + _describe(unlisted, layers))
    stale = sorted(set(LAZY_UPWARD) - set(upward))
    assert not stale, f"LAZY_UPWARD lists imports the package does not make: {stale}"


def test_import_module_of_a_computed_name_only_in_a_package_getattr():
    found = []
    for name, path in module_names().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module")
                        and not (isinstance(node.args[0], ast.Constant)
                                 and not node.args[0].value.startswith("minigrad"))):
                    found.append((name, function.name, path.name))
    assert found and all(f == "__getattr__" and p == "__init__.py" for _, f, p in found), found


def test_the_docstring_and_the_readme_write_out_the_layer_table():
    layers, modules = read_layers(), module_names()
    docstring = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text()))
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("\n## Layout\n"):]
    layout = layout[:layout.index("\n## ", 1)]
    for where, text, quote in (("the package docstring", docstring, "``"),
                               ("the README's Layout", layout, "`")):
        matches, named = _layer_text_matches_table(text, quote, layers, modules)
        assert matches, f"{where} names {named}, minigrad._LAYERS holds {layers}"


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
