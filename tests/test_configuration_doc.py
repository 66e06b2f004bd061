"""docs/configuration.md against the code: defaults, environment variables, extras.

Each table of the page preceded by ``<!-- defaults: dotted.name -->`` lists the
arguments (or fields) of that object with their defaults; it must name every
one of them, and each default must equal the code's. The environment table must
name every variable the package reads, and the extras table every extra of
pyproject.toml. A new knob, a changed default or a new extra fails here until
the page says it.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import agentmem

REPO = Path(__file__).resolve().parent.parent
PAGE = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
REQUIRED = object()


def _tables() -> dict[str, list[tuple[str, str]]]:
    """``marker -> [(first cell, second cell)]`` for each table after an HTML-comment marker."""
    out: dict[str, list[tuple[str, str]]] = {}
    current: str | None = None
    for line in PAGE.splitlines():
        marker = re.fullmatch(r"<!-- (.+?) -->", line.strip())
        if marker:
            current = marker.group(1)
            out[current] = []
        elif current is not None and line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set(cells[0]) <= {"-", " "} or not cells[0].startswith("`"):
                continue  # the rule, or the header
            out[current].append((cells[0].strip("`"), cells[1]))
        elif current is not None and out[current] and not line.startswith("|"):
            current = None  # the table ended
    return out


TABLES = _tables()
DEFAULTS = {k.removeprefix("defaults: "): v for k, v in TABLES.items() if k.startswith("defaults:")}


def _resolve(dotted: str) -> Any:
    """``agentmem.semantic.Mem0Client`` or ``agentmem.Memory.session``: the object named."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(dotted)


def _code_defaults(obj: Any) -> dict[str, Any]:
    """Every argument (or field) of ``obj`` and its default (:data:`REQUIRED` when none)."""
    if isinstance(obj, type) and issubclass(obj, BaseModel):
        return {
            name: REQUIRED if field.is_required() else field.default
            for name, field in obj.model_fields.items()
        }
    if dataclasses.is_dataclass(obj):
        return {
            f.name: REQUIRED if f.default is dataclasses.MISSING else f.default
            for f in dataclasses.fields(obj)
        }
    params = inspect.signature(obj).parameters.values()
    return {
        p.name: REQUIRED if p.default is inspect.Parameter.empty else p.default
        for p in params
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def _doc_default(cell: str) -> Any:
    """A table's default cell: ``required``, a Python literal, or a dotted name."""
    if cell == "required":
        return REQUIRED
    text = cell.strip("`")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return _resolve(text)


def test_the_page_was_parsed() -> None:
    # Guards the parser: no tables would make every check pass.
    assert {"agentmem.Memory", "agentmem.Memory.session", "agentmem.ContextSettings"} <= set(
        DEFAULTS
    )
    assert dict(DEFAULTS["agentmem.Memory"])["root"] == '`".agentmem"`'
    assert "environment" in TABLES and "extras" in TABLES


@pytest.mark.parametrize("dotted", sorted(DEFAULTS))
def test_documented_defaults_are_the_codes(dotted: str) -> None:
    code = _code_defaults(_resolve(dotted))
    documented = {name: _doc_default(cell) for name, cell in DEFAULTS[dotted]}
    assert list(documented) == list(code), f"{dotted}: arguments differ from the code's, in order"
    for name, value in documented.items():
        said = f"{dotted}({name}=...): page says {value!r}, code {code[name]!r}"
        assert value == code[name], said


def _is_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _name(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _variables_read() -> set[str]:
    """Environment variables the package reads: ``os.environ[...]``, ``.get(...)``,
    ``... in os.environ``, ``os.getenv(...)``, and module constants named ``*_ENV``."""
    found: set[str | None] = set()
    for path in Path(agentmem.__file__).parent.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if not any(word in text for word in ("environ", "getenv", "_ENV")):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Subscript) and _is_environ(node.value):
                found.add(_name(node.slice))
            elif isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
                func = node.func
                environ_get = func.attr == "get" and _is_environ(func.value)
                getenv = func.attr == "getenv" and ast.unparse(func.value) == "os"
                if environ_get or getenv:
                    found.add(_name(node.args[0]))
            elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
                found.add(_name(node.left))
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id.endswith("_ENV") for t in targets):
                    found.add(_name(node.value))
    return {name for name in found if name}


def test_every_environment_variable_read_is_documented() -> None:
    documented = {name for name, _ in TABLES["environment"]}
    read = _variables_read()
    assert "AGENTMEM_BACKEND" in read and "TIKTOKEN_CACHE_DIR" in read  # guards the patterns
    assert read - documented == set()


def test_every_extra_is_documented() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    assert {name for name, _ in TABLES["extras"]} == extras
