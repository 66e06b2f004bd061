"""docs/layout.md against a real root, and every test the docs cite against the suite.

A root is built that uses every store (a session that trims, long-term memory,
a note, a topic, an item, semantic memory, a file edit and a shell command under
the time machine). Every file found under it must match a documented path, and
every path of the page's main table must be found; the tables of its SQLite
files, and of a PostgreSQL database when a server is available, must be the
page's lists exactly. The page cannot drift from the code without a test failing.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_documents import pg_uri

import agentmem
from agentmem.semantic import LocalMemoryClient, SemanticMemoryExtension
from agentmem.testing import tool_call

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
LAYOUT = DOCS / "layout.md"


# ---------------------------------------------------------------------- the page


def _sections(text: str) -> dict[str, list[str]]:
    """The page's lines under each heading (any level), by heading text."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("#"):
            current = line.lstrip("#").strip()
            out[current] = []
        else:
            out.setdefault(current, []).append(line)
    return out


def _first_cells(lines: list[str]) -> list[str]:
    """The backticked names in the first cell of each table row (header and rule skipped)."""
    names: list[str] = []
    for line in lines:
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        names += re.findall(r"`([^`]+)`", first)
    return names


SECTIONS = _sections(LAYOUT.read_text(encoding="utf-8"))
ALWAYS = _first_cells(SECTIONS["On disk (the embedded backend, the default)"])
OCCASIONAL = _first_cells(SECTIONS["Files that appear on occasion"])
SQLITE_TABLES = _first_cells(SECTIONS["Tables of the SQLite files"])
PG_TABLES = _first_cells(SECTIONS["In PostgreSQL"])


def _pattern(doc_path: str, session_ids: tuple[str, ...] = ()) -> re.Pattern[str]:
    """A documented path as a regex: ``<session id>`` is one of ``session_ids`` (so a
    lock file of some other store cannot pass for a session's), any other ``<...>``
    one path component or part of one."""

    def part(p: str) -> str:
        if p == "<session id>" and session_ids:
            return "(?:" + "|".join(map(re.escape, session_ids)) + ")"
        return "[^/]+" if p.startswith("<") else re.escape(p)

    body = "".join(part(p) for p in re.split(r"(<[^>]+>)", doc_path))
    if doc_path.startswith("<name>"):  # a file moved aside may sit in any directory
        body = "(?:.+/)?" + body
    return re.compile(body)


def _undocumented(found: set[str], documented: list[str], ids: tuple[str, ...] = ()) -> set[str]:
    patterns = [_pattern(p, ids) for p in documented]
    return {f for f in found if not any(p.fullmatch(f) for p in patterns)}


def _unfound(found: set[str], documented: list[str], ids: tuple[str, ...] = ()) -> set[str]:
    return {d for d in documented if not any(_pattern(d, ids).fullmatch(f) for f in found)}


def test_the_page_was_parsed() -> None:
    # Guards the parser: empty lists would make every check below pass.
    assert "sessions.sqlite" in ALWAYS and "ltm.json" in ALWAYS
    assert "snapshots/sessions/<session id>.guard" in OCCASIONAL
    assert "recall_docs" in SQLITE_TABLES and "memories" in SQLITE_TABLES
    assert "agentmem_migrations" in PG_TABLES and "semantic_memories" in PG_TABLES
    assert _pattern("memory/<key>.json").fullmatch("memory/deploy.json")
    assert not _pattern("memory/<key>.json").fullmatch("memory/a/b.json")
    moved = "memory/x.json.corrupt-20260101T000000Z"
    assert _pattern("<name>.corrupt-<timestamp>").fullmatch(moved)


# ---------------------------------------------------------------------- a real root


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


SESSION_IDS: list[str] = []
"""The ids of the sessions :func:`_use_every_store` made last."""


