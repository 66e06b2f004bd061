"""PostgreSQL plumbing shared by agentmem's stores: pooled connections, transactions,
migrations and locks that die with their holder.

The PostgreSQL backend (docs/backends.md) needs ``psycopg`` 3 and ``psycopg-pool``
(``pip install 'agentmem[postgres]'``). They are imported when a :class:`PgDatabase`
is made, never by ``import agentmem``; without them that raises a
:class:`~agentmem.errors.ConfigurationError` saying what to install.

* **Connections.** :class:`PgDatabase` keeps a ``psycopg_pool.ConnectionPool`` of
  autocommit connections; every transaction is an explicit ``BEGIN`` ... ``COMMIT``
  (``ROLLBACK`` on any exception, ``KeyboardInterrupt`` included). A pooled connection
  the server has dropped (a restart, a cut network) fails at its ``BEGIN``, before
  anything of the call reached the server: the pool is then checked (every idle
  connection pinged, the dead ones replaced) and the ``BEGIN`` retried once on a fresh
  connection. So after a server restart the next call reconnects, at no cost to the
  calls of a healthy pool (no ping before each use). TCP connections carry keepalives,
  so a dead server or host is noticed.
* **Errors.** Every psycopg error that leaves a transaction (a lost connection mid-call,
  a server shutting down, a timeout waiting for a pooled connection) becomes a
  :class:`~agentmem.errors.StorageError` naming the server (without its password) and
  the action, with the psycopg error chained. The transaction was rolled back, so
  nothing of it is stored, with one exception no client can rule out: when the
  connection is lost *while* ``COMMIT`` is on its way, the server may have committed.
* **Placeholders.** :class:`PgCursor` takes the ``?`` placeholders of :mod:`sqlite3`,
  so a statement written for SQLite's store can run here when its SQL is portable.
* **Durability.** A ``COMMIT`` that returned is durable per the server's
  ``synchronous_commit``: with ``durability="full"`` (the default) a server configured
  with ``synchronous_commit = off`` is overridden to ``on`` for agentmem's connections,
  so a write that returned survives a crash of the server. ``"normal"`` sets it
  ``off``: a crash of the client is still harmless, a crash of the server may lose the
  last fraction of a second of commits (never corrupt older ones).
* **Schema.** agentmem's tables live in their own schema (``agentmem`` by default), set
  as the ``search_path`` of every connection, so they never collide with an
  application's tables in the same database.
* **Migrations.** Named, append-only :class:`Migration`\\ s per *format* (one database
  can hold several agentmem stores), recorded in ``agentmem_migrations`` with the
  format's version in ``agentmem_meta``; :func:`migrate` applies the pending ones in
  one transaction under ``pg_advisory_xact_lock``, so hosts starting at once apply
  each exactly once. A database that records a migration this code does not know, or
  a newer version, is refused with :class:`~agentmem.errors.FormatVersionError`.
* **Exclusive locks.** :class:`AdvisoryLock` is a session-level
  ``pg_try_advisory_lock`` held on a dedicated connection (not a pooled one): it never
  waits, and the server drops it the moment that connection ends, so a killed holder
  never leaves it behind (a dead host: once TCP keepalives give up on it, about 25 s:
  they are set on both sides of every connection).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Literal

from agentmem._optional import require
from agentmem.errors import (
    AgentMemError,
    ConfigurationError,
    FormatVersionError,
    InvalidArgumentError,
    StorageError,
    StoreLockedError,
)

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = [
    "AdvisoryLock",
    "ConstraintViolation",
    "Migration",
    "PgCursor",
    "PgDatabase",
    "advisory_key",
    "migrate",
    "redact_dsn",
    "translate_placeholders",
]

logger = logging.getLogger("agentmem.storage")

_MIGRATIONS_TABLE: Final = "agentmem_migrations"
_META_TABLE: Final = "agentmem_meta"
_CREATE_BOOKKEEPING: Final = (
    f"""CREATE TABLE IF NOT EXISTS {_MIGRATIONS_TABLE} (
        format TEXT NOT NULL,
        name TEXT NOT NULL,
        applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (format, name)
    )""",
    f"""CREATE TABLE IF NOT EXISTS {_META_TABLE} (
        format TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (format, key)
    )""",
)

# TCP keepalives: a server or host that vanished is noticed after about 10 + 5 * 3 s of
# silence (libpq ignores them on unix sockets, where the kernel tells at once).
_KEEPALIVES: Final = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


def _modules() -> tuple[ModuleType, ModuleType]:
    """``(psycopg, psycopg_pool)``, imported now; the error naming the extra when missing."""
    return (
        require("psycopg", "the PostgreSQL backend", "postgres"),
        require("psycopg_pool", "the PostgreSQL backend", "postgres"),
    )


@lru_cache(maxsize=1024)
def translate_placeholders(sql: str) -> str:
    """``sql`` with sqlite3's ``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled).

    A ``?`` or ``%`` inside a quoted string or identifier is left as text (``%`` doubled,
    as psycopg wants it). PostgreSQL's jsonb ``?`` operators cannot be written this way;
    agentmem does not use them.
    """
    out: list[str] = []
    quote = ""
    for char in sql:
        if char == "%":
            out.append("%%")
        elif quote:
            out.append(char)
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
            out.append(char)
        elif char == "?":
            out.append("%s")
        else:
            out.append(char)
    return "".join(out)


def advisory_key(namespace: str, key: str) -> int:
    """A stable signed 64-bit key for ``pg_advisory_lock`` from ``(namespace, key)``.

    The first 8 bytes of BLAKE2b: the same in every process and on every host. Two
    different pairs share a key with probability 2**-64; among ``n`` locks held at once
    some pair collides with probability about ``n**2 / 2**65`` (1e-8 for a million
    sessions open at once). A collision only ever refuses a lock that was free (a
    spurious :class:`~agentmem.errors.StoreLockedError`); it never lets two holders in.
    """
    digest = hashlib.blake2b(f"{namespace}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def redact_dsn(dsn: str) -> str:
    """``dsn`` for messages: ``postgresql://user@host:port/dbname``, without the password."""
    try:
        psycopg, _ = _modules()
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except Exception:  # a malformed DSN is reported by whoever connects
        return "<a PostgreSQL DSN>"
    user = params.get("user")
    host = params.get("host") or "localhost"
    port = params.get("port")
    where = f"{host}:{port}" if port else str(host)
    return f"postgresql://{user + '@' if user else ''}{where}/{params.get('dbname') or ''}"


