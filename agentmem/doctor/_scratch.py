"""Looking without touching: scratch copies, lock probes, and quiet logs.

The doctor never writes under the root. To learn what opening a store would do,
it copies the store's files into a private scratch directory and lets the
store's own opening and loading code run on the copy (its recovery moves the
*copy* aside, its quarantine changes the *copy*), then reports what happened.
So the prediction is the store's real behaviour, never a second implementation
that could drift from it.

A database another process has open is copied through SQLite's online backup
from a read-only connection (a consistent snapshot; the ``-wal``/``-shm`` files
already exist while it is open, so nothing is created); one nobody has open is
copied byte for byte with its ``-wal`` and ``-shm``, while the doctor holds its
open lock exclusively, as opening does, so no one starts writing meanwhile.

Locks are probed with ``flock`` on a read-only descriptor of the lock file:
taking (and at once releasing) a lock writes nothing, and a lock file that does
not exist is not created.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from agentmem._storage.files import SQLITE_COMPANIONS

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "copy_database",
    "copy_tree",
    "holder_pids",
    "integrity_problems",
    "is_locked",
    "lenient_text",
    "quiet_logs",
    "scratch_full",
    "under_lock",
]


def _open_readonly(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None


@contextlib.contextmanager
def under_lock(lock_path: Path) -> Iterator[bool]:
    """Hold ``lock_path`` exclusively for the block if nobody holds it; yields whether it was
    free (a missing lock file is free: nobody holds it, and it is not created)."""
    fd = _open_readonly(lock_path) if lock_path.exists() else None
    if fd is None or fcntl is None:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def is_locked(lock_path: Path) -> bool:
    """Whether another open file description holds ``lock_path`` (``flock``)."""
    with under_lock(lock_path) as free:
        return not free


def holder_pids(lock_path: Path) -> list[int]:
    """The processes holding a ``flock`` on ``lock_path``, from ``/proc/locks`` (Linux; empty
    elsewhere or when it cannot be read)."""
    try:
        inode = os.stat(lock_path).st_ino
        lines = Path("/proc/locks").read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []
    pids: list[int] = []
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a "->" marks a waiter).
        if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK":
            continue
        try:
            pid, ino = int(fields[4]), int(fields[5].rsplit(":", 1)[1])
        except (ValueError, IndexError):
            continue
        if ino == inode and pid not in pids:
            pids.append(pid)
    return pids


def copy_database(path: Path, target: Path) -> bool:
    """Copy the SQLite database at ``path`` (and its ``-wal``/``-shm``) to ``target``.

    Returns whether another agentmem process had it open (then the copy is a backup
    taken through a read-only connection, without the log's damage, which opening
    would not inspect either: it only inspects the log of a database nobody has open).

    Raises:
        OSError: a file could not be read.
        sqlite3.Error: (open elsewhere) the backup could not read the database.
    """
    lock = path.parent / "locks" / f"@open-{path.name}.lock"
    with under_lock(lock) as free:
        if free:
            for suffix in ("", *SQLITE_COMPANIONS):
                source = path.with_name(path.name + suffix)
                if source.is_file():
                    shutil.copyfile(source, target.with_name(target.name + suffix))
            return False
    uri = f"file:{quote(str(path))}?mode=ro"
    src = sqlite3.connect(uri, uri=True)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
    return True


def scratch_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the scratch directory ran out of space (not a fault of the root)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


def copy_tree(source: Path, target: Path) -> None:
    """Copy the regular files directly in ``source`` (symlinks as symlinks) into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    try:
        entries = list(os.scandir(source))
    except FileNotFoundError:
        return
    for entry in entries:
        dest = target / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), dest)
        elif entry.is_file(follow_symlinks=False):
            shutil.copyfile(entry.path, dest)
        elif entry.is_dir(follow_symlinks=False):
            dest.mkdir()  # what a listing reports as "not a regular file"


class _DropScratch(logging.Filter):
    def __init__(self, scratch: str) -> None:
        super().__init__()
        self.scratch = scratch

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            return self.scratch not in record.getMessage()
        except Exception:  # a record that cannot be formatted is not ours to judge
            return True


@contextlib.contextmanager
def quiet_logs(scratch: Path) -> Iterator[None]:
    """Drop the stores' log records about the scratch copy (what they did to the copy is
    reported as findings, naming the real files instead)."""
    drop = _DropScratch(str(scratch))
    names = [
        "agentmem",
        *(n for n in logging.Logger.manager.loggerDict if n.startswith("agentmem.")),
    ]
    loggers = [logging.getLogger(n) for n in names]
    for item in loggers:
        item.addFilter(drop)
    try:
        yield
    finally:
        for item in loggers:
            item.removeFilter(drop)


def lenient_text(data: bytes) -> str:
    """A ``text_factory`` for damaged databases: bad UTF-8 read as U+FFFD, never raised."""
    return data.decode("utf-8", errors="replace")


def integrity_problems(copy: Path) -> list[str]:
    """``PRAGMA integrity_check``'s complaints about a (scratch) database; empty when ok."""
    try:
        conn = sqlite3.connect(copy)
    except sqlite3.Error as exc:
        return [str(exc)]
    conn.text_factory = lenient_text
    try:
        rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(20)").fetchall()]
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        return [str(exc)]
    finally:
        conn.close()
    return [] if rows == ["ok"] else rows
