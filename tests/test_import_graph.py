"""The package's import graph, every import included: no cycle, no reach into private names.

DESIGN section 1: "No import cycles, type-only imports included", and "a part
never imports another part's private names". ``tests/test_layout.py`` checks
the graph Python builds when the package is imported; this module checks the
graph a reader (and a type checker) sees. Every module under ``agentmem/`` is
read with :mod:`ast` (nothing is imported), and every import counts, wherever
it stands: at the top, under ``if TYPE_CHECKING:``, inside a function, in a
``try``, or as ``importlib.import_module("agentmem...")`` with a literal name.

An edge goes from the importing module to the module it names:

* ``import agentmem.a.b`` and ``from agentmem.a.b import name``: to ``agentmem.a.b``;
* ``from agentmem.a import b`` where ``b`` is a submodule: to ``agentmem.a.b``
  (the name imported is the module, not something ``agentmem.a`` re-exports);
* a package's ``__init__`` is the package's node, so its re-exports are edges
  from the package (and ``from agentmem import Memory`` is an edge to the
  package, which imports every part).

The packages a dotted import runs on the way (``agentmem.a`` for
``agentmem.a.b``) are not edges: Python runs them first whoever imports.

A *part* is a top-level module or subpackage of ``agentmem`` (``session``,
``session_store``, ``_storage``, ``_json``...). A part may import its own
private names; from another part it imports only public names of public
modules. The shared helper modules ``agentmem._xxx`` are public to every part
(their own ``_names`` are not); a private module inside a subpackage
(``semantic/_schema.py``) belongs to that subpackage.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import agentmem

PACKAGE = Path(agentmem.__file__).parent
ROOT = "agentmem"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


@dataclass(frozen=True)
class Import:
    """One name an import statement brings in, resolved to the module that defines it."""

    source: str  # the importing module
    line: int
    module: str  # the agentmem module the edge goes to
    name: str | None  # the attribute imported from ``module`` (None: the module itself)


def _absolute(package: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = package
    if node.level > 1:
        base = base.rsplit(".", node.level - 1)[0]
    return f"{base}.{node.module}" if node.module else base


def _literal_import_module(node: ast.Call) -> str | None:
    """The name in ``importlib.import_module("...")`` when it is a literal."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called != "import_module" or not node.args:
        return None
    arg = node.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def _imports(source: str, text: str, *, package: str) -> Iterator[Import]:
    """Every agentmem import of module ``source`` (``text``), at any depth of its syntax tree.

    ``package`` is the package relative imports start from (``source`` itself
    for a package's ``__init__``).
    """
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == ROOT or alias.name.startswith(ROOT + "."):
                    yield Import(source, node.lineno, alias.name, None)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(package, node)
            if module != ROOT and not module.startswith(ROOT + "."):
                continue
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                if submodule in MODULES:
                    yield Import(source, node.lineno, submodule, None)
                else:
                    yield Import(source, node.lineno, module, alias.name)
        elif isinstance(node, ast.Call):
            name = _literal_import_module(node)
            if name is not None and (name == ROOT or name.startswith(ROOT + ".")):
                yield Import(source, node.lineno, name, None)


def _module_imports(source: str) -> Iterator[Import]:
    path = MODULES[source]
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    return _imports(source, path.read_text(encoding="utf-8"), package=package)


IMPORTS = [imp for source in MODULES for imp in _module_imports(source)]


def _graph(imports: list[Import]) -> dict[str, dict[str, int]]:
    """module -> {module it imports: line of the first such import}."""
    graph: dict[str, dict[str, int]] = {name: {} for name in MODULES}
    for imp in imports:
        if imp.module != imp.source:
            graph[imp.source].setdefault(imp.module, imp.line)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module.

    Tarjan's algorithm (iterative) finds the components; a breadth-first
    search inside each finds a shortest cycle through its first module, so
    the message names real edges in order.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    cycles = []
    for component in components:
        members = set(component)
        first = component[0]
        previous: dict[str, str] = {}
        queue = [first]
        found = None
        while queue and found is None:
            node = queue.pop(0)
            for child in sorted(graph[node]):
                if child == first:
                    found = node
                    break
                if child in members and child not in previous:
                    previous[child] = node
                    queue.append(child)
        assert found is not None
        path = [found]
        while path[-1] != first:
            path.append(previous[path[-1]])
        cycles.append([*reversed(path), first])
    return cycles


