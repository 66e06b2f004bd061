"""SessionStore: round trips, a stateful model check, corruption, golden files, locks, exports."""

from __future__ import annotations

import copy
import html.parser
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from strategies import message as strategy_message

from agentmem import (
    AgentMemError,
    CorruptStoreError,
    InvalidArgumentError,
    InvalidMessageError,
    MessageHistory,
    StorageError,
    StoreLockedError,
    normalize_message,
)
from agentmem._storage.files import atomic_write_bytes, atomic_write_text, move_aside
from agentmem._storage.sqlite import Migration, connect, is_corruption, migrate
from agentmem.session_store import (
    FORMAT_VERSION,
    BillingRecord,
    SessionLock,
    SessionNotFoundError,
    SessionRecord,
    SessionStore,
    SessionWriter,
    export_html,
)

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
CHILD = HERE / "_kill9_child.py"


def _load_make_golden() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_golden", GOLDEN / "make_golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_golden = _load_make_golden()


class Clock:
    """A settable clock; every store in these tests uses one, so timestamps are exact."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "sessions.sqlite"


@pytest.fixture
def store(db: Path, clock: Clock) -> Any:
    with SessionStore(db, clock=clock, durability="normal") as s:
        yield s


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def assistant(text: str | None, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **extra}


def raw(db: Path) -> sqlite3.Connection:
    """A plain connection, to look at or damage the database behind the store's back."""
    return sqlite3.connect(db, isolation_level=None)


# --------------------------------------------------------------------------- round trips


def test_create_defaults_and_info(store: SessionStore, clock: Clock) -> None:
    info = store.create()
    assert re.fullmatch(r"[0-9a-f]{32}", info.id)
    assert info.created_at == info.updated_at == clock.now
    assert (info.name, info.working_directory, info.model, info.context_window) == (None,) * 4
    assert info.message_count == 0
    assert store.info(info.id) == info
    assert store.exists(info.id)
    assert not store.exists("nope")


def test_create_with_metadata(store: SessionStore) -> None:
    info = store.create(
        session_id="abc-1.2_3", name="n", working_directory="/w", model="m", context_window=8
    )
    assert store.info("abc-1.2_3") == info
    assert (info.name, info.working_directory, info.model, info.context_window) == (
        "n",
        "/w",
        "m",
        8,
    )


@pytest.mark.parametrize(
    "bad", ["", "a/b", "a b", "x" * 129, "é", "a\n", "a\\b", "a:b", 12, None.__class__]
)
def test_create_rejects_malformed_ids(store: SessionStore, bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="session id"):
        store.create(session_id=bad)
    assert store.list() == []


def test_create_rejects_taken_id_and_bad_arguments(store: SessionStore) -> None:
    store.create(session_id="x" * 128)
    with pytest.raises(InvalidArgumentError, match="already exists"):
        store.create(session_id="x" * 128)
    with pytest.raises(InvalidArgumentError):
        store.create(context_window=0)
    with pytest.raises(InvalidArgumentError):
        store.create(name=3)  # type: ignore[arg-type]
    assert len(store.list()) == 1


def test_full_round_trip(store: SessionStore, clock: Clock) -> None:
    sid = store.create(name="trip").id
    w = store.writer(sid)
    msgs = [
        {"role": "system", "content": "sys"},
        user("hi ü 😀\n", task_id=1),
        assistant(
            None,
            tool_calls=[
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        ),
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "out"}]},
    ]
    w.on_append(msgs[:2])
    w.on_append(msgs[2:])
    w.on_replace(1, user("edited", task_id=2))
    w.on_rewrite(3, [msgs[3], assistant("done")])
    w.save_state({"window": {"start": 1}, "summary": None})
    w.save_state({"window": {"start": 2}, "n": [1, 2.5, True]})
    bill = BillingRecord(at=5.5, kind="llm", model="m", prompt_tokens=3, completion_tokens=4)
    w.add_billing(bill)
    w.add_billing(BillingRecord(at=6.0, kind="memory_update", cost_usd=0.25))
    w.append_thread("t2", [user("b")])
    w.append_thread("t1", [user("a1")])
    w.append_thread("t1", [assistant("a2")])

    record = store.load(sid)
    assert record.messages == [
        msgs[0],
        user("edited", task_id=2),
        msgs[2],
        msgs[3],
        assistant("done"),
    ]
    assert record.state == {"window": {"start": 2}, "n": [1, 2.5, True]}
    assert record.billing == [bill, BillingRecord(at=6.0, kind="memory_update", cost_usd=0.25)]
    assert record.threads == {"t1": [user("a1"), assistant("a2")], "t2": [user("b")]}
    assert record.quarantined == [] and record.quarantined_threads == {}
    assert not record.state_quarantined
    assert record.info.message_count == 5
    assert record.info.name == "trip"


