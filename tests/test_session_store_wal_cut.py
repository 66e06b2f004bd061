"""A killed writer's ``-wal`` cut short: the lost commits are reported, never dropped silently.

A child appends with durability "full" and is killed with SIGKILL, so its
acknowledged commits sit un-checkpointed in the ``-wal``. Truncating that
log (at a frame boundary or mid-frame) makes SQLite replay only the valid
prefix and silently forget the rest. The killed writer's ``-shm`` still
records how many frames were committed (``mxFrame``, same salts as the
log), so every cut that removes a committed frame must be moved aside and
reported, with the commits before the cut recovered; a cut that removes
nothing committed, and a kill with no cut at all, must report nothing.
"""

from __future__ import annotations

import logging
import shutil
import signal
import sqlite3
import struct
import sys
from pathlib import Path

import pytest
from _kill9_child import expected_message
from _store_faults import kill_after, lay_out, moved_aside

import agentmem
from agentmem.session_store import SessionStore

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")

ACKS = 31


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], int]:
    """The main file, ``-wal`` and ``-shm`` a writer killed after ACKS appends left behind."""
    db = tmp_path_factory.mktemp("cut") / "s.sqlite"
    with SessionStore(db) as store:
        store.create(session_id="s")
    acked = kill_after(db, "s", ACKS)
    files = {suffix: db.with_name(db.name + suffix).read_bytes() for suffix in ("", "-wal", "-shm")}
    return files, max(acked) + 1


def _mx_frame(shm: bytes) -> int:
    """``mxFrame`` from a wal-index header (native byte order)."""
    return int(struct.unpack(f"{'<' if sys.byteorder == 'little' else '>'}I", shm[16:20])[0])


def _committed_frames(shm: bytes, wal: bytes) -> int:
    """``mxFrame`` of the killed writer's wal-index, checked against its log."""
    assert shm[:48] == shm[48:96], "the wal-index header copies should agree after a kill"
    assert shm[32:40] == wal[16:24], "the wal-index should describe this log"
    return _mx_frame(shm)


