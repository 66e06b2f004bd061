"""How a recall reads a PostgreSQL store (agentmem.session_store.pg), against a real server.

* A recall's reads share one ``REPEATABLE READ READ ONLY`` transaction: one snapshot
  (a message committed while the recall runs is in none of its reads) and one
  ``BEGIN``/``COMMIT`` (:meth:`.pg.PgEngine.one_snapshot`).
* A write in the shared block ends the sharing (the reads after it see it); a read
  that fails ends it too (the reads after it still work).
* Lists of ids go as one array parameter: no statement of a recall carries more than
  psycopg's 50 parameters (beyond those it neither caches the statement's conversion
  nor parses it cheaply), whatever the number of matches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from agentmem.errors import StorageError
from agentmem.recall import DEFAULT_RANKING, recall
from agentmem.session_store import SessionStore

pytest.importorskip("psycopg", reason="pip install 'agentmem[postgres]'")

POSTINGS = dataclasses.replace(DEFAULT_RANKING, every_match=0)  # the top-k path at any size


@pytest.fixture
def store(pg_dsn: str) -> Iterator[SessionStore]:
    store = SessionStore.postgres(pg_dsn)
    try:
        for s in range(3):
            sid = store.create(name=f"s{s}").id
            store.writer(sid).on_append(
                [
                    {"role": "user" if i % 2 else "assistant", "content": f"zebra yak {s} {i}"}
                    for i in range(60)
                ]
            )
        yield store
    finally:
        store.close()


def test_a_recall_reads_one_snapshot(store: SessionStore, pg_dsn: str) -> None:
    other = SessionStore.postgres(pg_dsn)
    try:
        sid = other.create().id
        stats = store.recall_stats
        word = ""

        def stats_then_a_commit(terms: list[str]) -> Any:
            out = stats(terms)  # the recall's first read: its snapshot is taken
            other.writer(sid).on_append([{"role": "user", "content": f"the {word}"}])
            return out

        store.recall_stats = stats_then_a_commit  # type: ignore[method-assign]
        for word, ranking in (("quokka", DEFAULT_RANKING), ("wombat", POSTINGS)):
            # The message committed after the recall's first read is in none of its reads.
            assert recall(store, word, ranking=ranking) == []
        store.recall_stats = stats  # type: ignore[method-assign]
        for seq, word in enumerate(("quokka", "wombat")):
            assert [(h.session_id, h.index) for h in recall(store, word)] == [(sid, seq)]
    finally:
        other.close()


def _recalls(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """Recalls of many matches (the every-match and the postings paths, with and without
    filters): for each, the statements sent, as ``(statement, its parameters)``."""
    import psycopg

    sent: list[Any] = []
    execute = psycopg.Cursor.execute  # psycopg.Connection.execute calls it too

    def counted(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        sent.append((str(query), list(params or ())))
        return execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    sessions = [i.id for i in store.list()]
    asks: list[dict[str, Any]] = [
        {},
        {"roles": ["user"]},
        {"max_sessions": 2},
        {"exclude_session": sessions[0]},
        {"session_ids": sessions[:2]},
        {"max_results": 40},
    ]
    out = []
    for ranking in (DEFAULT_RANKING, POSTINGS):
        for ask in asks:
            sent.clear()
            assert recall(store, "zebra yak", ranking=ranking, **ask)
            out.append(list(sent))
    return out


def test_a_recall_is_one_transaction(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    for sent in _recalls(store, monkeypatch):
        begins = [q for q, _ in sent if q.startswith("BEGIN")]
        assert begins == ["BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"]


def test_no_statement_of_a_recall_has_many_parameters(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for sent in _recalls(store, monkeypatch):
        # 180 messages match: their ids went as arrays, not one placeholder each.
        assert max(len(params) for _, params in sent) <= 50


def test_a_write_or_a_failed_read_ends_the_shared_snapshot(store: SessionStore) -> None:
    sid = store.create().id
    with store.recall_snapshot():
        assert store.recall_stats(["quokka"]).docs == {}
        store.writer(sid).on_append([{"role": "user", "content": "the quokka"}])
        assert store.recall_stats(["quokka"]).docs == {"quokka": 1}  # the write is seen
    with store.recall_snapshot():
        assert store.recall_stats(["zebra"]).docs == {"zebra": 180}
        with pytest.raises(StorageError, match="no_such_table"), store._read("a bad read") as sql:
            sql.conn.execute("SELECT * FROM no_such_table")
        assert store.recall_stats(["zebra"]).docs == {"zebra": 180}  # a fresh transaction
    with store.recall_snapshot(), store.recall_snapshot():  # nested: the outer one's
        assert [h.index for h in recall(store, "quokka")] == [0]