class ConstraintViolation(StorageError):
    """A statement broke a constraint (a foreign or unique key): the transaction is lost.

    Attributes:
        sqlstate: PostgreSQL's error code (``"23503"``: a foreign key, ``"23505"``: unique).
        constraint: The constraint's name, when the server said.
    """

    def __init__(self, message: str, *, sqlstate: str | None, constraint: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.constraint = constraint


class PgCursor:
    """A psycopg cursor with the calls agentmem's SQLite code uses: ``execute`` (``?``
    placeholders, returns the cursor), ``executemany``, ``fetchone``, ``fetchall``,
    ``rowcount`` and iteration. Obtained from :meth:`PgDatabase.transaction`.

    A broken constraint raises :class:`ConstraintViolation`; a value PostgreSQL cannot
    store (text holding a NUL character, a number out of range) raises
    :class:`~agentmem.errors.InvalidArgumentError`. Either way the transaction is lost.
    """

    __slots__ = ("_cursor", "_psycopg")

    def __init__(self, cursor: psycopg.Cursor[Any], psycopg_module: ModuleType) -> None:
        self._cursor = cursor
        self._psycopg = psycopg_module

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        try:
            if params:
                self._cursor.execute(translate_placeholders(sql), params)
            else:
                self._cursor.execute(sql)
        except (self._psycopg.IntegrityError, self._psycopg.DataError) as exc:
            raise _refused(exc, self._psycopg) from exc
        return self

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> PgCursor:
        if rows:
            try:
                self._cursor.executemany(translate_placeholders(sql), rows)
            except (self._psycopg.IntegrityError, self._psycopg.DataError) as exc:
                raise _refused(exc, self._psycopg) from exc
        return self

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._cursor.fetchone()

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._cursor)

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount


def _refused(exc: Exception, psycopg: ModuleType) -> AgentMemError:
    if isinstance(exc, psycopg.DataError):
        return InvalidArgumentError(f"PostgreSQL cannot store a value given: {exc}")
    diag = getattr(exc, "diag", None)
    return ConstraintViolation(
        f"constraint violated: {exc}",
        sqlstate=getattr(exc, "sqlstate", None),
        constraint=getattr(diag, "constraint_name", None),
    )


