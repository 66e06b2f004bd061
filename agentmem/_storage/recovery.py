"""Recovery on open: a SQLite database that cannot be read is moved aside, reported, replaced.

Every agentmem database (sessions today; the recall index, LTM and semantic
memory next) opens through :func:`open_or_recover`. The rule it enforces is
DESIGN section 8's: a file that is not a readable SQLite database is never
overwritten and never silently dropped. It is renamed, with its ``-wal`` and
``-shm`` companions, to ``<name>.corrupt-<timestamp>`` (see
:func:`~agentmem._storage.files.move_aside`), a warning naming both paths
goes to the ``agentmem.storage`` logger, the caller learns where it went
(:class:`Recovery`), and a fresh, empty database takes its place.

Recovery is serialised across processes by a file lock
(``<dir>/locks/@recover.lock``) and the file is probed again under it:
another process may have moved the damaged file aside already, and its
fresh database must not be moved in turn.

A busy, locked or read-only database is *not* damage (see
:func:`~agentmem._storage.sqlite.is_corruption`): it raises
:class:`~agentmem.errors.StorageError` and is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentmem._storage.files import (
    SQLITE_COMPANIONS,
    atomic_write_bytes,
    check_inside,
    move_aside,
)
from agentmem._storage.locks import held_lock
from agentmem._storage.sqlite import header_problem, is_corruption
from agentmem._storage.wal import WalReport, inspect_wal, rebuild_wal, wal_page_image
from agentmem.errors import AgentMemError, CorruptStoreError, StorageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["RECOVERY_LOCK_TIMEOUT_S", "OpenLock", "Recovery", "open_or_recover"]

logger = logging.getLogger("agentmem.storage")

RECOVERY_LOCK_TIMEOUT_S = 30.0
"""How long to wait for another process that is recovering the same directory."""


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :func:`open_or_recover` did about a database it could not read."""

    moved_to: Path
    """Where the unreadable file (and its companions) now lives."""
    reason: str
    """Why it was judged unreadable."""
    salvaged: bool = False
    """Whether the commits that could be read were copied into the new database (else it
    started empty)."""
    outcome: str = ""
    """What was recovered: "recovered every commit", "recovered the commits before the
    damage", "recovered the database without its log", or "started an empty one"."""


Opener = Callable[[Path], sqlite3.Connection]
"""Opens (and migrates) the database at a path; lets :class:`sqlite3.Error` through."""


