"""The recall index is derived data: damage to it is repaired from the messages, on open.

Each case damages the index of a closed store from outside (a dropped table, view,
trigger or FTS5 shadow table, every page of one of its objects overwritten, rows
deleted or altered, the queue emptied, the state row changed), then opens it again:
the same database opens (nothing moved aside), every message is still there, recall
finds every message, the rebuild is reported (``recall_repairs`` and the
``agentmem.storage`` logger), the file passes ``PRAGMA integrity_check``, and the next
open rebuilds nothing. Damage to the messages' own schema is still set aside.
"""

from __future__ import annotations

import logging
import random
import sqlite3
from pathlib import Path

import pytest

from agentmem.errors import CorruptStoreError
from agentmem.recall import Ranking, recall
from agentmem.session_store import SessionStore
from agentmem.session_store.recall_index import RECALL_BATCH, is_recall_object

WORDS = ["zebra", "quartz", "violin", "mango"]
# Every match is a candidate: the hits are then exactly the messages holding the word.
ALL = Ranking(candidates=10_000, common=1.0)
SESSIONS = 3
PER_SESSION = 150  # 450 messages: several pages per index table, and a non-empty queue


def _message(s: int, i: int) -> dict[str, object]:
    word = WORDS[(s + i) % len(WORDS)]
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"message {s}/{i} about the {word} " + "lorem " * (i % 40)}


def _build(path: Path) -> dict[str, list[dict[str, object]]]:
    written: dict[str, list[dict[str, object]]] = {}
    with SessionStore(path, durability="normal") as store:
        for s in range(SESSIONS):
            sid = store.create(session_id=f"s{s}", name=f"session {s}").id
            messages = [_message(s, i) for i in range(PER_SESSION)]
            store.writer(sid).on_append(messages)
            written[sid] = messages
    assert (SESSIONS * PER_SESSION) % RECALL_BATCH != 0  # some changes are still queued
    return written


def _expected(written: dict[str, list[dict[str, object]]], word: str) -> set[tuple[str, int]]:
    return {(sid, i) for sid, ms in written.items() for i, m in enumerate(ms) if word in str(m)}


def _recall_objects() -> list[tuple[str, str]]:
    with SessionStore(None) as store:
        conn = store._conn
        assert conn is not None
        rows = conn.execute("SELECT type, name FROM sqlite_master ORDER BY name").fetchall()
    return [(str(t), str(n)) for t, n in rows if is_recall_object(str(n))]


OBJECTS = _recall_objects()
SHADOWS = {"recall_fts_data", "recall_fts_idx", "recall_fts_docsize", "recall_fts_config"}
assert {name for _, name in OBJECTS} >= SHADOWS


def _drop(kind: str, name: str) -> list[str]:
    return [f'DROP {kind.upper()} "{name}"']


ROW_EDITS = {
    "delete index rows": ["DELETE FROM recall_docs WHERE docid % 3 = 0"],
    "alter index texts": ["UPDATE recall_docs SET text = 'tampered' WHERE docid % 2 = 0"],
    "alter index positions": ["UPDATE recall_docs SET seq = seq + 1000 WHERE docid % 5 = 0"],
    "insert a stray index row": [
        "INSERT INTO recall_docs (session_id, seq, role, text) VALUES ('s0', 9999, 'user', 'x')"
    ],
    "empty the queue": ["DELETE FROM recall_pending"],
    "delete from the FTS5 table": ["DELETE FROM recall_fts WHERE rowid % 4 = 0"],
    "FTS5 delete-all": ["INSERT INTO recall_fts (recall_fts) VALUES ('delete-all')"],
    "older index rules": ["UPDATE recall_state SET version = 1"],
    "state row deleted": ["DELETE FROM recall_state"],
}