@dataclass(frozen=True)
class Migration:
    """One named schema change of one format. Never edit or reorder a released one.

    Attributes:
        name: Unique within its format, stable (``"0001_initial"``); recorded once applied.
        steps: SQL statements run in order, or a function given the cursor; they run
            inside the migration transaction.
    """

    name: str
    steps: Sequence[str] | Callable[[PgCursor], None]


Durability = Literal["full", "normal"]


class PgDatabase:
    """One PostgreSQL database, through a pool of connections.

    Args:
        dsn: A libpq connection string or URI (``postgresql://user@host:5432/db``).
        schema: The schema agentmem's tables live in (created by :func:`migrate`), set
            as every connection's ``search_path``; ``None`` keeps the server's.
        durability: ``"full"`` (default) or ``"normal"`` (see the module docstring).
        min_size: Connections the pool keeps open.
        max_size: Connections it opens at most.
        timeout: Seconds to wait for a connection (from the pool, or to a server that is
            restarting) before a call fails with :class:`~agentmem.errors.StorageError`.
        connect_timeout: Seconds libpq waits for one connection attempt.

    Raises:
        ConfigurationError: psycopg is not installed, or an argument is unusable.
        StorageError: the server cannot be reached or refused the connection.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = "agentmem",
        durability: Durability = "full",
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 10.0,
        connect_timeout: int = 5,
    ) -> None:
        if not isinstance(dsn, str) or not dsn:
            raise ConfigurationError(f"dsn must be a non-empty string, got {dsn!r}")
        if schema is not None and not (schema.isidentifier() and schema.isascii()):
            raise ConfigurationError(f"schema must be a plain SQL identifier, got {schema!r}")
        if durability not in ("full", "normal"):
            raise ConfigurationError(f"durability must be one of full, normal; got {durability!r}")
        if not (0 <= min_size <= max_size and max_size >= 1 and timeout > 0):
            raise ConfigurationError(
                "need 0 <= min_size <= max_size, max_size >= 1 and timeout > 0; got "
                f"min_size={min_size!r}, max_size={max_size!r}, timeout={timeout!r}"
            )
        self._psycopg, pool_module = _modules()
        self.dsn = dsn
        self.schema = schema
        self.durability: Durability = durability
        self.where = redact_dsn(dsn)
        self._timeout = timeout
        try:
            params = self._psycopg.conninfo.conninfo_to_dict(dsn)
        except self._psycopg.Error as exc:
            raise ConfigurationError(f"cannot parse the PostgreSQL DSN: {exc}") from None
        self._kwargs: dict[str, Any] = {"autocommit": True, "application_name": "agentmem"}
        self._kwargs.update({k: v for k, v in _KEEPALIVES.items() if k not in params})
        self._kwargs.setdefault("connect_timeout", params.get("connect_timeout", connect_timeout))
        # One direct connection first: its error (a wrong password, no such database)
        # says more than the pool's timeout would.
        self.connect().close()
        self._pool: psycopg_pool.ConnectionPool[Any] | None = pool_module.ConnectionPool(
            dsn,
            kwargs=self._kwargs,
            min_size=min_size,
            max_size=max_size,
            open=False,
            configure=self._configure,
            timeout=timeout,
            name="agentmem",
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except self._psycopg.Error as exc:
            self._pool.close()
            raise self.error("open a connection pool", exc) from exc

    # ------------------------------------------------------------------ connections

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Set up a new connection: the schema, commits as durable as asked, and the
        server's own keepalives (so the server, too, notices a client host that vanished,
        and drops its locks, in about 25 s rather than the system's default two hours)."""
        row = conn.execute(
            "SELECT current_setting('synchronous_commit'), "
            "set_config('search_path', COALESCE(%s, current_setting('search_path')), false), "
            "set_config('tcp_keepalives_idle', %s, false), "
            "set_config('tcp_keepalives_interval', %s, false), "
            "set_config('tcp_keepalives_count', %s, false)",
            (
                None if self.schema is None else f'"{self.schema}"',
                str(_KEEPALIVES["keepalives_idle"]),
                str(_KEEPALIVES["keepalives_interval"]),
                str(_KEEPALIVES["keepalives_count"]),
            ),
        ).fetchone()
        current = str(row[0]) if row else ""
        if self.durability == "normal":
            conn.execute("SET synchronous_commit TO off")
        elif current == "off":
            conn.execute("SET synchronous_commit TO on")

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection of this database's own (not pooled), configured like the pool's.

        Raises:
            StorageError: the server cannot be reached or refused it.
        """
        try:
            conn: psycopg.Connection[Any] = self._psycopg.connect(self.dsn, **self._kwargs)
        except self._psycopg.Error as exc:
            raise StorageError(
                f"cannot connect to PostgreSQL at {self.where}: {str(exc).strip()}"
            ) from exc
        try:
            self._configure(conn)
        except self._psycopg.Error as exc:
            conn.close()
            raise self.error("set up a connection", exc) from exc
        return conn

    def error(self, action: str, exc: BaseException) -> StorageError:
        """The :class:`~agentmem.errors.StorageError` for a psycopg error met while doing
        ``action`` (chain it: ``raise db.error(...) from exc``)."""
        text = str(exc).strip() or type(exc).__name__
        if isinstance(exc, self._psycopg.OperationalError | self._psycopg.InterfaceError):
            return StorageError(
                f"cannot {action}: lost or could not get the connection to PostgreSQL at "
                f"{self.where} ({text}); the call was rolled back (if the connection was lost "
                "while committing, the server may have committed it)"
            )
        return StorageError(f"cannot {action} in PostgreSQL at {self.where}: {text}")

    def _require_pool(self) -> psycopg_pool.ConnectionPool[Any]:
        if self._pool is None:
            raise StorageError(f"the PostgreSQL database {self.where} is closed")
        return self._pool

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._pool is None

    def close(self) -> None:
        """Close every pooled connection (idempotent). Locks keep their own connections."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(timeout=5.0)

    # ------------------------------------------------------------------ transactions

    @contextlib.contextmanager
    def transaction(self, action: str, *, snapshot: bool = False) -> Iterator[PgCursor]:
        """Run a block in one transaction on a pooled connection.

        ``COMMIT`` when the block ends, ``ROLLBACK`` on any exception; a psycopg error
        becomes a :class:`~agentmem.errors.StorageError` naming ``action``.

        Args:
            action: What the block does ("append to session x"), for errors.
            snapshot: A read-only ``REPEATABLE READ`` transaction: every query of the
                block sees one snapshot.
        """
        begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" if snapshot else "BEGIN"
        pool = self._require_pool()
        try:
            conn = self._begin(pool, begin)
            try:
                with _in_transaction(conn, self._psycopg) as cursor:
                    yield cursor
            finally:
                pool.putconn(conn)
        except AgentMemError:
            raise
        except self._psycopg.Error as exc:
            raise self.error(action, exc) from exc

    def _begin(self, pool: psycopg_pool.ConnectionPool[Any], begin: str) -> Any:
        """A pooled connection with a transaction begun; a dead connection is replaced once.

        The ``BEGIN`` is the first thing sent on the connection, so when it fails nothing
        of the caller's work reached the server and trying again is safe.
        """
        conn = pool.getconn(self._timeout)
        try:
            conn.execute(begin)
            return conn
        except BaseException as exc:
            pool.putconn(conn)  # a broken one is discarded, and another opened
            dead = isinstance(exc, self._psycopg.OperationalError) and (conn.broken or conn.closed)
            if not dead:
                raise
        pool.check()  # the other idle connections died with it, most likely
        conn = pool.getconn(self._timeout)
        try:
            conn.execute(begin)
        except BaseException:
            pool.putconn(conn)
            raise
        return conn

    def advisory_lock(self, namespace: str, key: str) -> AdvisoryLock:
        """An exclusive lock on ``(namespace, key)``, not taken yet (see :class:`AdvisoryLock`)."""
        return AdvisoryLock(self, namespace, key)

    def __repr__(self) -> str:
        state = " closed" if self._pool is None else ""
        return f"<PgDatabase {self.where}{state}>"


