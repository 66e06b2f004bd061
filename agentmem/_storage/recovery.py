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

import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import filelock

from agentmem._storage.files import SQLITE_COMPANIONS, move_aside
from agentmem._storage.sqlite import header_problem, is_corruption
from agentmem.errors import CorruptStoreError, StorageError

__all__ = ["RECOVERY_LOCK_TIMEOUT_S", "Recovery", "open_or_recover"]

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


Opener = Callable[[Path], sqlite3.Connection]
"""Opens (and migrates) the database at a path; lets :class:`sqlite3.Error` through."""


def _probe(path: Path, opener: Opener, what: str) -> tuple[sqlite3.Connection | None, str]:
    """Open ``path``; ``(None, reason)`` when it is not a readable SQLite database.

    The header is checked by hand first: SQLite would delete the ``-wal``
    beside a file whose header it cannot read, and that log must be kept
    with the file when it is moved aside.
    """
    try:
        problem = header_problem(path)
    except OSError as exc:
        raise StorageError(f"cannot read {what} {path}: {exc}", path=path) from exc
    if problem is not None:
        return None, problem
    try:
        return opener(path), ""
    except sqlite3.Error as exc:
        if not is_corruption(exc):
            raise StorageError(f"cannot open {what} {path}: {exc}", path=path) from exc
        return None, str(exc)


def open_or_recover(
    path: Path, opener: Opener, *, what: str
) -> tuple[sqlite3.Connection, Recovery | None]:
    """Open the database at ``path``, moving it aside first when it is unreadable.

    Args:
        path: The database file (its directory must exist).
        opener: Connects and migrates; raises :class:`sqlite3.Error` on failure.
        what: How to name the database in messages ("session store").

    Returns:
        The open connection, and a :class:`Recovery` when the file found
        there was moved aside (``None`` when it opened as it was).

    Raises:
        StorageError: the file cannot be opened for a reason other than
            damage (permissions, busy, not ours, newer), or the fresh
            database cannot be created.
        CorruptStoreError: the file is damaged and could not be moved aside.
    """
    conn, reason = _probe(path, opener, what)
    if conn is not None:
        return conn, None
    recovery_lock = filelock.FileLock(
        str(path.parent / "locks" / "@recover.lock"), thread_local=False
    )
    try:
        (path.parent / "locks").mkdir(exist_ok=True)
        recovery_lock.acquire(timeout=RECOVERY_LOCK_TIMEOUT_S)
    except (OSError, filelock.Timeout) as exc:
        raise StorageError(f"cannot recover unreadable {path}: {exc}", path=path) from exc
    try:
        conn, reason = _probe(path, opener, what)
        if conn is not None:
            return conn, None
        try:
            moved = move_aside(path, companions=SQLITE_COMPANIONS)
        except OSError as exc:
            raise CorruptStoreError(
                f"{path} is not a readable {what} ({reason}) and could not be moved aside: {exc}",
                path=path,
            ) from exc
        logger.warning(
            "%s %s is not a readable SQLite database (%s); moved it to %s and started an empty one",
            what,
            path,
            reason,
            moved,
        )
        try:
            return opener(path), Recovery(moved, reason)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot create {what} {path}: {exc}", path=path) from exc
    finally:
        recovery_lock.release()