def _edit(path: Path, statements: list[str]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def _corrupt_pages(path: Path, name: str, seed: int) -> None:
    """Overwrite every page of one schema object with random bytes (never page 1)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [
            int(r[0]) for r in conn.execute("SELECT pageno FROM dbstat WHERE name = ?", (name,))
        ]
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()
    pages = [p for p in pages if p != 1]
    assert pages, name
    rng = random.Random(seed)
    with open(path, "r+b") as handle:
        for page in pages:
            handle.seek((page - 1) * size)
            handle.write(rng.randbytes(size))


def _assert_repaired(
    path: Path,
    written: dict[str, list[dict[str, object]]],
    caplog: pytest.LogCaptureFixture,
    *,
    at_open: bool,
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="agentmem.storage"),
        SessionStore(path) as store,
    ):
        assert store.recovery is None
        if at_open:  # found by the open-time check, before any search
            assert store.recall_repairs
        for word in WORDS:
            found = {
                (h.session_id, h.index)
                for h in recall(store, word, max_results=10_000, ranking=ALL)
            }
            assert found == _expected(written, word), word
        for sid, messages in written.items():
            assert store.load(sid).messages == messages
        assert store.recall_repairs, "the rebuild was not reported"
        assert all("rebuilt from the messages" in r for r in store.recall_repairs)
        assert store.check_recall_index(repair=False) == []
    assert "rebuilt from the messages" in caplog.text
    assert not list(path.parent.glob("*.corrupt-*")), "the database was set aside"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    with SessionStore(path) as again:  # repaired once: the next open rebuilds nothing
        assert again.recovery is None and again.recall_repairs == []


@pytest.mark.parametrize(("kind", "name"), OBJECTS, ids=[n for _, n in OBJECTS])
def test_a_dropped_index_object_is_rebuilt_on_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str, name: str
) -> None:
    path = tmp_path / "sessions.sqlite"
    written = _build(path)
    _edit(path, _drop(kind, name))
    _assert_repaired(path, written, caplog, at_open=True)


@pytest.mark.parametrize("edit", list(ROW_EDITS), ids=list(ROW_EDITS))
def test_index_rows_changed_from_outside_are_rebuilt_on_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, edit: str
) -> None:
    path = tmp_path / "sessions.sqlite"
    written = _build(path)
    _edit(path, ROW_EDITS[edit])
    _assert_repaired(path, written, caplog, at_open=True)


CORRUPTIBLE = sorted(
    {"recall_docs", "recall_docs_by_message", "recall_pending", "recall_state"}
    | {"recall_postings", "recall_postings_by_impact", "recall_terms", "recall_unposted"}
    | SHADOWS
)


@pytest.mark.parametrize("name", CORRUPTIBLE)
def test_every_page_of_an_index_object_overwritten_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    path = tmp_path / "sessions.sqlite"
    written = _build(path)
    _corrupt_pages(path, name, seed=len(name))
    _assert_repaired(path, written, caplog, at_open=False)


def test_an_index_root_page_pointing_at_the_messages_never_frees_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A flipped root page can make an index table claim the messages' pages: dropping it
    would free them; it is removed from the schema instead and the file vacuumed."""
    path = tmp_path / "sessions.sqlite"
    written = _build(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET rootpage = ? WHERE name = 'recall_docs'", root)
    finally:
        conn.close()
    _assert_repaired(path, written, caplog, at_open=True)


def test_damage_to_the_messages_schema_is_still_set_aside(tmp_path: Path) -> None:
    """Only the index's own objects are rebuilt: a changed `messages` table is damage to
    the data, and the database is moved aside as before."""
    path = tmp_path / "sessions.sqlite"
    _build(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_master SET sql = replace(sql, 'body TEXT', 'bodz TEXT') "
            "WHERE name = 'messages'"
        )
    finally:
        conn.close()
    with SessionStore(path) as store:
        assert store.recovery is not None
        assert store.recall_repairs == []
    assert list(tmp_path.glob("sessions.sqlite.corrupt-*"))


def test_damaged_message_pages_are_not_hidden_by_the_index_check(tmp_path: Path) -> None:
    """The open-time check reads the messages' last pages; when they are unreadable the
    store still opens (as before) and loading the session reports the damage."""
    path = tmp_path / "sessions.sqlite"
    _build(path)
    _corrupt_pages(path, "messages", seed=3)
    with SessionStore(path) as store:
        assert store.recovery is None
        with pytest.raises(CorruptStoreError):
            store.load("s0")
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_a_seq_gap_is_not_index_damage(tmp_path: Path) -> None:
    """A gap left in a session's seq by damage (repaired when the session is loaded) is
    indexed like any change: the index matches the messages and nothing is rebuilt."""
    path = tmp_path / "sessions.sqlite"
    _build(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("UPDATE messages SET seq = seq + 1000 WHERE session_id = 's1' AND seq >= 100")
    finally:
        conn.close()
    for _ in range(2):
        with SessionStore(path) as store:
            assert store.recovery is None
            assert store.recall_repairs == []
            assert store.check_recall_index(repair=False) == []
