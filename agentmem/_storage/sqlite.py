"""SQLite plumbing shared by agentmem's databases: connections, transactions, migrations.

Every agentmem database is opened the same way (:func:`connect`):

* **WAL mode.** Readers never block the writer and the writer never blocks
  readers; a commit appends pages to the ``-wal`` file instead of
  rewriting the database, and a crash at any instant leaves the last
  committed state (SQLite replays or discards the log on the next open).
* **Explicit transactions.** The connection is in autocommit mode
  (``isolation_level=None``) so Python's ``sqlite3`` never opens a
  transaction behind our back; every write goes through
  :func:`transaction`, which issues ``BEGIN IMMEDIATE`` (take the write
  lock up front, so two writers queue instead of deadlocking on a lock
  upgrade), ``COMMIT`` on success and ``ROLLBACK`` on *any* exception,
  ``KeyboardInterrupt`` included.
* **Durability is a choice, made once per connection.** ``"full"``
  (``synchronous=FULL``, the default) fsyncs the log on every commit: a
  write that returned survives power loss. ``"normal"``
  (``synchronous=NORMAL``) syncs only at checkpoints: a write that returned
  survives a crash or ``kill -9`` of the process, but the last commits may
  be lost if the machine loses power. Both keep the database consistent.
* ``busy_timeout`` of 10 s (another process writing makes us wait, not
  fail), ``foreign_keys=ON``, ``check_same_thread=False`` (the owner
  serialises access with its own lock).
* ``path=None`` opens a private in-memory database that never touches the
  disk (incognito mode; temporary tables are kept in memory too).

Schema changes are **named, append-only migrations** (:class:`Migration`),
recorded in a ``migrations(name, applied_at)`` table and applied in order,
all in one transaction, by :func:`migrate` (the sqlite-utils / simonw/llm
pattern). A ``meta(key, value)`` table names the database's ``format`` and
``version``. A reader refuses a database whose version is *newer* than it
knows, or that records migrations it has never heard of, with a
:class:`~agentmem.errors.StorageError` naming both versions, instead of
guessing at a schema it does not understand; it upgrades older ones.

Errors: this module lets :class:`sqlite3.Error` through (callers decide
what it means for them); :func:`is_corruption` tells an unreadable file
(``SQLITE_NOTADB``, ``SQLITE_CORRUPT``) from a busy, locked or read-only
one, which must never be treated as corrupt.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from agentmem.errors import FormatVersionError, StorageError

logger = logging.getLogger("agentmem.storage")

__all__ = [
    "BUSY_TIMEOUT_S",
    "DURABILITIES",
    "DerivedDamage",
    "Durability",
    "IsDerived",
    "Migration",
    "SchemaDamageError",
    "connect",
    "enable_wal",
    "header_problem",
    "is_busy",
    "is_corruption",
    "migrate",
    "open_database",
    "pending_migrations",
    "record_schema",
    "transaction",
    "verify_schema",
]

Durability = Literal["full", "normal"]
"""``"full"``: fsync on every commit (survives power loss). ``"normal"``: survives process death."""

DURABILITIES: Final = ("full", "normal")

BUSY_TIMEOUT_S: Final = 10.0
"""How long a statement waits for another connection's lock before failing with SQLITE_BUSY."""

_SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6
_SQLITE_CORRUPT: Final = 11
_SQLITE_NOTADB: Final = 26

_SYNCHRONOUS: Final = {"full": "FULL", "normal": "NORMAL"}

_META_SQL: Final = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
_MIGRATIONS_SQL: Final = (
    "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
)


@dataclass(frozen=True)
class Migration:
    """One named schema change. Never edit or reorder a released migration; append a new one.

    Attributes:
        name: Unique, stable name such as ``"0001_initial"``; recorded once applied.
        steps: SQL statements run in order, or a function given the connection.
            Both run inside the migration transaction (so no ``executescript``,
            which would commit it).
    """

    name: str
    """Unique, stable name such as ``"0001_initial"``; recorded once applied."""
    steps: Sequence[str] | Callable[[sqlite3.Connection], None]
    """SQL statements run in order, or a function given the connection."""


class SchemaDamageError(sqlite3.DatabaseError):
    """The schema SQLite read is not the one this database recorded: damage it did not notice."""


_BUSY_CODES: Final = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED


def is_busy(exc: BaseException) -> bool:
    """Whether an error (or the sqlite3 error it was raised from) is another connection's
    lock, not damage."""
    code = getattr(exc.__cause__, "sqlite_errorcode", getattr(exc, "sqlite_errorcode", None))
    return isinstance(code, int) and code & 0xFF in _BUSY_CODES


