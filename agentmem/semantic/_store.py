"""The semantic memory database: opening, transactions, and the SQL the client runs.

:class:`SemanticDB` opens ``semantic.sqlite`` the way every agentmem
database is opened (:mod:`agentmem._storage`): WAL, a 10 s busy timeout so
writers from several processes queue instead of failing, ``BEGIN
IMMEDIATE`` transactions that roll back on any exception, named
migrations checked against :data:`~agentmem.semantic._schema.FORMAT_VERSION`,
and recovery on open (a file that is not a readable SQLite database is
moved aside to ``semantic.sqlite.corrupt-<timestamp>``, logged on the
``agentmem.storage`` logger and recorded on :attr:`SemanticDB.recovery`;
what can be read is recovered into the fresh database). A ``meta`` version
that is malformed (missing, not a number) is re-derived from the migrations
table and rewritten (see :func:`agentmem._storage.sqlite.pending_migrations`);
a newer version raises :class:`~agentmem.errors.FormatVersionError` and the
file is left alone. ``path=None`` is a
private in-memory database (incognito: nothing touches the disk).

Every :mod:`sqlite3` error leaving this module is mapped to
:class:`~agentmem.errors.StorageError` (:class:`~agentmem.errors.CorruptStoreError`
for damage found after open). The functions below the class take the
connection inside a transaction and never commit on their own.

**Two engines.** The client holds a :class:`SemanticEngine`: :class:`SemanticDB`
here, or :class:`~agentmem.semantic._pg.PgSemanticDB` on PostgreSQL. The SQL
functions below are written once, with ``?`` placeholders, and run on either
connection (:data:`Conn`); what PostgreSQL names or does differently (table names,
text read as text, keyword matching without FTS5, server-side cosines with
pgvector) comes from :mod:`agentmem.semantic._pg_sql`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from agentmem._storage.recovery import OpenLock, Recovery, open_or_recover
from agentmem._storage.sqlite import (
    Durability,
    is_corruption,
    open_database,
    transaction,
)
from agentmem.errors import CorruptStoreError, StorageError
from agentmem.semantic import _pg_sql as pg_sql
from agentmem.semantic._common import Scope
from agentmem.semantic._rows import COLUMNS as _COLUMNS
from agentmem.semantic._rows import NAMES as _NAMES
from agentmem.semantic._rows import (
    Report,
    Row,
    cosine,
    decode_vector,
    encode_vector,
    fact_hash,
)
from agentmem.semantic._rows import decode_row as _decode
from agentmem.semantic._rows import metadata_json as _metadata_json
from agentmem.semantic._rows import read_row as _row
from agentmem.semantic._rows import text_of as _text
from agentmem.semantic._schema import FORMAT_NAME, FORMAT_VERSION, MIGRATIONS

__all__ = [
    "Conn",
    "Row",
    "SemanticDB",
    "SemanticEngine",
    "cosine",
    "decode_vector",
    "delete_row",
    "encode_vector",
    "fact_hash",
    "find_fact",
    "get_row",
    "has_id",
    "history_rows",
    "insert_row",
    "keyword_matches",
    "record",
    "rows_by_docid",
    "scope_rows",
    "scope_vectors",
    "similarities",
    "update_row",
]

_log = logging.getLogger("agentmem.storage")

_CHUNK = 500  # bound parameters per IN (...) query, well under SQLite's limit

Conn = sqlite3.Connection | pg_sql.PgConn
"""What the SQL functions below are given: a SQLite connection or a PostgreSQL one
(:class:`~agentmem.semantic._pg_sql.PgConn`), inside a transaction."""


class _Dialect(NamedTuple):
    """What the two engines name differently: tables, and how text columns are read."""

    memories: str
    history: str
    columns: str
    history_columns: str


_SQLITE = _Dialect(
    "memories",
    "history",
    _COLUMNS,
    "CAST(event AS BLOB), CAST(old_text AS BLOB), CAST(new_text AS BLOB), CAST(at AS BLOB)",
)
# PostgreSQL checks every text value's encoding on the way in: read as text.
_PG = _Dialect(pg_sql.MEMORIES, pg_sql.HISTORY, ", ".join(_NAMES), "event, old_text, new_text, at")


def _dialect(conn: Conn) -> _Dialect:
    return _SQLITE if isinstance(conn, sqlite3.Connection) else _PG


class SemanticEngine(Protocol):
    """What the client needs of its database, on either engine: :class:`SemanticDB`
    (SQLite) or :class:`~agentmem.semantic._pg.PgSemanticDB` (PostgreSQL)."""

    @property
    def path(self) -> Path | None: ...  # the file (None: in memory or on a server)

    @property
    def recovery(self) -> Recovery | None: ...

    @property
    def problems(self) -> list[str]: ...

    @property
    def where(self) -> str: ...  # for messages

    def read(self, action: str) -> AbstractContextManager[Conn]: ...

    def write(self, action: str) -> AbstractContextManager[Conn]: ...

    def report(self, problem: str) -> None: ...

    def close(self) -> None: ...


class SemanticDB:
    """The connection to ``semantic.sqlite`` (or an in-memory database), used under one lock.

    Args:
        path: The database file (its directory must exist), or ``None``.
        durability: ``"full"`` (fsync every commit) or ``"normal"``.
    """

    def __init__(self, path: Path | None, *, durability: Durability = "full") -> None:
        self.path = path
        self.where = ":memory:" if path is None else str(path)
        self.durability: Durability = durability
        self.recovery: Recovery | None = None
        self.problems: list[str] = []
        self._lock = threading.RLock()
        self._open_lock: OpenLock | None = None
        if path is None:
            self._conn: sqlite3.Connection | None = self._versioned(None)
        else:
            if path.is_dir():
                raise StorageError(f"{path} is a directory, not a semantic memory database")
            conn, self.recovery, self._open_lock = open_or_recover(
                path, self._try_open, what="semantic memory"
            )
            self._conn = conn
            if self.recovery is not None and not self.recovery.salvaged:
                self._salvage_rows(self.recovery)
            # Checked (and recovered if need be) on this open: the mark has done its work.
            with contextlib.suppress(OSError):
                _damage_mark(path).unlink()

    def _versioned(self, path: Path | None) -> sqlite3.Connection:
        return open_database(
            path,
            durability=self.durability,
            format_name=FORMAT_NAME,
            format_version=FORMAT_VERSION,
            migrations=MIGRATIONS,
        )

    def _try_open(self, path: Path) -> sqlite3.Connection:
        conn = self._versioned(path)
        try:
            if _damage_mark(path).exists():
                # A query met damage in this file after an earlier open (which does not read
                # every page): check it whole now, so that recovery moves it aside if it is.
                found = [str(r[0]) for r in conn.execute("PRAGMA quick_check(3)").fetchall()]
                if found != ["ok"]:
                    raise sqlite3.DatabaseError(
                        f"database disk image is malformed ({'; '.join(found)})"
                    )
                # quick_check does not look inside FTS5's blocks; this raises when they are
                # damaged beyond a rebuild (recovery then rebuilds the index from the rows).
                conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
        except BaseException:
            conn.close()
            raise
        return conn

    def _salvage_rows(self, recovery: Recovery) -> None:
        """Copy the rows still readable in the moved-aside file into the fresh database.

        Recovery on open (:func:`~agentmem._storage.recovery.open_or_recover`) salvages
        whole files; when it could not (a damaged schema, a damaged page), it starts
        empty, while most rows may still read fine one by one. They are copied here
        (rows that do not decode stay behind, counted); the moved file is only read.
        """
        conn = self._conn
        assert conn is not None
        try:
            copied, entries, unreadable = _copy_readable(recovery.moved_to, conn)
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # nothing readable: stay empty
            self.report(f"no row of {recovery.moved_to} could be read ({exc})")
            return
        if not copied and not entries and not unreadable:
            return
        outcome = f"recovered {copied} memories and {entries} history entries row by row" + (
            f" ({unreadable} rows or row numbers could not be read: what they held "
            "stayed in the moved file)"
            if unreadable
            else ""
        )
        self.recovery = dataclasses.replace(recovery, salvaged=copied > 0, outcome=outcome)
        _log.warning("semantic memory %s: %s from %s", self.path, outcome, recovery.moved_to)

    def _error(self, action: str, exc: sqlite3.Error) -> StorageError:
        where = self.path if self.path is not None else ":memory:"
        if is_corruption(exc):
            if self._repair_index():
                return CorruptStoreError(
                    f"cannot {action}: the full-text index of {where} was damaged ({exc}); "
                    "it has been rebuilt from the memories, nothing was lost or changed by "
                    "this call: try again",
                    path=self.path,
                )
            if self.path is not None:
                with contextlib.suppress(OSError):
                    _damage_mark(self.path).touch()
                return CorruptStoreError(
                    f"cannot {action}: {where} is damaged ({exc}); it was left in place, and "
                    "will be checked whole, and recovered if it is, the next time a client "
                    "opens it (close and reopen this one)",
                    path=self.path,
                )
            return CorruptStoreError(f"cannot {action}: {where} is damaged ({exc})", path=self.path)
        return StorageError(f"cannot {action} in {where}: {exc}", path=self.path)

    def _repair_index(self) -> bool:
        """Rebuild ``memories_fts`` when its own check fails; whether it was rebuilt.

        The index is derived from ``memories`` (an external-content FTS5 table),
        so rebuilding it loses nothing. ``PRAGMA quick_check`` does not look inside
        FTS5's pages, so a damaged index is only found when a query meets it.
        """
        conn = self._conn
        if conn is None:
            return False
        try:
            conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
            return False  # the index is sound: the damage is elsewhere
        except sqlite3.Error:
            pass
        try:
            with transaction(conn):
                conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")
            conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
        except sqlite3.Error as exc:
            self.report(f"the full-text index is damaged and could not be rebuilt ({exc})")
            return False
        self.report("the full-text index was damaged; rebuilt it from the memories")
        return True

    @contextmanager
    def write(self, action: str) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``) under the lock; rolls back on error."""
        with self._lock:
            conn = self._require()
            try:
                with transaction(conn):
                    yield conn
            except sqlite3.Error as exc:
                raise self._error(action, exc) from exc

    @contextmanager
    def read(self, action: str) -> Iterator[sqlite3.Connection]:
        """A consistent read snapshot under the lock."""
        with self._lock:
            conn = self._require()
            try:
                with transaction(conn, immediate=False):
                    yield conn
            except sqlite3.Error as exc:
                raise self._error(action, exc) from exc

    def report(self, problem: str) -> None:
        """Log damage found (and what was done) on ``agentmem.storage`` and keep it in
        :attr:`problems`, once."""
        where = self.path if self.path is not None else ":memory:"
        message = f"semantic memory {where}: {problem}"
        with self._lock:
            if message in self.problems:
                return
            self.problems.append(message)
        _log.warning("%s", message)

    def _require(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError("the semantic memory client is closed", path=self.path)
        return self._conn

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self._conn is None

    def close(self) -> None:
        """Close the connection and release the open lock (idempotent)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            if self._open_lock is not None:
                self._open_lock.release()
                self._open_lock = None


def _damage_mark(path: Path) -> Path:
    """The file that says a query met damage in ``path`` (checked whole on the next open)."""
    return path.parent / "locks" / f"@damaged-{path.name}"


def _copy_readable(source: Path, conn: sqlite3.Connection) -> tuple[int, int, int]:
    """``(memories, history entries, unreadable rows)`` copied from a damaged ``source``.

    Rows are read in docid/seq ranges, and one by one in a range that fails, so
    a damaged page costs only its own rows. ``source`` is opened read-only and
    immutable (nothing is written beside it), with ``writable_schema`` so that a
    damaged index or trigger definition does not hide the tables.
    """
    src = sqlite3.connect(source.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        # Lets SQLite skip schema entries it cannot parse (a damaged index or trigger) and
        # read the tables; with mode=ro and immutable=1 nothing can be written.
        src.execute("PRAGMA writable_schema = ON")
        memories, bad = _copy_table(
            src,
            conn,
            f"SELECT {_COLUMNS} FROM memories",
            "docid",
            # New docids (in the old order): another process may have added rows to the
            # fresh database already; the same fact stored meanwhile is not stored twice.
            "INSERT OR IGNORE INTO memories (id, user_id, agent_id, run_id, text, hash, "
            "metadata, vector, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            lambda raw: (
                None
                if not isinstance(row := _decode(raw), Row)
                else (
                    row.id,
                    row.user_id,
                    row.agent_id or "",
                    row.run_id or "",
                    row.text,
                    row.hash,
                    _metadata_json(row.metadata),
                    row.vector,
                    row.created_at,
                    row.updated_at,
                )
            ),
        )
        try:
            entries, bad_history = _copy_table(
                src,
                conn,
                "SELECT seq, CAST(memory_id AS BLOB), CAST(event AS BLOB), "
                "CAST(old_text AS BLOB), CAST(new_text AS BLOB), CAST(at AS BLOB) FROM history",
                "seq",
                "INSERT INTO history (memory_id, event, old_text, new_text, at) "
                "VALUES (?, ?, ?, ?, ?)",
                _history_values,
            )
        except (sqlite3.Error, UnicodeDecodeError):
            entries, bad_history = 0, 1  # the history table could not be read at all
    finally:
        src.close()
    return memories, entries, bad + bad_history


def _history_values(raw: Sequence[Any]) -> tuple[Any, ...] | None:
    try:
        texts = [None if v is None else bytes(v).decode("utf-8") for v in raw[1:]]
    except (TypeError, UnicodeDecodeError):
        return None
    if texts[0] is None or texts[1] not in ("ADD", "UPDATE", "DELETE") or texts[4] is None:
        return None
    return tuple(texts)


def _top_key(src: sqlite3.Connection, table: str, key: str) -> int | None:
    """The largest ``key`` of ``table``, or a bound on it when a damaged page hides it.

    ``max()`` follows the b-tree's rightmost path only; when that is damaged, the
    largest key a scan reaches before the damage, and the number of ``history``
    entries (every docid was an insert, and every insert wrote one), bound it.
    """
    try:
        top = src.execute(f"SELECT max({key}) FROM {table}").fetchone()[0]
        return None if top is None else int(top)
    except (sqlite3.Error, UnicodeDecodeError):
        pass
    bounds = [0]
    with contextlib.suppress(sqlite3.Error, UnicodeDecodeError):
        for (value,) in src.execute(f"SELECT {key} FROM {table}"):
            bounds[0] = max(bounds[0], int(value))
    with contextlib.suppress(sqlite3.Error, UnicodeDecodeError):
        bounds.append(int(src.execute("SELECT max(seq) FROM history").fetchone()[0] or 0))
    with contextlib.suppress(sqlite3.Error, UnicodeDecodeError):
        bounds.append(int(src.execute("SELECT count(*) FROM history").fetchone()[0] or 0))
    return max(bounds) + 1024


def _copy_table(
    src: sqlite3.Connection,
    dst: sqlite3.Connection,
    select: str,
    key: str,
    insert: str,
    values: Callable[[Sequence[Any]], tuple[Any, ...] | None],
    chunk: int = 256,
) -> tuple[int, int]:
    """Copy ``select``'s rows range by range of ``key``; ``(copied, unreadable)``."""
    top = _top_key(src, select.rsplit(" FROM ", 1)[1], key)
    if top is None:
        return 0, 0
    copied = unreadable = 0
    with transaction(dst):
        for lo in range(0, int(top) + 1, chunk):
            hi = lo + chunk
            try:
                rows = src.execute(
                    f"{select} WHERE {key} >= ? AND {key} < ? ORDER BY {key}", (lo, hi)
                ).fetchall()
            except (sqlite3.Error, UnicodeDecodeError):  # (the latter: an undecodable message)
                rows = []
                for one in range(lo, hi):  # a damaged page: save what reads one by one
                    try:
                        rows.extend(src.execute(f"{select} WHERE {key} = ?", (one,)).fetchall())
                    except (sqlite3.Error, UnicodeDecodeError):
                        unreadable += 1
            for raw in rows:
                row = values(raw)
                if row is None:
                    unreadable += 1
                    continue
                copied += dst.execute(insert, row).rowcount
    return copied, unreadable


# --------------------------------------------------------------------------- SQL


def _where(scope: Scope, *, exact: bool, alias: str = "") -> tuple[str, list[str]]:
    """The scope as a WHERE clause: ``exact`` matches the triple, else filters by the ids given."""
    p = f"{alias}." if alias else ""
    clauses = [f"{p}user_id = ?"]
    params = [scope.user_id]
    for column, value in (("agent_id", scope.agent_id), ("run_id", scope.run_id)):
        if value is not None or exact:
            clauses.append(f"{p}{column} = ?")
            params.append(value or "")
    return " AND ".join(clauses), params


def scope_rows(
    conn: Conn, scope: Scope, *, exact: bool = False, report: Report | None = None
) -> Iterator[Row]:
    """The memories of ``scope``, newest update first (damaged ones told to ``report``)."""
    d = _dialect(conn)
    where, params = _where(scope, exact=exact)
    cursor = conn.execute(
        f"SELECT {d.columns} FROM {d.memories} WHERE {where} ORDER BY updated_at DESC, docid DESC",
        params,
    )
    for raw in cursor:
        row = _row(raw, report)
        if row is not None:
            yield row


def scope_vectors(conn: Conn, scope: Scope, *, exact: bool = False) -> Iterator[tuple[int, bytes]]:
    """``(docid, vector blob)`` of the memories of ``scope`` that have a vector."""
    where, params = _where(scope, exact=exact)
    for docid, blob in conn.execute(
        f"SELECT docid, vector FROM {_dialect(conn).memories} WHERE {where} AND vector IS NOT NULL",
        params,
    ):
        yield int(docid), bytes(blob)


def similarities(
    conn: Conn, scope: Scope, query: Sequence[float], *, exact: bool = False
) -> dict[int, float]:
    """``docid -> max(0, cosine with query)`` of the memories of ``scope`` whose vector
    has the query's length (a zero vector scores 0). Computed by the server when it has
    pgvector (:attr:`~agentmem.semantic._pg_sql.PgConn.vector_schema`), else here."""
    out: dict[int, float] = {}
    if isinstance(conn, pg_sql.PgConn) and conn.pgvector:
        where, params = _where(scope, exact=exact, alias="m")
        out, blobs = pg_sql.server_similarities(conn, where, params, encode_vector(query))
        out = {docid: max(0.0, value) for docid, value in out.items()}
    else:
        blobs = list(scope_vectors(conn, scope, exact=exact))
    for docid, blob in blobs:
        vector = decode_vector(blob)
        value = cosine(query, vector)
        if value is not None:
            out[docid] = max(0.0, value)
        elif len(vector) == len(query):
            # A zero vector's cosine is 0 (the Embedder contract): blended like any
            # other, not scored as if it had no vector.
            out[docid] = 0.0
    return out


def rows_by_docid(conn: Conn, docids: Sequence[int], *, report: Report | None = None) -> list[Row]:
    """The memories with these docids, newest update first (damaged ones told to ``report``)."""
    d = _dialect(conn)
    out: list[Row] = []
    ids = sorted(set(docids))
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        for raw in conn.execute(
            f"SELECT {d.columns} FROM {d.memories} WHERE docid IN ({marks})", chunk
        ):
            row = _row(raw, report)
            if row is not None:
                out.append(row)
    out.sort(key=lambda row: (row.updated_at, row.docid), reverse=True)
    return out


def get_row(conn: Conn, memory_id: str, *, report: Report | None = None) -> Row | None:
    """The memory with this id, or ``None`` (also when it is damaged: told to ``report``)."""
    d = _dialect(conn)
    raw = conn.execute(
        f"SELECT {d.columns} FROM {d.memories} WHERE id = ?", (memory_id,)
    ).fetchone()
    return None if raw is None else _row(raw, report)


def has_id(conn: Conn, memory_id: str) -> bool:
    """Whether a row with this id exists (readable or not)."""
    sql = f"SELECT 1 FROM {_dialect(conn).memories} WHERE id = ?"
    return conn.execute(sql, (memory_id,)).fetchone() is not None


def find_fact(conn: Conn, scope: Scope, digest: str, *, report: Report | None = None) -> Row | None:
    """The memory of exactly ``scope`` whose :func:`fact_hash` is ``digest``, if any."""
    d = _dialect(conn)
    where, params = _where(scope, exact=True)
    raw = conn.execute(
        f"SELECT {d.columns} FROM {d.memories} WHERE {where} AND hash = ?", [*params, digest]
    ).fetchone()
    return None if raw is None else _row(raw, report)


def insert_row(
    conn: Conn,
    *,
    memory_id: str,
    scope: Scope,
    text: str,
    metadata: Mapping[str, Any],
    vector: bytes | None,
    now: str,
) -> None:
    """Insert a memory and index it (SQLite: the FTS triggers, in the same statement;
    PostgreSQL: its terms, in the same transaction)."""
    sql = (
        f"INSERT INTO {_dialect(conn).memories} (id, user_id, agent_id, run_id, text, hash, "
        "metadata, vector, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    params = (
        memory_id,
        scope.user_id,
        scope.agent_id or "",
        scope.run_id or "",
        text,
        fact_hash(text),
        _metadata_json(metadata),
        vector,
        now,
        now,
    )
    if isinstance(conn, sqlite3.Connection):
        conn.execute(sql, params)
        return
    [docid] = conn.execute(sql + " RETURNING docid", params).fetchall()[0]
    pg_sql.index_terms(conn, int(docid), text, old=None)
    pg_sql.set_embedding(conn, int(docid), vector)


def update_row(
    conn: Conn,
    memory_id: str,
    *,
    text: str,
    metadata: Mapping[str, Any],
    vector: bytes | None,
    now: str,
) -> None:
    """Replace a memory's text, metadata and vector."""
    sql = (
        f"UPDATE {_dialect(conn).memories} SET text = ?, hash = ?, metadata = ?, vector = ?, "
        "updated_at = ? WHERE id = ?"
    )
    params = (text, fact_hash(text), _metadata_json(metadata), vector, now, memory_id)
    if isinstance(conn, sqlite3.Connection):
        conn.execute(sql, params)
        return
    before = conn.execute(
        f"SELECT docid, terms FROM {pg_sql.MEMORIES} WHERE id = ?", (memory_id,)
    ).fetchone()
    conn.execute(sql, params)
    if before is not None:
        pg_sql.index_terms(conn, int(before[0]), text, old=int(before[1]))
        pg_sql.set_embedding(conn, int(before[0]), vector)


def delete_row(conn: Conn, memory_id: str) -> None:
    """Delete a memory (its history stays; on PostgreSQL its terms go by cascade)."""
    sql = f"DELETE FROM {_dialect(conn).memories} WHERE id = ?"
    if isinstance(conn, sqlite3.Connection):
        conn.execute(sql, (memory_id,))
    else:
        pg_sql.forget(conn, conn.execute(sql + " RETURNING terms", (memory_id,)).fetchall())


def record(
    conn: Conn,
    memory_id: str,
    event: str,
    old: str | None,
    new: str | None,
    now: str,
) -> None:
    """Append one change to ``history``."""
    conn.execute(
        f"INSERT INTO {_dialect(conn).history} (memory_id, event, old_text, new_text, at) "
        "VALUES (?, ?, ?, ?, ?)",
        (memory_id, event, old, new, now),
    )


def history_rows(
    conn: Conn, memory_id: str, *, report: Report | None = None
) -> list[tuple[str, str | None, str | None, str]]:
    """``(event, old_text, new_text, at)`` of every change of a memory, oldest first.

    An entry with a column that is not UTF-8 is told to ``report`` and left out
    (without ``report``: :class:`sqlite3.DatabaseError`).
    """
    d = _dialect(conn)
    out: list[tuple[str, str | None, str | None, str]] = []
    for seq, *raw in conn.execute(
        f"SELECT seq, {d.history_columns} FROM {d.history} WHERE memory_id = ? ORDER BY seq",
        (memory_id,),
    ):
        try:
            event, old, new, at = (None if v is None else _text(v) for v in raw)
        except UnicodeDecodeError as exc:
            problem = f"history entry {seq}: a column is not UTF-8 (byte {exc.start})"
            if report is None:
                raise sqlite3.DatabaseError(f"malformed {problem}") from exc
            report(f"{problem}; left out of the history and left in place")
            continue
        out.append((str(event), old, new, str(at)))
    return out


def keyword_matches(
    conn: Conn, scope: Scope, words: Sequence[str], *, exact: bool
) -> dict[int, tuple[float, int]]:
    """For the memories of ``scope`` holding any of ``words`` (by porter stem):
    ``docid -> (BM25, how many of the words it holds)``; BM25 as FTS5 gives it
    (more negative is better; on PostgreSQL, the same formula over the same terms,
    :func:`agentmem.semantic._pg_sql.keyword_matches`).

    ``words`` must be ``\\w+`` tokens (they are quoted as FTS5 strings).
    """
    if not words:
        return {}
    where, params = _where(scope, exact=exact, alias="m")
    if not isinstance(conn, sqlite3.Connection):
        return pg_sql.keyword_matches(conn, where, params, words)
    # CROSS JOIN keeps the FTS5 lookup as the outer loop: SQLite would otherwise walk the
    # scope's rows through the user_id index and re-run the MATCH for each of them.
    any_word = " OR ".join(f'"{word}"' for word in words)
    found = {
        int(docid): (float(score), 0)
        for docid, score in conn.execute(
            "SELECT m.docid, bm25(memories_fts) FROM memories_fts "
            "CROSS JOIN memories AS m ON m.docid = memories_fts.rowid "
            f"WHERE memories_fts MATCH ? AND {where}",
            [any_word, *params],
        )
    }
    if len(words) == 1:
        return {docid: (score, 1) for docid, (score, _) in found.items()}
    for word in words:
        for (docid,) in conn.execute(
            "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", [f'"{word}"']
        ):
            hit = found.get(int(docid))
            if hit is not None:
                found[int(docid)] = (hit[0], hit[1] + 1)
    return found
