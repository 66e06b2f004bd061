"""Pin the module layout: imports flow one way, the codecs sit below messages, long modules say why.

Reads the source with :mod:`ast` (nothing is imported to build the graph),
so a cycle is reported as the modules it goes through, not as whatever
ImportError the import order happens to produce.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agentmem
import agentmem._codecs.anthropic
import agentmem.messages

PACKAGE = Path(agentmem.__file__).parent
LONG_MODULE_LINES = 800
NOTE = "Why this module is long"
NOTE_WITHIN_LINES = 40


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements run when the module is imported (not functions, not TYPE_CHECKING)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            if not _is_type_checking(stmt.test):
                out.extend(_import_time_statements(stmt.body))
            out.extend(_import_time_statements(stmt.orelse))
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                out.extend(_import_time_statements(block))
            for handler in stmt.handlers:
                out.extend(_import_time_statements(handler.body))
        else:
            out.append(stmt)
    return out


def _imports(name: str, path: Path) -> set[str]:
    """agentmem modules ``name`` imports at import time (with the packages they sit in)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for stmt in _import_time_statements(ast.parse(path.read_text(encoding="utf-8")).body):
        targets: list[str] = []
        if isinstance(stmt, ast.Import):
            targets = [alias.name for alias in stmt.names]
        elif isinstance(stmt, ast.ImportFrom):
            if stmt.level:
                base = package.rsplit(".", stmt.level - 1)[0] if stmt.level > 1 else package
                module = f"{base}.{stmt.module}" if stmt.module else base
            else:
                module = stmt.module or ""
            targets = [module]
            targets += [f"{module}.{alias.name}" for alias in stmt.names]
        for target in targets:
            while target in MODULES or target.startswith("agentmem."):
                # A module inside a package importing a sibling runs the package's
                # __init__ first, but that is the package's own wiring, not a layer above.
                if target in MODULES and target != "agentmem" and not name.startswith(target + "."):
                    found.add(target)
                target = target.rpartition(".")[0]
    found.discard(name)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _reachable(start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in GRAPH.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_graph_sees_known_edges() -> None:
    # Guards the parser itself: a graph with no edges would pass every check below.
    assert "agentmem._codecs.anthropic" in GRAPH["agentmem.messages"]
    assert "agentmem._codecs" in GRAPH["agentmem.messages"]
    assert "agentmem.messages" in GRAPH["agentmem.context.manager"]
    assert "agentmem._json" in GRAPH["agentmem._shape"]


def test_imports_have_no_cycle() -> None:
    # The root package re-exports every part; importing agentmem.x runs it first,
    # which is the usual package pattern and not a layering cycle. This is the graph
    # of import time; tests/test_import_graph.py checks every import, type-only too.
    for name in GRAPH:
        if name == "agentmem":
            continue
        assert name not in _reachable(name), f"{name} imports itself through {GRAPH[name]}"


def test_codecs_sit_below_messages() -> None:
    # messages.py validates and re-exports the codecs; a codec that reached back
    # up into messages (or any part) would make the two a cycle.
    allowed = {"agentmem._codecs", "agentmem._shape", "agentmem._json", "agentmem.errors"}
    codecs = [name for name in MODULES if name.startswith("agentmem._codecs")]
    assert "agentmem._codecs.anthropic" in codecs
    for name in [*codecs, "agentmem._shape"]:
        assert _reachable(name) <= allowed | set(codecs), name


def test_messages_reexports_the_codec() -> None:
    codec = agentmem._codecs.anthropic
    for name in codec.__all__:
        if not name.startswith("anthropic_"):  # the per-turn converters stay private
            assert name in agentmem.messages.__all__
            assert getattr(agentmem.messages, name) is getattr(codec, name)
    assert agentmem.to_anthropic is codec.to_anthropic
    assert agentmem.from_anthropic is agentmem.messages.from_anthropic


def test_long_modules_say_why_at_the_top() -> None:
    for name, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) <= LONG_MODULE_LINES:
            continue
        head = "\n".join(lines[:NOTE_WITHIN_LINES])
        assert NOTE in head, (
            f"{name} has {len(lines)} lines (> {LONG_MODULE_LINES}) and no "
            f"'{NOTE}: ...' in its first {NOTE_WITHIN_LINES} lines"
        )


def test_only_the_package_imports_the_facade() -> None:
    # DESIGN section 1: facade -> parts -> messages/tokens/_storage; no part imports the facade.
    # The facade is agentmem.memory (Memory) and agentmem.session (Session, which Memory makes).
    # The integrations (and the CLI) sit above the facade: they take a Memory. The doctor
    # sits beside it: it reads every store (and where the facade wires the time machine).
    # The package itself imports the facade on first use of agentmem.Memory (PEP 562),
    # not at import time, so nothing below the facade imports it when it is imported.
    above = (
        "agentmem.integrations",
        "agentmem.cli",
        "agentmem._cli",
        "agentmem.__main__",
        "agentmem.doctor",
    )
    importers = sorted(
        name
        for name, targets in GRAPH.items()
        if "agentmem.memory" in targets and not name.startswith(above)
    )
    assert importers == []
    importers = sorted(
        name
        for name, targets in GRAPH.items()
        if "agentmem.session" in targets and not name.startswith(above)
    )
    assert set(importers) <= {"agentmem", "agentmem.memory"}
    assert "agentmem.memory" in importers


def _private_names_imported(name: str, path: Path) -> list[str]:
    """``from agentmem.<public module> import _name`` statements in ``name`` (any depth)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        target = node.module
        public = target in MODULES and not any(p.startswith("_") for p in target.split(".")[1:])
        # One part (a module, or a package such as session_store/) shares its own names.
        inside = name.split(".")[:2] == target.split(".")[:2]
        for alias in node.names:
            if public and not inside and alias.name.startswith("_"):
                found.append(f"{name} imports {target}.{alias.name}")
    return found


def test_no_part_imports_another_parts_private_names() -> None:
    # DESIGN section 1: "A part never imports another part's private names."
    offenders = [f for name, path in MODULES.items() for f in _private_names_imported(name, path)]
    assert offenders == []