def is_corruption(exc: BaseException) -> bool:
    """Whether ``exc`` says the file is not a readable SQLite database.

    Only ``SQLITE_NOTADB`` and ``SQLITE_CORRUPT`` (and their extended codes)
    count. ``SQLITE_BUSY``, ``SQLITE_LOCKED``, ``SQLITE_READONLY``,
    ``SQLITE_CANTOPEN`` and I/O errors do not: moving such a file aside
    would throw away a healthy database.

    Args:
        exc: An exception raised by :mod:`sqlite3`.

    Returns:
        ``True`` for corruption.
    """
    if isinstance(exc, SchemaDamageError | UnicodeDecodeError):
        # UnicodeDecodeError: sqlite3 cannot decode the message SQLite gives for some
        # malformed schemas (the damaged bytes are quoted in it).
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    message = str(exc).lower()
    return "file is not a database" in message or "malformed" in message


_HEADER_MAGIC: Final = b"SQLite format 3\x00"


def header_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the file at ``path`` cannot be a SQLite database, judging by its 100-byte header.

    Checked *before* SQLite opens the file because SQLite, on failing to
    read a header, deletes the ``-wal`` and ``-shm`` files beside it when
    the connection closes, and the log may hold the newest data. A missing
    or empty file is fine (SQLite creates a new database).

    Args:
        path: The database file.

    Returns:
        ``None`` when the header looks valid (or there is no file yet), else a reason.

    Raises:
        OSError: the file exists but cannot be read.
    """
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
    except FileNotFoundError:
        return None
    if not header:
        return None
    if len(header) < 100:
        return f"truncated header ({len(header)} bytes)"
    if not header.startswith(_HEADER_MAGIC):
        return "not a SQLite database (bad magic string)"
    page_size = int.from_bytes(header[16:18], "big")
    if page_size == 1:
        page_size = 65536
    if page_size < 512 or page_size & (page_size - 1):
        return f"invalid page size {page_size}"
    if header[18] not in (1, 2) or header[19] not in (1, 2):
        return "invalid file format version"
    if header[21:24] != b"\x40\x20\x20":
        return "invalid payload fractions"
    return None


def connect(
    path: str | os.PathLike[str] | None,
    *,
    durability: Durability = "full",
    wal: bool = True,
) -> sqlite3.Connection:
    """Open an agentmem SQLite connection (WAL, explicit transactions, chosen durability).

    Args:
        path: The database file, created when missing (its directory must
            exist); ``None`` for a private in-memory database.
        durability: ``"full"`` (fsync every commit) or ``"normal"``.
        wal: Switch the database to WAL mode now. Pass ``False`` to look at
            a file before changing it (WAL mode is persistent, so a database
            that turns out not to be ours must not be switched), then call
            :func:`enable_wal`.

    Returns:
        A connection in autocommit mode; use :func:`transaction` to write.

    Raises:
        StorageError: ``durability`` is unknown, or the filesystem does not
            support WAL mode.
        sqlite3.Error: the file could not be opened or read (see
            :func:`is_corruption`).
    """
    if durability not in _SYNCHRONOUS:
        raise StorageError(f"unknown durability {durability!r}; expected one of {DURABILITIES}")
    target = ":memory:" if path is None else os.fspath(path)
    conn = sqlite3.connect(
        target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if path is None:
            conn.execute("PRAGMA temp_store = MEMORY")
        # Reading the schema reads the header: a file that is not a database fails here.
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[durability]}")
        if durability == "full":
            # macOS: plain fsync does not reach the platter; F_FULLFSYNC does. No-op elsewhere.
            conn.execute("PRAGMA fullfsync = ON")
            conn.execute("PRAGMA checkpoint_fullfsync = ON")
        conn.execute("PRAGMA foreign_keys = ON")
        if wal and path is not None:
            enable_wal(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def enable_wal(conn: sqlite3.Connection, path: str | os.PathLike[str] | None = None) -> None:
    """Switch a file database to WAL mode (persistent; a no-op when it already is).

    Args:
        conn: An open connection to a file database.
        path: The file, for the error message.

    Raises:
        StorageError: SQLite refused (for example on a filesystem without
            shared memory, such as some network filesystems).
        sqlite3.Error: the database could not be read.
    """
    # Switching to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once instead
    # of calling the busy handler: two processes opening a brand-new database would fail
    # after a millisecond. Wait for the other one, as busy_timeout does for every other lock.
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.001
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            break
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", None)
            busy = code is not None and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
    if str(mode).lower() != "wal":
        where = os.fspath(path) if path is not None else "the database"
        raise StorageError(
            f"SQLite refused WAL mode for {where} (got {mode!r}); "
            "is the file on a network filesystem?",
            path=None if path is None else Path(os.fspath(path)),
        )


@contextlib.contextmanager
def transaction(
    conn: sqlite3.Connection, *, immediate: bool = True
) -> Iterator[sqlite3.Connection]:
    """Run a block in one transaction: COMMIT on success, ROLLBACK on any exception.

    Args:
        conn: A connection from :func:`connect` (autocommit mode).
        immediate: ``BEGIN IMMEDIATE`` (take the write lock now; for writes)
            or a deferred ``BEGIN`` (a consistent snapshot for multi-query reads).

    Yields:
        ``conn``.
    """
    conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        # COMMIT itself may fail (SQLITE_BUSY, disk full) and leave the transaction open.
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def _version_or_none(value: object) -> int | None:
    """A stored ``meta.version``: a decimal integer >= 1, else ``None`` (malformed)."""
    text = str(value) if value is not None else ""
    return int(text) if text.isascii() and text.isdigit() and int(text) >= 1 else None


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(row[0]) for row in rows}


def pending_migrations(
    conn: sqlite3.Connection,
    *,
    format_name: str,
    format_version: int,
    migrations: Sequence[Migration],
    path: str | os.PathLike[str] | None = None,
) -> list[Migration]:
    """Check a database's format and version and return the migrations it still needs.

    Args:
        conn: An open connection.
        format_name: The ``format`` this reader expects in ``meta``.
        format_version: The newest version this reader understands.
        migrations: Every migration, oldest first.
        path: For error messages.

    Returns:
        The migrations not applied yet, in order (all of them for a new database).

    Raises:
        StorageError: the database belongs to something else, or was written
            by a newer version of agentmem.
        sqlite3.Error: the database could not be read.
    """
    where = os.fspath(path) if path is not None else ":memory:"
    error_path = Path(where) if path is not None else None
    tables = _tables(conn)
    if "meta" in tables:
        meta = {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
        found = meta.get("format")
        if found != format_name:
            raise StorageError(
                f"{where} is not an {format_name} database (its format is {found!r})",
                path=error_path,
            )
        version = _version_or_none(meta.get("version"))
        if version is None:
            # A malformed version (missing, 0, "one"...) is damage to one row, not to the
            # data: the migrations table says which migrations ran, so the version is
            # re-derived from it (unknown names still refuse below) and rewritten by migrate.
            if "migrations" not in tables:
                raise SchemaDamageError(
                    f"{where}: unreadable {format_name} version {meta.get('version')!r} "
                    "and no migrations table to tell it from"
                )
            logger.warning(
                "%s: unreadable %s version %r; taken from its migrations table and rewritten",
                where,
                format_name,
                meta.get("version"),
            )
            version = 0
        if version > format_version:
            raise FormatVersionError(
                f"{where} is {format_name} version {version}, written by a newer agentmem; "
                f"this version reads up to version {format_version}. Upgrade agentmem to open it.",
                path=error_path,
                found=version,
                supported=format_version,
            )
    elif tables - {"migrations"}:
        raise StorageError(
            f"{where} is a SQLite database but not an {format_name} database "
            f"(it has tables {sorted(tables)} and no meta table)",
            path=error_path,
        )
    applied: set[str] = set()
    if "migrations" in tables:
        applied = {str(row[0]) for row in conn.execute("SELECT name FROM migrations")}
    unknown = applied - {m.name for m in migrations}
    if unknown:
        raise FormatVersionError(
            f"{where} has migrations this version of agentmem does not know "
            f"({', '.join(sorted(unknown))}); it was written by a newer agentmem "
            f"(this version reads up to {format_name} version {format_version})",
            path=error_path,
            supported=format_version,
        )
    return [m for m in migrations if m.name not in applied]


def migrate(
    conn: sqlite3.Connection,
    *,
    format_name: str,
    format_version: int,
    migrations: Sequence[Migration],
    path: str | os.PathLike[str] | None = None,
) -> list[str]:
    """Bring a database up to ``format_version``: apply pending migrations in one transaction.

    A database that is already current costs one read and no write lock.

    Args:
        conn: An open connection from :func:`connect`.
        format_name: Stored as ``meta.format`` (for example ``"agentmem.sessions"``).
        format_version: Stored as ``meta.version`` once every migration ran.
        migrations: Every migration, oldest first.
        path: For error messages.

    Returns:
        Names of the migrations applied now (empty when none were needed).

    Raises:
        StorageError: the database is someone else's or newer than this reader.
        sqlite3.Error: a read or a migration failed (the transaction rolled back).
    """

    def plan() -> list[Migration] | None:
        todo = pending_migrations(
            conn,
            format_name=format_name,
            format_version=format_version,
            migrations=migrations,
            path=path,
        )
        # None: nothing to do at all (no migration pending and the version already recorded).
        return None if not todo and _version_is_current(conn, format_version) else todo

    if plan() is None:
        return []
    applied: list[str] = []
    with transaction(conn):
        # Re-check under the write lock: another process may have migrated meanwhile.
        todo = plan()
        if todo is None:
            return []
        conn.execute(_MIGRATIONS_SQL)
        conn.execute(_META_SQL)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for migration in todo:
            if callable(migration.steps):
                migration.steps(conn)
            else:
                for statement in migration.steps:
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (migration.name, stamp)
            )
            applied.append(migration.name)
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('format', ?), ('version', ?)",
            (format_name, str(format_version)),
        )
    return applied


def _version_is_current(conn: sqlite3.Connection, format_version: int) -> bool:
    if "meta" not in _tables(conn):
        return False
    row = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
    return row is not None and str(row[0]) == str(format_version)


_SCHEMA_KEY: Final = "schema_sql"
_ROOTS_KEY: Final = "schema_roots"
_DERIVED_KEY: Final = "derived_sql"
_DERIVED_ROOTS_KEY: Final = "derived_roots"

IsDerived = Callable[[str], bool]
"""Tells the schema objects holding derived data (rebuilt, never trusted) by name."""


@dataclass(frozen=True, slots=True)
class DerivedDamage:
    """The derived part of a schema differs from its fingerprint (see :func:`verify_schema`)."""

    reason: str
    """What differs."""
    shared_pages: bool = False
    """A derived object's root page moved and ``quick_check`` failed: it may point at pages
    another table owns, so it must be removed from the schema, never dropped (a drop would
    free those pages)."""


def _fingerprints(
    conn: sqlite3.Connection, derived: IsDerived | None = None, *, of_derived: bool = False
) -> tuple[str, str]:
    """Digests of the schema's SQL text and of its b-tree root pages, as SQLite reads them.

    With ``derived``: of the objects it does not name (``of_derived`` False) or of those it
    names (``of_derived`` True).
    """
    rows = conn.execute(
        "SELECT type, name, tbl_name, rootpage, CAST(sql AS BLOB) FROM sqlite_master "
        "ORDER BY CAST(name AS BLOB)"
    ).fetchall()
    text = hashlib.sha256()
    roots = hashlib.sha256()
    for kind, name, table, root, sql in rows:
        if derived is not None and derived(str(name)) != of_derived:
            continue
        text.update(repr((kind, name, table, sql)).encode("utf-8", "surrogatepass"))
        roots.update(repr((name, root)).encode("utf-8", "surrogatepass"))
    return text.hexdigest(), roots.hexdigest()


def _quick_check(conn: sqlite3.Connection) -> list[str]:
    """``PRAGMA quick_check``'s complaints (empty when it says ok)."""
    try:
        problems = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.DatabaseError as exc:  # pages too damaged for the check to finish
        return [str(exc)]
    return [] if problems == ["ok"] else problems


