"""Recall on both backends: the same finds, filters and index maintenance on SQLite and on
PostgreSQL, and PostgreSQL's recall equal to SQLite's on the same random corpora.

The PostgreSQL cases need a server (tests/pg.py: without one they skip with one line).
"""

from __future__ import annotations

import dataclasses
import json
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import scaled

import agentmem
from agentmem.recall import Ranking, recall
from agentmem.session_store import SessionStore
from agentmem.session_store.pg_recall_text import indexed_text
from agentmem.testing import tool_call
from agentmem.tools import TOOL_NAME

MakeMemory = Callable[[], agentmem.Memory]


def pg_uri(dsn: str) -> str:
    """The ``postgresql://`` URI of a libpq keyword DSN (what ``Memory(backend=)`` takes)."""
    import psycopg

    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = {k: str(p[k]) for k in ("host", "port") if p.get(k)}
    return f"postgresql://{p.get('user') or ''}@/{p['dbname']}?{urllib.parse.urlencode(query)}"


@pytest.fixture(params=["sqlite", "postgresql"])
def make_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeMemory]:
    """Memories on one backend (each call: another root; on PostgreSQL the same database)."""
    backend = None
    if request.param == "postgresql":
        backend = pg_uri(request.getfixturevalue("pg_dsn"))
    made: list[agentmem.Memory] = []

    def make() -> agentmem.Memory:
        clock = iter(range(1_000, 10_000_000, 100))
        mem = agentmem.Memory(root=tmp_path / f"m{len(made)}", backend=backend, durability="normal")
        mem.sessions._now = lambda: float(next(clock))
        made.append(mem)
        return mem

    yield make
    for mem in made:
        mem.close()


def _fill(mem: agentmem.Memory) -> list[str]:
    ids = []
    for name, turns in [
        ("parquet", ["how do I read parquet files?", "use pandas.read_parquet", "thanks"]),
        ("weather", ["what is the weather like", "sunny, no parquet here", "ok"]),
        ("parquet again", ["read parquet files with polars", "pl.read_parquet works", "bye"]),
    ]:
        with mem.session(name=name) as s:
            for i, text in enumerate(turns):
                s.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
            ids.append(s.id)
    return ids


def _keys(hits: list[agentmem.RecallHit]) -> set[tuple[str, int]]:
    return {(h.session_id, h.index) for h in hits}


def test_recall_finds_and_filters_across_sessions(make_memory: MakeMemory) -> None:
    mem = make_memory()
    ids = _fill(mem)
    top = mem.recall("read parquet files")[0]
    assert (top.session_id, top.index) in {(ids[0], 0), (ids[2], 0)}
    assert top.next is not None and "read_parquet" in top.next
    every = _keys(mem.recall("parquet", max_results=50))
    assert {sid for sid, _ in every} == set(ids)
    assert {h.session_id for h in mem.recall("parquet", session_ids=[ids[1]])} == {ids[1]}
    assert ids[0] not in {h.session_id for h in mem.recall("parquet", exclude_session=ids[0])}
    roles = {h.role for h in mem.recall("parquet", roles=["assistant"], max_results=50)}
    assert roles == {"assistant"}
    assert {h.session_id for h in mem.recall("parquet", max_sessions=1)} == {ids[2]}
    info = [mem.sessions.info(i) for i in ids]
    late = {h.session_id for h in mem.recall("parquet", since=info[2].created_at, max_results=50)}
    assert late == {ids[2]}
    assert mem.recall("parquet", session_ids=[]) == []
    # The postings path (every store size on both backends past Ranking.every_match).
    postings = Ranking(every_match=0)
    assert _keys(recall(mem.sessions, "parquet", 50, 50, ranking=postings)) == every
    assert {h.session_id for h in recall(mem.sessions, "parquet", 1, ranking=postings)} == {ids[2]}
    assert mem.sessions.check_recall_index(repair=False) == []


