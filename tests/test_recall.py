"""Recall: the FTS5 index never drifts from the messages, and Memory.recall finds and filters.

The index is maintained by triggers in the same transaction as every message change;
these tests hold it to that: after kill -9 at random instants, against an independent
model of the writer's operations, after the format-3 migration of the golden stores,
and after damage done from outside (rebuilt from the messages and reported).
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import agentmem
from agentmem.errors import InvalidArgumentError
from agentmem.recall import Ranking, RecallHit, keywords, recall
from agentmem.session_store import FORMAT_VERSION, SessionStore
from agentmem.session_store.sql import RECALL_BATCH

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
CHILD = HERE / "_kill9_child.py"
WORDS = ["zebra", "quartz", "violin", "mango", "harbor", "copper", "nebula", "tulip"]
# Every candidate: the set of hits is then exactly the set of messages containing a word.
ALL = Ranking(candidates=10_000, common=1.0)


def _problems(store: SessionStore) -> list[str]:
    return store.check_recall_index(repair=False)


def _found(store: SessionStore, word: str) -> set[tuple[str, int]]:
    return {(h.session_id, h.index) for h in recall(store, word, max_results=10_000, ranking=ALL)}


# ---------------------------------------------------------------- the index vs a model


class RecallIndexMachine(RuleBasedStateMachine):
    """Writer operations against a model: session id -> list of (role, words)."""

    def __init__(self) -> None:
        super().__init__()
        self.store = SessionStore(None)
        self.model: dict[str, list[tuple[str, list[str]]]] = {}

    texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4)
    roles = st.sampled_from(["user", "assistant", "tool"])

    @staticmethod
    def _message(role: str, words: list[str]) -> dict[str, object]:
        if role == "tool":
            return {"role": "tool", "tool_call_id": "c1", "content": " ".join(words)}
        if role == "assistant" and words:
            # Tool-call arguments are indexed too.
            arguments = json.dumps({"q": " ".join(words)})
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "f", "arguments": arguments},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": role, "content": " ".join(words)}

    @staticmethod
    def _pick(data: st.DataObject, ids: list[str]) -> str:
        # By creation order (dicts keep it), not by the random ids, so runs replay.
        return ids[data.draw(st.integers(0, len(ids) - 1))]

    @rule()
    def create(self) -> None:
        self.model[self.store.create().id] = []

    @precondition(lambda self: self.model)
    @rule(data=st.data(), tail=st.lists(st.tuples(roles, texts), min_size=1, max_size=3))
    def append(self, data: st.DataObject, tail: list[tuple[str, list[str]]]) -> None:
        sid = self._pick(data, list(self.model))
        self.store.writer(sid).on_append([self._message(r, w) for r, w in tail])
        self.model[sid].extend(tail)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), tail=st.lists(st.tuples(roles, texts), min_size=20, max_size=70))
    def append_many(self, data: st.DataObject, tail: list[tuple[str, list[str]]]) -> None:
        # Long enough to cross RECALL_BATCH queued changes: the queue is then indexed inside
        # the appending statement (and, by the rewrite rule, inside a truncating one).
        self.append(data, tail)

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data(), role=roles, words=texts)
    def replace(self, data: st.DataObject, role: str, words: list[str]) -> None:
        sid = self._pick(data, [s for s, m in self.model.items() if m])
        index = data.draw(st.integers(0, len(self.model[sid]) - 1))
        self.store.writer(sid).on_replace(index, self._message(role, words))
        self.model[sid][index] = (role, words)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), tail=st.lists(st.tuples(roles, texts), max_size=2))
    def rewrite(self, data: st.DataObject, tail: list[tuple[str, list[str]]]) -> None:
        sid = self._pick(data, list(self.model))
        start = data.draw(st.integers(0, len(self.model[sid])))
        self.store.writer(sid).on_rewrite(start, [self._message(r, w) for r, w in tail])
        self.model[sid][start:] = tail

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        sid = self._pick(data, list(self.model))
        assert self.store.delete(sid)
        del self.model[sid]

    @invariant()
    def recall_finds_exactly_the_messages_with_the_word(self) -> None:
        for word in WORDS:
            expected = {
                (sid, i)
                for sid, messages in self.model.items()
                for i, (_, words) in enumerate(messages)
                if word in words
            }
            assert _found(self.store, word) == expected, word

    @invariant()
    def roles_filter(self) -> None:
        hits = recall(self.store, " ".join(WORDS), max_results=10_000, roles=["tool"], ranking=ALL)
        assert {(h.session_id, h.index) for h in hits} == {
            (sid, i)
            for sid, messages in self.model.items()
            for i, (role, words) in enumerate(messages)
            if role == "tool" and words
        }

    def teardown(self) -> None:
        assert _problems(self.store) == []
        self.store.close()


RecallIndexMachine.TestCase.settings = settings(
    settings.default, max_examples=min(40, settings.default.max_examples), stateful_step_count=20
)
TestRecallIndexMachine = RecallIndexMachine.TestCase


def _count(store: SessionStore, table: str) -> int:
    conn = store._conn
    assert conn is not None
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_changes_are_queued_and_indexed_in_batches(tmp_path: Path) -> None:
    """An append queues its message in its own transaction; every RECALL_BATCH-th change
    indexes the queue in that same statement; a search indexes what is still queued."""
    store = SessionStore(tmp_path / "s.sqlite", durability="normal")
    sid = store.create().id
    writer = store.writer(sid)
    for i in range(RECALL_BATCH - 1):
        writer.on_append([{"role": "user", "content": f"zebra {i}"}])
    assert _count(store, "recall_pending") == RECALL_BATCH - 1
    assert _count(store, "recall_docs") == 0
    writer.on_append([{"role": "user", "content": "zebra last"}])
    assert _count(store, "recall_pending") == 0
    assert _count(store, "recall_docs") == RECALL_BATCH
    writer.on_replace(3, {"role": "assistant", "content": "quartz"})
    writer.on_append([{"role": "user", "content": "quartz too"}])
    assert _count(store, "recall_pending") == 2
    assert _found(store, "quartz") == {(sid, 3), (sid, RECALL_BATCH)}
    assert _found(store, "zebra") == {(sid, i) for i in range(RECALL_BATCH) if i != 3}
    assert _count(store, "recall_pending") == 0
    assert _count(store, "recall_docs") == RECALL_BATCH + 1
    store.close()
    # What is queued when the store closes is indexed by the next search.
    with SessionStore(tmp_path / "s.sqlite") as again:
        again.writer(sid).on_rewrite(RECALL_BATCH, [{"role": "user", "content": "violin"}])
        assert _count(again, "recall_pending") == 2  # the delete and the insert
    with SessionStore(tmp_path / "s.sqlite") as again:
        assert _found(again, "violin") == {(sid, RECALL_BATCH)}
        assert _found(again, "quartz") == {(sid, 3)}
        assert _problems(again) == []


# ---------------------------------------------------------------- kill -9


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
def test_kill9_never_lets_the_index_drift(tmp_path: Path) -> None:
    """Random kills during churn (and during the format-3 migration of a v2 store)."""
    db = tmp_path / "sessions.sqlite"
    shutil.copy(GOLDEN / "sessions-v2.sqlite", db)
    rng = random.Random(7)
    for run in range(6):
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), "churn", str(db), str(run)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline() == b"start\n"
            if run % 3 != 0:  # else kill early, maybe inside open / the migration
                assert proc.stdout.readline() == b"ready\n"
            time.sleep(rng.uniform(0.0, 0.4) if run % 3 == 0 else rng.uniform(0.1, 0.6))
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")
        with SessionStore(db) as store:
            assert _problems(store) == [], f"run {run}"
            assert store.recall_repairs == []
            conn = store._conn
            assert conn is not None
            messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
            assert conn.execute("SELECT count(*) FROM recall_docs").fetchone()[0] == messages
            for word in ("zebra", "quartz"):
                assert _found(store, word) == {
                    (sid, seq)
                    for sid, seq, body in conn.execute("SELECT session_id, seq, body FROM messages")
                    if word in body
                }


# ---------------------------------------------------------------- migration and golden files


@pytest.mark.parametrize("name", [f"sessions-v{v}.sqlite" for v in range(1, FORMAT_VERSION + 1)])
def test_golden_stores_are_indexed_by_the_migration(tmp_path: Path, name: str) -> None:
    db = tmp_path / name
    shutil.copy(GOLDEN / name, db)
    with SessionStore(db) as store:
        assert _problems(store) == []
        record = store.load("golden-main")
        assert record.messages  # the golden session still opens
        hits = recall(store, "bug main.py", max_results=10)
        assert hits and all(h.session_id == "golden-main" for h in hits)
        assert {h.index for h in hits} >= {1}  # "Fix the bug in <main.py> & add a test."
        # Tool-call arguments are indexed: the read_file call names main.py.
        first = record.messages[hits[0].index]
        assert "main" in str(first).lower()
    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY name")]
        assert {"0003_recall_index", "0004_recall_index_v2"} <= set(names)
        version = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0]
        assert version == str(FORMAT_VERSION)
    finally:
        conn.close()


# ---------------------------------------------------------------- damage from outside


def _store_with(tmp_path: Path, texts: list[str]) -> tuple[SessionStore, str]:
    store = SessionStore(tmp_path / "s.sqlite", durability="normal")
    sid = store.create(name="s").id
    store.writer(sid).on_append([{"role": "user", "content": t} for t in texts])
    assert store.check_recall_index(repair=False) == []  # indexes the queued appends
    return store, sid


def test_drifted_index_is_rebuilt_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, sid = _store_with(tmp_path, ["alpha zebra", "beta quartz", "gamma zebra"])
    conn = store._conn
    assert conn is not None
    conn.execute("DROP TRIGGER messages_recall_ad")  # a hand edit that bypasses the index
    conn.execute("DELETE FROM messages WHERE seq = 2")
    conn.execute("UPDATE recall_docs SET text = 'stale' WHERE seq = 1")
    problems = store.check_recall_index(repair=False)
    assert any("no message" in p for p in problems)
    assert any("differ" in p for p in problems)
    with caplog.at_level(logging.WARNING, logger="agentmem.storage"):
        assert store.check_recall_index() == problems
    assert len(store.recall_repairs) == 1 and "rebuilt" in caplog.text
    assert store.check_recall_index(repair=False) == []
    assert _found(store, "zebra") == {(sid, 0)}
    assert _found(store, "quartz") == {(sid, 1)}
    store.close()
    # The rebuild re-created the same triggers: the schema fingerprint still matches.
    with SessionStore(tmp_path / "s.sqlite") as again:
        assert again.recovery is None
        assert again.check_recall_index(repair=False) == []
        assert _found(again, "zebra") == {(sid, 0)}


def test_corrupt_fts_index_is_rebuilt_on_search(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, sid = _store_with(tmp_path, [f"zebra number {i}" for i in range(50)])
    conn = store._conn
    assert conn is not None
    conn.execute("UPDATE recall_fts_data SET block = x'0000ffffffff' WHERE id > 10")
    # Queued, not yet indexed: the search's indexing of the queue meets the damage first.
    store.writer(sid).on_append([{"role": "user", "content": "zebra queued"}])
    with caplog.at_level(logging.WARNING, logger="agentmem.storage"):
        hits = recall(store, "zebra", max_results=100)
    assert len(hits) == 51
    assert store.recall_repairs and "rebuilt" in caplog.text
    assert store.check_recall_index(repair=False) == []
    store.close()


def test_silently_damaged_fts_index_is_found_by_the_check(tmp_path: Path) -> None:
    store, _ = _store_with(tmp_path, [f"zebra number {i}" for i in range(50)])
    conn = store._conn
    assert conn is not None
    # Zeroed pages: FTS5 answers (nothing) instead of failing; integrity-check sees it.
    conn.execute("UPDATE recall_fts_data SET block = zeroblob(length(block)) WHERE id > 10")
    assert store.check_recall_index() != []
    assert len(recall(store, "zebra", max_results=100)) == 50
    assert len(store.recall_repairs) == 1
    store.close()


# ---------------------------------------------------------------- Memory.recall


def _memory(tmp_path: Path) -> tuple[agentmem.Memory, list[str]]:
    clock = iter(range(1_000, 100_000, 100))
    mem = agentmem.Memory(root=tmp_path / "m", durability="normal")
    mem.sessions._now = lambda: float(next(clock))
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
    return mem, ids


def test_hits_carry_position_session_and_neighbours(tmp_path: Path) -> None:
    mem, ids = _memory(tmp_path)
    hits = mem.recall("read parquet files")
    assert isinstance(hits[0], RecallHit)
    top = hits[0]
    assert (top.session_id, top.index) in {(ids[0], 0), (ids[2], 0)}
    assert top.role == "user"
    assert "parquet" in top.preview
    assert top.session_name in {"parquet", "parquet again"}
    assert isinstance(top.session_date, datetime) and top.session_date.tzinfo == UTC
    assert top.previous is None and top.next is not None and "read_parquet" in top.next
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # Ties go to the newest session: the two sessions have the same words at index 0.
    same = mem.recall("parquet files", max_results=2)
    if same[0].score == same[1].score:
        assert same[0].session_id == ids[2]
    mem.close()


def test_filters(tmp_path: Path) -> None:
    mem, ids = _memory(tmp_path)
    every = {(h.session_id, h.index) for h in mem.recall("parquet", max_results=50)}
    assert {sid for sid, _ in every} == set(ids)
    assert {h.session_id for h in mem.recall("parquet", session_ids=[ids[1]])} == {ids[1]}
    assert ids[0] not in {h.session_id for h in mem.recall("parquet", exclude_session=ids[0])}
    assert {h.role for h in mem.recall("parquet", roles=["assistant"], max_results=50)} == {
        "assistant"
    }
    assert {h.session_id for h in mem.recall("parquet", max_sessions=1)} == {ids[2]}
    info = [mem.sessions.info(i) for i in ids]
    late = {h.session_id for h in mem.recall("parquet", since=info[2].created_at, max_results=50)}
    assert late == {ids[2]}
    early = {h.session_id for h in mem.recall("parquet", until=info[0].updated_at, max_results=50)}
    assert early == {ids[0]}
    assert mem.recall("parquet", session_ids=[]) == []
    # A query of stopwords only searches them rather than nothing.
    assert keywords("what is the") == []
    assert {h.session_id for h in mem.recall("what is the")} == {ids[1]}
    assert mem.recall("   ") == []
    mem.close()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"query": 3}, "query"),
        ({"query": "x", "max_results": 0}, "max_results"),
        ({"query": "x", "max_sessions": -1}, "max_sessions"),
        ({"query": "x", "session_ids": "abc"}, "session_ids"),
        ({"query": "x", "roles": [1]}, "roles"),
        ({"query": "x", "since": "yesterday"}, "since"),
        ({"query": "x", "until": float("nan")}, "until"),
        ({"query": "x", "exclude_session": 5}, "exclude_session"),
    ],
)
def test_bad_arguments_are_named(tmp_path: Path, kwargs: dict[str, object], field: str) -> None:
    mem, _ = _memory(tmp_path)
    with pytest.raises(InvalidArgumentError, match=field):
        mem.recall(**kwargs)  # type: ignore[arg-type]
    mem.close()


def test_a_word_in_every_message_is_still_found(tmp_path: Path) -> None:
    """The cut of very common keywords never leaves a query with no matching word."""
    store = SessionStore(tmp_path / "s.sqlite", durability="normal")
    sid = store.create().id
    texts = [f"parquet note {i}" for i in range(300)]
    store.writer(sid).on_append([{"role": "user", "content": t} for t in texts])
    # "parquet" is in every message, "absent" in none: parquet must still be searched.
    assert len(recall(store, "parquet absent", max_results=5)) == 5
    # With a rare word present, the common one leaves the query (speed) but ranks the same.
    store.writer(sid).on_append([{"role": "user", "content": "parquet zebra"}])
    assert recall(store, "parquet zebra", max_results=1)[0].index == 300
    small = SessionStore(None)
    one = small.create().id
    small.writer(one).on_append([{"role": "user", "content": "hello parquet"}])
    assert [h.index for h in recall(small, "parquet zzz")] == [0]
    store.close()
    small.close()


def test_query_syntax_is_never_interpreted(tmp_path: Path) -> None:
    mem, _ = _memory(tmp_path)
    for query in ['"parquet', "parquet AND NOT", "NEAR(parquet", "parquet*", "col:parquet", "-"]:
        hits = mem.recall(query)
        assert all("parquet" in h.preview for h in hits)
    mem.close()
