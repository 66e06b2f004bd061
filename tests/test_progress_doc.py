"""docs/progress.md's event table names exactly the events the code emits.

The events are read from the code's call sites, not from a list kept by
hand: every ``emit(reporter, "<event>", ...)``, every
``operation(reporter, "<name>", ...)`` (which sends ``<name>.started`` and
``<name>.finished``), every ``<...>reporter.report("<event>", ...)`` and the
memory updater's ``self._report("<event>", ...)``, found by walking the AST
of every module under agentmem/. An event name that is not a string literal
at such a call fails the test (so nothing escapes the comparison), except
inside the dispatchers that forward a name they were given. The table rows
are ``| `event` | keys |``, one per event (the keys are compared with the
catalogue by tests/test_progress_events.py).
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "agentmem"
DOC = ROOT / "docs" / "progress.md"

_EVENT = re.compile(r"^[a-z_]+(\.[a-z_]+)*$")
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")
# Functions that forward an event name they were handed (their call sites are scanned).
_DISPATCHERS = {"emit", "operation", "_report"}


@dataclass
class Emitted:
    events: dict[str, list[str]] = field(default_factory=dict)  # event -> "file:line" sites
    unreadable: list[str] = field(default_factory=list)  # call sites whose name is not literal


def _callee(call: ast.Call) -> tuple[str, str]:
    """(function name, source of the object it is called on, or "")."""
    if isinstance(call.func, ast.Name):
        return call.func.id, ""
    if isinstance(call.func, ast.Attribute):
        return call.func.attr, ast.unparse(call.func.value)
    return "", ""


def _event_argument(call: ast.Call) -> tuple[int, str] | None:
    """Which argument names the event at this call, and how to expand it; None: not an emitter."""
    name, receiver = _callee(call)
    if name == "emit":
        return 1, "event"
    if name == "operation":
        return 1, "operation"
    if name == "_report" and receiver == "self":
        return 0, "event"
    if name == "report" and receiver.lower().endswith("reporter"):
        return 0, "event"
    return None


@functools.cache
def emitted_events() -> Emitted:
    found = Emitted()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_events.py":  # defines emit/operation; emits nothing of its own
            continue
        text = path.read_text(encoding="utf-8")
        if not any(word in text for word in ("emit(", "operation(", "report(")):
            continue
        tree = ast.parse(text, filename=str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or (how := _event_argument(node)) is None:
                continue
            index, kind = how
            site = f"{path.relative_to(ROOT)}:{node.lineno}"
            arg = node.args[index] if len(node.args) > index else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                if not _EVENT.match(arg.value):
                    continue  # a problem reporter's message, not a progress event
                names = (
                    [f"{arg.value}.started", f"{arg.value}.finished"]
                    if kind == "operation"
                    else [arg.value]
                )
                for event in names:
                    found.events.setdefault(event, []).append(site)
                continue
            scope = parents.get(node)
            while scope is not None and not isinstance(
                scope, ast.FunctionDef | ast.AsyncFunctionDef
            ):
                scope = parents.get(scope)
            if scope is None or scope.name not in _DISPATCHERS:
                found.unreadable.append(site)
    return found


def documented_events() -> list[str]:
    return [
        m.group(1)
        for line in DOC.read_text(encoding="utf-8").splitlines()
        if (m := _ROW.match(line)) and _EVENT.match(m.group(1))
    ]


def test_every_emit_site_names_its_event_literally() -> None:
    unreadable = emitted_events().unreadable
    assert not unreadable, (
        "progress events must be named by a string literal at the call, so docs/progress.md "
        f"can be checked against them: {unreadable}"
    )


def test_the_doc_table_and_the_code_name_the_same_events() -> None:
    emitted = emitted_events().events
    documented = documented_events()
    # Guards against a parser that silently finds nothing on either side.
    assert len(emitted) >= 10 and {"context.trim", "restore.started"} <= set(emitted)
    assert len(documented) >= 10
    assert len(documented) == len(set(documented)), "an event has two rows in docs/progress.md"
    missing = {e: emitted[e] for e in sorted(set(emitted) - set(documented))}
    stale = sorted(set(documented) - set(emitted))
    assert not missing and not stale, (
        f"emitted but not in docs/progress.md's table: {missing}; "
        f"in the table but never emitted: {stale}"
    )


def test_the_collector_reads_each_kind_of_call_site() -> None:
    """The AST rules on a small module: each emitter form counts, a message does not."""
    source = (
        "def f(reporter, self):\n"
        "    emit(reporter, 'a.one', {})\n"
        "    with operation(reporter, 'b', x=1):\n"
        "        pass\n"
        "    self._wiring.reporter.report('c.two', {})\n"
        "    self._report('d_three', None)\n"
        "    self._problems.report('a message about a bad file')\n"
        "    emit(reporter, name, {})\n"
    )
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    kinds = [_event_argument(c) for c in calls]
    literal = [
        c.args[k[0]].value
        for c, k in zip(calls, kinds, strict=True)
        if k and isinstance(c.args[k[0]], ast.Constant)
    ]
    assert sorted(literal) == ["a.one", "b", "c.two", "d_three"]
    assert sum(k is not None for k in kinds) == 5  # the non-literal emit is an emitter too