def test_message_changes_update_recall(make_memory: MakeMemory) -> None:
    mem = make_memory()
    store = mem.sessions
    sid = store.create(name="edits").id
    writer = store.writer(sid)
    writer.on_append([{"role": "user", "content": f"zebra note {i}"} for i in range(6)])
    assert _keys(mem.recall("zebra", max_results=50)) == {(sid, i) for i in range(6)}
    writer.on_replace(2, {"role": "user", "content": "quartz instead"})
    assert _keys(mem.recall("zebra", max_results=50)) == {(sid, i) for i in (0, 1, 3, 4, 5)}
    assert _keys(mem.recall("quartz")) == {(sid, 2)}
    writer.on_rewrite(4, [{"role": "assistant", "content": "violin"}])  # truncate + append
    assert _keys(mem.recall("zebra", max_results=50)) == {(sid, i) for i in (0, 1, 3)}
    assert _keys(mem.recall("violin")) == {(sid, 4)}
    assert store.check_recall_index(repair=False) == []
    other = store.create(name="gone").id
    store.writer(other).on_append([{"role": "user", "content": "zebra elsewhere"}])
    assert (other, 0) in _keys(mem.recall("zebra", max_results=50))
    store.delete(other)
    assert other not in {h.session_id for h in mem.recall("zebra", max_results=50)}
    assert store.check_recall_index(repair=False) == []


def test_memory_echoes_are_not_indexed(make_memory: MakeMemory) -> None:
    """Index rules 2 on both backends: the memory tool's calls and results, injected
    messages and blocks, and the trim checkpoint are not recall hits."""
    mem = make_memory()
    sid = mem.sessions.create().id
    call = tool_call(TOOL_NAME, {"operation": "search", "query": "nebula"}, call_id="c1")
    mem.sessions.writer(sid).on_append(
        [
            {"role": "user", "content": "nebula <memory-context>nebula tulip</memory-context> ok"},
            call,
            {"role": "tool", "tool_call_id": "c1", "content": "nebula found"},
            {"role": "user", "content": "tulip", "system_injected": True},
            {"role": "user", "content": "# Session progress\nnebula"},
        ]
    )
    assert _keys(mem.recall("nebula", max_results=50)) == {(sid, 0)}
    assert mem.recall("tulip") == []
    assert mem.sessions.check_recall_index(repair=False) == []