@contextlib.contextmanager
def _in_transaction(conn: Any, psycopg: ModuleType) -> Iterator[PgCursor]:
    """The body of a transaction already begun on ``conn``: COMMIT, or ROLLBACK on any
    exception. A COMMIT the server answers with ROLLBACK (the transaction had failed and
    the failure was swallowed) raises instead of passing for a commit."""
    try:
        with conn.cursor() as raw:
            yield PgCursor(raw, psycopg)
        done = conn.execute("COMMIT")
        if done.statusmessage != "COMMIT":
            raise StorageError(
                f"the transaction was rolled back by the server (it answered "
                f"{done.statusmessage!r} to COMMIT): a statement in it had failed"
            )
    except BaseException:
        if not conn.closed:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        raise


class AdvisoryLock:
    """An exclusive PostgreSQL advisory lock on ``(namespace, key)``, on its own connection.

    :meth:`try_acquire` opens a dedicated connection and takes ``pg_try_advisory_lock``
    on :func:`advisory_key` of the pair: it never waits. The lock lives as long as that
    connection: :meth:`release` unlocks and closes it, and when the holder dies (kill -9,
    a crash) the server drops the lock as soon as the socket closes; when its host
    dies, once TCP keepalives give up (about 25 s). Advisory locks are per database,
    so the same pair locks the same thing for every host using that database.

    :meth:`transaction` runs a transaction *on the lock's connection*, so the lock is
    held while the transaction runs (fencing): if that connection was lost (a server
    restart drops every lock), the lock is taken again on a new connection before
    anything is written, and :class:`~agentmem.errors.StoreLockedError` is raised if
    another holder took it meanwhile.
    """

    def __init__(self, database: PgDatabase, namespace: str, key: str) -> None:
        self._db = database
        self.namespace = namespace
        self.key = key
        self._key = advisory_key(namespace, key)
        self._conn: psycopg.Connection[Any] | None = None
        self._guard = threading.RLock()

    @property
    def held(self) -> bool:
        """Whether this object holds the lock (as far as it knows: see :meth:`transaction`)."""
        return self._conn is not None

    def _try_lock(self) -> psycopg.Connection[Any] | None:
        """A new connection holding the lock, or ``None`` when someone else holds it."""
        psycopg = self._db._psycopg
        conn = self._db.connect()
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()
        except psycopg.Error as exc:
            conn.close()
            raise self._db.error(f"lock {self.namespace} {self.key}", exc) from exc
        if row is None or row[0] is not True:
            conn.close()
            return None
        return conn

    def try_acquire(self) -> bool:
        """Take the lock without waiting. ``True`` when taken (or already held by this object).

        Raises:
            StorageError: the server could not be reached.
        """
        with self._guard:
            if self._conn is not None:
                return True
            self._conn = self._try_lock()
            return self._conn is not None

    def acquire(self) -> AdvisoryLock:
        """Take the lock without waiting, or raise.

        Returns:
            ``self``.

        Raises:
            StoreLockedError: another connection holds it.
            StorageError: the server could not be reached.
        """
        if not self.try_acquire():
            raise StoreLockedError(
                f"{self.namespace} {self.key} is locked by another process or host "
                f"(on {self._db.where})"
            )
        return self

    def release(self) -> None:
        """Unlock and close the connection (idempotent; never raises for a lost connection)."""
        with self._guard:
            conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            # Unlock before closing: the server would drop it with the connection, but
            # only once the backend has exited, a few milliseconds after close().
            conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
        except self._db._psycopg.Error:
            pass  # the connection is gone, and the lock with it
        finally:
            conn.close()

    @contextlib.contextmanager
    def transaction(self, action: str) -> Iterator[PgCursor]:
        """One transaction on the lock's connection (see the class docstring).

        Raises:
            StoreLockedError: the lock is not held, or was lost with its connection and
                someone else took it since.
            StorageError: the connection was lost during the call (rolled back).
        """
        psycopg = self._db._psycopg
        with self._guard:
            try:
                conn = self._begin(action)
                with _in_transaction(conn, psycopg) as cursor:
                    yield cursor
            except AgentMemError:
                raise
            except psycopg.Error as exc:
                raise self._db.error(action, exc) from exc

    def _begin(self, action: str) -> Any:
        """The lock's connection with a transaction begun; a lost one is replaced once,
        taking the lock again first."""
        psycopg = self._db._psycopg
        conn = self._conn
        if conn is None:
            raise StoreLockedError(f"cannot {action}: the lock on {self.key} is not held")
        try:
            conn.execute("BEGIN")
            return conn
        except psycopg.OperationalError:
            if not conn.broken and not conn.closed:
                raise
        conn.close()
        self._conn = None
        replacement = self._try_lock()
        if replacement is None:
            raise StoreLockedError(
                f"cannot {action}: the lock on {self.key} was lost with its connection to "
                f"{self._db.where} (a server restart or a network cut), and another process "
                "holds it now"
            )
        logger.warning(
            "lock on %s %s: its connection to %s was lost; took the lock again",
            self.namespace,
            self.key,
            self._db.where,
        )
        self._conn = replacement
        replacement.execute("BEGIN")
        return replacement

    def __del__(self) -> None:
        # A lock dropped without release() is released with its connection (as a file
        # lock is when its file object goes), without psycopg's unclosed-connection warning.
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()

    def __repr__(self) -> str:
        state = "held" if self._conn is not None else "free"
        return f"<AdvisoryLock {self.namespace} {self.key!r} {state}>"


