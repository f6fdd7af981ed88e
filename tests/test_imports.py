"""The package's shape: no import circle between memq modules, no module over MAX_LINES lines, at most
MAX_LOOSE modules loose in memq/ itself, no private name borrowed from another module, and the old paths
of moved modules still importable (deprecated).

The import graph is read from the source with ``ast``: ``import memq.x``,
``from memq.x import y``, ``from . import x`` and ``from ..x import y``, at
module level and inside functions alike (a lazy import is still an edge).
Imports under ``if TYPE_CHECKING:`` count too: they never run, but a circle
in the annotations is still two modules that each need the other.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

from memq import MOVED_MODULES

PACKAGE = Path(__file__).resolve().parent.parent / "memq"
MAX_LINES = 450
MAX_LOOSE = 12  # .py files directly in memq/, __init__.py and __main__.py included


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _import_nodes(nodes):
    """Every import statement among ``nodes`` and inside them (functions, ``if TYPE_CHECKING:`` and all)."""
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        else:
            yield from _import_nodes(ast.iter_child_nodes(node))


def _source(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module a ``from ... import`` statement reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def borrowed_private_names(module: str, path: Path, is_package: bool, modules) -> list[str]:
    """``where: what`` for each private name ``module`` takes from another memq module: ``from x import _y``,
    or ``x._y`` where ``x`` names an imported memq module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out, module_aliases = [], set()
    for node in _import_nodes(tree.body):
        if isinstance(node, ast.Import):
            module_aliases |= {alias.asname or alias.name.partition(".")[0] for alias in node.names
                               if alias.name.partition(".")[0] == "memq"}
            continue
        source = _source(module, is_package, node)
        if source != "memq" and not source.startswith("memq.") or source == module:
            continue
        for alias in node.names:
            if f"{source}.{alias.name}" in modules:
                module_aliases.add(alias.asname or alias.name)
            elif _is_private(alias.name):
                out.append(f"{path.name}:{node.lineno}: from {source} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in module_aliases:
                out.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return out


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules) -> set[str]:
    """The memq modules an import statement loads (the nearest enclosing module of each name)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        prefix = _source(module, is_package, node)
        # ``from pkg import name``: ``pkg.name`` when it is a module, else ``pkg`` itself
        names = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix for alias in node.names]
    out = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for module, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[module] = set().union(*(_imported(module, is_package, n, modules) for n in _import_nodes(tree.body)))
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or None (depth-first search, sorted for a stable answer)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_reader_sees_relative_absolute_and_lazy_imports():
    graph = import_graph()
    assert "memq.evaluate.scoring" in graph["memq.evaluate.run"]  # from .scoring import ...
    assert "memq.datasets" in graph["memq.evaluate.run"]  # from .. import datasets
    assert "memq.errors" in graph["memq.plan.planner"]  # from memq.errors import ...
    assert "memq.plan.fewshot" in graph["memq.plan.planner"]  # imported inside make_planner
    assert "memq.benchmark.shape" in graph["memq.benchmark.values"]  # only under TYPE_CHECKING


def test_find_cycle_names_the_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_between_memq_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_module_is_over_the_line_limit():
    sizes = {str(p.relative_to(PACKAGE.parent)): len(p.read_text(encoding="utf-8").splitlines())
             for p in sorted(PACKAGE.rglob("*.py"))}
    over = {path: n for path, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: " + ", ".join(f"{p} ({n} lines)" for p, n in over.items())


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_a_moved_module_still_imports_from_its_old_path_with_a_deprecation_warning(old, monkeypatch):
    new = importlib.import_module(MOVED_MODULES[old])
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {MOVED_MODULES[old]}"):
        module = importlib.import_module(old)
    assert module is new  # one module object: a monkeypatch through either path patches both
    assert module.__spec__.name == MOVED_MODULES[old]  # the module keeps its own spec


def test_the_old_paths_point_at_modules_that_exist():
    modules = _modules()
    assert all(old not in modules and new in modules for old, new in MOVED_MODULES.items())


def test_the_private_name_check_sees_imports_and_attributes(tmp_path):
    code = tmp_path / "user.py"
    code.write_text("import memq.llm.base\nfrom memq.kg import check\nfrom .split import _flatten, flatten_group\n"
                    "def f():\n    return memq.llm.base._LOADED, check._keys_match, check.answer_key\n")
    modules = _modules()
    assert borrowed_private_names("memq.decompose.user", code, False, modules) == [
        "user.py:3: from memq.decompose.split import _flatten", "user.py:5: memq.llm.base._LOADED",
        "user.py:5: check._keys_match"]


def test_no_module_imports_another_modules_private_name():
    modules = _modules()
    borrowed = [hit for module, (path, is_package) in modules.items()
                for hit in borrowed_private_names(module, path, is_package, modules)]
    assert not borrowed, "private names borrowed across modules: " + "; ".join(borrowed)


def test_at_most_max_loose_modules_sit_directly_in_memq():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_LOOSE, f"{len(loose)} modules loose in memq/ (at most {MAX_LOOSE}): {', '.join(loose)}"