class OpenLock:
    """A shared ``flock`` held by every open agentmem connection to one database file.

    Taking it exclusively (without waiting) proves no other agentmem
    process has the database open, so a ``-wal`` found then is left over
    from a crash and can be inspected without racing a live writer. On
    platforms without ``fcntl`` it does nothing and the log is not inspected.
    """

    def __init__(self, path: Path) -> None:
        self._fd: int | None = None
        lock_path = path.parent / "locks" / f"@open-{path.name}.lock"
        try:
            lock_path.parent.mkdir(exist_ok=True)
            self._fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise StorageError(f"cannot create {lock_path}: {exc}", path=path) from exc

    def exclusive(self) -> bool:
        """Try to take the lock exclusively, without waiting."""
        if self._fd is None or fcntl is None:
            return False
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

    def shared(self) -> None:
        """Hold the lock shared (waits for an exclusive holder that is inspecting)."""
        if self._fd is not None and fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_SH)

    def release(self) -> None:
        """Release and close (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _probe(path: Path, opener: Opener, what: str) -> tuple[sqlite3.Connection | None, str]:
    """Open ``path``; ``(None, reason)`` when it is not a readable SQLite database.

    The header and the write-ahead log are checked by hand first: SQLite
    deletes the ``-wal`` beside a file whose header it cannot read (or an
    empty one), and silently ignores the commits after a damaged frame, and
    that log must be kept with the file when it is moved aside.
    """
    try:
        problem = header_problem(path)
    except OSError as exc:
        raise StorageError(f"cannot read {what} {path}: {exc}", path=path) from exc
    if problem is not None:
        return None, problem
    try:
        return opener(path), ""
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        if not (is_corruption(exc) or _is_schema_error(exc)):
            raise StorageError(f"cannot open {what} {path}: {exc}", path=path) from exc
        return None, str(exc)


_SQLITE_ERROR = 1


def _is_schema_error(exc: BaseException) -> bool:
    """An SQL error from the opener's own statements: the schema is not the one they were
    written against ("no such column", an undecodable name), so page 1 is damaged.

    Busy, locked, read-only, I/O and full-disk errors carry other codes and are not damage.
    """
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    return code is None or code & 0xFF == _SQLITE_ERROR


def _salvage(
    path: Path, moved: Path, report: WalReport | None, opener: Opener
) -> tuple[sqlite3.Connection, str] | None:
    """Rebuild what can be read from the moved-aside set under ``path``; ``None`` if nothing.

    The moved files are copied, never changed. With a damaged log, first the
    log without its damaged frames (:func:`~agentmem._storage.wal.rebuild_wal`:
    every commit, when each damaged frame's page was written again later; it
    must pass ``PRAGMA integrity_check``), else the main file and the log's
    valid prefix (SQLite replays exactly the commits before the damage; for a log cut
    shorter than its wal-index says, only this, or the main file alone when a checkpoint
    already copied the valid prefix into it). With
    a log whose main file is missing or empty, the main file is rebuilt from
    the newest image of page 1 in the log, which works when the log holds
    every page (a database never checkpointed). The result must pass ``PRAGMA quick_check``.
    """
    if report is None:
        return None
    try:
        log = moved.with_name(moved.name + "-wal").read_bytes()
    except FileNotFoundError:  # a log deleted (or cut to nothing) while its index remained
        log = b""
    if moved.exists() and moved.stat().st_size > 0 and not report.index_frames:
        # Every commit, when the damaged frames' pages were written again later. (Not for a
        # log that was cut: the commits past the cut are gone, whatever is rebuilt.)
        rebuilt = rebuild_wal(log)
        if rebuilt is not None:
            conn = _try_salvage(path, moved, None, rebuilt, opener, check="integrity_check")
            if conn is not None:
                return conn, "recovered every commit"
    # The commits before the damage (none at all: the main file alone).
    wal_bytes = log[: report.valid_bytes] if report.valid_bytes > 32 else b""
    page1: bytes | None = None
    if not moved.exists() or moved.stat().st_size == 0:
        page1 = wal_page_image(wal_bytes, report.page_size, 1, report.valid_bytes)
        if page1 is None:
            return None
    elif not wal_bytes:
        conn = _try_salvage(path, moved, None, b"", opener, check="quick_check")
        return None if conn is None else (conn, "recovered the database without its log")
    conn = _try_salvage(path, moved, page1, wal_bytes, opener, check="quick_check")
    if conn is None:
        return None
    return conn, "recovered the commits before the damage"


def _try_salvage(
    path: Path, moved: Path, page1: bytes | None, log: bytes, opener: Opener, *, check: str
) -> sqlite3.Connection | None:
    """Lay out a main file (a copy of ``moved``, or ``page1``) and ``log`` at ``path``, open
    it, and keep it when ``PRAGMA <check>`` passes; else remove it and return ``None``."""
    wal = path.with_name(path.name + "-wal")
    try:
        if log:
            atomic_write_bytes(wal, log)
        if page1 is not None:
            atomic_write_bytes(path, page1)
        else:
            _copy_durably(moved, path)
        conn = opener(path)
    except (sqlite3.Error, UnicodeDecodeError, AgentMemError):
        _discard(path)
        return None
    try:
        ok = [str(r[0]) for r in conn.execute(f"PRAGMA {check}(1)").fetchall()] == ["ok"]
        if ok:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error:
        ok = False
    if not ok:
        conn.close()
        _discard(path)
        return None
    return conn


def _copy_durably(source: Path, target: Path) -> None:
    """Copy a (possibly large) file without reading it whole into memory, then fsync it."""
    shutil.copyfile(source, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(path: Path) -> None:
    for suffix in ("", *SQLITE_COMPANIONS):
        with contextlib.suppress(OSError):
            os.unlink(path.with_name(path.name + suffix))


def open_or_recover(
    path: Path, opener: Opener, *, what: str
) -> tuple[sqlite3.Connection, Recovery | None, OpenLock]:
    """Open the database at ``path``, moving it aside first when it is unreadable.

    Args:
        path: The database file (its directory must exist).
        opener: Connects and migrates; raises :class:`sqlite3.Error` on failure.
        what: How to name the database in messages ("session store").

    Returns:
        The open connection; a :class:`Recovery` when the file found there
        was moved aside (``None`` when it opened as it was); and the
        :class:`OpenLock` the caller holds until it closes the connection.

    Raises:
        UnsafePathError: the file, a companion or ``locks/`` beside it is a symlink.
        StorageError: the file cannot be opened for a reason other than
            damage (permissions, busy, not ours, newer), or the fresh
            database cannot be created.
        CorruptStoreError: the file is damaged and could not be moved aside.
    """
    # Nothing the database owns may be (behind) a symlink: SQLite would follow it out of the root.
    locks = path.parent / "locks"
    owned = [locks, locks / f"@open-{path.name}.lock", locks / "@recover.lock"]
    for item in [*owned, *(Path(f"{path}{s}") for s in ("", *SQLITE_COMPANIONS))]:
        check_inside(path.parent, item, what=f"the directory of {what}")
    open_lock = OpenLock(path)
    try:
        conn, recovery = _open_or_recover(path, opener, what, open_lock)
    except BaseException:
        open_lock.release()
        raise
    return conn, recovery, open_lock


def _open_or_recover(
    path: Path, opener: Opener, what: str, open_lock: OpenLock
) -> tuple[sqlite3.Connection, Recovery | None]:
    first = open_lock.exclusive()
    if not first:
        # Another store has the database open, or is inspecting it right now: wait for the
        # inspection to finish (it holds the lock exclusively), then open alongside.
        open_lock.shared()
    try:
        conn, _, _ = _look(path, opener, what, inspect=first)
        if conn is not None:
            return conn, None
        return _recover(path, opener, what, inspect=first)
    finally:
        if first:
            open_lock.shared()


def _look(
    path: Path, opener: Opener, what: str, *, inspect: bool
) -> tuple[sqlite3.Connection | None, WalReport | None, str]:
    """Open ``path`` if it is readable: ``(conn, report, "")``, else ``(None, report, why)``.

    ``inspect``: read the write-ahead log by hand first (only done while no other process
    has the database open, so the log is a crash's leftover and not a live writer's).
    """
    report = _inspect(path, what) if inspect else None
    if report is not None and report.problem is not None:
        return None, report, report.problem
    conn, reason = _probe(path, opener, what)
    return conn, report, reason


def _inspect(path: Path, what: str) -> WalReport | None:
    try:
        return inspect_wal(path)
    except OSError as exc:
        raise StorageError(f"cannot read the write-ahead log of {what} {path}: {exc}") from exc


def _recover(
    path: Path, opener: Opener, what: str, *, inspect: bool
) -> tuple[sqlite3.Connection, Recovery | None]:
    # Serialise recovery across processes and look again under the lock: another process
    # may have moved the file aside already, and its fresh database must not be moved in turn.
    with held_lock(
        path.parent / "locks" / "@recover.lock",
        what=f"recovery of {what} {path}",
        timeout=RECOVERY_LOCK_TIMEOUT_S,
    ):
        return _recover_locked(path, opener, what, inspect=inspect)


def _recover_locked(
    path: Path, opener: Opener, what: str, *, inspect: bool
) -> tuple[sqlite3.Connection, Recovery | None]:
    found, report, reason = _look(path, opener, what, inspect=inspect)
    if found is not None:
        return found, None
    try:
        if not path.exists():
            # Only the log is left (a kill during a move aside, or a deleted main file):
            # give the set an empty main file so it moves, and is named, as one.
            path.touch()
        moved = move_aside(path, companions=SQLITE_COMPANIONS)
    except OSError as exc:
        raise CorruptStoreError(
            f"{path} is not a readable {what} ({reason}) and could not be moved aside: {exc}",
            path=path,
        ) from exc
    try:
        salvage = _salvage(path, moved, report, opener)
    except OSError:
        _discard(path)
        salvage = None
    conn, outcome = salvage if salvage is not None else (None, "started an empty one")
    salvaged = conn is not None
    logger.warning(
        "%s %s is not a readable SQLite database (%s); moved it to %s and %s",
        what,
        path,
        reason,
        moved,
        outcome,
    )
    if conn is None:
        try:
            conn = opener(path)
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise StorageError(f"cannot create {what} {path}: {exc}", path=path) from exc
    return conn, Recovery(moved, reason, salvaged=salvaged, outcome=outcome)
