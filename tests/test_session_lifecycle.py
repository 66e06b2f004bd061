"""Opening only what exists (``create=False``) and deleting a session with everything it owns."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import scaled

from agentmem import InvalidArgumentError, Memory, SessionNotFoundError, StoreLockedError

REPO = Path(__file__).resolve().parents[1]


def tree(root: Path) -> set[str]:
    """Every path under ``root`` (SQLite's own -wal/-shm side files aside)."""
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if not p.name.endswith(("-wal", "-shm", "-journal"))
    }


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    with Memory(root=tmp_path / ".agentmem", working_dir=tmp_path) as m:
        yield m


# --------------------------------------------------------------------------- create=False


def test_create_false_resumes_an_existing_session(mem: Memory) -> None:
    with mem.session("known") as s:
        s.start_task("hello")
    with mem.session("known", create=False) as s:
        assert s.history[0]["content"] == "hello"


def test_create_false_with_an_unknown_id_raises_and_creates_nothing(
    mem: Memory, tmp_path: Path
) -> None:
    with mem.session("known") as s:
        s.start_task("hello")
    before = tree(tmp_path)
    with pytest.raises(SessionNotFoundError) as info:
        mem.session("knwon", create=False)  # a typo
    assert info.value.session_id == "knwon"
    assert tree(tmp_path) == before
    assert [i.id for i in mem.sessions.list()] == ["known"]
    assert not mem.sessions.exists("knwon")


@settings(max_examples=scaled(40), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    session_id=st.one_of(
        st.sampled_from(["a", "b", "c.1", "zz-9"]),
        st.text(min_size=1, max_size=12),
        st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True),
    )
)
def test_create_false_either_resumes_or_changes_nothing(
    mem: Memory, tmp_path: Path, session_id: str
) -> None:
    for sid in ("a", "b", "c.1"):
        if not mem.sessions.exists(sid):
            mem.session(sid).close()
    before = tree(tmp_path)
    ids = {i.id for i in mem.sessions.list()}
    try:
        s = mem.session(session_id, create=False)
    except (SessionNotFoundError, InvalidArgumentError):
        assert session_id not in ids
        assert tree(tmp_path) == before
    else:
        assert session_id in ids and s.id == session_id
        s.close()
    assert {i.id for i in mem.sessions.list()} == ids


def test_create_false_needs_an_id(mem: Memory) -> None:
    with pytest.raises(InvalidArgumentError, match="create=False"):
        mem.session(create=False)
    with pytest.raises(Exception, match="create must be True or False"):
        mem.session("x", create="no")  # type: ignore[arg-type]
    assert mem.sessions.list() == []