# ---------------------------------------------------------------------------- migrations


def _format_state(cursor: PgCursor, format_name: str) -> tuple[set[str], str | None] | None:
    """``(applied migration names, stored version)`` of a format; ``None`` without the
    bookkeeping tables (a database agentmem never migrated)."""
    row = cursor.execute(
        "SELECT to_regclass(?) IS NOT NULL AND to_regclass(?) IS NOT NULL",
        (_MIGRATIONS_TABLE, _META_TABLE),
    ).fetchone()
    if row is None or not row[0]:
        return None
    applied = {
        str(name)
        for (name,) in cursor.execute(
            f"SELECT name FROM {_MIGRATIONS_TABLE} WHERE format = ?", (format_name,)
        ).fetchall()
    }
    version = cursor.execute(
        f"SELECT value FROM {_META_TABLE} WHERE format = ? AND key = 'version'", (format_name,)
    ).fetchone()
    return applied, None if version is None else str(version[0])


def _pending(
    state: tuple[set[str], str | None] | None,
    *,
    where: str,
    format_name: str,
    format_version: int,
    migrations: Sequence[Migration],
) -> list[Migration]:
    """The migrations still to apply; refuses a database written by a newer agentmem."""
    applied, version = state if state is not None else (set(), None)
    if version is not None:
        number = int(version) if version.isascii() and version.isdigit() else None
        if number is not None and number > format_version:
            raise FormatVersionError(
                f"{where} holds {format_name} version {number}, written by a newer agentmem; "
                f"this version reads up to version {format_version}. Upgrade agentmem to "
                "open it.",
                found=number,
                supported=format_version,
            )
    unknown = applied - {m.name for m in migrations}
    if unknown:
        raise FormatVersionError(
            f"{where} has {format_name} migrations this version of agentmem does not know "
            f"({', '.join(sorted(unknown))}); it was written by a newer agentmem (this "
            f"version reads up to {format_name} version {format_version})",
            supported=format_version,
        )
    return [m for m in migrations if m.name not in applied]


