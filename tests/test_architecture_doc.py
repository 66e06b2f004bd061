"""docs/architecture.md's module list against the files on disk and the import graph.

The page's first ```text block lists every module and package of ``agentmem/``
top to bottom, each importing only what is listed below it. This module reads
that block and checks both halves of the claim, so the list cannot go stale:

* every file under ``agentmem/`` (each ``.py`` module, ``py.typed``) is listed
  exactly once, every package (a directory with an ``__init__.py``) has its
  ``name/`` line, and nothing listed is missing from disk;
* no import goes up the list. The edges are the ones
  ``tests/test_import_graph.py`` builds (every import: type-only ones, those
  inside functions, ``importlib.import_module`` with a literal name).

How the block is read:

* A line indented by fewer than 8 spaces is an *entry*: its first word names a
  file (``name.py``, ``py.typed``) or a package (``name/``), and its
  indentation is two spaces per package level. A line indented by 8 spaces or
  more continues the description of the entry above it.
* A package's lines follow its ``name/`` line, one level deeper, and its own
  module is its ``__init__.py`` line (what ``import agentmem.name`` runs and
  what ``from agentmem.name import X`` is an edge to); ``agentmem`` itself is
  the top level's ``__init__.py``.

How the order is read: a package's line stands for the whole package, members
included. An import from module A to module B is downward when, at the first
level where the entries holding them differ, A's comes first. So
``session/session.py`` may import ``session_store/writer.py`` because
``session/`` is above ``session_store/``, and ``session/session.py`` may
import ``session/usage.py`` because it is above it inside ``session/``; a
member importing its own package needs the ``__init__.py`` line below it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from test_import_graph import IMPORTS, MODULES, PACKAGE, ROOT, _graph

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "architecture.md"
CONTINUATION_INDENT = 8
ENTRY = re.compile(r"(?P<indent> *)(?P<name>[\w.]+/?)(?: +(?P<text>.*))?$")


@dataclass(frozen=True)
class Entry:
    """One line of the list: the file or package it names and where it stands."""

    path: str  # relative to agentmem/: "memory.py", "session/", "session/wiring.py"
    position: tuple[int, ...]  # its index at each level: (top-level index, member index...)
    line: int  # the line of the page


def module_list(page: str) -> str:
    """The page's first ```text block (the module list)."""
    match = re.search(r"^```text\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)
    assert match is not None, "no ```text block on the page"
    return match.group(1)


def parse(block: str) -> tuple[list[Entry], list[str]]:
    """The block's entries, and the problems found reading it."""
    entries: list[Entry] = []
    problems: list[str] = []
    packages: list[str] = []  # the packages the current line is inside, outermost first
    counters = [0]  # the next index at each open level
    for number, line in enumerate(block.splitlines(), start=1):
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= CONTINUATION_INDENT:
            continue
        match = ENTRY.match(line)
        if match is None or indent % 2:
            problems.append(f"line {number}: not an entry: {line!r}")
            continue
        depth = indent // 2
        if depth > len(packages):
            problems.append(f"line {number}: indented below no package: {line!r}")
            continue
        del packages[depth:]
        del counters[depth + 1 :]
        name = match["name"]
        path = "".join(packages) + name
        entries.append(Entry(path, (*[c - 1 for c in counters[:-1]], counters[-1]), number))
        counters[-1] += 1
        if name.endswith("/"):
            packages.append(name)
            counters.append(0)
    return entries, problems


def on_disk(package: Path) -> tuple[set[str], set[str]]:
    """The files (``.py`` and others, caches left out) and the packages under ``package``."""
    files = {
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    packages = {f.removesuffix("__init__.py") for f in files if f.endswith("/__init__.py")}
    return files, packages


def listing_problems(entries: list[Entry], files: set[str], packages: set[str]) -> list[str]:
    """Entries listed twice, missing from the list, or listed but not on disk."""
    problems = []
    seen: dict[str, int] = {}
    for entry in entries:
        if entry.path in seen:
            problems.append(f"{entry.path} listed twice (lines {seen[entry.path]}, {entry.line})")
        seen.setdefault(entry.path, entry.line)
    problems += [f"{p} is on disk but not listed" for p in sorted((files | packages) - set(seen))]
    problems += [f"{p} is listed but not on disk" for p in sorted(set(seen) - files - packages)]
    return problems


def module_file(module: str, packages: Collection[str]) -> str:
    """The listed file of a module name: ``agentmem.session`` -> ``session/__init__.py``."""
    relative = module.removeprefix(ROOT).removeprefix(".").replace(".", "/")
    if not relative:
        return "__init__.py"
    return f"{relative}/__init__.py" if f"{relative}/" in packages else f"{relative}.py"


def order_problems(
    entries: list[Entry], graph: Mapping[str, Mapping[str, int]], packages: Collection[str]
) -> list[str]:
    """Every import that goes up the list (or names a module the list leaves out)."""
    where = {entry.path: entry for entry in entries}
    problems = []
    for source, targets in sorted(graph.items()):
        importer = where.get(module_file(source, packages))
        for target, line in sorted(targets.items()):
            imported = where.get(module_file(target, packages))
            if importer is None or imported is None:
                continue  # listing_problems names it
            if not importer.position < imported.position:
                problems.append(
                    f"{importer.path} (line {line} of the module) imports {imported.path}, "
                    f"which the page lists above it (page lines {importer.line}, {imported.line})"
                )
    return problems


# ------------------------------------------------------------------ the checker

SAMPLE_FILES = {"__init__.py", "a.py", "p/__init__.py", "p/x.py", "p/y.py", "b.py", "py.typed"}
SAMPLE_GRAPH = {  # module -> {module it imports: line}
    "agentmem": {"agentmem.a": 1},
    "agentmem.a": {"agentmem.p": 1, "agentmem.b": 2},
    "agentmem.p": {"agentmem.p.x": 1},
    "agentmem.p.x": {"agentmem.p.y": 1, "agentmem.b": 2},
    "agentmem.p.y": {},
    "agentmem.b": {},
}
SAMPLE = """\
__init__.py   the package
a.py          a, over p and b
p/            a package
  __init__.py p's names
  x.py        x: uses y and b, with a description
                that goes on over two lines
  y.py        y
b.py          b
py.typed      marker
"""


def _check(block: str) -> list[str]:
    entries, problems = parse(block)
    packages = {"p/"}
    return (
        problems
        + listing_problems(entries, SAMPLE_FILES, packages)
        + order_problems(entries, SAMPLE_GRAPH, packages)
    )


def test_the_checker_reads_nesting_and_continuations() -> None:
    entries, problems = parse(SAMPLE)
    assert problems == []
    assert [(e.path, e.position) for e in entries] == [
        ("__init__.py", (0,)),
        ("a.py", (1,)),
        ("p/", (2,)),
        ("p/__init__.py", (2, 0)),
        ("p/x.py", (2, 1)),
        ("p/y.py", (2, 2)),
        ("b.py", (3,)),
        ("py.typed", (4,)),
    ]
    assert _check(SAMPLE) == []


def test_the_checker_finds_a_missing_a_doubled_and_an_unknown_line() -> None:
    missing = SAMPLE.replace("  y.py        y\n", "")
    assert _check(missing) == ["p/y.py is on disk but not listed"]
    doubled = SAMPLE.replace("b.py          b\n", "b.py          b\nb.py          b\n")
    assert _check(doubled) == ["b.py listed twice (lines 8, 9)"]
    unknown = SAMPLE + "c.py          gone\n"
    assert _check(unknown) == ["c.py is listed but not on disk"]


def test_the_checker_finds_an_import_that_goes_up() -> None:
    # within a package: x imports y, so y above x is wrong
    swapped = SAMPLE.replace("  y.py        y\n", "").replace("  x.py ", "  y.py y\n  x.py ")
    assert _check(swapped) == [
        "p/x.py (line 1 of the module) imports p/y.py, which the page lists above it "
        "(page lines 6, 5)"
    ]
    # across levels: p/x.py imports b.py, so b above the package p/ is wrong
    b_up = SAMPLE.replace("b.py          b\n", "").replace("a.py ", "b.py b\na.py ")
    assert "p/x.py (line 2 of the module) imports b.py" in "\n".join(_check(b_up))


# ------------------------------------------------------------------ the page


def _page_entries() -> list[Entry]:
    entries, problems = parse(module_list(PAGE.read_text(encoding="utf-8")))
    assert not problems, "\n".join(problems)
    return entries


def test_the_page_lists_every_module_and_package_once() -> None:
    files, packages = on_disk(PACKAGE)
    assert "py.typed" in files and "session/" in packages and "cli.py" in files
    problems = listing_problems(_page_entries(), files, packages)
    assert not problems, "docs/architecture.md's module list:\n" + "\n".join(problems)


def test_the_page_lists_each_module_above_what_it_imports() -> None:
    _, packages = on_disk(PACKAGE)
    graph = _graph(IMPORTS)
    assert len(graph) == len(MODULES) and "agentmem.session_store" in graph["agentmem.memory"]
    problems = order_problems(_page_entries(), graph, packages)
    assert not problems, "docs/architecture.md's module list:\n" + "\n".join(problems)