def test_create_false_when_the_session_is_deleted_while_opening_leaves_nothing(
    mem: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.session("gone").close()
    mem.sessions.delete("gone")
    before = tree(tmp_path)
    answers = iter([True])  # the look before locking still saw it
    real = mem.sessions.exists
    monkeypatch.setattr(mem.sessions, "exists", lambda sid: next(answers, None) or real(sid))
    with pytest.raises(SessionNotFoundError):
        mem.session("gone", create=False)
    assert tree(tmp_path) == before  # the lock file taken meanwhile is gone too


def test_create_false_in_incognito(tmp_path: Path) -> None:
    with Memory(root=tmp_path / "r", working_dir=tmp_path, incognito=True) as mem:
        with pytest.raises(SessionNotFoundError):
            mem.session("nope", create=False)
        mem.session("yes").close()
        mem.session("yes", create=False).close()
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- delete


def edit_session(mem: Memory, sid: str, work: Path, files: dict[str, str]) -> None:
    """A session whose tasks changed ``files``: time-machine records and blobs on disk."""
    with mem.session(sid) as s:
        s.start_task("edit the files")
        for name, text in files.items():
            s.time_machine.record_file_before_change(work / name)
            (work / name).write_text(text)
        s.start_task("next")  # freezes the first task's AFTER state


def age_blobs(root: Path) -> None:
    """Make every blob older than the collector's grace period (for a concurrent writer)."""
    old = time.time() - 7_200
    for blob in (root / "snapshots" / "blobs").rglob("*"):
        if blob.is_file():
            os.utime(blob, (old, old))


def owned_paths(root: Path, sid: str) -> list[Path]:
    found = list((root / "snapshots" / "sessions").glob(f"{sid}.*"))
    return found + [p for p in (root / "locks").glob("*") if p.name == f"{sid}.lock"]


def test_delete_removes_the_records_lock_file_and_unshared_blobs(
    mem: Memory, tmp_path: Path
) -> None:
    root = mem.root
    for name, text in (("shared.txt", "same before"), ("own.txt", "only mine before")):
        (tmp_path / name).write_text(text)
    edit_session(mem, "doomed", tmp_path, {"shared.txt": "v1", "own.txt": "v2"})
    (tmp_path / "shared.txt").write_text("same before")  # the keeper sees the same bytes
    edit_session(mem, "keeper", tmp_path, {"shared.txt": "v3"})
    assert owned_paths(root, "doomed")
    blobs_before = {p.name for p in (root / "snapshots" / "blobs").rglob("*") if p.is_file()}
    age_blobs(root)

    assert mem.sessions.delete("doomed") is True

    assert owned_paths(root, "doomed") == []
    assert not mem.sessions.exists("doomed")
    blobs_after = {p.name for p in (root / "snapshots" / "blobs").rglob("*") if p.is_file()}
    assert blobs_after < blobs_before  # "only mine before", "v1" and "v2" went
    # The keeper's blobs (its "same before" is content-shared with the deleted one) stay:
    with mem.session("keeper", create=False) as s:
        s.switch_to_task(None)  # back to before the keeper's first task
        assert (tmp_path / "shared.txt").read_text() == "same before"
    # Deleting again: nothing left, nothing to do.
    assert mem.sessions.delete("doomed") is False


def test_delete_of_a_session_open_in_this_process_raises_and_deletes_nothing(
    mem: Memory, tmp_path: Path
) -> None:
    (tmp_path / "f.txt").write_text("x")
    edit_session(mem, "busy", tmp_path, {"f.txt": "y"})
    s = mem.session("busy")
    s.append({"role": "assistant", "content": "still working"})
    before = tree(tmp_path)
    with pytest.raises(StoreLockedError):
        mem.sessions.delete("busy")
    # Another Memory over the same root in this process is refused too.
    with Memory(root=mem.root, working_dir=tmp_path) as other, pytest.raises(StoreLockedError):
        other.sessions.delete("busy")
    assert tree(tmp_path) == before
    s.append({"role": "assistant", "content": "and writing"})  # the holder is unaffected
    s.close()
    record = mem.sessions.load("busy")
    assert record.messages[-1]["content"] == "and writing"
    assert mem.sessions.delete("busy") is True


def test_delete_of_a_session_open_in_another_process_raises_and_deletes_nothing(
    mem: Memory, tmp_path: Path
) -> None:
    (tmp_path / "f.txt").write_text("x")
    edit_session(mem, "remote", tmp_path, {"f.txt": "y"})
    script = textwrap.dedent(
        f"""
        import sys, agentmem
        mem = agentmem.Memory(root={str(mem.root)!r}, working_dir={str(tmp_path)!r})
        s = mem.session("remote")
        print("open", flush=True)
        sys.stdin.readline()
        s.append({{"role": "assistant", "content": "written after the refused delete"}})
        s.close()
        print("closed", flush=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as child:
        try:
            assert child.stdout is not None and child.stdin is not None
            assert child.stdout.readline() == "open\n"
            before = tree(tmp_path)
            with pytest.raises(StoreLockedError):
                mem.sessions.delete("remote")
            assert tree(tmp_path) == before
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline() == "closed\n"
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 0
    assert mem.sessions.load("remote").messages[-1]["content"] == (
        "written after the refused delete"
    )
    assert mem.sessions.delete("remote") is True
    assert owned_paths(mem.root, "remote") == []


def test_delete_in_incognito_respects_the_open_session(tmp_path: Path) -> None:
    with Memory(root=tmp_path / "r", working_dir=tmp_path, incognito=True) as mem:
        s = mem.session("x")
        with pytest.raises(StoreLockedError):
            mem.sessions.delete("x")
        s.close()
        assert mem.sessions.delete("x") is True
        assert not mem.sessions.exists("x")


def test_a_lock_taken_on_a_deleted_lock_file_is_not_kept(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a delete opens: B opens the old lock file, the deleter unlinks it and
    releases, a third holder locks a fresh file at the path, and B's flock of the old
    file succeeds. B must notice the path is another file and not think it holds it."""
    import filelock

    mem.session("raced").close()
    path = mem.root / "locks" / "raced.lock"
    other: list[filelock.FileLock] = []
    real_acquire = filelock.FileLock.acquire

    def acquire_then_lose_the_path(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = real_acquire(self, *args, **kwargs)
        if not other:  # once: the file B locked is unlinked, a fresh one is locked by C
            path.unlink()
            other.append(filelock.FileLock(str(path), timeout=0, thread_local=False))
            real_acquire(other[0])
        return result

    monkeypatch.setattr(filelock.FileLock, "acquire", acquire_then_lose_the_path)
    try:
        with pytest.raises(StoreLockedError):
            mem.session("raced")
    finally:
        monkeypatch.undo()
        other[0].release(force=True)
    with mem.session("raced", create=False):  # and once C is gone, B gets it
        pass