def _cuts(wal: bytes, committed: int) -> list[int]:
    """Deterministic truncation offsets: frame boundaries and mid-frame, all through the log."""
    page_size = struct.unpack(">I", wal[8:12])[0]
    frame = 24 + page_size
    frames = (len(wal) - 32) // frame
    boundaries = sorted({1, 2, committed // 4, committed // 2, committed - 1, committed})
    cuts = [0, 16, 32]  # empty log, a torn header, a header without frames
    for k in boundaries:
        start = 32 + k * frame
        cuts += [start, start - frame + 10, start - frame + 24 + page_size // 2, start - 1]
    if frames > committed:  # uncommitted frames of an append the kill cut short
        cuts.append(32 + committed * frame + frame // 2)
    return sorted({c for c in cuts if 0 <= c < len(wal)})


def test_cut_log_is_reported_or_keeps_every_acknowledged_append(
    tmp_path: Path, killed: tuple[dict[str, bytes], int], caplog: pytest.LogCaptureFixture
) -> None:
    """Before: 20/20 cuts lost 2..31 acknowledged appends with no report at all."""
    files, acked = killed
    wal = files["-wal"]
    committed = _committed_frames(files["-shm"], wal)
    page_size = struct.unpack(">I", wal[8:12])[0]
    committed_end = 32 + committed * (24 + page_size)
    cuts = _cuts(wal, committed)
    assert len(cuts) >= 10
    reported = 0
    for cut in cuts:
        cut_wal = wal[:cut]
        db = lay_out(tmp_path / str(cut), {"": files[""], "-wal": cut_wal, "-shm": files["-shm"]})
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="agentmem.storage"), SessionStore(db) as store:
            messages = store.load("s").messages
            recovery = store.recovery
        assert messages == [expected_message(i) for i in range(len(messages))], f"cut at {cut}"
        if recovery is None:
            assert len(messages) >= acked, f"cut at {cut} lost appends silently"
            assert cut >= committed_end, f"cut at {cut} removed committed frames unreported"
            assert not moved_aside(db)
            continue
        reported += 1
        assert cut < committed_end, f"cut at {cut} removed nothing committed but was reported"
        moved = recovery.moved_to
        assert str(moved) in caplog.text
        assert moved.read_bytes() == files[""]
        assert moved.with_name(moved.name + "-wal").read_bytes() == cut_wal
        assert moved.with_name(moved.name + "-shm").read_bytes() == files["-shm"]
        if cut >= 32:
            assert "wal-index" in recovery.reason and "lost" in recovery.reason
        assert recovery.outcome != "recovered every commit"
        assert recovery.salvaged
    assert reported >= len([c for c in cuts if c < committed_end]) >= 10


def test_cut_log_through_the_facade_is_reported(
    tmp_path: Path, killed: tuple[dict[str, bytes], int]
) -> None:
    files, acked = killed
    wal = files["-wal"]
    committed = _committed_frames(files["-shm"], wal)
    frame = 24 + struct.unpack(">I", wal[8:12])[0]
    for k, cut in enumerate([32 + (committed // 2) * frame, 32 + (committed - 1) * frame + 100]):
        root = tmp_path / str(k)
        root.mkdir()
        for suffix, data in {"": files[""], "-wal": wal[:cut], "-shm": files["-shm"]}.items():
            (root / f"sessions.sqlite{suffix}").write_bytes(data)
        with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
            recovery = mem.sessions.recovery
            history = list(mem.session("s").history)
        assert recovery is not None, f"cut at {cut} was not reported"
        assert "wal-index" in recovery.reason
        assert (
            recovery.moved_to.with_name(recovery.moved_to.name + "-wal").read_bytes() == (wal[:cut])
        )
        assert 0 < len(history) <= acked
        assert history == [
            agentmem.normalize_message(expected_message(i))[0] for i in range(len(history))
        ]


def test_intact_kill9_with_its_wal_index_is_not_reported(tmp_path: Path) -> None:
    """Kills after 1, 2, 3, 5 and 8 appends, each reopened as found: never a false report."""
    db = tmp_path / "s.sqlite"
    with SessionStore(db) as store:
        store.create(session_id="s")
    total = 0
    for acks in (1, 2, 3, 5, 8):
        acked = kill_after(db, "s", acks)
        total = max(acked) + 1
        assert db.with_name(db.name + "-shm").exists()
        copy = tmp_path / f"copy{acks}"
        copy.mkdir()
        for suffix in ("", "-wal", "-shm"):
            shutil.copyfile(db.with_name(db.name + suffix), copy / f"s.sqlite{suffix}")
        with SessionStore(copy / "s.sqlite") as store:
            assert store.recovery is None
            messages = store.load("s").messages
        assert len(messages) >= total
        assert messages == [expected_message(i) for i in range(len(messages))]
    with SessionStore(db) as store:
        assert store.recovery is None
        assert len(store.load("s").messages) >= total


def test_stale_wal_index_of_an_earlier_log_is_ignored(tmp_path: Path) -> None:
    """A ``-shm`` whose salts are another generation's says nothing about this log."""
    db = tmp_path / "s.sqlite"
    with SessionStore(db) as store:
        store.create(session_id="s")
    kill_after(db, "s", ACKS)
    stale = db.with_name(db.name + "-shm").read_bytes()
    with SessionStore(db) as store:  # a clean close checkpoints and deletes the log
        assert store.recovery is None
    acked = kill_after(db, "s", 2)  # a new, shorter log with new salts
    wal = db.with_name(db.name + "-wal").read_bytes()
    assert stale[32:40] != wal[16:24]
    assert _mx_frame(stale) > (len(wal) - 32) // (24 + struct.unpack(">I", wal[8:12])[0])
    copy = lay_out(tmp_path / "copy", {"": db.read_bytes(), "-wal": wal, "-shm": stale})
    with SessionStore(copy) as store:
        assert store.recovery is None
        assert len(store.load("s").messages) > max(acked)


def test_cut_log_after_a_checkpoint_recovers_the_main_file_alone(tmp_path: Path) -> None:
    """Every frame was checkpointed (``nBackfill``): replaying the cut log would mix old pages
    into the newer main file, so the set is reported and the main file kept without it."""
    db = tmp_path / "s.sqlite"
    store = SessionStore(db)
    try:
        store.create(session_id="s")
        writer = store.writer("s")
        for seq in range(12):
            writer.on_append([expected_message(seq)])
        raw = sqlite3.connect(db)
        try:
            assert raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[0] == 0
            files = {s: db.with_name(db.name + s).read_bytes() for s in ("", "-wal", "-shm")}
        finally:
            raw.close()
    finally:
        store.close()
    wal = files["-wal"]
    frame = 24 + struct.unpack(">I", wal[8:12])[0]
    cut = 32 + ((len(wal) - 32) // frame // 2) * frame
    copy = lay_out(tmp_path / "copy", {**files, "-wal": wal[:cut]})
    with SessionStore(copy) as store:
        recovery = store.recovery
        messages = store.load("s").messages
    assert recovery is not None
    assert recovery.outcome == "recovered the database without its log"
    assert messages == [expected_message(i) for i in range(12)]


def test_deleted_log_beside_its_wal_index_is_reported(
    tmp_path: Path, killed: tuple[dict[str, bytes], int]
) -> None:
    """Before: a missing ``-wal`` was never looked for, and its commits vanished silently."""
    files, _ = killed
    db = lay_out(tmp_path, {"": files[""], "-shm": files["-shm"]})
    with SessionStore(db) as store:
        recovery = store.recovery
        messages = store.load("s").messages
    assert recovery is not None
    assert "write-ahead log is missing" in recovery.reason
    assert recovery.outcome == "recovered the database without its log"
    assert recovery.moved_to.read_bytes() == files[""]
    assert (
        recovery.moved_to.with_name(recovery.moved_to.name + "-shm").read_bytes() == (files["-shm"])
    )
    assert messages == [expected_message(i) for i in range(len(messages))]


def test_damaged_last_commit_frame_is_reported_with_its_wal_index(
    tmp_path: Path, killed: tuple[dict[str, bytes], int]
) -> None:
    """Nothing after the last commit frame vouches for it, but the wal-index does."""
    files, acked = killed
    wal = files["-wal"]
    committed = _committed_frames(files["-shm"], wal)
    frame = 24 + struct.unpack(">I", wal[8:12])[0]
    last = 32 + (committed - 1) * frame
    for k, offset in enumerate([last + 4, last + 24 + 100, last + frame - 1]):
        damaged = bytearray(wal)
        damaged[offset] ^= 0x10
        db = lay_out(
            tmp_path / str(k), {"": files[""], "-wal": bytes(damaged), "-shm": files["-shm"]}
        )
        with SessionStore(db) as store:
            recovery = store.recovery
            messages = store.load("s").messages
        assert recovery is not None, f"flip at {offset} was not reported"
        assert "wal-index" in recovery.reason
        assert recovery.moved_to.with_name(recovery.moved_to.name + "-wal").read_bytes() == (
            bytes(damaged)
        )
        assert 0 < len(messages) <= acked
        assert messages == [expected_message(i) for i in range(len(messages))]
