"""The time machine's blob collection (one collector, which never guesses), and
its rule for the store's own trouble (a snapshot that cannot be stored).

``TimeMachine.collect_garbage`` and ``delete_stored_session`` (a session
deleted from the store) share :func:`agentmem.time_machine._snapshots.collect_unreferenced`:
while any session record cannot be read, its references are unknown and no
blob is removed.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from agentmem.time_machine import TimeMachine, delete_stored_session


def _age_blobs(store: Path, seconds: float = 7200.0) -> list[Path]:
    """Make every blob older than the collection's grace period; returns them."""
    blobs = [p for p in (store / "blobs").rglob("*") if p.is_file()]
    old = time.time() - seconds
    for blob in blobs:
        os.utime(blob, (old, old))
    return blobs


def _two_sessions(tmp_path: Path) -> tuple[TimeMachine, TimeMachine, Path]:
    work, store = tmp_path / "work", tmp_path / "store"
    work.mkdir()
    (work / "a.txt").write_text("held only by session a")
    (work / "b.txt").write_text("held only by session b")
    tms = []
    for sid, name in (("a", "a.txt"), ("b", "b.txt")):
        tm = TimeMachine(work, sid, store, memory_root=store)
        tm.start_new_task("edit")
        tm.record_file_before_change(name)
        tms.append(tm)
    return tms[0], tms[1], store


@pytest.mark.parametrize("damage", [b"{not json", b"\xff\xfe not utf-8"])
def test_collect_garbage_removes_nothing_while_a_record_is_unreadable(
    tmp_path: Path, damage: bytes
) -> None:
    tm_a, _, store = _two_sessions(tmp_path)
    blobs = _age_blobs(store)
    assert len(blobs) == 2
    (store / "sessions" / "b.json").write_bytes(damage)  # b's references are now unknown
    (store / "sessions" / "b.index.json").unlink(missing_ok=True)
    assert tm_a.collect_garbage() == 0
    assert all(blob.exists() for blob in blobs)  # b's blob survives


def test_collect_garbage_removes_what_no_record_refers_to(tmp_path: Path) -> None:
    tm_a, _, store = _two_sessions(tmp_path)
    blobs = _age_blobs(store)
    for suffix in (".json", ".index.json"):
        (store / "sessions" / f"b{suffix}").unlink(
            missing_ok=True
        )  # b is gone, its blob unreferenced
    assert tm_a.collect_garbage() == 1
    assert sum(blob.exists() for blob in blobs) == 1
    assert tm_a.undo_last_task() is not None  # a's snapshot is still there


def test_deleting_a_session_keeps_blobs_while_another_record_is_unreadable(
    tmp_path: Path,
) -> None:
    _, _, store = _two_sessions(tmp_path)
    blobs = _age_blobs(store)
    (store / "sessions" / "b.json").write_bytes(b"{not json")
    assert delete_stored_session(store, "a") == 0
    assert not (store / "sessions" / "a.json").exists()
    assert all(blob.exists() for blob in blobs)


def test_a_snapshot_that_cannot_be_stored_does_not_stop_the_guard_recording(
    tmp_path: Path,
) -> None:
    """One file's snapshot failing (disk full) is recorded; the command's other
    changes are still recorded, so an undo brings a deleted file back."""
    work, store = tmp_path / "work", tmp_path / "store"
    work.mkdir()
    (work / "a.txt").write_text("old a")
    (work / "z.txt").write_text("precious z")
    tm = TimeMachine(work, "s", store, memory_root=store)
    tm.start_new_task("run a command")
    put = tm.blobs.put

    def full_disk(data: bytes) -> tuple[str, int]:
        if data == b"new a":
            raise OSError(errno.ENOSPC, "No space left on device")
        return put(data)

    tm.blobs.put = full_disk  # type: ignore[method-assign]
    with tm.guard():
        (work / "a.txt").write_text("new a")  # sorted first: its snapshot fails
        (work / "z.txt").unlink()
    files = tm.get_task_history()[-1]["files"]
    assert files == ["a.txt", "z.txt"]
    assert any("a.txt" in e and "could not be stored" in e for e in tm.errors)
    tm.undo_last_task()
    assert (work / "z.txt").read_text() == "precious z"
    assert (work / "a.txt").read_text() == "new a"  # unknown content: left alone
