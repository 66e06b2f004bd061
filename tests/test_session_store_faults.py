"""Storage faults injected for real: damaged files, killed processes, racing processes.

The promise under test: nothing acknowledged is lost silently. Every fault
either leaves the data readable and intact, or is moved aside (bytes kept
exactly as found), reported on ``SessionStore.recovery`` /
``recovered_from`` and the ``agentmem.storage`` logger, and whatever could
be read is recovered. No fault ever surfaces as anything but an
``AgentMemError``.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from _kill9_child import expected_message
from _store_faults import kill_after, lay_out, moved_aside
from hypothesis import given, settings
from hypothesis import strategies as st

import agentmem
from agentmem.errors import AgentMemError
from agentmem.messages import normalize_message
from agentmem.session_store import SessionStore

POSIX_ONLY = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], int]:
    """The files a child killed with SIGKILL left behind (its appends still in the -wal)."""
    if not hasattr(signal, "SIGKILL"):
        pytest.skip("needs POSIX SIGKILL")
    db = tmp_path_factory.mktemp("killed") / "s.sqlite"
    with SessionStore(db) as store:
        store.create(session_id="s")
    acked = kill_after(db, "s", 40)
    files = {
        suffix: db.with_name(db.name + suffix).read_bytes()
        for suffix in ("", "-wal", "-shm")
        if db.with_name(db.name + suffix).exists()
    }
    assert len(files.get("-wal", b"")) > 32, "the acknowledged appends should be in the log"
    return files, max(acked) + 1


# --------------------------------------------------------------------------- B1: the -wal


def _last_commit_frame(wal: bytes) -> int:
    """Byte offset of the last commit frame of the log's current generation."""
    page_size = struct.unpack(">I", wal[8:12])[0]
    salts = wal[16:24]
    last = 32
    for offset in range(32, len(wal) - 24 - page_size + 1, 24 + page_size):
        if wal[offset + 8 : offset + 16] == salts and wal[offset + 4 : offset + 8] != bytes(4):
            last = offset
    return last


@POSIX_ONLY
def test_killed_store_reopens_intact_without_recovery(
    tmp_path: Path, killed: tuple[dict[str, bytes], int]
) -> None:
    files, acked = killed
    db = lay_out(tmp_path, dict(files))
    with SessionStore(db) as store:
        assert store.recovery is None
        messages = store.load("s").messages
    assert len(messages) >= acked
    assert messages[:acked] == [expected_message(i) for i in range(acked)]


