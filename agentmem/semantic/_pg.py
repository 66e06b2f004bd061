"""The PostgreSQL engine of semantic memory: the same calls as ``semantic.sqlite``'s.

:class:`PgSemanticDB` offers what :class:`~agentmem.semantic._store.SemanticDB` does
(``read``/``write`` transactions handing a connection to the SQL functions of
:mod:`agentmem.semantic._store`, ``report``, ``problems``, ``close``), on a
:class:`~agentmem._storage.postgres.PgDatabase`, so
:class:`~agentmem.semantic.local.LocalMemoryClient` runs on it unchanged.

* **Schema.** The tables of :data:`~agentmem.semantic._schema.PG_MIGRATIONS`, created
  by named migrations run once under a lock (several hosts may start together); a
  database written by a newer agentmem raises
  :class:`~agentmem.errors.FormatVersionError` on open.
* **Writes** are one transaction each that first takes
  ``pg_advisory_xact_lock`` on the store: writers queue, on every host, exactly as
  SQLite's ``BEGIN IMMEDIATE`` makes them queue on one disk, so a client's
  read-decide-write (is this fact stored already? is the memory to update still
  there?) sees no other writer between its read and its write. The dedupe and
  merge semantics are the SQLite store's, and the unique index on the fact holds
  whatever a client does. The lock dies with the transaction, so a killed
  writer never leaves it behind.
* **Reads** are ``REPEATABLE READ`` read-only transactions: one snapshot per call,
  like SQLite's.
* **Failures.** A lost connection (a server restart, a cut network) raises
  :class:`~agentmem.errors.StorageError` with the call rolled back; the next call
  reconnects (:class:`~agentmem._storage.postgres.PgDatabase`). A committed write
  survives a crash of the server (``durability="full"``).
* **pgvector.** When the extension is installed in the database (``pg_extension``,
  in any schema: its names are written qualified), or available to install
  (``pg_available_extensions``) and this role may create it, a ``vector`` column
  ``embedding`` is kept beside each blob and the server computes the cosines. Never
  required: without it, or when setting it up fails (logged), the blobs are scored
  in the client.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from agentmem._storage.postgres import Durability, PgDatabase, advisory_key, migrate
from agentmem.errors import AgentMemError, CorruptStoreError, StorageError
from agentmem.semantic import _pg_sql as pg_sql
from agentmem.semantic._schema import FORMAT_NAME, PG_FORMAT_VERSION, PG_MIGRATIONS

__all__ = ["PgSemanticDB", "pgvector_state"]

_log = logging.getLogger("agentmem.storage")

LOCK_NAMESPACE: Final = "agentmem.semantic"


def pgvector_state(database: PgDatabase) -> tuple[str, str | None]:
    """``("installed", its schema)``, ``("available", None)`` (the server has it, this
    database has not created it) or ``("missing", None)``."""
    with database.transaction("look for pgvector", snapshot=True) as cur:
        row = cur.execute(
            "SELECT (SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n "
            "ON n.oid = e.extnamespace WHERE e.extname = 'vector'), "
            "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"
        ).fetchone()
    if row is not None and row[0] is not None:
        return "installed", str(row[0])
    if row is not None and row[1]:
        return "available", None
    return "missing", None


class PgSemanticDB:
    """Semantic memory in a PostgreSQL database.

    Args:
        database: A DSN (the engine opens and closes its own pool) or a
            :class:`~agentmem._storage.postgres.PgDatabase` shared with other stores
            (not closed here; its ``durability`` applies).
        durability: For a DSN: ``"full"`` or ``"normal"``.

    Raises:
        ConfigurationError: psycopg is missing (``pip install 'agentmem[postgres]'``).
        StorageError: the server cannot be reached.
        FormatVersionError: the database was written by a newer agentmem.
    """

    path: None = None
    recovery: None = None

    def __init__(
        self,
        database: str | PgDatabase,
        *,
        durability: Durability = "full",
    ) -> None:
        self._owned = not isinstance(database, PgDatabase)
        opened = (
            database
            if isinstance(database, PgDatabase)
            else PgDatabase(database, durability=durability)
        )
        self._database: PgDatabase | None = opened
        self.where = opened.where
        self.problems: list[str] = []
        self._guard = threading.Lock()
        self._key = advisory_key(LOCK_NAMESPACE, opened.schema or "")
        try:
            migrate(
                opened,
                format_name=FORMAT_NAME,
                format_version=PG_FORMAT_VERSION,
                migrations=PG_MIGRATIONS,
            )
            self.vector_schema = self._setup_pgvector()
            self.pgvector = self.vector_schema is not None
        except BaseException:
            self.close()
            raise

    def _setup_pgvector(self) -> str | None:
        """pgvector's schema when the server scores vectors (the ``embedding`` column set
        up), else ``None``. A failure here only leaves the scoring to the client."""
        db = self._require()
        try:
            state, schema = pgvector_state(db)
            if state == "available":
                with db.transaction("create the pgvector extension") as cur:
                    cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
                state, schema = pgvector_state(db)
            if state != "installed" or schema is None:
                return None
            self._add_embeddings(db, schema)
        except StorageError as exc:
            _log.warning("semantic memory %s: pgvector not used (%s)", self.where, exc)
            return None
        return schema

    def _add_embeddings(self, db: PgDatabase, schema: str) -> None:
        """Add the ``embedding`` column, its trigger, and fill it, once (under the lock)."""
        with db.transaction("look for the pgvector column", snapshot=True) as cur:
            row = cur.execute(
                "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE "
                "table_schema = current_schema() AND table_name = ? "
                "AND column_name = 'embedding')",
                (pg_sql.MEMORIES,),
            ).fetchone()
        if row is not None and row[0]:
            return
        with db.transaction("add the pgvector column") as cur:
            conn = pg_sql.PgConn(cur, vector_schema=schema)
            cur.execute("SELECT pg_advisory_xact_lock(?)", (self._key,))
            cur.execute(
                f"ALTER TABLE {pg_sql.MEMORIES} ADD COLUMN IF NOT EXISTS "
                f"embedding {conn.vector_name('vector')}"
            )
            # A client that opened before the column existed changes a vector without
            # knowing of it: the trigger empties the stale embedding (the blob is then
            # scored in the client) until a client that knows sets it again.
            for statement in pg_sql.STALE_EMBEDDING:
                cur.execute(statement)
            missing = cur.execute(
                f"SELECT docid, vector FROM {pg_sql.MEMORIES} "
                "WHERE vector IS NOT NULL AND embedding IS NULL"
            ).fetchall()
            for docid, blob in missing:  # written before pgvector was there
                pg_sql.set_embedding(conn, int(docid), bytes(blob))

    def _require(self) -> PgDatabase:
        if self._database is None:
            raise StorageError(f"the semantic memory client on {self.where} is closed")
        return self._database

    def _mapped(self, action: str, exc: sqlite3.DatabaseError) -> StorageError:
        # The SQL functions raise sqlite3.DatabaseError for a row they cannot decode.
        return CorruptStoreError(f"cannot {action} in {self.where}: {exc}")

    @contextmanager
    def write(self, action: str) -> Iterator[pg_sql.PgConn]:
        """One transaction holding the store's write lock (see the module docstring)."""
        db = self._require()
        try:
            with db.transaction(action) as cur:
                cur.execute("SELECT pg_advisory_xact_lock(?)", (self._key,))
                yield pg_sql.PgConn(cur, vector_schema=self.vector_schema)
        except AgentMemError:
            raise
        except sqlite3.DatabaseError as exc:
            raise self._mapped(action, exc) from exc

    @contextmanager
    def read(self, action: str) -> Iterator[pg_sql.PgConn]:
        """A consistent read snapshot."""
        db = self._require()
        try:
            with db.transaction(action, snapshot=True) as cur:
                yield pg_sql.PgConn(cur, vector_schema=self.vector_schema)
        except AgentMemError:
            raise
        except sqlite3.DatabaseError as exc:
            raise self._mapped(action, exc) from exc

    def report(self, problem: str) -> None:
        """Log a damaged row met (and left out) on ``agentmem.storage``; keep it in
        :attr:`problems`, once."""
        message = f"semantic memory {self.where}: {problem}"
        with self._guard:
            if message in self.problems:
                return
            self.problems.append(message)
        _log.warning("%s", message)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self._database is None

    def close(self) -> None:
        """Close the pool when this engine opened it (idempotent)."""
        database, self._database = self._database, None
        if database is not None and self._owned:
            database.close()
