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
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _kill9_child import expected_message

import agentmem
from agentmem.errors import AgentMemError
from agentmem.session_store import SessionStore

CHILD = Path(__file__).with_name("_kill9_child.py")
POSIX_ONLY = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")


def _kill_after(db: Path, session_id: str, acks: int) -> list[int]:
    """Run the appending child until it acknowledged ``acks`` appends, then SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), "append", str(db), session_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    acked: list[int] = []
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"start\n"
        assert proc.stdout.readline().startswith(b"ready")
        while len(acked) < acks:
            line = proc.stdout.readline()
            assert line, proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            acked.append(int(line))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return acked


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], int]:
    """The files a child killed with SIGKILL left behind (its appends still in the -wal)."""
    if not hasattr(signal, "SIGKILL"):
        pytest.skip("needs POSIX SIGKILL")
    db = tmp_path_factory.mktemp("killed") / "s.sqlite"
    with SessionStore(db) as store:
        store.create(session_id="s")
    acked = _kill_after(db, "s", 40)
    files = {
        suffix: db.with_name(db.name + suffix).read_bytes()
        for suffix in ("", "-wal", "-shm")
        if db.with_name(db.name + suffix).exists()
    }
    assert len(files.get("-wal", b"")) > 32, "the acknowledged appends should be in the log"
    return files, max(acked) + 1


def _lay_out(directory: Path, files: dict[str, bytes | None]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / "s.sqlite"
    for suffix, data in files.items():
        if data is not None:
            db.with_name(db.name + suffix).write_bytes(data)
    return db


def _aside(db: Path) -> list[Path]:
    return sorted(db.parent.glob(db.name + ".corrupt-*"))


# --------------------------------------------------------------------------- B1: the -wal


@POSIX_ONLY
def test_killed_store_reopens_intact_without_recovery(
    tmp_path: Path, killed: tuple[dict[str, bytes], int]
) -> None:
    files, acked = killed
    db = _lay_out(tmp_path, dict(files))
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
    db = _lay_out(tmp_path, {**files, "": main})
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
    db = _lay_out(tmp_path, dict(files))
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
    rng = random.Random(6)
    reported = 0
    for run in range(40):
        offset = rng.randrange(32, len(wal))
        damaged = bytearray(wal)
        damaged[offset] ^= 1 << rng.randrange(8)
        db = _lay_out(tmp_path / str(run), {"": files[""], "-wal": bytes(damaged)})
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
    assert reported >= 30


# --------------------------------------------------------------------------- B2: page 1


def _small_store(directory: Path) -> Path:
    db = directory / "s.sqlite"
    with SessionStore(db) as store:
        store.create(session_id="a", name="n")
        store.writer("a").on_append([{"role": "user", "content": f"m{i}"} for i in range(5)])
    return db


def test_every_damaged_schema_byte_opens_intact_or_is_moved_aside(tmp_path: Path) -> None:
    """Flip each byte of page 1 (every third one): intact, or moved aside and reported.

    Before: 18.6% of flips raised a raw UnicodeDecodeError, others a raw
    'no such column' StorageError, and some opened with the schema wrong.
    """
    pristine = _small_store(tmp_path / "base").read_bytes()
    page_size = int.from_bytes(pristine[16:18], "big")
    expected = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    outcomes = {"intact": 0, "moved": 0}
    for offset in range(0, page_size, 3):
        damaged = bytearray(pristine)
        damaged[offset] ^= 0xFF
        directory = tmp_path / "t"
        shutil.rmtree(directory, ignore_errors=True)
        db = _lay_out(directory, {"": bytes(damaged)})
        try:
            store = SessionStore(db)
        except AgentMemError as exc:  # pragma: no cover - reported in the assertion
            pytest.fail(f"flip at {offset}: open raised {exc!r}")
        with store:
            if store.recovery is not None:
                assert _aside(db)[0].read_bytes() == bytes(damaged)
                assert store.list() == []
                outcomes["moved"] += 1
            else:
                assert store.load("a").messages == expected, f"flip at {offset}"
                outcomes["intact"] += 1
    assert outcomes["moved"] > 0 and outcomes["intact"] > 0


def test_memory_open_on_a_damaged_schema_is_reported_not_a_unicode_error(
    tmp_path: Path,
) -> None:
    root = tmp_path / "mem"
    root.mkdir()
    pristine = _small_store(tmp_path / "base").read_bytes()
    # The name of a table in the schema text: undecodable once its bytes are flipped.
    offset = pristine.index(b"CREATE TABLE sessions") + len(b"CREATE TABLE ")
    damaged = bytearray(pristine)
    damaged[offset + 1] ^= 0xFF
    (root / "sessions.sqlite").write_bytes(bytes(damaged))
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        assert mem.sessions.recovery is not None
        assert mem.sessions.list() == []
