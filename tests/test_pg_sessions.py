"""The sessions store on both engines: SQLite and PostgreSQL (a real server, tests/pg.py).

Every test here runs on both (``backend`` is parametrised), so the PostgreSQL store is
held to the SQLite store's behaviour: round trips of everything a session holds,
resume, listing order, errors for missing and deleted sessions, writes visible to
another store object once they return, session locks, and damaged rows quarantined
on load. The PostgreSQL-only guarantees (kill -9, races between processes, a server
crash-restart) are in tests/test_pg_crash.py.
"""

from __future__ import annotations

import gc
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentmem import MessageHistory
from agentmem.errors import (
    InvalidArgumentError,
    SessionNotFoundError,
    StorageError,
    StoreLockedError,
)
from agentmem.session_store import BillingRecord, SessionStore


@dataclass
class Backend:
    """One engine under test: how to open a store on the test's database, and raw SQL."""

    name: str
    open: Callable[..., SessionStore]
    raw: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
    dsn: str = ""


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    stores: list[SessionStore] = []

    def remember(store: SessionStore) -> SessionStore:
        stores.append(store)
        return store

    if request.param == "sqlite":
        path = tmp_path / "sessions.sqlite"

        def raw(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
            with sqlite3.connect(path) as conn:
                return conn.execute(sql, params).fetchall()

        yield Backend("sqlite", lambda **kw: remember(SessionStore(path, **kw)), raw)
    else:
        psycopg = pytest.importorskip("psycopg", reason="pip install 'agentmem[postgres]'")
        dsn = request.getfixturevalue("pg_dsn")

        def raw(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
            with psycopg.connect(dsn, options="-c search_path=agentmem") as conn:
                cur = conn.execute(sql.replace("?", "%s"), params)
                return cur.fetchall() if cur.description else []

        yield Backend(
            "postgresql", lambda **kw: remember(SessionStore.postgres(dsn, **kw)), raw, dsn
        )
    for store in stores:
        store.close()


def _clock(start: float = 1_000.0) -> Callable[[], float]:
    now = [start]

    def tick() -> float:
        now[0] += 1.0
        return now[0]

    return tick


def test_everything_a_session_holds_round_trips(backend: Backend) -> None:
    store = backend.open(clock=_clock())
    info = store.create(
        session_id="s-1",
        name="fix the parser: 50% done?",
        working_directory="/work/ünïcode",
        model="gpt-4o",
        context_window=128_000,
    )
    assert (info.id, info.name, info.message_count) == ("s-1", "fix the parser: 50% done?", 0)
    with store.lock("s-1"):
        writer = store.writer("s-1")
        history = MessageHistory(observer=writer)
        history.append({"role": "system", "content": "be brief"})
        history.append({"role": "user", "content": "what's 100% of ? \u2603 'quoted' \"x\""})
        history.extend([{"role": "assistant", "content": f"answer {i}"} for i in range(5)])
        history.truncate_from(5)  # a rewrite: drops answers 3 and 4
        history.append({"role": "user", "content": "again"})
        writer.on_replace(0, {"role": "system", "content": "be very brief"})
        writer.save_state({"window": {"start": 2}, "nested": [1, 2.5, None, "x"]})
        writer.add_billing(
            BillingRecord(
                at=12.5,
                kind="llm",
                model="gpt-4o",
                prompt_tokens=100,
                completion_tokens=20,
                cost_usd=0.0125,
                cached_prompt_tokens=60,
                cache_write_tokens=10,
            )
        )
        writer.add_billing(BillingRecord(at=13.0, kind="embedding", prompt_tokens=7))
        writer.append_thread("yarn-1", [{"role": "user", "content": "side"}])
        writer.save_state_and_threads(
            {"window": {"start": 3}},
            {"yarn-1": [{"role": "assistant", "content": "side answer"}], "yarn-2": []},
        )
        writer.rename("renamed")
    record = backend.open().load("s-1")  # another store object: what was committed
    expected = [
        {"role": "system", "content": "be very brief"},
        {"role": "user", "content": "what's 100% of ? \u2603 'quoted' \"x\""},
        {"role": "assistant", "content": "answer 0"},
        {"role": "assistant", "content": "answer 1"},
        {"role": "assistant", "content": "answer 2"},
        {"role": "user", "content": "again"},
    ]
    assert record.messages == expected
    assert record.state == {"window": {"start": 3}}
    assert [b.kind for b in record.billing] == ["llm", "embedding"]
    assert record.billing[0] == BillingRecord(
        at=12.5,
        kind="llm",
        model="gpt-4o",
        prompt_tokens=100,
        completion_tokens=20,
        cost_usd=0.0125,
        cached_prompt_tokens=60,
        cache_write_tokens=10,
    )
    assert record.threads == {
        "yarn-1": [
            {"role": "user", "content": "side"},
            {"role": "assistant", "content": "side answer"},
        ]
    }
    assert record.info.name == "renamed"
    assert record.info.working_directory == "/work/ünïcode"
    assert (record.info.model, record.info.context_window) == ("gpt-4o", 128_000)
    assert record.info.message_count == 6
    assert record.info.updated_at > record.info.created_at
    assert not (record.quarantined or record.repaired or record.state_quarantined)


def test_a_resumed_session_continues_where_it_stopped(backend: Backend) -> None:
    first = backend.open()
    sid = first.create().id
    with first.lock(sid):
        MessageHistory(observer=first.writer(sid)).extend(
            [{"role": "user", "content": f"m{i}"} for i in range(3)]
        )
    first.close()
    second = backend.open()
    with second.lock(sid):
        record = second.load(sid)
        history = MessageHistory(record.messages, observer=second.writer(sid))
        history.append({"role": "user", "content": "m3"})
    assert [m["content"] for m in backend.open().load(sid).messages] == ["m0", "m1", "m2", "m3"]


def test_list_is_most_recent_first_and_limited(backend: Backend) -> None:
    store = backend.open(clock=lambda: 50.0)  # one instant: creation order breaks the tie
    for sid in ("a", "b", "c"):
        store.create(session_id=sid)
    assert [i.id for i in store.list()] == ["c", "b", "a"]
    assert [i.id for i in store.list(limit=2)] == ["c", "b"]
    later = backend.open(clock=lambda: 60.0)
    with later.lock("a"):
        later.writer("a").save_state({"x": 1})
    assert [i.id for i in store.list()] == ["a", "c", "b"]
    assert store.list(limit=0) == []


def test_missing_taken_and_deleted_sessions(backend: Backend) -> None:
    store = backend.open()
    store.create(session_id="taken")
    with pytest.raises(InvalidArgumentError, match="already exists"):
        store.create(session_id="taken")
    with pytest.raises(SessionNotFoundError):
        store.info("nope")
    with pytest.raises(SessionNotFoundError):
        store.load("nope")
    with pytest.raises(SessionNotFoundError):
        store.rename("nope", "x")
    assert store.delete("nope") is False
    assert not store.exists("nope")

    writer = store.writer("taken")
    history = MessageHistory(observer=writer)
    history.append({"role": "user", "content": "kept until the delete"})
    assert store.delete("taken") is True
    assert not store.exists("taken")
    for write in (
        lambda: history.append({"role": "user", "content": "after"}),
        lambda: writer.on_append([{"role": "user", "content": "after"}]),
        lambda: writer.save_state({"a": 1}),
        lambda: writer.add_billing(BillingRecord(at=1.0, kind="llm")),
        lambda: writer.append_thread("t", [{"role": "user", "content": "x"}]),
    ):
        with pytest.raises(SessionNotFoundError):
            write()
    assert backend.raw("SELECT count(*) FROM messages", ()) == [(0,)]
    assert backend.raw("SELECT count(*) FROM billing", ()) == [(0,)]


def test_session_locks_are_exclusive_across_store_objects(backend: Backend) -> None:
    mine, theirs = backend.open(), backend.open()
    sid = mine.create().id
    lock = mine.lock(sid)
    with pytest.raises(StoreLockedError, match=sid):
        theirs.lock(sid)
    with pytest.raises(StoreLockedError):
        mine.lock(sid)  # a second object in the same process too
    with pytest.raises(StoreLockedError):
        theirs.delete(sid)
    assert theirs.exists(sid)
    lock.release()
    lock.release()  # idempotent
    with theirs.lock(sid):
        pass
    assert theirs.delete(sid) is True


def test_a_damaged_row_is_quarantined_and_the_rest_renumbered(backend: Backend) -> None:
    store = backend.open()
    sid = store.create().id
    MessageHistory(observer=store.writer(sid)).extend(
        [{"role": "user", "content": f"m{i}"} for i in range(4)]
    )
    backend.raw("UPDATE messages SET body = '{not json' WHERE session_id = ? AND seq = 1", (sid,))
    record = backend.open().load(sid)
    assert [m["content"] for m in record.messages] == ["m0", "m2", "m3"]
    assert record.quarantined == [1]
    assert backend.raw("SELECT seq FROM messages WHERE session_id = ? ORDER BY seq", (sid,)) == [
        (0,),
        (1,),
        (2,),
    ]
    [(body, reason)] = backend.raw("SELECT body, reason FROM quarantine", ())
    assert bytes(body) == b"{not json"
    assert "not valid JSON" in reason
    again = backend.open().load(sid)
    assert again.messages == record.messages
    assert not again.quarantined and not again.repaired


def test_a_closed_store_refuses_every_call(backend: Backend) -> None:
    store = backend.open()
    sid = store.create().id
    writer = store.writer(sid)
    store.close()
    store.close()  # idempotent
    assert store.closed
    with pytest.raises(StorageError, match="closed"):
        store.list()
    with pytest.raises(StorageError, match="closed"):
        writer.on_append([{"role": "user", "content": "x"}])


def test_text_postgresql_cannot_store_is_a_clear_error(backend: Backend) -> None:
    """PostgreSQL's text cannot hold NUL (SQLite's can): bad input, nothing written."""
    store = backend.open()
    if backend.name == "sqlite":
        assert store.create(session_id="n", name="a\x00b").name == "a\x00b"
        return
    with pytest.raises(InvalidArgumentError, match="NUL"):
        store.create(session_id="n", name="a\x00b")
    assert not store.exists("n")
    sid = store.create().id
    with pytest.raises(InvalidArgumentError, match="NUL"):
        store.writer(sid).append_thread("t\x00", [{"role": "user", "content": "x"}])
    assert store.load(sid).threads == {}


def test_two_hosts_creating_one_id_get_one_session_and_one_clear_error(
    backend: Backend,
) -> None:
    """The other host's insert lands between this store's existence check and its own
    insert: still "already exists" (InvalidArgumentError), never a raw constraint error."""
    store = backend.open()
    if backend.name == "sqlite":  # SQLite's write lock serialises the check and the insert
        store.create(session_id="dup")
        with pytest.raises(InvalidArgumentError, match="already exists"):
            store.create(session_id="dup")
        return
    import psycopg

    dsn = backend.dsn
    other = psycopg.connect(dsn, options="-c search_path=agentmem")
    other.execute(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES ('dup', 1, 1)"
    )  # not committed yet: this store's insert waits for it
    errors: list[BaseException] = []

    def create() -> None:
        try:
            store.create(session_id="dup")
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=create)
    worker.start()
    with psycopg.connect(dsn, autocommit=True) as admin:
        for _ in range(500):
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            ).fetchone()
            if row and row[0]:
                break
            time.sleep(0.01)
    other.commit()
    other.close()
    worker.join(30)
    assert len(errors) == 1
    assert isinstance(errors[0], InvalidArgumentError), repr(errors[0])
    assert "already exists" in str(errors[0])
    assert [info.id for info in store.list()] == ["dup"]


def test_threads_writing_their_own_sessions_through_one_store(backend: Backend) -> None:
    store = backend.open()
    sids = [store.create().id for _ in range(4)]
    failures: list[BaseException] = []

    def work(sid: str) -> None:
        try:
            with store.lock(sid):
                history = MessageHistory(observer=store.writer(sid))
                for i in range(25):
                    history.append({"role": "user", "content": f"{sid} {i}"})
                    store.list(limit=2)  # reads interleaved with the other threads' writes
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(sid,)) for sid in sids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    for sid in sids:
        contents = [m["content"] for m in backend.open().load(sid).messages]
        assert contents == [f"{sid} {i}" for i in range(25)]


def test_a_lock_dropped_without_release_frees_the_session(backend: Backend) -> None:
    """As a file lock does when its object is collected (a Session never closed)."""
    store = backend.open()
    sid = store.create().id
    store.lock(sid)  # not kept
    gc.collect()
    other = backend.open()
    # PostgreSQL releases it when the closed connection's backend exits, a moment later.
    for _ in range(100):
        try:
            other.lock(sid).release()
            return
        except StoreLockedError:
            time.sleep(0.05)
    pytest.fail("the session stayed locked after its lock object was collected")