def record_schema(conn: sqlite3.Connection, *, derived: IsDerived | None = None) -> None:
    """Record the schema's fingerprints in ``meta`` (inside the caller's transaction).

    With ``derived``, the derived objects get their own fingerprint, so damage confined
    to them can be told apart (:class:`DerivedDamage`) and repaired by rebuilding them.
    """
    text, roots = _fingerprints(conn, derived)
    values: list[str] = [_SCHEMA_KEY, text, _ROOTS_KEY, roots]
    if derived is not None:
        derived_text, derived_roots = _fingerprints(conn, derived, of_derived=True)
        values += [_DERIVED_KEY, derived_text, _DERIVED_ROOTS_KEY, derived_roots]
    marks = ", ".join("(?, ?)" for _ in range(len(values) // 2))
    conn.execute(f"INSERT OR REPLACE INTO meta (key, value) VALUES {marks}", values)


def verify_schema(
    conn: sqlite3.Connection, *, migrated: bool = False, derived: IsDerived | None = None
) -> DerivedDamage | None:
    """Check that the schema SQLite parsed from page 1 is the one the database recorded.

    SQLite reads its schema from page 1 and trusts it: a flipped byte there
    can rename a column or point a table at another page and still parse.
    :func:`migrate`-managed databases record two fingerprints in ``meta``
    (the schema's SQL text, and its root pages) the first time they are
    opened by this code, and after every migration (``migrated=True``).
    On open the SQL text must match exactly. A root-page change alone can
    be a legitimate ``VACUUM``: it is accepted when ``PRAGMA quick_check``
    passes, and the fingerprint is updated.

    ``derived`` names the objects that hold derived data (an index that can be
    rebuilt from the tables it indexes). They are fingerprinted apart: when only they
    differ (a dropped table, a changed trigger, a root page moved where ``quick_check``
    then fails while every other root is as recorded), the damage is returned for the
    caller to rebuild them (then :func:`record_schema`), not raised.

    Cost: one read of ``sqlite_master`` and ``meta`` (a few pages); the
    ``quick_check`` only runs after a root-page change.

    Returns:
        ``None``, or what differs among the derived objects.

    Raises:
        SchemaDamageError: the schema (outside the derived objects) does not match
            its fingerprint.
        sqlite3.Error: the database could not be read.
    """
    keys = (_SCHEMA_KEY, _ROOTS_KEY, _DERIVED_KEY, _DERIVED_ROOTS_KEY)
    stored = dict(
        conn.execute(f"SELECT key, value FROM meta WHERE key IN ({', '.join('?' * 4)})", keys)
    )
    # A database recorded before `derived` was given has one fingerprint of everything.
    split = derived is not None and _DERIVED_KEY in stored
    if not migrated and _SCHEMA_KEY in stored:
        text, roots = _fingerprints(conn, derived if split else None)
        if stored[_SCHEMA_KEY] != text:
            raise SchemaDamageError("malformed database schema: it differs from its fingerprint")
        derived_text, derived_roots = (
            _fingerprints(conn, derived, of_derived=True) if split else ("", "")
        )
        roots_same = stored.get(_ROOTS_KEY) == roots
        derived_roots_same = not split or stored.get(_DERIVED_ROOTS_KEY) == derived_roots
        if split and stored[_DERIVED_KEY] != derived_text:
            problems = [] if derived_roots_same else _quick_check(conn)
            return DerivedDamage(
                "the schema of its derived objects differs from its fingerprint"
                + (f" and quick_check says {problems}" if problems else ""),
                shared_pages=bool(problems),
            )
        if roots_same and derived_roots_same:
            return None
        problems = _quick_check(conn)
        if problems:
            if split and roots_same:
                return DerivedDamage(
                    f"its root pages moved and quick_check says {problems}", shared_pages=True
                )
            raise SchemaDamageError(
                f"malformed database schema: root pages moved and quick_check says {problems}"
            )
    with transaction(conn):
        record_schema(conn, derived=derived)
    return None


def open_database(
    path: str | os.PathLike[str] | None,
    *,
    durability: Durability,
    format_name: str,
    format_version: int,
    migrations: Sequence[Migration],
    derived: IsDerived | None = None,
    rebuild_derived: Callable[[sqlite3.Connection, DerivedDamage], None] | None = None,
) -> sqlite3.Connection:
    """Open one of agentmem's versioned databases, ready to use.

    Connects without touching the file, refuses someone else's (or a newer)
    database before changing anything in it, switches it to WAL mode, applies
    the pending migrations and checks the schema against the migrations'
    fingerprints. ``path`` ``None`` opens a private in-memory database.

    ``derived`` names the objects holding derived data; when only they differ from
    their fingerprint, ``rebuild_derived`` is called (it rebuilds them and records the
    schema again) instead of raising :class:`SchemaDamageError`.

    Raises:
        FormatVersionError: a newer or foreign format.
        SchemaDamageError: the schema does not match what the migrations built.
        sqlite3.Error: the file could not be read (left to the caller, whose
            recovery tells damage apart with :func:`is_corruption`).

    The connection is closed on any failure.
    """
    conn = connect(path, durability=durability, wal=False)
    try:
        if path is None:
            migrate(
                conn,
                format_name=format_name,
                format_version=format_version,
                migrations=migrations,
            )
        else:
            pending_migrations(
                conn,
                format_name=format_name,
                format_version=format_version,
                migrations=migrations,
                path=path,
            )
            enable_wal(conn, path)
            applied = migrate(
                conn,
                format_name=format_name,
                format_version=format_version,
                migrations=migrations,
                path=path,
            )
            damage = verify_schema(conn, migrated=bool(applied), derived=derived)
            if damage is not None:
                if rebuild_derived is None:
                    raise SchemaDamageError(f"malformed database schema: {damage.reason}")
                rebuild_derived(conn, damage)
    except BaseException:
        conn.close()
        raise
    return conn