def migrate(
    database: PgDatabase,
    *,
    format_name: str,
    format_version: int,
    migrations: Sequence[Migration],
) -> list[str]:
    """Bring ``format_name``'s tables up to ``format_version``, once across every host.

    A database that is current costs one read transaction and takes no lock. Otherwise
    one transaction takes ``pg_advisory_xact_lock`` (every agentmem migrator of this
    database and schema queues on it), creates the schema and the bookkeeping tables if
    needed, checks again what is applied (another host may have done it meanwhile),
    applies the rest in order, records each, and sets the version. A failure rolls all
    of it back.

    Returns:
        The names of the migrations applied by this call.

    Raises:
        FormatVersionError: the database records a newer version or an unknown migration.
        StorageError: the server failed or a migration failed (nothing was applied).
    """

    def pending(state: tuple[set[str], str | None] | None) -> list[Migration]:
        return _pending(
            state,
            where=database.where,
            format_name=format_name,
            format_version=format_version,
            migrations=migrations,
        )

    with database.transaction(f"read the {format_name} schema version", snapshot=True) as cur:
        state = _format_state(cur, format_name)
    todo = pending(state)
    if not todo and state is not None and state[1] == str(format_version):
        return []
    applied: list[str] = []
    with database.transaction(f"migrate {format_name}") as cur:
        cur.execute(
            "SELECT pg_advisory_xact_lock(?)",
            (advisory_key("agentmem.migrate", database.schema or ""),),
        )
        if database.schema is not None:
            cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{database.schema}"')
        for statement in _CREATE_BOOKKEEPING:
            cur.execute(statement)
        for migration in pending(_format_state(cur, format_name)):
            if callable(migration.steps):
                migration.steps(cur)
            else:
                for statement in migration.steps:
                    cur.execute(statement)
            cur.execute(
                f"INSERT INTO {_MIGRATIONS_TABLE} (format, name) VALUES (?, ?)",
                (format_name, migration.name),
            )
            applied.append(migration.name)
        cur.execute(
            f"INSERT INTO {_META_TABLE} (format, key, value) VALUES (?, 'version', ?) "
            "ON CONFLICT (format, key) DO UPDATE SET value = excluded.value",
            (format_name, str(format_version)),
        )
    if applied:
        logger.info("%s: applied %s migrations %s", database.where, format_name, applied)
    return applied