def _use_every_store(project: Path, backend: str | None) -> Iterator[set[str]]:
    """Use every store of a memory rooted in ``project``; yield the root's files at
    moments when transient files exist (inside a guard, with the databases open)."""
    root = project / ".agentmem"
    (project / "app.py").write_text("print('v1')\n")
    mem = agentmem.Memory(root=root, working_dir=project, backend=backend)
    SESSION_IDS.clear()
    try:
        mem.ltm.add_discovery("tests run with pytest -q", confidence=0.9)
        mem.notes.store("deploy", "use make deploy")
        mem.topics.write("testing", "# Testing\nrun pytest -q\n")
        mem.items.put(("users", "alice"), "prefs", {"theme": "dark"})
        ext = SemanticMemoryExtension(client=LocalMemoryClient(mem), user_id="alice", infer=False)
        with mem.session(name="layout", context_window=1500, extensions=[ext]) as s:
            SESSION_IDS.append(s.id)
            s.start_task("Change app.py to print v2; I prefer tabs.")
            s.time_machine.record_file_before_change(project / "app.py")
            (project / "app.py").write_text("print('v2')\n")
            with s.time_machine.guard():
                subprocess.run(["sh", "-c", "echo x > shell.txt"], cwd=project, check=True)
                yield _files(root)
            for i in range(12):  # enough tool rounds to trim a 1,500-token window
                call = tool_call("read_file", {"path": f"f{i}.py"})
                s.append(call)
                call_id = call["tool_calls"][0]["id"]
                s.append({"role": "tool", "tool_call_id": call_id, "content": "x " * 80})
                s.context()
            s.record_usage(100, 10)
            s.finish_task()
            yield _files(root)
        ext.recorder.close()
    finally:
        mem.close()
    yield _files(root)


def test_every_file_of_a_real_root_is_documented_and_every_row_is_found(tmp_path: Path) -> None:
    seen: set[str] = set()
    for listing in _use_every_store(tmp_path, None):
        seen |= listing
    root = tmp_path / ".agentmem"
    # Damage one note: it is moved aside, the occasional row that names such files.
    (root / "memory" / "deploy.json").write_text("{not json")
    with (
        agentmem.Memory(root=root, working_dir=tmp_path) as mem,
        pytest.raises(agentmem.CorruptStoreError),
    ):
        mem.notes.retrieve("deploy")
    seen |= _files(root)
    assert any(".corrupt-" in f for f in seen)
    assert any(f.endswith(".guard") for f in seen)
    ids = tuple(SESSION_IDS)
    assert _undocumented(seen, ALWAYS + OCCASIONAL, ids) == set()
    assert _unfound(seen, ALWAYS, ids) == set()


def _sqlite_tables(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def test_the_sqlite_tables_are_the_documented_ones(tmp_path: Path) -> None:
    for _ in _use_every_store(tmp_path, None):
        pass
    root = tmp_path / ".agentmem"
    found = _sqlite_tables(root / "sessions.sqlite") | _sqlite_tables(root / "semantic.sqlite")
    assert _undocumented(found, [t.replace("*", "<part>") for t in SQLITE_TABLES]) == set()
    assert _unfound(found, [t.replace("*", "<part>") for t in SQLITE_TABLES]) == set()


def test_the_postgres_tables_and_files_are_the_documented_ones(pg_dsn: str, tmp_path: Path) -> None:
    import psycopg

    seen: set[str] = set()
    for listing in _use_every_store(tmp_path, pg_uri(pg_dsn)):
        seen |= listing
    # On PostgreSQL the root keeps only what describes the local disk.
    assert _undocumented(seen, ALWAYS + OCCASIONAL, tuple(SESSION_IDS)) == set()
    assert {f.split("/")[0] for f in seen} == {"memory", "snapshots"}
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'agentmem'"
        ).fetchall()
    assert {r[0] for r in rows} == set(PG_TABLES)


# ---------------------------------------------------------------------- tests the docs cite


def _doc_pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


_DEFINED = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)


@functools.cache
def _test_names(path: Path) -> frozenset[str]:
    """Every function and class defined in a test file, methods included."""
    return frozenset(_DEFINED.findall(path.read_text(encoding="utf-8")))


def test_every_test_the_docs_cite_exists() -> None:
    every_name: set[str] = set()
    for path in (REPO / "tests").rglob("*.py"):
        every_name |= _test_names(path)
    cited = 0
    missing: list[str] = []
    for page in _doc_pages():
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(REPO)
        for ref in re.findall(r"tests/[\w/]+\.py(?:::\w+)*", text):
            cited += 1
            file, *names = ref.split("::")
            if not (REPO / file).is_file():
                missing.append(f"{where}: {ref} (no such file)")
            elif names and names[-1] not in _test_names(REPO / file):
                missing.append(f"{where}: {ref} (no such test)")
        for name in re.findall(r"`(test_\w+)`", text):
            cited += 1
            if name not in every_name and not (REPO / "tests" / f"{name}.py").is_file():
                missing.append(f"{where}: {name} (no such test)")
    assert cited > 50  # guards the patterns
    assert missing == []