def test_history_observer_integration(store: SessionStore) -> None:
    """Whatever MessageHistory does, the store ends up holding exactly its persistent list."""
    sid = store.create().id
    history = MessageHistory(observer=store.writer(sid))
    history.append({"role": "system", "content": "s"})
    first = history.append(user("one"))
    history.append(
        assistant(
            None,
            tool_calls=[
                {"id": "a", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            ],
        )
    )
    history.append(user("interrupts the dangling call"))  # drops the unanswered assistant
    history.append({"role": "user", "content": "transient", "transient": True})
    history.append(assistant("answer"))
    history.replace_system_prompt("new system")
    assert store.load(sid).messages == history.to_list()
    history.rollback_before(first)
    assert store.load(sid).messages == history.to_list()
    history.extend([user("a"), assistant("b"), user("c")])
    history.delete_where(lambda m: m.get("content") == "b")
    history.pop_last()
    assert store.load(sid).messages == history.to_list()
    reloaded = MessageHistory(store.load(sid).messages)
    assert reloaded.to_list() == history.to_list()


def test_a_history_append_is_validated_once(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history validates on the way in; the writer does not validate its messages again,
    but still checksums them (they load through the trusted path) and still validates what
    a caller hands it directly."""
    import agentmem.session_store.records as records

    calls = []
    real = records.normalize_message

    def counting(message: Any, **kwargs: Any) -> Any:
        calls.append(message)
        return real(message, **kwargs)

    monkeypatch.setattr(records, "normalize_message", counting)
    sid = store.create().id
    history = MessageHistory(observer=store.writer(sid))
    history.extend([user("one"), assistant("two")])
    history.truncate_from(1)
    assert calls == []
    record = store.load(sid)
    assert record.messages == history.to_list() and record.validated
    store.writer(sid).on_append([user("direct")])
    assert len(calls) == 1


def test_failed_write_leaves_history_and_store_unchanged(store: SessionStore) -> None:
    sid = store.create().id
    history = MessageHistory(observer=store.writer(sid))
    history.append(user("kept"))
    assert store.delete(sid)
    with pytest.raises(SessionNotFoundError):
        history.append(assistant("lost"))
    assert history.to_list() == [user("kept")]


def test_append_touches_only_new_rows(store: SessionStore) -> None:
    """O(new message): appending to a long session changes as many rows as to a short one.

    (``updated_at`` moves at most once per TOUCH_INTERVAL_S on appends; the fixed test clock
    does not move, so only the first append touched the session row.) An append changes the
    new message row and its row in the recall index's queue (written by a trigger in the
    same transaction; the queue is indexed every RECALL_BATCH changes), however long the
    session.
    """
    conn = store._conn
    assert conn is not None

    def changes(sid: str, write: Callable[[SessionWriter], None]) -> int:
        before = conn.total_changes
        write(store.writer(sid))
        return conn.total_changes - before

    short, long = store.create().id, store.create().id
    store.writer(short).on_append([user("m0")])
    store.writer(long).on_append([user(f"m{i}") for i in range(500)])
    store.check_recall_index(repair=False)  # posts what the bulk append left queued
    appended = changes(long, lambda w: w.on_append([assistant("new")]))
    assert appended == changes(short, lambda w: w.on_append([assistant("new")]))
    assert 1 <= appended <= 16  # the row and its recall queue row
    assert conn.execute("SELECT count(*) FROM messages WHERE seq = 500").fetchone()[0] == 1
    replaced = changes(long, lambda w: w.on_replace(10, user("x")))
    assert replaced == changes(short, lambda w: w.on_replace(0, user("x")))
    assert store.info(long).message_count == 501


def test_bad_indices_change_nothing(store: SessionStore) -> None:
    sid = store.create().id
    w = store.writer(sid)
    w.on_append([user("a"), assistant("b")])
    with pytest.raises(InvalidArgumentError, match="no message 2"):
        w.on_replace(2, user("x"))
    with pytest.raises(InvalidArgumentError, match="cannot rewrite from 3"):
        w.on_rewrite(3, [user("x")])
    with pytest.raises(InvalidArgumentError):
        w.on_replace(-1, user("x"))
    w.on_rewrite(2, [user("c")])  # start == count is an append
    assert store.load(sid).messages == [user("a"), assistant("b"), user("c")]


@pytest.mark.parametrize(
    "bad",
    [
        ["not a dict"],
        [{"content": "no role"}],
        [{"role": 1}],
        [{"role": "user", "content": {1, 2}}],
        [{"role": "user", "content": "lone \ud800 surrogate"}],
        [user("fine"), {"role": "user", "content": 2**70}],
    ],
)
def test_unstorable_messages_are_rejected_whole(store: SessionStore, bad: list[Any]) -> None:
    sid = store.create().id
    w = store.writer(sid)
    with pytest.raises(InvalidMessageError):
        w.on_append(bad)
    with pytest.raises(InvalidMessageError):
        w.on_rewrite(0, bad)
    assert store.load(sid).messages == []


def test_bad_arguments_to_writer(store: SessionStore) -> None:
    sid = store.create().id
    w = store.writer(sid)
    with pytest.raises(InvalidArgumentError):
        w.on_append(user("a dict, not a list"))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        w.save_state([1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        w.save_state({"x": object()})
    with pytest.raises(InvalidArgumentError):
        w.add_billing(BillingRecord(at=1.0, kind="llm", prompt_tokens=-1))
    with pytest.raises(InvalidArgumentError):
        w.add_billing(BillingRecord(at=float("nan"), kind="llm"))
    with pytest.raises(InvalidArgumentError):
        w.add_billing({"at": 1.0})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        w.append_thread("", [user("a")])
    record = store.load(sid)
    assert (record.state, record.billing, record.threads) == ({}, [], {})


def test_save_state_and_threads_appends_and_replaces_in_one_transaction(
    store: SessionStore,
) -> None:
    sid = store.create().id
    w = store.writer(sid)
    w.save_state_and_threads({"a": 1}, {"t2": [user("b")], "t1": [user("a1")]})
    w.save_state_and_threads({"a": 2}, {"t1": [assistant("a2")], "t3": []})
    expected = {"t1": [user("a1"), assistant("a2")], "t2": [user("b")]}
    record = store.load(sid)
    assert (record.state, record.threads) == ({"a": 2}, expected)
    # Bad input anywhere (the state, a thread id, a message): nothing is written.
    for state, threads, error in [
        ({"x": object()}, {"t1": [user("c")]}, InvalidArgumentError),
        ({"a": 3}, {"t1": [user("c")], "": [user("d")]}, InvalidArgumentError),
        ({"a": 3}, {"t1": [user("c")], "t4": [{"content": "no role"}]}, InvalidMessageError),
    ]:
        with pytest.raises(error):
            w.save_state_and_threads(state, threads)
        record = store.load(sid)
        assert (record.state, record.threads) == ({"a": 2}, expected)
    store.delete(sid)
    with pytest.raises(SessionNotFoundError):
        w.save_state_and_threads({"a": 3}, {"t1": [user("c")]})


def test_updated_at_moves_with_activity_not_with_rename(store: SessionStore, clock: Clock) -> None:
    sid = store.create().id
    w = store.writer(sid)
    for step, action in enumerate(
        [
            lambda: w.on_append([user("a")]),
            lambda: w.on_replace(0, user("b")),
            lambda: w.on_rewrite(0, []),
            lambda: w.save_state({"a": 1}),
            lambda: w.add_billing(BillingRecord(at=0.0, kind="llm")),
            lambda: w.append_thread("t", [user("x")]),
        ],
        start=1,
    ):
        clock.now = 1_000_000.0 + step
        action()
        assert store.info(sid).updated_at == clock.now
    clock.now += 100
    w.rename("renamed")
    store.rename(sid, "again")
    assert store.info(sid).updated_at == clock.now - 100
    assert store.info(sid).name == "again"


def test_list_orders_by_updated_at_and_limits(store: SessionStore, clock: Clock) -> None:
    ids = []
    for i in range(4):
        clock.now = 100.0 + i
        ids.append(store.create(session_id=f"s{i}").id)
    clock.now = 200.0
    store.writer("s1").on_append([user("bump")])
    assert [i.id for i in store.list()] == ["s1", "s3", "s2", "s0"]
    assert [i.id for i in store.list(limit=2)] == ["s1", "s3"]
    assert store.list(limit=0) == []
    assert store.list()[0].message_count == 1
    with pytest.raises(InvalidArgumentError):
        store.list(limit=-1)


def test_delete_cascades(store: SessionStore, db: Path) -> None:
    sid = store.create().id
    other = store.create().id
    w = store.writer(sid)
    w.on_append([user("a")])
    w.add_billing(BillingRecord(at=1.0, kind="llm"))
    w.append_thread("t", [user("x")])
    store.writer(other).on_append([user("kept")])
    assert store.delete(sid) is True
    assert store.delete(sid) is False
    assert not store.exists(sid)
    with pytest.raises(SessionNotFoundError):
        store.load(sid)
    with pytest.raises(SessionNotFoundError):
        w.on_append([user("b")])
    conn = raw(db)
    try:
        for table in ("messages", "billing", "threads"):
            rows = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE session_id = ?", (sid,))
            assert rows.fetchone()[0] == 0
    finally:
        conn.close()
    assert store.load(other).messages == [user("kept")]


def test_unknown_session(store: SessionStore) -> None:
    for call in (
        lambda: store.load("missing"),
        lambda: store.info("missing"),
        lambda: store.writer("missing"),
        lambda: store.rename("missing", "x"),
    ):
        with pytest.raises(SessionNotFoundError, match="missing") as caught:
            call()
        assert isinstance(caught.value, KeyError) and isinstance(caught.value, AgentMemError)
        assert caught.value.session_id == "missing"
        assert str(caught.value) == "no session with id 'missing'"
    with pytest.raises(InvalidArgumentError):
        store.exists(3)  # type: ignore[arg-type]


def test_durability_settings(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="durability"):
        SessionStore(tmp_path / "x.sqlite", durability="sometimes")  # type: ignore[arg-type]
    for durability, level in (("full", 2), ("normal", 1)):
        with SessionStore(tmp_path / f"{durability}.sqlite", durability=durability) as s:  # type: ignore[arg-type]
            conn = s._conn
            assert conn is not None
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == level
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
            assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
            assert s.durability == durability


def test_in_memory_store_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for path in (None, ":memory:"):
        with SessionStore(path) as s:
            assert s.path is None
            sid = s.create(name="incognito").id
            w = s.writer(sid)
            w.on_append([user("secret")] * 50)
            w.save_state({"a": 1})
            w.append_thread("t", [user("x")])
            with s.lock(sid), pytest.raises(StoreLockedError):
                s.lock(sid)
            s.lock(sid).release()
            assert s.load(sid).messages == [user("secret")] * 50
    assert list(tmp_path.iterdir()) == []


def test_in_memory_stores_are_independent() -> None:
    with SessionStore(None) as a, SessionStore(None) as b:
        a.create(session_id="same")
        assert not b.exists("same")
        with a.lock("same"), b.lock("same"):
            pass


def test_closed_store(db: Path) -> None:
    s = SessionStore(db)
    sid = s.create().id
    w = s.writer(sid)
    s.close()
    s.close()
    assert s.closed
    with pytest.raises(StorageError, match="closed"):
        s.list()
    with pytest.raises(StorageError, match="closed"):
        w.on_append([user("a")])
    with SessionStore(db) as again:
        assert again.exists(sid)


def test_sqlite_failure_rolls_back_and_is_chained(store: SessionStore, clock: Clock) -> None:
    sid = store.create().id
    conn = store._conn
    assert conn is not None
    conn.execute("DROP TABLE billing")  # sabotage: the INSERT after the touch will fail
    clock.now += 10
    with pytest.raises(StorageError, match="add billing") as caught:
        store.writer(sid).add_billing(BillingRecord(at=1.0, kind="llm"))
    assert isinstance(caught.value.__cause__, sqlite3.Error)
    assert not isinstance(caught.value, CorruptStoreError)
    assert store.info(sid).updated_at == clock.now - 10  # the touch was rolled back
    assert not conn.in_transaction


def test_two_stores_on_one_file_see_each_other(db: Path) -> None:
    with SessionStore(db) as a, SessionStore(db) as b:
        sid = a.create().id
        a.writer(sid).on_append([user("from a")])
        b.writer(sid).on_append([assistant("from b")])
        assert a.load(sid).messages == b.load(sid).messages == [user("from a"), assistant("from b")]


def test_threads_write_concurrently(store: SessionStore) -> None:
    ids = [store.create().id for _ in range(4)]
    errors: list[BaseException] = []

    def work(sid: str) -> None:
        try:
            w = store.writer(sid)
            for i in range(25):
                w.on_append([user(f"{sid}-{i}")])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(sid,)) for sid in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for sid in ids:
        assert store.load(sid).messages == [user(f"{sid}-{i}") for i in range(25)]


def test_store_path_errors(tmp_path: Path) -> None:
    (tmp_path / "dir.sqlite").mkdir()
    with pytest.raises(StorageError, match="directory"):
        SessionStore(tmp_path / "dir.sqlite")
    with pytest.raises(InvalidArgumentError):
        SessionStore(3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- stateful model

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
any_messages = st.builds(
    lambda role, content, extra: {"role": role, "content": content, **extra},
    st.sampled_from(["system", "user", "assistant", "tool"]),
    st.none()
    | st.text(max_size=30)
    | st.lists(st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=10)), max_size=2),
    st.dictionaries(st.sampled_from(["task_id", "created_at", "x-host"]), json_values, max_size=2),
)


def _valid(message: dict[str, Any]) -> bool:
    try:
        normalize_message(message)
    except InvalidMessageError:
        return False
    return True


# The writer refuses what would fail validation when read back (see invalid_refused).
messages = strategy_message().map(lambda m: normalize_message(m)[0])


class SessionStoreMachine(RuleBasedStateMachine):
    """The store against a plain list: after any sequence of writes and reopens, load == model.

    The model is a Python list changed with list operations; it shares no code with the store.
    """

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="agentmem-sm-"))
        self.path = self.dir / "sessions.sqlite"
        self.store = SessionStore(self.path, durability="normal")
        self.sid = self.store.create(session_id="machine").id
        self.writer = self.store.writer(self.sid)
        self.model: list[dict[str, Any]] = []

    @rule(batch=st.lists(messages, max_size=4))
    def append(self, batch: list[dict[str, Any]]) -> None:
        self.writer.on_append(batch)
        self.model.extend(copy.deepcopy(batch))

    @precondition(lambda self: self.model)
    @rule(data=st.data(), message=messages)
    def replace(self, data: st.DataObject, message: dict[str, Any]) -> None:
        index = data.draw(st.integers(0, len(self.model) - 1), label="index")
        self.writer.on_replace(index, message)
        self.model[index] = copy.deepcopy(message)

    @rule(data=st.data(), tail=st.lists(messages, max_size=4))
    def rewrite(self, data: st.DataObject, tail: list[dict[str, Any]]) -> None:
        start = data.draw(st.integers(0, len(self.model)), label="start")
        self.writer.on_rewrite(start, tail)
        self.model[start:] = copy.deepcopy(tail)

    @rule(message=any_messages)
    def any_message(self, message: dict[str, Any]) -> None:
        """A message is stored exactly when it is valid; an invalid one changes nothing."""
        if _valid(message):
            self.writer.on_append([message])
            self.model.append(copy.deepcopy(message))
        else:
            with pytest.raises(InvalidMessageError):
                self.writer.on_append([message])

    @rule(data=st.data(), message=messages)
    def out_of_range(self, data: st.DataObject, message: dict[str, Any]) -> None:
        index = data.draw(st.integers(len(self.model), len(self.model) + 3), label="index")
        with pytest.raises(InvalidArgumentError):
            self.writer.on_replace(index, message)
        with pytest.raises(InvalidArgumentError):
            self.writer.on_rewrite(index + 1, [message])

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = SessionStore(self.path, durability="normal")
        assert self.store.recovered_from is None
        self.writer = self.store.writer(self.sid)

    @invariant()
    def store_matches_model(self) -> None:
        record = self.store.load(self.sid)
        assert record.messages == self.model
        assert record.info.message_count == len(self.model)
        assert record.quarantined == []

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)


SessionStoreMachine.TestCase.settings = settings(
    settings.default,
    max_examples=max(25, settings.default.max_examples // 3),
    stateful_step_count=25,
)
TestSessionStoreMachine = SessionStoreMachine.TestCase


# --------------------------------------------------------------------------- corruption


def test_garbage_file_is_moved_aside(db: Path, caplog: pytest.LogCaptureFixture) -> None:
    db.parent.mkdir(parents=True)
    garbage = os.urandom(3000) + b"definitely not sqlite"
    db.write_bytes(garbage)
    wal = db.with_name(db.name + "-wal")
    wal.write_bytes(b"stale wal")
    with caplog.at_level(logging.WARNING, logger="agentmem.storage"), SessionStore(db) as s:
        moved = s.recovered_from
        assert moved is not None
        assert re.fullmatch(r"sessions\.sqlite\.corrupt-\d{8}T\d{6}Z(-\d+)?", moved.name)
        assert moved.read_bytes() == garbage
        assert moved.with_name(moved.name + "-wal").read_bytes() == b"stale wal"
        sid = s.create().id
        s.writer(sid).on_append([user("fresh")])
        assert s.load(sid).messages == [user("fresh")]
    [warning] = [r for r in caplog.records if r.name == "agentmem.storage"]
    assert warning.levelno == logging.WARNING
    assert str(db) in warning.getMessage() and str(moved) in warning.getMessage()
    with SessionStore(db) as again:
        assert again.recovered_from is None
        assert again.exists(sid)


def test_concurrent_openers_recover_once(db: Path) -> None:
    """Two openers racing on one unreadable file: it is moved aside once, both end up usable."""
    db.parent.mkdir(parents=True)
    db.write_bytes(b"garbage" * 500)
    stores: list[SessionStore] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def open_store() -> None:
        try:
            barrier.wait()
            stores.append(SessionStore(db))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert sum(s.recovered_from is not None for s in stores) == 1
        assert len(list(db.parent.glob("*.corrupt-*"))) == 1
        sid = stores[0].create().id
        assert all(s.exists(sid) for s in stores)
    finally:
        for s in stores:
            s.close()


def test_truncated_header_is_moved_aside(db: Path) -> None:
    with SessionStore(db) as s:
        s.create(session_id="a")
    data = db.read_bytes()
    db.write_bytes(data[:50])
    with SessionStore(db) as s:
        assert s.recovered_from is not None
        assert s.recovered_from.read_bytes() == data[:50]
        assert s.list() == []


def test_empty_file_is_a_new_store_not_corruption(db: Path) -> None:
    db.parent.mkdir(parents=True)
    db.write_bytes(b"")
    with SessionStore(db) as s:
        assert s.recovered_from is None
        s.create()


def test_someone_elses_database_is_refused_and_left_alone(db: Path) -> None:
    db.parent.mkdir(parents=True)
    conn = raw(db)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StorageError, match=r"not an agentmem\.sessions database") as caught:
        SessionStore(db)
    assert not isinstance(caught.value, CorruptStoreError)
    assert db.read_bytes() == before
    assert not list(db.parent.glob("*.corrupt-*"))


def test_newer_version_is_refused(db: Path) -> None:
    with SessionStore(db) as s:
        s.create(session_id="a")
    conn = raw(db)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(FORMAT_VERSION + 1),))
    conn.close()
    with pytest.raises(StorageError) as caught:
        SessionStore(db)
    message = str(caught.value)
    assert f"version {FORMAT_VERSION + 1}" in message
    assert f"up to version {FORMAT_VERSION}" in message
    assert caught.value.path == db
    assert not list(db.parent.glob("*.corrupt-*"))


def test_unknown_migration_is_refused(db: Path) -> None:
    with SessionStore(db):
        pass
    conn = raw(db)
    conn.execute("INSERT INTO migrations VALUES ('0099_from_the_future', 'x')")
    conn.close()
    with pytest.raises(StorageError, match="0099_from_the_future"):
        SessionStore(db)


def test_migration_chain_upgrades_older_databases(tmp_path: Path) -> None:
    """The machinery: a v1 database opened by a v2 reader gets exactly the missing migration."""
    calls: list[str] = []

    def second(conn: sqlite3.Connection) -> None:
        calls.append("second")
        conn.execute("ALTER TABLE t ADD COLUMN b TEXT")

    first = Migration("0001", ("CREATE TABLE t (a TEXT)",))
    path = tmp_path / "m.sqlite"
    conn = connect(path)
    assert migrate(conn, format_name="x", format_version=1, migrations=[first]) == ["0001"]
    assert migrate(conn, format_name="x", format_version=1, migrations=[first]) == []
    chain = [first, Migration("0002", second)]
    assert migrate(conn, format_name="x", format_version=2, migrations=chain) == ["0002"]
    assert migrate(conn, format_name="x", format_version=2, migrations=chain) == []
    assert calls == ["second"]
    assert conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0] == "2"
    with pytest.raises(StorageError, match="version 2"):
        migrate(conn, format_name="x", format_version=1, migrations=[first])
    with pytest.raises(StorageError, match="format is 'x'"):
        migrate(conn, format_name="y", format_version=1, migrations=[first])
    conn.close()


def test_failed_migration_rolls_back(tmp_path: Path) -> None:
    def boom(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half (a)")
        raise RuntimeError("boom")

    conn = connect(tmp_path / "m.sqlite")
    with pytest.raises(RuntimeError):
        migrate(conn, format_name="x", format_version=1, migrations=[Migration("0001", boom)])
    tables = conn.execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == []
    conn.close()


def test_is_corruption_only_for_unreadable_files() -> None:
    assert not is_corruption(sqlite3.OperationalError("database is locked"))
    assert not is_corruption(ValueError("file is not a database"))
    assert is_corruption(sqlite3.DatabaseError("file is not a database"))


def test_corrupt_rows_are_quarantined_and_reported(
    store: SessionStore, db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sid = store.create().id
    w = store.writer(sid)
    w.on_append([user(f"m{i}") for i in range(6)])
    conn = raw(db)
    conn.execute("UPDATE messages SET body = '{not json' WHERE seq = 1")
    conn.execute("UPDATE messages SET body = CAST(x'ff22' AS TEXT) WHERE seq = 3")
    conn.execute("""UPDATE messages SET body = '["an array"]' WHERE seq = 4""")
    conn.close()

    with caplog.at_level(logging.WARNING, logger="agentmem.storage"):
        record = store.load(sid)
    assert record.messages == [user("m0"), user("m2"), user("m5")]
    assert record.quarantined == [1, 3, 4]
    assert record.info.message_count == 3
    warnings = [r.getMessage() for r in caplog.records if r.name == "agentmem.storage"]
    assert len(warnings) == 3
    assert all(sid in text for text in warnings)
    assert any("seq 3" in text for text in warnings)

    conn = raw(db)
    rows = conn.execute(
        "SELECT seq, CAST(body AS BLOB), reason FROM quarantine WHERE session_id = ? ORDER BY seq",
        (sid,),
    ).fetchall()
    seqs = [r[0] for r in conn.execute("SELECT seq FROM messages ORDER BY seq")]
    conn.close()
    assert [(r[0], r[1]) for r in rows] == [
        (1, b"{not json"),
        (3, b"\xff\x22"),
        (4, b'["an array"]'),
    ]
    assert all(r[2] for r in rows)
    assert seqs == [0, 1, 2]

    again = store.load(sid)
    assert again.messages == record.messages and again.quarantined == []
    w.on_append([user("next")])
    assert store.load(sid).messages[-1] == user("next")
    assert store.info(sid).message_count == 4


def test_corrupt_thread_rows_and_state_are_quarantined(store: SessionStore, db: Path) -> None:
    sid = store.create().id
    w = store.writer(sid)
    w.append_thread("t", [user("a"), user("b"), user("c")])
    w.append_thread("gone", [user("only")])
    w.save_state({"ok": True})
    conn = raw(db)
    conn.execute("UPDATE threads SET body = 'x' WHERE thread_id = 't' AND seq = 0")
    conn.execute("UPDATE threads SET body = 'x' WHERE thread_id = 'gone'")
    conn.execute("UPDATE sessions SET state = CAST(x'7bff' AS TEXT) WHERE id = ?", (sid,))
    conn.close()
    record = store.load(sid)
    assert record.threads == {"t": [user("b"), user("c")]}
    assert record.quarantined_threads == {"t": [0], "gone": [0]}
    assert record.state_quarantined and record.state == {}
    w.append_thread("t", [user("d")])
    again = store.load(sid)
    assert again.threads == {"t": [user("b"), user("c"), user("d")]}
    assert not again.state_quarantined and again.quarantined_threads == {}


def test_move_aside_never_overwrites(tmp_path: Path) -> None:
    first = tmp_path / "f.db"
    first.write_bytes(b"one")
    a = move_aside(first, now=0)
    first.write_bytes(b"two")
    first.with_name("f.db-wal").write_bytes(b"wal")
    b = move_aside(first, now=0, companions=("-wal", "-shm"))
    assert a.name == "f.db.corrupt-19700101T000000Z"
    assert b.name == "f.db.corrupt-19700101T000000Z-1"
    assert (a.read_bytes(), b.read_bytes()) == (b"one", b"two")
    assert b.with_name(b.name + "-wal").read_bytes() == b"wal"
    assert not first.exists()


def test_atomic_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "f.txt"
    atomic_write_text(target, "first ü")
    assert target.read_text(encoding="utf-8") == "first ü"
    target.chmod(0o640)
    atomic_write_bytes(target, b"second")
    assert target.read_bytes() == b"second"
    assert target.stat().st_mode & 0o777 == 0o640

    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(target, b"third")
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


# --------------------------------------------------------------------------- golden files


def _golden_copy(tmp_path: Path) -> Path:
    copy_path = tmp_path / make_golden.DB_NAME
    shutil.copyfile(GOLDEN / make_golden.DB_NAME, copy_path)
    return copy_path


def test_golden_fixture_is_small() -> None:
    assert (GOLDEN / make_golden.DB_NAME).stat().st_size < 64 * 1024
    assert not (GOLDEN / (make_golden.DB_NAME + "-wal")).exists()


def test_current_reader_loads_golden_v1_exactly(tmp_path: Path) -> None:
    with SessionStore(_golden_copy(tmp_path)) as s:
        assert s.recovered_from is None
        assert s.list() == make_golden.EXPECTED_INFOS
        record = s.load(make_golden.MAIN_ID)
        empty = s.load(make_golden.EMPTY_ID)
    assert record == SessionRecord(
        info=make_golden.EXPECTED_INFOS[0],
        messages=make_golden.EXPECTED_MESSAGES,
        state=make_golden.EXPECTED_STATE,
        billing=make_golden.EXPECTED_BILLING,
        threads=make_golden.EXPECTED_THREADS,
    )
    assert empty == SessionRecord(
        info=make_golden.EXPECTED_INFOS[1], messages=[], state={}, billing=[], threads={}
    )


@pytest.mark.parametrize("name", [f"sessions-v{v}.sqlite" for v in range(1, FORMAT_VERSION + 1)])
def test_current_reader_loads_every_golden_version_exactly(tmp_path: Path, name: str) -> None:
    """Version 2 added row checksums: its rows load through the trusted path; version 1
    rows (no checksum) are validated, and get their checksum on that first load."""
    copy_path = tmp_path / name
    shutil.copyfile(GOLDEN / name, copy_path)
    conn = raw(copy_path)
    try:
        stored = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0]
    finally:
        conn.close()
    assert stored == name[len("sessions-v") : -len(".sqlite")]
    with SessionStore(copy_path) as s:
        assert s.recovery is None
        assert s.list() == make_golden.EXPECTED_INFOS
        record = s.load(make_golden.MAIN_ID)
        assert record.messages == make_golden.EXPECTED_MESSAGES
        assert record.threads == make_golden.EXPECTED_THREADS
        assert record.validated and record.repaired == [] and record.checksum_failed == []
    conn = raw(copy_path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM messages WHERE crc IS NULL").fetchone() == (0,)
    finally:
        conn.close()


def test_export_of_golden_session_matches_golden_json(tmp_path: Path) -> None:
    expected = (GOLDEN / make_golden.EXPORT_NAME).read_bytes()
    with SessionStore(_golden_copy(tmp_path)) as s:
        out = s.export(make_golden.MAIN_ID, tmp_path / "from-golden.json")
    assert out.read_bytes() == expected
    # The current writer, replaying the fixture's script, produces the same session.
    fresh = tmp_path / "fresh" / "sessions.sqlite"
    make_golden.build(fresh)
    with SessionStore(fresh) as s:
        out = s.export(make_golden.MAIN_ID, tmp_path / "from-fresh.json")
    assert out.read_bytes() == expected
    data = json.loads(expected)
    assert list(data) == ["format", "version", "session", "messages", "state", "billing", "threads"]
    assert (data["format"], data["version"]) == ("agentmem.session-export", 1)
    assert data["session"]["created_at_iso"] == "2024-05-01T12:00:00.000Z"


# --------------------------------------------------------------------------- export


def test_export_format_from_extension(store: SessionStore, tmp_path: Path) -> None:
    sid = store.create(name="x").id
    store.writer(sid).on_append([user("hello")])
    assert json.loads(store.export(sid, tmp_path / "a.json").read_text("utf-8"))["messages"] == [
        user("hello")
    ]
    assert store.export(sid, tmp_path / "a.HTML").read_text("utf-8").startswith("<!DOCTYPE html>")
    assert store.export(sid, tmp_path / "a.txt", format="json").read_text("utf-8").startswith("{")
    with pytest.raises(InvalidArgumentError, match=r"\.json or \.html"):
        store.export(sid, tmp_path / "a.txt")
    with pytest.raises(InvalidArgumentError):
        store.export(sid, tmp_path / "a.json", format="xml")  # type: ignore[arg-type]
    with pytest.raises(SessionNotFoundError):
        store.export("missing", tmp_path / "m.json")
    with pytest.raises(StorageError):
        store.export(sid, tmp_path / "no" / "such" / "dir.json")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [
        "a.HTML",
        "a.json",
        "a.txt",
    ]


class _TagCollector(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


EVIL = "<script>alert(1)</script>"


def test_html_export_is_inert_and_self_contained(store: SessionStore, tmp_path: Path) -> None:
    png = make_golden.PNG_1PX
    sid = store.create(name=f"title {EVIL}", model=EVIL).id
    w = store.writer(sid)
    w.on_append(
        [
            {"role": "system", "content": f"line one\nline two {EVIL}"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": EVIL},
                    {"type": "image_url", "image_url": {"url": png}},
                    {"type": "image_url", "image_url": {"url": "https://evil.example/x.png"}},
                    {"type": "image_url", "image_url": {"url": "http://evil.example/y.png"}},
                    {
                        "type": "image_url",
                        "image_url": {"url": 'data:image/png;base64,AA"><script>'},
                    },
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/svg+xml;base64,PHN2Zz4="},
                    },
                ],
                "task_id": EVIL,
            },
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": EVIL,
                "tool_calls": [
                    {
                        "id": EVIL,
                        "type": "function",
                        "function": {"name": "run", "arguments": json.dumps({"cmd": EVIL})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": EVIL, "content": f"result {EVIL}"},
        ]
    )
    w.save_state({EVIL: EVIL})
    w.add_billing(BillingRecord(at=1.0, kind=EVIL, model=EVIL))
    w.append_thread(EVIL, [user(EVIL)])
    text = store.export(sid, tmp_path / "s.html").read_text("utf-8")
    # What the store refuses to write can still come from elsewhere (an older release, a
    # hand-edited file): the page escapes whatever a record holds.
    record = store.load(sid)
    record.messages[1]["name"] = EVIL
    record.messages.append({"role": EVIL, "content": EVIL})
    text = export_html(record)

    assert "<script" not in text.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", text, re.IGNORECASE)
    assert "https://evil.example/x.png" in text  # shown as text
    assert "line one\nline two" in text  # newlines kept (pre-wrap)
    parser = _TagCollector()
    parser.feed(text)
    tags = [tag for tag, _ in parser.tags]
    assert "script" not in tags and "link" not in tags and "iframe" not in tags
    images = [attrs for tag, attrs in parser.tags if tag == "img"]
    assert [a["src"] for a in images] == [png]
    # Links only to anchors of the page itself, made from indexes (never from stored text).
    hrefs = [a["href"] for _, a in parser.tags if "href" in a]
    assert hrefs and all(re.fullmatch(r"#[a-z0-9-]+", h or "") for h in hrefs)
    assert all(not (k.startswith("on")) for _, a in parser.tags for k in a)
    assert '<details class="tool-result">' in text
    assert '<span class="fn">run</span>' in text
    assert '<dt>cmd</dt><dd><pre class="arg">&lt;script&gt;' in text  # one row an argument
    assert "Content-Security-Policy" in text


# --------------------------------------------------------------------------- locks


def test_locks_conflict_and_release(store: SessionStore, db: Path) -> None:
    sid = store.create().id
    lock = store.lock(sid)
    assert isinstance(lock, SessionLock) and lock.locked
    assert lock.path == db.parent / "locks" / f"{sid}.lock"
    with pytest.raises(StoreLockedError, match=f"session {sid} is already open in another"):
        store.lock(sid)
    with SessionStore(db) as other, pytest.raises(StoreLockedError):
        other.lock(sid)
    with store.lock("another-id"):
        pass
    lock.release()
    lock.release()
    assert not lock.locked
    with store.lock(sid) as again:
        assert again.locked
    assert lock.acquire() is lock and lock.locked
    lock.release()
    with pytest.raises(InvalidArgumentError):
        store.lock("../escape")


def test_lock_released_when_holder_is_killed(store: SessionStore, db: Path) -> None:
    if not hasattr(signal, "SIGKILL"):
        pytest.skip("needs POSIX SIGKILL")
    sid = store.create().id
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), "hold-lock", str(db), sid],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"locked\n"
        with pytest.raises(StoreLockedError):
            store.lock(sid)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with store.lock(sid) as lock:
        assert lock.locked


def test_appends_move_updated_at_at_most_once_per_interval(
    store: SessionStore, clock: Clock
) -> None:
    """Appends skip the session-row write between touches (two pages per commit saved)."""
    from agentmem.session_store.writer import TOUCH_INTERVAL_S

    sid = store.create().id
    w = store.writer(sid)
    clock.now = 5_000.0
    w.on_append([user("a")])
    assert store.info(sid).updated_at == 5_000.0
    clock.now = 5_000.0 + TOUCH_INTERVAL_S / 2
    w.on_append([user("b")])
    assert store.info(sid).updated_at == 5_000.0
    clock.now = 5_000.0 + TOUCH_INTERVAL_S * 1.5
    w.on_append([user("c")])
    assert store.info(sid).updated_at == clock.now
    store.delete(sid)
    with pytest.raises(SessionNotFoundError):
        w.on_append([user("d")])  # between touches, existence is still checked


def test_a_file_store_keeps_a_page_cache_for_its_searches(tmp_path: Path) -> None:
    """A recall reads a few hundred pages of the index: the connection's page cache holds
    ``PAGE_CACHE_KIB`` (SQLite's default, 2 MiB, sent most of them back to the OS)."""
    from agentmem.session_store.sqlite_engine import PAGE_CACHE_KIB

    with SessionStore(tmp_path / "s.sqlite") as store:
        conn = store._engine.connection
        assert conn is not None
        assert conn.execute("PRAGMA cache_size").fetchone()[0] == -PAGE_CACHE_KIB