def _describe(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    steps = [f"{a} (line {graph[a][b]}) -> {b}" for a, b in itertools.pairwise(cycle)]
    return "\n    ".join(steps)


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _reaches_into(imp: Import) -> bool:
    """``imp`` names a private module or name that belongs to another part."""
    if _part(imp.module) == _part(imp.source):
        return False
    inside = imp.module.split(".")[2:]  # below the part: agentmem.<part>.<this>...
    if imp.name is not None:
        inside.append(imp.name)
    return any(_is_private(p) for p in inside)


# ------------------------------------------------------------------ the parser


SAMPLE = """
import importlib
from typing import TYPE_CHECKING

import agentmem.errors
from agentmem import messages, Memory
from agentmem.protocols import TokenCounter as Counter
from . import history
from .session_store import writer

if TYPE_CHECKING:
    from agentmem.ltm import LongTermMemory

def later():
    from agentmem.topics import TopicStore
    try:
        import agentmem.notes
    except ImportError:
        pass
    return importlib.import_module("agentmem.recall")
"""


def test_the_parser_sees_every_kind_of_import() -> None:
    # A graph without edges would pass every check below: pin each kind of import.
    found = {(i.module, i.name) for i in _imports("agentmem.sample", SAMPLE, package=ROOT)}
    assert found == {
        ("agentmem.errors", None),  # import agentmem.x
        ("agentmem.messages", None),  # from agentmem import <submodule>
        ("agentmem", "Memory"),  # from agentmem import <re-export>: the package
        ("agentmem.protocols", "TokenCounter"),  # from agentmem.x import Name as alias
        ("agentmem.history", None),  # relative, a submodule
        ("agentmem.session_store.writer", None),  # relative, a subpackage's submodule
        ("agentmem.ltm", "LongTermMemory"),  # under TYPE_CHECKING
        ("agentmem.topics", "TopicStore"),  # inside a function
        ("agentmem.notes", None),  # inside a try, inside a function
        ("agentmem.recall", None),  # importlib.import_module with a literal name
    }
    graph = _graph(IMPORTS)
    assert "agentmem.session" in graph["agentmem.memory"]
    assert "agentmem.memory" in graph["agentmem"]  # a package's re-exports are its edges
    for module in graph:
        assert set(graph[module]) <= set(MODULES), module  # every edge names a real module


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {
        "a": {"b": 1},
        "b": {"c": 2},
        "c": {"a": 3, "d": 4},
        "d": {},
        "e": {"f": 5},
        "f": {"e": 6},
    }
    assert _cycles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert _describe(["e", "f", "e"], graph) == "e (line 5) -> f\n    f (line 6) -> e"
    assert _cycles({"a": {"b": 1}, "b": {}}) == []


def test_private_rule() -> None:
    def imp(source: str, module: str, name: str | None = None) -> Import:
        return Import(source, 1, module, name)

    assert _reaches_into(imp("agentmem.session", "agentmem.memory", "_forget"))
    assert _reaches_into(imp("agentmem.session", "agentmem.memory_updater._settings", "X"))
    assert _reaches_into(imp("agentmem.ltm", "agentmem._json", "_private"))
    assert _reaches_into(imp("agentmem.memory", "agentmem", "_version"))
    assert not _reaches_into(imp("agentmem.ltm", "agentmem._json", "sanitize_text"))
    assert not _reaches_into(imp("agentmem.ltm", "agentmem._storage.files"))
    assert not _reaches_into(imp("agentmem.ltm", "agentmem", "__version__"))
    # inside one part (a subpackage) its private names are shared
    assert not _reaches_into(imp("agentmem.semantic.local", "agentmem.semantic._schema", "X"))
    assert not _reaches_into(imp("agentmem._storage.sqlite", "agentmem._storage.files", "_x"))


# ------------------------------------------------------------------ the package


def test_no_import_cycle_type_only_imports_included() -> None:
    graph = _graph(IMPORTS)
    cycles = _cycles(graph)
    message = "\n".join(f"  cycle:\n    {_describe(c, graph)}" for c in cycles)
    assert not cycles, f"{len(cycles)} import cycle(s) in agentmem:\n{message}"


def test_no_part_imports_another_parts_private_names() -> None:
    offenders = [
        f"{i.source} (line {i.line}) imports {i.module}{'.' + i.name if i.name else ''}"
        for i in IMPORTS
        if _reaches_into(i)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_cli_sits_on_top() -> None:
    # The inspection CLI (agentmem.cli, its commands in agentmem._cli) uses the facade and
    # the stores; nothing in the library may import it (``import agentmem`` never loads it).
    top = {"agentmem.cli", "agentmem.__main__"}
    cli = {m for m in MODULES if m == "agentmem._cli" or m.startswith("agentmem._cli.")}
    assert "agentmem._cli.sessions" in cli and "agentmem.cli" in MODULES
    graph = _graph(IMPORTS)
    assert "agentmem._cli.stores" in graph["agentmem.cli"]  # the check below sees real edges
    offenders = [
        f"{source} imports {target}"
        for source, targets in graph.items()
        if source not in top | cli
        for target in targets
        if target in top | cli
    ]
    assert not offenders, "\n".join(offenders)
