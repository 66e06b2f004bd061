"""The SQLite engine of a sessions store: one database file (or memory), one connection.

Opening creates the file's directory, refuses a directory at the path, and goes
through :func:`agentmem._storage.recovery.open_or_recover` (a file that is not a
readable database is moved aside and reported in :attr:`SqliteEngine.recovery`).
Every write is one ``BEGIN IMMEDIATE`` ... ``COMMIT`` under the connection's lock
(:func:`agentmem._storage.sqlite.transaction`), and sqlite3 errors come out as
:class:`~agentmem.errors.StorageError` (:class:`~agentmem.errors.CorruptStoreError`
for a damaged file, left in place). Session locks are ``flock``\\ s on
``<dir>/locks/<id>.lock`` (an in-memory set for ``:memory:``).
"""

from __future__ import annotations

import builtins
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agentmem._storage.recovery import OpenLock, Recovery, open_or_recover
from agentmem._storage.sqlite import is_corruption, transaction
from agentmem.errors import CorruptStoreError, StorageError
from agentmem.session_store.engine import SessionTables
from agentmem.session_store.lock import SessionLock
from agentmem.session_store.sql import SessionsSQL

__all__ = ["PAGE_CACHE_KIB", "SqliteEngine"]

PAGE_CACHE_KIB = 32 * 1024
"""The connection's page cache, at most (SQLite's default: 2 MiB). A recall reads a few
hundred pages spread over the recall index (the heads of its words' postings, its
candidates' rows and postings); with 2 MiB most of them came back through a ``pread``
each, the OS's cache, at every search (``docs/recall.md``, "Speed and cost"). Memory is
taken only as pages are read."""

Opener = Callable[[Path | None], sqlite3.Connection]
"""Connects to (and migrates) the database at a path, or in memory for ``None``; lets
:class:`sqlite3.Error` through so recovery can tell damage apart."""


class SqliteEngine:
    """A sessions store's SQLite database (see the module docstring).

    Args:
        path: The database file, or ``None`` for a private in-memory database.
        opener: Connects and migrates (the store's, which knows the schema).

    Raises:
        StorageError: the file cannot be opened (permissions, a directory at
            ``path``), belongs to something else, or is newer than this agentmem.
    """

    def __init__(self, path: Path | None, *, opener: Opener) -> None:
        self.path = path
        self.mutex = threading.Lock()
        """Serialises every use of the one connection (the store's threads and writers)."""
        self.recovery: Recovery | None = None
        """What was done on open about an unreadable database, else ``None``."""
        self._held: builtins.set[str] = set()
        self._held_guard = threading.Lock()
        self._open_lock: OpenLock | None = None
        self._conn: sqlite3.Connection | None = (
            opener(None) if path is None else self._open_file(path, opener)
        )
        if path is not None:
            # A page cache that holds a search's working set (see PAGE_CACHE_KIB).
            self._conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")

    def _open_file(self, path: Path, opener: Opener) -> sqlite3.Connection:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(
                f"path {str(path)!r}: cannot create its directory {str(path.parent)!r} "
                f"({exc.strerror or exc}; is a parent a file, or read-only?)",
                path=path,
            ) from exc
        if path.is_dir():
            raise StorageError(
                f"path {str(path)!r} is a directory, not a session database", path=path
            )
        conn, self.recovery, self._open_lock = open_or_recover(path, opener, what="session store")
        return conn

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else ":memory:"

    @property
    def closed(self) -> bool:
        return self._conn is None

    @property
    def connection(self) -> sqlite3.Connection | None:
        """The connection (``None`` once closed); hold :attr:`mutex` to use it."""
        return self._conn

    def require_open(self) -> sqlite3.Connection:
        """The connection (hold :attr:`mutex`).

        Raises:
            StorageError: the store is closed.
        """
        if self._conn is None:
            raise StorageError("the session store is closed", path=self.path)
        return self._conn

    def error(self, action: str, exc: sqlite3.Error) -> StorageError:
        """The StorageError for ``exc``; a damaged file is a CorruptStoreError (left in place)."""
        if is_corruption(exc):
            return CorruptStoreError(
                f"cannot {action}: {self.where} is damaged ({exc}); it was left in place. Copy "
                "it somewhere safe and check it with `sqlite3 <file> 'PRAGMA integrity_check'`",
                path=self.path,
            )
        return StorageError(f"cannot {action} in {self.where}: {exc}", path=self.path)

    @contextmanager
    def write(self, action: str, *, session: str | None = None) -> Iterator[SessionTables]:
        """One write transaction under the connection's lock (``session`` is not needed:
        the session locks are files)."""
        with self.mutex:
            conn = self.require_open()
            try:
                with transaction(conn):
                    sql = SessionsSQL(conn)
                    yield sql
                    sql.recall_post()  # what the recall triggers queued, in this transaction
            except sqlite3.Error as exc:
                raise self.error(action, exc) from exc

    @contextmanager
    def read(self, action: str, *, snapshot: bool = False) -> Iterator[SessionTables]:
        """Reads under the connection's lock; ``snapshot`` wraps them in one read transaction."""
        with self.mutex:
            conn = self.require_open()
            try:
                if snapshot:
                    with transaction(conn, immediate=False):
                        yield SessionsSQL(conn)
                else:
                    yield SessionsSQL(conn)
            except sqlite3.Error as exc:
                raise self.error(action, exc) from exc

    def lock(self, session_id: str) -> SessionLock:
        path = None if self.path is None else self.path.parent / "locks" / f"{session_id}.lock"
        return SessionLock(session_id, path=path, held=self._held, guard=self._held_guard)

    def close(self) -> None:
        with self.mutex:
            conn, self._conn = self._conn, None
            open_lock, self._open_lock = self._open_lock, None
        try:
            if conn is not None:
                conn.close()
        except sqlite3.Error as exc:
            raise self.error("close the store", exc) from exc
        finally:
            if open_lock is not None:
                open_lock.release()