def test_a_nul_character_in_a_message_is_indexed(
    make_memory: MakeMemory, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL's text cannot hold NUL: the message is still stored, and found by the
    words on both sides of it (SQLite's index keeps the text up to the NUL only)."""
    mem = make_memory()
    sid = mem.sessions.create().id
    mem.sessions.writer(sid).on_append([{"role": "user", "content": "mango\x00harbor"}])
    assert mem.sessions.load(sid).messages[0]["content"] == "mango\x00harbor"
    assert _keys(mem.recall("mango")) == {(sid, 0)}
    if request.node.callspec.params["make_memory"] == "postgresql":
        assert _keys(mem.recall("harbor")) == {(sid, 0)}
    assert mem.sessions.check_recall_index(repair=False) == []


def test_recall_sessions_tool(make_memory: MakeMemory) -> None:
    mem = make_memory()
    ids = _fill(mem)
    call = tool_call(TOOL_NAME, {"operation": "recall_sessions", "query": "polars"})
    reply = json.loads(mem.tools.handle(call["tool_calls"][0])["content"])
    assert reply["ok"] is True
    hits = reply["result"]["hits"]
    assert hits and hits[0]["session_id"] == ids[2]
    assert "polars" in hits[0]["preview"]


def test_damage_to_the_postings_is_found_and_repaired(make_memory: MakeMemory) -> None:
    """The full check (FTS5's integrity-check on SQLite, the postings' own check on
    PostgreSQL) finds a posting changed from outside; the repair rebuilds the index."""
    mem = make_memory()
    ids = _fill(mem)
    store = mem.sessions
    assert store.check_recall_index(repair=False) == []  # SQLite: the queue indexed
    with store._engine.write("damage") as sql:
        sql.conn.execute("DELETE FROM recall_postings WHERE term = ?", ("parquet",))
    problems = store.check_recall_index(repair=True)
    assert any("postings" in p for p in problems), problems
    assert store.check_recall_index(repair=False) == []
    assert {h.session_id for h in mem.recall("parquet", max_results=50)} == set(ids)
    assert store.recall_repairs


# ---------------------------------------------------------------- PostgreSQL == SQLite

_WORDS = ["zebra", "quartz", "violin", "mango", "harbor", "copper", "def_test", "running"]
_TEXT = st.lists(st.sampled_from([*_WORDS, "the", "run", "test", "<system-reminder>"]), max_size=8)
_MESSAGE = st.tuples(st.sampled_from(["user", "assistant", "tool"]), _TEXT.map(" ".join))
_CORPUS = st.lists(st.lists(_MESSAGE, min_size=1, max_size=6), min_size=1, max_size=4)
_QUERY = st.lists(st.sampled_from([*_WORDS, "the", "run"]), min_size=1, max_size=3).map(" ".join)
_RANKINGS = [Ranking(), Ranking(every_match=0), Ranking(candidates=1)]


def _stored(store: SessionStore, corpus: list[list[tuple[str, str]]]) -> None:
    for n, turns in enumerate(corpus):
        sid = store.create(session_id=f"s{n}", name=f"session {n}").id
        messages = [{"role": r, "content": t} for r, t in turns]
        for message in messages:
            if message["role"] == "tool":
                message["tool_call_id"] = "c0"
        store.writer(sid).on_append(messages)


def _answers(store: SessionStore, queries: list[str]) -> list[Any]:
    out = []
    for query in queries:
        for ranking in _RANKINGS:
            hits = recall(store, query, max_results=4, ranking=ranking)
            out.append([dataclasses.astuple(h) for h in hits])
            hits = recall(store, query, max_results=3, max_sessions=2, ranking=ranking)
            out.append([dataclasses.astuple(h) for h in hits])
    return out


@settings(
    max_examples=scaled(25),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(corpus=_CORPUS, queries=st.lists(_QUERY, min_size=1, max_size=3))
def test_postgresql_recall_equals_sqlite_recall(
    pg_dsn: str, corpus: list[list[tuple[str, str]]], queries: list[str]
) -> None:
    clock = iter(range(1_000, 10_000_000, 100))
    lite = SessionStore(None, clock=lambda: float(next(clock)))
    pg_clock = iter(range(1_000, 10_000_000, 100))
    pg = SessionStore.postgres(pg_dsn, clock=lambda: float(next(pg_clock)))
    try:
        for info in pg.list():  # the database is shared by the examples: start empty
            pg.delete(info.id)
        _stored(lite, corpus)
        _stored(pg, corpus)
        assert _answers(pg, queries) == _answers(lite, queries)
        words = ["zebra", "the", "run"]
        assert pg.recall_stats(words) == lite.recall_stats(words)
        assert pg.check_recall_index(repair=False) == []
    finally:
        lite.close()
        pg.close()


_CALL = {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": '{"q": 1}'}}


@pytest.mark.parametrize(
    "body",
    [
        {"role": "user", "content": "plain <thread_summary>x</thread_summary> after"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": None, "tool_calls": [_CALL]},
        {"role": "assistant", "content": "x <system-reminder>y", "tool_calls": [_CALL]},
        {"role": "user", "content": "  # SESSION PROGRESS\nnotes"},
        {"role": "user", "content": "k", "transient": "[]"},
        {"role": "user", "content": "k", "transient": "0"},
        {"role": "user", "content": "k", "transient": 0.0},
        {"role": "user", "content": "<context_recovery>never closed"},
        {"role": "tool", "tool_call_id": "c1", "name": TOOL_NAME, "content": "echo"},
    ],
)
def test_indexed_text_is_sqlites(body: dict[str, Any]) -> None:
    """PostgreSQL's indexed text (Python) equals SQLite's (the recall_source view), for
    the stored body."""
    store = SessionStore(None)
    sid = store.create().id
    store.writer(sid).on_append([body])
    assert store.check_recall_index(repair=False) == []  # the queue indexed
    with store._engine.read("text") as sql:
        role, raw = sql.conn.execute("SELECT role, body FROM messages").fetchone()
        (text,) = sql.conn.execute("SELECT text FROM recall_docs").fetchone()
    assert indexed_text(str(role), raw) == text
    store.close()