@POSIX_ONLY
@pytest.mark.parametrize("main", [b"", None], ids=["empty-main", "missing-main"])
def test_wal_without_its_database_is_moved_aside_and_reported(
    tmp_path: Path,
    killed: tuple[dict[str, bytes], int],
    main: bytes | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before: SQLite deleted the log beside an empty (or missing) main file, silently."""
    files, _ = killed
    db = lay_out(tmp_path, {**files, "": main})
    with caplog.at_level(logging.WARNING, logger="agentmem.storage"), SessionStore(db) as store:
        assert store.recovery is not None
        assert "write-ahead log without its database" in store.recovery.reason
        moved = store.recovered_from
    assert moved is not None and moved == store.recovery.moved_to
    # The log, with every acknowledged append in it, is kept byte for byte.
    assert moved.with_name(moved.name + "-wal").read_bytes() == files["-wal"]
    assert str(moved) in caplog.text


@POSIX_ONLY
def test_kill_during_move_aside_leaves_an_orphan_log_that_is_kept(
    tmp_path: Path, killed: tuple[dict[str, bytes], int]
) -> None:
    """A kill between renaming the main file and its log leaves the log alone: keep it."""
    files, _ = killed
    db = lay_out(tmp_path, dict(files))
    db.rename(db.with_name(db.name + ".corrupt-20240101T000000Z"))  # the first rename happened
    with SessionStore(db) as store:
        assert store.recovery is not None
        assert store.list() == []
        moved = store.recovery.moved_to
    assert moved.with_name(moved.name + "-wal").read_bytes() == files["-wal"]


@POSIX_ONLY
def test_damaged_log_is_reported_and_its_readable_commits_recovered(
    tmp_path: Path, killed: tuple[dict[str, bytes], int]
) -> None:
    """40 single-bit flips in the log of a killed writer: never a silent loss.

    Before: SQLite stopped replaying at the damaged frame and the commits
    after it vanished without a word.
    """
    files, acked = killed
    wal = files["-wal"]
    # The one blind spot without the -shm (left out here; with it, see test_session_store_wal_cut):
    # damage to the log's very last commit frame, which nothing after it vouches for (a kill
    # between writing a frame's header and its page looks the same).
    end = _last_commit_frame(wal)
    rng = random.Random(6)
    reported = complete = 0
    for run in range(40):
        offset = rng.randrange(32, end)
        damaged = bytearray(wal)
        damaged[offset] ^= 1 << rng.randrange(8)
        db = lay_out(tmp_path / str(run), {"": files[""], "-wal": bytes(damaged)})
        with SessionStore(db) as store:
            messages = store.load("s").messages
            recovery = store.recovery
        expected = [expected_message(i) for i in range(len(messages))]
        assert messages == expected, f"flip at {offset}: recovered messages differ"
        if recovery is None:
            assert len(messages) >= acked, f"flip at {offset} lost appends silently"
            continue
        reported += 1
        moved = recovery.moved_to
        assert moved.with_name(moved.name + "-wal").read_bytes() == bytes(damaged)
        assert recovery.salvaged
        if recovery.outcome == "recovered every commit":
            # The damaged frame's page was written again later: nothing was lost.
            assert len(messages) >= acked, f"flip at {offset}"
            complete += 1
    assert reported >= 30
    assert complete >= 5


# --------------------------------------------------------------------------- B2: page 1


def _small_store(directory: Path) -> Path:
    db = directory / "s.sqlite"
    with SessionStore(db) as store:
        store.create(session_id="a", name="n")
        store.writer("a").on_append([{"role": "user", "content": f"m{i}"} for i in range(5)])
    return db


def test_every_damaged_schema_byte_opens_intact_or_is_moved_aside(tmp_path: Path) -> None:
    """Flip each byte of page 1 (every seventh one): intact, or moved aside and reported.

    Before: 18.6% of flips raised a raw UnicodeDecodeError, others a raw
    'no such column' StorageError, and some opened with the schema wrong.
    """
    pristine = _small_store(tmp_path / "base").read_bytes()
    page_size = int.from_bytes(pristine[16:18], "big")
    expected = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    outcomes = {"intact": 0, "moved": 0}
    for offset in range(0, page_size, 7):
        damaged = bytearray(pristine)
        damaged[offset] ^= 0xFF
        directory = tmp_path / "t"
        shutil.rmtree(directory, ignore_errors=True)
        db = lay_out(directory, {"": bytes(damaged)})
        try:
            store = SessionStore(db)
        except AgentMemError as exc:  # pragma: no cover - reported in the assertion
            pytest.fail(f"flip at {offset}: open raised {exc!r}")
        with store:
            if store.recovery is not None:
                assert moved_aside(db)[0].read_bytes() == bytes(damaged)
                assert store.list() == []
                outcomes["moved"] += 1
            else:
                assert store.load("a").messages == expected, f"flip at {offset}"
                outcomes["intact"] += 1
    assert outcomes["moved"] > 0 and outcomes["intact"] > 0


def _raw_open_error(data: bytes, directory: Path) -> BaseException | None:
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / "raw.sqlite"
    db.write_bytes(data)
    conn = sqlite3.connect(db)
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        return exc
    finally:
        conn.close()
    return None


def test_memory_open_on_a_damaged_schema_is_reported_not_a_unicode_error(
    tmp_path: Path,
) -> None:
    """Before: Memory() raised the UnicodeDecodeError Python gets from SQLite's message."""
    pristine = _small_store(tmp_path / "base").read_bytes()
    # A flip in a table's name in the schema: SQLite quotes the undecodable name back.
    damaged = None
    start = 0
    while damaged is None:
        start = pristine.index(b"sessions", start) + 1
        candidate = bytearray(pristine)
        candidate[start] ^= 0xFF
        if isinstance(_raw_open_error(bytes(candidate), tmp_path / "raw"), UnicodeDecodeError):
            damaged = bytes(candidate)
    root = tmp_path / "mem"
    root.mkdir()
    (root / "sessions.sqlite").write_bytes(damaged)
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        assert mem.sessions.recovery is not None
        assert mem.sessions.list() == []
        assert moved_aside(root / "sessions.sqlite")[0].read_bytes() == damaged


# --------------------------------------------------------------------------- B3-B5: rows


def _chat(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {i}"}
        if i % 2 == 0
        else {"role": "assistant", "content": f"answer {i}"}
        for i in range(n)
    ]


def _session_with(tmp_path: Path, n: int = 8) -> tuple[Path, str]:
    root = tmp_path / "mem"
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        s = mem.session("chat", name="chat")
        for message in _chat(n):
            s.append(message)
    return root, "chat"


def _sql(root: Path, statement: str, *args: Any) -> None:
    conn = sqlite3.connect(root / "sessions.sqlite")
    try:
        conn.execute(statement, args)
        conn.commit()
    finally:
        conn.close()


def _quarantine_rows(root: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(root / "sessions.sqlite")
    try:
        return conn.execute("SELECT seq, reason FROM quarantine ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("old", "new"),
    [('"role":"user"', '"role":"usr"'), ('"content"', '"contenu"')],
    ids=["unknown-role", "damaged-key"],
)
def test_row_that_parses_but_fails_validation_is_quarantined(
    tmp_path: Path, old: str, new: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: InvalidMessageError locked the whole session out of mem.session(id)."""
    root, sid = _session_with(tmp_path)
    _sql(root, "UPDATE messages SET body = replace(body, ?, ?) WHERE seq = 2", old, new)
    with (
        caplog.at_level(logging.WARNING, logger="agentmem.storage"),
        agentmem.Memory(root=root, working_dir=tmp_path) as mem,
    ):
        s = mem.session(sid)
        assert s.repairs == {"quarantined": [2]}
        expected = _chat(8)
        del expected[2]
        assert [{k: m[k] for k in ("role", "content")} for m in s.history] == expected
        s.append({"role": "user", "content": "after"})
    assert [seq for seq, _ in _quarantine_rows(root)] == [2]
    assert "fails validation" in _quarantine_rows(root)[0][1]
    assert "seq 2" in caplog.text
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        again = mem.session(sid)
        assert again.history[-1]["content"] == "after" and again.repairs == {}


def test_changed_seq_is_put_back_and_later_edits_hit_the_right_row(tmp_path: Path) -> None:
    """Before: a changed seq reordered the resumed history and a later edit hit another row."""
    root, sid = _session_with(tmp_path)
    _sql(root, "UPDATE messages SET seq = 57 WHERE seq = 3")
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        record = mem.sessions.load(sid)
        assert record.repaired == [57]
        assert [m["content"] for m in record.messages] == [m["content"] for m in _chat(8)]
        writer = mem.sessions.writer(sid)
        writer.on_replace(3, {"role": "assistant", "content": "edited 3"})
        again = mem.sessions.load(sid)
    assert [m["content"] for m in again.messages][2:5] == ["question 2", "edited 3", "question 4"]
    assert again.repaired == [] and again.quarantined == []


@pytest.mark.parametrize("damage", ["gap", "text-seq", "duplicate-position"])
def test_unplaceable_seq_damage_is_repaired_in_stored_order_and_reported(
    tmp_path: Path, damage: str
) -> None:
    root, sid = _session_with(tmp_path)
    # Without a checksum the true position is unknown: keep stored order, make seqs contiguous.
    _sql(root, "UPDATE messages SET crc = NULL")
    if damage == "gap":
        _sql(root, "UPDATE messages SET seq = 90 WHERE seq = 7")
        _sql(root, "UPDATE messages SET seq = 40 WHERE seq = 2")
    elif damage == "text-seq":
        _sql(root, "UPDATE messages SET seq = 'x' WHERE seq = 2")
    else:
        _sql(root, "UPDATE messages SET seq = -1 WHERE seq = 0")
    with SessionStore(root / "sessions.sqlite") as store:
        record = store.load(sid)
        assert record.repaired, "the damage must be reported"
        assert len(record.messages) == 8 and record.quarantined == []
        conn = sqlite3.connect(root / "sessions.sqlite")
        try:
            seqs = [r[0] for r in conn.execute("SELECT seq FROM messages ORDER BY seq")]
        finally:
            conn.close()
        assert seqs == list(range(8))
        assert store.load(sid).repaired == []


def test_changed_body_that_still_validates_is_kept_and_reported(tmp_path: Path) -> None:
    root, sid = _session_with(tmp_path)
    _sql(root, "UPDATE messages SET body = replace(body, 'answer 5', 'answEr 5') WHERE seq = 5")
    with SessionStore(root / "sessions.sqlite") as store:
        record = store.load(sid)
        assert record.checksum_failed == [5]
        assert record.messages[5]["content"] == "answEr 5"
        assert store.load(sid).checksum_failed == []
    assert [seq for seq, _ in _quarantine_rows(root)] == [5]


def test_every_column_is_validated_on_read(tmp_path: Path) -> None:
    """Before: one session's bad name broke list() for all; wrong types raised raw errors."""
    root, sid = _session_with(tmp_path)
    with SessionStore(root / "sessions.sqlite") as store:
        store.create(session_id="other", name="fine")
        store.writer(sid).add_billing(agentmem.BillingRecord(at=1.0, kind="llm", prompt_tokens=3))
        store.writer(sid).add_billing(agentmem.BillingRecord(at=2.0, kind="llm", prompt_tokens=4))
    _sql(root, "UPDATE sessions SET name = CAST(x'ff41' AS TEXT) WHERE id = ?", sid)
    _sql(
        root, "UPDATE sessions SET created_at = 'yesterday', context_window = -3 WHERE id = ?", sid
    )
    _sql(root, "UPDATE billing SET prompt_tokens = 'many' WHERE at = 1.0")
    with SessionStore(root / "sessions.sqlite") as store:
        infos = {info.id: info for info in store.list()}
        assert infos["other"].damaged == () and infos["other"].name == "fine"
        damaged = infos[sid]
        assert set(damaged.damaged) == {"name", "created_at", "context_window"}
        assert damaged.name is None and damaged.created_at == 0.0
        assert damaged.context_window is None
        record = store.load(sid)
        assert record.billing_quarantined == 1
        assert [b.prompt_tokens for b in record.billing] == [4]
        assert len(record.messages) == 8
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        assert len(mem.session(sid).history) == 8


@settings(max_examples=25, deadline=None)
@given(
    damage=st.lists(
        st.tuples(
            st.sampled_from(["flip", "seq", "crc", "swap", "role"]),
            st.integers(0, 9),
            st.integers(0, 10_000),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_damaged_rows_never_surface_raw_and_intact_rows_survive(
    tmp_path_factory: pytest.TempPathFactory, damage: list[tuple[str, int, int]]
) -> None:
    """Random damage to message rows: load never raises, every untouched row loads intact."""
    directory = tmp_path_factory.mktemp("rows")
    db = directory / "s.sqlite"
    chat = _chat(10)
    with SessionStore(db) as store:
        store.create(session_id="s")
        store.writer("s").on_append(chat)
    touched: set[int] = set()
    conn = sqlite3.connect(db)
    try:
        for kind, seq, x in damage:
            row = conn.execute(
                "SELECT CAST(body AS BLOB) FROM messages WHERE seq = ?", (seq,)
            ).fetchone()
            if row is None:
                continue
            touched.add(seq)
            if kind == "flip":
                body = bytearray(row[0])
                body[x % len(body)] ^= 1 << (x % 8)
                conn.execute("UPDATE messages SET body = ? WHERE seq = ?", (bytes(body), seq))
            elif kind == "seq":
                conn.execute("UPDATE OR IGNORE messages SET seq = ? WHERE seq = ?", (x, seq))
            elif kind == "crc":
                conn.execute("UPDATE messages SET crc = ? WHERE seq = ?", (x or None, seq))
            elif kind == "swap":
                other = x % 10
                touched.add(other)
                conn.execute("UPDATE messages SET seq = -7 WHERE seq = ?", (seq,))
                conn.execute("UPDATE messages SET seq = ? WHERE seq = ?", (seq, other))
                conn.execute("UPDATE messages SET seq = ? WHERE seq = -7", (other,))
            else:
                conn.execute("UPDATE messages SET role = 'x', body = '{}' WHERE seq = ?", (seq,))
        conn.commit()
    finally:
        conn.close()
    with SessionStore(db) as store:
        record = store.load("s")
        again = store.load("s")
    assert again.messages == record.messages
    assert again.quarantined == [] and again.repaired == []
    bodies = [orjson.dumps(m) for m in record.messages]
    for seq, message in enumerate(chat):
        if seq not in touched:
            assert orjson.dumps(message) in bodies, f"untouched row {seq} was lost"
    for message in record.messages:
        assert normalize_message(message) == [message]
    shutil.rmtree(directory, ignore_errors=True)


# --------------------------------------------------------------------------- B6: closed


def test_closed_session_history_refuses_every_mutation(tmp_path: Path) -> None:
    """Before: s.history still wrote after s.close(), outside the lock, over the next owner."""
    root = tmp_path / "mem"
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        old = mem.session("s")
        old.append({"role": "user", "content": "first"})
        old.close()
        new = mem.session("s")
        new.append({"role": "assistant", "content": "the new owner's answer"})
        before = old.history.to_list()
        attempts = [
            lambda: old.history.append({"role": "user", "content": "stale"}),
            lambda: old.history.replace_all([{"role": "user", "content": "stale"}]),
            lambda: old.history.pop_last(),
            lambda: old.history.truncate_from(0),
            lambda: old.history.replace_system_prompt("stale"),
            lambda: old.history.append({"role": "user", "content": "t", "transient": True}),
            lambda: old._writer.on_replace(1, {"role": "assistant", "content": "stale"}),
            lambda: old._writer.rename("stale"),
        ]
        for attempt in attempts:
            with pytest.raises(agentmem.SessionClosedError):
                attempt()
        assert old.history.to_list() == before
        new.close()
        again = mem.session("s")
        assert [m["content"] for m in again.history] == ["first", "the new owner's answer"]


# --------------------------------------------------------------------------- B8, B10: state


def _stored_state(root: Path, sid: str) -> dict[str, Any]:
    conn = sqlite3.connect(root / "sessions.sqlite")
    try:
        state: dict[str, Any] = orjson.loads(
            conn.execute("SELECT state FROM sessions WHERE id = ?", (sid,)).fetchone()[0]
        )
        return state
    finally:
        conn.close()


def test_state_parts_from_a_newer_release_are_kept_never_overwritten(tmp_path: Path) -> None:
    """Before: a v2 window/yarn part was reset on resume, then replaced by v1 on close."""
    root, sid = _session_with(tmp_path)
    state = _stored_state(root, sid)
    state["window"] = {**state["window"], "version": 99, "new_field": [1, 2]}
    state["yarn"] = {**state["yarn"], "version": 7}
    state["future_part"] = {"anything": True}
    _sql(root, "UPDATE sessions SET state = ? WHERE id = ?", orjson.dumps(state).decode(), sid)
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        s = mem.session(sid)
        assert set(s.unreadable_state) == {"window", "yarn", "future_part"}
        assert "version 99" in s.unreadable_state["window"]
        task = s.start_task("more work")
        s.append({"role": "assistant", "content": "done"})
        s.context()
        s.close()
    after = _stored_state(root, sid)
    for key in ("window", "yarn", "future_part"):
        assert after[key] == state[key], key
    assert str(task) in after["tasks"]["iterations"]  # the rest was saved
    assert str(task) not in state["tasks"]["iterations"]


def test_session_state_from_a_newer_release_is_a_format_version_error(tmp_path: Path) -> None:
    root, sid = _session_with(tmp_path)
    state = {**_stored_state(root, sid), "version": 5}
    _sql(root, "UPDATE sessions SET state = ? WHERE id = ?", orjson.dumps(state).decode(), sid)
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        with pytest.raises(agentmem.FormatVersionError) as info:
            mem.session(sid)
        assert info.value.found == 5 and info.value.supported == 1
        assert isinstance(info.value, agentmem.StorageError)


def test_sessions_database_from_a_newer_release_is_a_format_version_error(
    tmp_path: Path,
) -> None:
    db = _small_store(tmp_path)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    conn.commit()
    conn.close()
    with pytest.raises(agentmem.FormatVersionError) as info:
        SessionStore(db)
    assert info.value.found == 99 and info.value.path == db


def test_state_without_a_format_header_resumes(tmp_path: Path) -> None:
    """Before: a session saved as docs/storage.md shows could not be resumed."""
    root = tmp_path / "mem"
    root.mkdir()
    with SessionStore(root / "sessions.sqlite") as store:
        info = store.create(name="docs example")
        writer = store.writer(info.id)
        writer.on_append([{"role": "user", "content": "hello"}])
        writer.save_state({"window": {"start": 0}})
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        s = mem.session(info.id)
        assert [m["content"] for m in s.history] == ["hello"]
        s.append({"role": "assistant", "content": "hi"})


def test_golden_v1_session_resumes_through_the_facade(tmp_path: Path) -> None:
    golden = Path(__file__).with_name("golden")
    root = tmp_path / "mem"
    root.mkdir()
    shutil.copyfile(golden / "sessions-v1.sqlite", root / "sessions.sqlite")
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        assert mem.sessions.recovery is None
        s = mem.session("golden-main")
        record = mem.sessions.load("golden-main")
        assert s.history.to_list() == record.messages and len(record.messages) == 7
        assert set(s.unreadable_state) == {"summary", "counters"}
        s.append({"role": "user", "content": "and now?"})
        s.close()
        again = mem.session("golden-main")
        assert again.history[-1]["content"] == "and now?"


# --------------------------------------------------------------------------- B7: races

_RACER = """
import os, sys, time
root, sid, go = sys.argv[1:4]
import agentmem
while not os.path.exists(go):
    time.sleep(0.0005)
try:
    os.makedirs(root, exist_ok=True)  # the working directory must exist (not the store in it)
    mem = agentmem.Memory(root=root, working_dir=root)
    try:
        s = mem.session(sid)
        s.append({"role": "user", "content": "from %d" % os.getpid()})
        print("opened", flush=True)
        time.sleep(0.3)
    finally:
        mem.close()
except agentmem.StoreLockedError:
    print("locked", flush=True)
except BaseException as exc:
    print("ERROR", type(exc).__name__, exc, flush=True)
"""


@POSIX_ONLY
@pytest.mark.parametrize("round_", range(4))
def test_processes_racing_on_a_new_root_and_session_id(tmp_path: Path, round_: int) -> None:
    """Before: 'already exists' (InvalidArgumentError) for the loser of a create race, and
    'database is locked' after 1 ms for processes opening a brand-new root together."""
    root = tmp_path / f"root{round_}"
    go = tmp_path / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(root), "same-id", str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    go.touch()
    outcomes = []
    for proc in racers:
        out, err = proc.communicate(timeout=60)
        outcomes.append(out.decode().strip() or err.decode()[-500:])
    assert all(o in ("opened", "locked") for o in outcomes), outcomes
    opened = outcomes.count("opened")
    assert opened >= 1
    with SessionStore(root / "sessions.sqlite") as store:
        assert [info.id for info in store.list()] == ["same-id"]
        assert len(store.load("same-id").messages) == opened


# --------------------------------------------------------------------------- B9: bad input


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda store: store.create(name="a\ud800b"), "name"),
        (lambda store: store.create(model="\udfff"), "model"),
        (lambda store: store.create(working_directory="/tmp/\ud800"), "working_directory"),
        (lambda store: store.rename("s", "\ud800"), "name"),
    ],
)
def test_lone_surrogates_are_refused_naming_the_argument(
    tmp_path: Path, call: Any, argument: str
) -> None:
    """Before: a raw UnicodeEncodeError from sqlite3."""
    with SessionStore(tmp_path / "s.sqlite") as store:
        store.create(session_id="s", name="kept")
        with pytest.raises(agentmem.InvalidArgumentError, match=f"^{argument} is not valid"):
            call(store)
        assert [(i.id, i.name) for i in store.list()] == [("s", "kept")]


def test_lone_surrogate_in_a_session_name_through_the_facade(tmp_path: Path) -> None:
    with agentmem.Memory(root=tmp_path / "mem", working_dir=tmp_path) as mem:
        with pytest.raises(agentmem.InvalidArgumentError, match=r"^name"):
            mem.session("s", name="\ud800")
        assert mem.sessions.list() == []
        assert mem.session("s").history.to_list() == []


def test_store_under_a_file_is_a_storage_error_naming_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    with pytest.raises(agentmem.StorageError, match=r"^path .*cannot create its directory"):
        SessionStore(blocker / "sessions.sqlite")
    assert blocker.read_text() == "not a directory"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores permissions"
)
def test_read_only_root_is_a_storage_error(tmp_path: Path) -> None:
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o555)
    try:
        with pytest.raises(agentmem.StorageError):
            SessionStore(root / "sessions.sqlite")
    finally:
        root.chmod(0o755)
