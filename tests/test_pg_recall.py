"""The recall index on PostgreSQL (agentmem.session_store.pg_recall), against a real server.

* Migration ``0006_recall_postings`` indexes the messages a database of format 1 holds.
* The term counts stay bounded: appends insert count rows, folded every
  ``FOLD_EVERY`` messages, and every count stays exact (the full check).
* Several processes appending at once keep the counts exact (no lost update).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from pg import child_env

from agentmem._storage.postgres import PgDatabase, migrate
from agentmem.recall import recall
from agentmem.session_store import SessionStore
from agentmem.session_store.pg import PG_MIGRATIONS
from agentmem.session_store.pg_recall import FOLD_EVERY
from agentmem.session_store.records import FORMAT_NAME

pytest.importorskip("psycopg", reason="pip install 'agentmem[postgres]'")


def _count(store: SessionStore, table: str) -> int:
    with store._engine.read("count") as sql:
        return int(sql.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_the_migration_indexes_the_messages_already_stored(pg_dsn: str) -> None:
    db = PgDatabase(pg_dsn)
    before = [m for m in PG_MIGRATIONS if m.name != "0006_recall_postings"]
    migrate(db, format_name=FORMAT_NAME, format_version=1, migrations=before)
    with db.transaction("an earlier release's rows") as cur:
        cur.execute(
            "INSERT INTO sessions (id, name, created_at, updated_at) VALUES ('old', 'o', 1, 1)"
        )
        for seq, text in enumerate(["the zebra crossing", "a quartz clock"]):
            body = json.dumps({"role": "user", "content": text})
            cur.execute(
                "INSERT INTO messages (session_id, seq, role, body) VALUES ('old', ?, 'user', ?)",
                (seq, body),
            )
    db.close()
    store = SessionStore.postgres(pg_dsn)
    try:
        assert [(h.session_id, h.index) for h in recall(store, "quartz")] == [("old", 1)]
        assert store.check_recall_index(repair=False) == []
    finally:
        store.close()


def test_term_counts_are_folded_and_stay_exact(pg_dsn: str) -> None:
    store = SessionStore.postgres(pg_dsn)
    try:
        sid = store.create().id
        writer = store.writer(sid)
        for n in range(FOLD_EVERY * 2 // 10 + 1):  # batches of 10: past two folds
            writer.on_append(
                [{"role": "user", "content": f"zebra item {n} {i}"} for i in range(10)]
            )
            # Bounded: at most the count rows of the messages since the last fold.
            assert _count(store, "recall_counts") <= (FOLD_EVERY + 10) * 4
        assert _count(store, "recall_terms") > 0  # folded
        assert store.recall_stats(["zebra"]).docs == {"zebra": (FOLD_EVERY * 2 // 10 + 1) * 10}
        writer.on_rewrite(5, [])  # truncate: negative counts
        assert store.recall_stats(["zebra"]).docs == {"zebra": 5}
        assert store.check_recall_index(repair=False) == []
    finally:
        store.close()


_APPENDER = textwrap.dedent(
    """
    import sys
    from agentmem.session_store import SessionStore

    store = SessionStore.postgres(sys.argv[1])
    sid = store.create().id
    writer = store.writer(sid)
    for n in range(60):
        writer.on_append([{"role": "user", "content": f"shared words mango {n}"}])
    store.close()
    """
)


def test_processes_appending_at_once_keep_the_counts_exact(pg_dsn: str) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", _APPENDER, pg_dsn], env=child_env())
        for _ in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    store = SessionStore.postgres(pg_dsn)
    try:
        stats = store.recall_stats(["mango", "share"])
        assert stats.docs == {"mango": 240, "share": 240}
        assert stats.messages == 240
        assert store.check_recall_index(repair=False) == []
    finally:
        store.close()
