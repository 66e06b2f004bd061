"""The PostgreSQL sessions store when processes die and the server crashes (tests/pg.py).

* Processes racing for one session: exactly one gets it, the others StoreLockedError.
* ``kill -9`` of the lock's holder: the server drops the lock with its connection, so
  the session reopens at once.
* ``kill -9`` of a writer in the middle of its appends, at random instants: every
  acknowledged append is there, in order, with its exact body; nothing half-written.
* ``pg_ctl restart -m immediate`` while a write is in flight: the call raises
  StorageError (not a psycopg error) and wrote nothing; every acknowledged append
  survives; the next call reconnects, takes the session lock again, and works. A
  rival that took the lock while it was lost keeps it: the old holder's writes are
  refused with StoreLockedError.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pg_child import expected_message
from pg import PgCluster, child_env

from agentmem import MessageHistory
from agentmem.errors import StorageError, StoreLockedError
from agentmem.session_store import SessionStore

psycopg = pytest.importorskip("psycopg", reason="pip install 'agentmem[postgres]'")

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")

CHILD = Path(__file__).with_name("_pg_child.py")
SEED = 20261126


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )


def _expect(child: subprocess.Popen[str], line: str) -> None:
    assert child.stdout is not None
    got = child.stdout.readline().strip()
    if got != line:
        child.kill()
        _, err = child.communicate(timeout=30)
        pytest.fail(f"child said {got!r}, expected {line!r}: {err}")


@pytest.fixture
def store(pg_dsn: str) -> Iterator[SessionStore]:
    opened = SessionStore.postgres(pg_dsn)
    yield opened
    opened.close()


def _lock_within(store: SessionStore, sid: str, seconds: float = 10.0) -> int:
    """Take the session's lock, retrying while it is held; how many tries it took."""
    deadline = time.monotonic() + seconds
    tries = 0
    while True:
        tries += 1
        try:
            store.lock(sid).release()
            return tries
        except StoreLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_processes_racing_for_one_session_one_gets_it(store: SessionStore, pg_dsn: str) -> None:
    sid = store.create().id
    children = [_child("race", pg_dsn, sid) for _ in range(4)]
    try:
        for child in children:
            _expect(child, "ready")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        answers = []
        for child in children:
            assert child.stdout is not None
            answers.append(child.stdout.readline().strip())
        assert sorted(answers) == ["got", "locked", "locked", "locked"]
        with pytest.raises(StoreLockedError):
            store.lock(sid)
    finally:
        for child in children:
            child.kill()
            child.communicate(timeout=30)
    _lock_within(store, sid)


def test_a_killed_holders_session_reopens_at_once(store: SessionStore, pg_dsn: str) -> None:
    sid = store.create().id
    holder = _child("hold", pg_dsn, sid)
    try:
        _expect(holder, "held")
        with pytest.raises(StoreLockedError):
            store.lock(sid)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=30)
    # The server drops the lock when it sees the socket close: a few tries at most.
    assert _lock_within(store, sid) <= 40


def test_kill_9_mid_appends_keeps_every_acknowledged_append(
    store: SessionStore, pg_dsn: str
) -> None:
    sid = store.create().id
    rng = random.Random(SEED)
    acknowledged = -1
    for _ in range(4):
        writer = _child("append", pg_dsn, sid)
        try:
            _expect(writer, "ready")
            time.sleep(rng.uniform(0.02, 0.25))
            writer.send_signal(signal.SIGKILL)
            out, _ = writer.communicate(timeout=30)
        finally:
            writer.kill()
        seqs = [int(line) for line in out.split()]
        if seqs:
            assert seqs == list(range(seqs[0], seqs[-1] + 1))
            assert seqs[0] >= acknowledged + 1
            acknowledged = seqs[-1]
        _lock_within(store, sid)
        stored = store.load(sid).messages
        # Every acknowledged append, in order, each body exact; at most the one in flight
        # beyond (its COMMIT may have reached the server before the kill).
        assert len(stored) in (acknowledged + 1, acknowledged + 2)
        assert stored == [expected_message(seq) for seq in range(len(stored))]
        acknowledged = len(stored) - 1
    assert acknowledged > 0, "no append was acknowledged before the kills"


def _wait_for_lock_wait(dsn: str, what: str) -> None:
    """Until some backend waits on a lock (our write, blocked behind ``what``)."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        for _ in range(500):
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.01)
    pytest.fail(f"the write never blocked behind {what}")


def test_a_crash_restart_mid_write_loses_nothing_acknowledged(pg_cluster: PgCluster) -> None:
    store = SessionStore.postgres(pg_cluster.dsn)
    try:
        sid = store.create().id
        lock = store.lock(sid)
        history = MessageHistory(observer=store.writer(sid))
        for seq in range(20):
            history.append(expected_message(seq))
        before = store.info(sid)

        # Hold message 20's key in an open transaction, so our next append (touch,
        # next seq, insert) blocks inside its transaction: it is in flight when the
        # server goes down.
        blocker = psycopg.connect(pg_cluster.dsn, options="-c search_path=agentmem")
        blocker.execute(
            "INSERT INTO messages (session_id, seq, role, body) VALUES (%s, 20, 'user', '{}')",
            (sid,),
        )
        errors: list[BaseException] = []

        def append() -> None:
            try:
                history.append({"role": "user", "content": "in flight"})
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=append)
        worker.start()
        _wait_for_lock_wait(pg_cluster.dsn, "the blocker's uncommitted row")
        pg_cluster.restart_immediate()
        worker.join(60)
        blocker.close()

        assert len(errors) == 1
        assert type(errors[0]) is StorageError, repr(errors[0])
        assert isinstance(errors[0].__cause__, psycopg.Error)
        assert len(history) == 20  # the history did not run ahead of the database
        # The next call reconnects, takes the session lock again, and works.
        history.append(expected_message(20))
        history.append(expected_message(21))
        other = SessionStore.postgres(pg_cluster.dsn)
        with pytest.raises(StoreLockedError):
            other.lock(sid)
        other.close()
        lock.release()
    finally:
        store.close()
    reopened = SessionStore.postgres(pg_cluster.dsn)
    try:
        record = reopened.load(sid)
        assert record.messages == [expected_message(seq) for seq in range(22)]
        assert record.info.updated_at >= before.updated_at
    finally:
        reopened.close()


def test_a_rival_that_took_a_lost_lock_keeps_it(pg_cluster: PgCluster) -> None:
    first = SessionStore.postgres(pg_cluster.dsn)
    rival = SessionStore.postgres(pg_cluster.dsn)
    try:
        sid = first.create().id
        lock = first.lock(sid)
        history = MessageHistory(observer=first.writer(sid))
        history.append(expected_message(0))
        pg_cluster.restart_immediate()  # every lock is gone with its connection
        rival_lock = rival.lock(sid)
        MessageHistory(rival.load(sid).messages, observer=rival.writer(sid)).append(
            expected_message(1)
        )
        with pytest.raises(StoreLockedError, match="another process holds it"):
            history.append({"role": "user", "content": "from the old holder"})
        assert rival.load(sid).messages == [expected_message(0), expected_message(1)]
        rival_lock.release()
        lock.release()
    finally:
        first.close()
        rival.close()
