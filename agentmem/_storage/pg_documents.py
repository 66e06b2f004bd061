"""Documents in PostgreSQL: long-term memory, notes and topics shared by many hosts.

The PostgreSQL implementation of :class:`~agentmem._storage.documents.Documents`.
Every namespace (``ltm``, ``notes``, ``topics``) is rows of one table::

    CREATE TABLE agentmem_documents (
        namespace TEXT NOT NULL, key TEXT NOT NULL,
        body BYTEA NOT NULL,                  -- the bytes the file would hold
        updated_at DOUBLE PRECISION NOT NULL, -- epoch seconds, the server's clock
        PRIMARY KEY (namespace, key));
    CREATE TABLE agentmem_set_aside (         -- unreadable bodies, kept byte for byte
        id BIGSERIAL PRIMARY KEY, namespace TEXT NOT NULL, key TEXT NOT NULL,
        body BYTEA NOT NULL, reason TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);

created by the named migration ``0001_documents`` of the format
``agentmem.documents`` (:func:`~agentmem._storage.postgres.migrate`: run once
under a lock when several hosts start together; a database written by a newer
release raises :class:`~agentmem.errors.FormatVersionError`).

**The lock is a transaction.** :meth:`PostgresDocuments.locked` takes a pooled
connection, begins a transaction and takes ``pg_advisory_xact_lock`` on a
stable hash of the namespace (waiting up to ``lock_timeout``, then
:class:`~agentmem.errors.StoreLockedError`). Every read, write, delete and
set-aside the holder makes runs in that transaction, which commits when the
block ends. So a store's lock -> re-read -> apply -> write cycle is one
atomic transaction, serialised against every other process on every host:
concurrent writers lose nothing and keep the file stores' confirm/merge
semantics. The lock dies with its transaction: a killed holder's connection
ends and the server releases it. A lost connection mid-cycle (a server
restart, a network cut) raises :class:`~agentmem.errors.StorageError`; the
transaction is rolled back, so the previous body is intact, and the next call
gets a fresh connection (:class:`~agentmem._storage.postgres.PgDatabase`).

Reads outside the lock are single committed reads on a pooled connection.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from agentmem._optional import require
from agentmem._storage.documents import DocInfo, Documents, Listing, SetAside, ThreadOwner
from agentmem._storage.postgres import (
    Migration,
    PgCursor,
    PgDatabase,
    advisory_key,
    migrate,
)
from agentmem._storage.sqlite import Durability
from agentmem.errors import StorageError, StoreLockedError

require("psycopg", "the PostgreSQL backend", "postgres")
import psycopg  # noqa: E402  (after the check that names the extra)

__all__ = ["DOCUMENTS_FORMAT", "DOCUMENTS_VERSION", "PgDocumentStore", "PostgresDocuments"]

DOCUMENTS_FORMAT = "agentmem.documents"
DOCUMENTS_VERSION = 1
LOCK_TIMEOUT = 60.0
MIGRATIONS = (
    Migration(
        "0001_documents",
        (
            """CREATE TABLE agentmem_documents (
                namespace TEXT NOT NULL,
                key TEXT NOT NULL,
                body BYTEA NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (namespace, key)
            )""",
            """CREATE TABLE agentmem_set_aside (
                id BIGSERIAL PRIMARY KEY,
                namespace TEXT NOT NULL,
                key TEXT NOT NULL,
                body BYTEA NOT NULL,
                reason TEXT NOT NULL,
                at DOUBLE PRECISION NOT NULL
            )""",
        ),
    ),
)
_NOW = "extract(epoch FROM clock_timestamp())::double precision"


class PgDocumentStore:
    """One database's documents: a connection pool, the schema migrated once.

    Args:
        dsn: The PostgreSQL DSN.
        lock_timeout: Seconds :meth:`PostgresDocuments.locked` waits for the lock.

    Raises:
        ConfigurationError: psycopg is missing, or the DSN cannot be parsed.
        FormatVersionError: a newer agentmem wrote the database.
        StorageError: the server cannot be reached.
    """

    def __init__(
        self, dsn: str, *, lock_timeout: float = LOCK_TIMEOUT, durability: Durability = "full"
    ) -> None:
        self.db = PgDatabase(dsn, durability=durability)
        self.lock_timeout = lock_timeout
        try:
            migrate(
                self.db,
                format_name=DOCUMENTS_FORMAT,
                format_version=DOCUMENTS_VERSION,
                migrations=MIGRATIONS,
            )
        except BaseException:
            self.db.close()
            raise

    def documents(self, namespace: str) -> PostgresDocuments:
        """The documents of ``namespace``."""
        return PostgresDocuments(self.db, namespace, lock_timeout=self.lock_timeout)

    def close(self) -> None:
        """Close the pool (idempotent)."""
        self.db.close()


class PostgresDocuments(Documents):
    """The documents of one namespace in ``agentmem_documents`` (see the module docstring)."""

    def __init__(
        self, database: PgDatabase, namespace: str, *, lock_timeout: float = LOCK_TIMEOUT
    ) -> None:
        self.db = database
        self.namespace = namespace
        self.location = f"{database.where} ({namespace})"
        self._lock_key = advisory_key(DOCUMENTS_FORMAT, namespace)
        self._lock_timeout_ms = max(1, int(lock_timeout * 1000))
        self._owner = ThreadOwner()
        self._cursor: PgCursor | None = None
        self._cursor_thread: int | None = None

    # ------------------------------------------------------------------ plumbing

    def _run(self, action: str, work: Callable[[PgCursor], Any]) -> Any:
        """``work(cursor)`` in the holder's transaction, or in a transaction of its own."""
        cursor = self._cursor if self._cursor_thread == threading.get_ident() else None
        if cursor is not None:
            try:
                return work(cursor)
            except psycopg.Error as exc:
                raise self.db.error(action, exc) from exc
        with self.db.transaction(action) as fresh:
            return work(fresh)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        action = f"change {self.location}"
        with self.db.transaction(action) as cursor:
            try:
                cursor.execute(
                    "SELECT set_config('lock_timeout', ?, true)", (f"{self._lock_timeout_ms}ms",)
                )
                cursor.execute("SELECT pg_advisory_xact_lock(?)", (self._lock_key,))
            except psycopg.errors.LockNotAvailable as exc:
                raise StoreLockedError(
                    f"{self.location}: locked by another process for over "
                    f"{self._lock_timeout_ms / 1000:.0f} s"
                ) from exc
            except psycopg.Error as exc:
                raise self.db.error(f"lock {self.location}", exc) from exc
            self._cursor, self._cursor_thread = cursor, threading.get_ident()
            try:
                yield
            finally:
                self._cursor, self._cursor_thread = None, None

    # ------------------------------------------------------------------ Documents

    def describe(self, key: str) -> str:
        return f"{self.location} [{key}]"

    def read(self, key: str) -> bytes | None:
        def work(cursor: PgCursor) -> bytes | None:
            row = cursor.execute(
                "SELECT body FROM agentmem_documents WHERE namespace = ? AND key = ?",
                (self.namespace, key),
            ).fetchone()
            return bytes(row[0]) if row is not None else None

        found: bytes | None = self._run(f"read {self.describe(key)}", work)
        return found

    def list(self) -> Listing:
        def work(cursor: PgCursor) -> builtins.list[DocInfo]:
            rows = cursor.execute(
                "SELECT key, octet_length(body), updated_at FROM agentmem_documents "
                "WHERE namespace = ?",
                (self.namespace,),
            ).fetchall()
            return sorted(DocInfo(str(k), int(n), float(at)) for k, n, at in rows)

        found: builtins.list[DocInfo] = self._run(f"list {self.location}", work)
        return Listing(found, [])

    def locked(self) -> AbstractContextManager[None]:
        return self._owner.hold(self._transaction)

    @property
    def held(self) -> bool:
        return self._owner.held

    def _write(self, key: str, data: bytes) -> None:
        self._run(
            f"write {self.describe(key)}",
            lambda cursor: cursor.execute(
                "INSERT INTO agentmem_documents (namespace, key, body, updated_at) "
                f"VALUES (?, ?, ?, {_NOW}) ON CONFLICT (namespace, key) DO UPDATE "
                "SET body = excluded.body, updated_at = excluded.updated_at",
                (self.namespace, key, bytes(data)),
            ),
        )

    def _delete(self, key: str) -> bool:
        def work(cursor: PgCursor) -> bool:
            cursor.execute(
                "DELETE FROM agentmem_documents WHERE namespace = ? AND key = ?",
                (self.namespace, key),
            )
            return cursor.rowcount > 0

        deleted: bool = self._run(f"delete {self.describe(key)}", work)
        return deleted

    def _set_aside(self, key: str, what: str, reason: str, logger: logging.Logger) -> SetAside:
        def work(cursor: PgCursor) -> int | None:
            row = cursor.execute(
                "INSERT INTO agentmem_set_aside (namespace, key, body, reason, at) "
                f"SELECT namespace, key, body, ?, {_NOW} FROM agentmem_documents "
                "WHERE namespace = ? AND key = ? RETURNING id",
                (reason, self.namespace, key),
            ).fetchone()
            cursor.execute(
                "DELETE FROM agentmem_documents WHERE namespace = ? AND key = ?",
                (self.namespace, key),
            )
            return int(row[0]) if row is not None else None

        number = self._run(f"set aside {self.describe(key)}", work)
        if number is None:
            raise StorageError(f"cannot set aside {self.describe(key)}: it is not stored")
        where = f"{self.location} agentmem_set_aside id {number}"
        message = f"{what} is unreadable ({reason}); set aside to {where}"
        logger.warning(message)
        return SetAside(where, message)

    def __repr__(self) -> str:
        return f"PostgresDocuments({self.location})"
