"""The PostgreSQL engine of a sessions store: the schema, every statement, the session locks.

:class:`PgSessionsSQL` is :class:`~.sql.SessionsSQL` in PostgreSQL's dialect: the
same methods, the same rows out (plain tuples; message bodies and the state as
``bytes``), so the store, the writer and the loader run unchanged on it. The tables
are the SQLite store's (``sessions``, ``messages``, ``billing`` with its cache columns,
``threads``, ``quarantine``), typed the PostgreSQL way (``TEXT``, ``BIGINT``,
``DOUBLE PRECISION``, ``BYTEA``, generated ids), in the database's ``agentmem``
schema, created by migrations named like the SQLite ones that mean the same
(``0001_initial``, ``0002_row_checksums``, ``0005_billing_cache_tokens``,
``0006_recall_postings``; the recall index's ``0003``/``0004`` are SQLite's FTS5 and
have no counterpart here).

:class:`PgEngine` runs them (:mod:`agentmem._storage.postgres`): reads and writes on
a connection pool, one transaction each, committed when the call returns; a lost
connection is a :class:`~agentmem.errors.StorageError` with the call rolled back, and
the next call reconnects. A session lock is a PostgreSQL advisory lock held on its
own connection (:class:`~agentmem._storage.postgres.AdvisoryLock`), so it is
exclusive across hosts and dies with its holder's connection. While this process
holds a session's lock, that session's writer writes *through the lock's
connection*: the lock is held by the very backend that commits each write, so a
writer whose lock was lost (a server restart drops every lock) cannot write after
another process took the session; it takes the lock again or gets
:class:`~agentmem.errors.StoreLockedError`.

The recall index (:mod:`.pg_recall`: the impact-ordered postings of :mod:`.postings`,
migration ``0006_recall_postings``) is written by the message-changing methods in the
same transaction as the messages, and read by the ``recall_*`` methods.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Final

from agentmem._storage.postgres import (
    AdvisoryLock,
    ConstraintViolation,
    Durability,
    Migration,
    PgCursor,
    PgDatabase,
    migrate,
)
from agentmem.errors import InvalidArgumentError, SessionNotFoundError, StorageError
from agentmem.session_store import pg_recall, postings
from agentmem.session_store.engine import SessionTables
from agentmem.session_store.lock import SessionLock
from agentmem.session_store.records import FORMAT_NAME, Row
from agentmem.session_store.sql_shared import SharedSessionsSQL

__all__ = ["PG_FORMAT_VERSION", "PG_MIGRATIONS", "PgEngine", "PgSessionsSQL"]

PG_FORMAT_VERSION: Final = 2
"""The sessions schema on PostgreSQL this code writes and the newest it reads
(``agentmem_meta`` row ``(agentmem.sessions, version)``). Bump it with every migration."""

PG_MIGRATIONS: Final = (
    Migration(
        "0001_initial",
        (
            """
            CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                name TEXT,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                working_directory TEXT,
                model TEXT,
                context_window BIGINT,
                state TEXT NOT NULL DEFAULT '{}',
                ord BIGINT GENERATED ALWAYS AS IDENTITY  -- creation order: list()'s tie-break
            )
            """,
            "CREATE INDEX sessions_by_updated_at ON sessions (updated_at, ord)",
            """
            CREATE TABLE messages (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                seq BIGINT NOT NULL,
                role TEXT NOT NULL,
                body TEXT NOT NULL,
                PRIMARY KEY (session_id, seq)
            )
            """,
            """
            CREATE TABLE billing (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                at DOUBLE PRECISION NOT NULL,
                kind TEXT NOT NULL,
                model TEXT,
                prompt_tokens BIGINT NOT NULL,
                completion_tokens BIGINT NOT NULL,
                cost_usd DOUBLE PRECISION NOT NULL
            )
            """,
            "CREATE INDEX billing_by_session ON billing (session_id, id)",
            """
            CREATE TABLE threads (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                thread_id TEXT NOT NULL,
                seq BIGINT NOT NULL,
                body TEXT NOT NULL,
                PRIMARY KEY (session_id, thread_id, seq)
            )
            """,
            """
            CREATE TABLE quarantine (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                thread_id TEXT,
                seq BIGINT,
                body BYTEA,
                reason TEXT NOT NULL,
                at DOUBLE PRECISION NOT NULL
            )
            """,
            # A session's delete cascades here: without it, a scan of the table.
            "CREATE INDEX quarantine_by_session ON quarantine (session_id)",
        ),
    ),
    # crc32(body, seq) of rows validated when written (agentmem.session_store.loading).
    # BIGINT: a CRC-32 is unsigned and does not fit PostgreSQL's INTEGER.
    Migration(
        "0002_row_checksums",
        (
            "ALTER TABLE messages ADD COLUMN crc BIGINT",
            "ALTER TABLE threads ADD COLUMN crc BIGINT",
        ),
    ),
    # The cached parts of a billed prompt (issue 18), as in SQLite's 0005.
    Migration(
        "0005_billing_cache_tokens",
        (
            "ALTER TABLE billing ADD COLUMN cached_prompt_tokens BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE billing ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0",
        ),
    ),
    # The recall index (agentmem.session_store.pg_recall), every stored message indexed.
    Migration("0006_recall_postings", lambda cur: _create_recall_index(cur)),
)


def _create_recall_index(cur: PgCursor) -> None:
    for statement in pg_recall.TABLES:
        cur.execute(statement)
    pg_recall.rebuild(cur)


_FOREIGN_KEY_VIOLATION: Final = "23503"
_UNIQUE_VIOLATION: Final = "23505"

_INFO_COLUMNS: Final = """
    SELECT s.id, s.name, s.created_at, s.updated_at, s.working_directory, s.model,
           s.context_window,
           COALESCE((SELECT MAX(m.seq) FROM messages AS m WHERE m.session_id = s.id), -1) + 1
    FROM sessions AS s
"""
_SQL_INFO: Final = _INFO_COLUMNS + " WHERE s.id = ?"
# LIMIT NULL is no limit.
_SQL_LIST: Final = _INFO_COLUMNS + " ORDER BY s.updated_at DESC, s.ord DESC LIMIT ?"
_SQL_LIST_ALL: Final = _INFO_COLUMNS + " ORDER BY s.updated_at DESC, s.ord DESC"
_SQL_CREATE: Final = (
    "INSERT INTO sessions (id, name, created_at, updated_at, working_directory, model, "
    "context_window) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_SQL_DELETE_SESSION: Final = "DELETE FROM sessions WHERE id = ?"
_SQL_STATE: Final = "SELECT state FROM sessions WHERE id = ?"
# The primary key (session_id, seq) answers MAX(seq) with one backward index descent.
_SQL_NEXT_SEQ: Final = "SELECT COALESCE(MAX(seq), -1) + 1 FROM messages WHERE session_id = ?"
_SQL_REPLACE_MESSAGE: Final = (
    "UPDATE messages SET role = ?, body = ?, crc = ? WHERE session_id = ? AND seq = ?"
)
_SQL_TRUNCATE: Final = "DELETE FROM messages WHERE session_id = ? AND seq >= ?"
_SQL_MESSAGES: Final = "SELECT seq, body, crc FROM messages WHERE session_id = ? ORDER BY seq"
_SQL_DELETE_MESSAGE: Final = "DELETE FROM messages WHERE session_id = ? AND seq = ?"
_SQL_RENUMBER_MESSAGE: Final = "UPDATE messages SET seq = ? WHERE session_id = ? AND seq = ?"
_SQL_BILLING: Final = (
    "SELECT id, at, kind, model, prompt_tokens, completion_tokens, cost_usd, "
    "cached_prompt_tokens, cache_write_tokens FROM billing WHERE session_id = ? ORDER BY id"
)
_SQL_NEXT_THREAD_SEQ: Final = (
    "SELECT COALESCE(MAX(seq), -1) + 1 FROM threads WHERE session_id = ? AND thread_id = ?"
)
_SQL_THREADS: Final = (
    "SELECT thread_id, seq, body, crc FROM threads WHERE session_id = ? ORDER BY thread_id, seq"
)
_SQL_DELETE_THREAD_ROW: Final = (
    "DELETE FROM threads WHERE session_id = ? AND thread_id = ? AND seq = ?"
)
_SQL_RENUMBER_THREAD_ROW: Final = (
    "UPDATE threads SET seq = ? WHERE session_id = ? AND thread_id = ? AND seq = ?"
)


class PgSessionsSQL(SharedSessionsSQL[PgCursor]):
    """The SQL of a sessions store on PostgreSQL, over one cursor in one transaction.

    The same methods as :class:`~.sql.SessionsSQL` (see :class:`~.engine.SessionTables`).
    Text comes back as ``str`` (PostgreSQL checks its encoding on the way in), and
    message bodies and the state as ``bytes``, as the loader expects.
    """

    __slots__ = ()

    def __init__(self, cursor: PgCursor) -> None:
        super().__init__(cursor)

    # -- sessions

    def info_row(self, sid: str) -> tuple[Any, ...] | None:
        return self.conn.execute(_SQL_INFO, (sid,)).fetchone()

    def list_rows(self, limit: int | None) -> list[tuple[Any, ...]]:
        if limit is None:
            return self.conn.execute(_SQL_LIST_ALL).fetchall()
        return self.conn.execute(_SQL_LIST, (limit,)).fetchall()

    def create(
        self,
        sid: str,
        name: str | None,
        now: float,
        working_directory: str | None,
        model: str | None,
        context_window: int | None,
    ) -> None:
        """Insert the session row.

        Raises:
            InvalidArgumentError: the id is taken; another host may have created it
                between the store's check and this insert (PostgreSQL does not serialise
                the two the way SQLite's write lock does).
        """
        try:
            self.conn.execute(
                _SQL_CREATE, (sid, name, now, now, working_directory, model, context_window)
            )
        except ConstraintViolation as exc:
            if exc.sqlstate == _UNIQUE_VIOLATION:
                raise InvalidArgumentError(f"a session with id {sid!r} already exists") from None
            raise

    def delete(self, sid: str) -> bool:
        pg_recall.forget_from(self.conn, sid, 0)
        return self.conn.execute(_SQL_DELETE_SESSION, (sid,)).rowcount > 0

    def state(self, sid: str) -> bytes:
        row = self.conn.execute(_SQL_STATE, (sid,)).fetchone()
        return b"{}" if row is None or row[0] is None else str(row[0]).encode("utf-8")

    # -- messages and side threads (thread_id None is the main history)

    def next_seq(self, sid: str, thread_id: str | None = None) -> int:
        if thread_id is None:
            row = self.conn.execute(_SQL_NEXT_SEQ, (sid,)).fetchone()
        else:
            row = self.conn.execute(_SQL_NEXT_THREAD_SEQ, (sid, thread_id)).fetchone()
        assert row is not None  # an aggregate always returns its row
        return int(row[0])

    def insert_messages(self, sid: str, start: int, rows: Sequence[Row]) -> None:
        """Insert rows ``(role, body, crc)`` at seqs ``start``, ``start + 1``...

        Raises:
            SessionNotFoundError: the session does not exist (its foreign key refused).
        """
        messages = [(start + i, str(role), body) for i, (role, body, _) in enumerate(rows)]
        try:  # the rows and their index in one statement (pg_recall.index)
            pg_recall.index(self.conn, sid, messages, crcs=[crc for _, _, crc in rows])
        except ConstraintViolation as exc:
            if exc.sqlstate == _FOREIGN_KEY_VIOLATION:
                raise SessionNotFoundError(sid) from None
            raise

    def replace_message(self, sid: str, seq: int, row: Row) -> bool:
        role, body, crc = row
        if self.conn.execute(_SQL_REPLACE_MESSAGE, (role, body, crc, sid, seq)).rowcount == 0:
            return False
        pg_recall.reindex(self.conn, sid, [seq])
        return True

    def truncate(self, sid: str, start: int) -> None:
        pg_recall.forget_from(self.conn, sid, start)
        self.conn.execute(_SQL_TRUNCATE, (sid, start))

    def message_rows(self, sid: str) -> list[tuple[Any, bytes, Any]]:
        """``(seq, raw body, crc)`` of the main history, in ``seq`` order."""
        rows = self.conn.execute(_SQL_MESSAGES, (sid,)).fetchall()
        return [(seq, body.encode("utf-8"), crc) for seq, body, crc in rows]

    def thread_rows(self, sid: str) -> list[tuple[Any, Any, bytes, Any]]:
        """``(thread_id, seq, raw body, crc)`` of every side thread, by thread then ``seq``."""
        rows = self.conn.execute(_SQL_THREADS, (sid,)).fetchall()
        return [(tid, seq, body.encode("utf-8"), crc) for tid, seq, body, crc in rows]

    def delete_row(self, sid: str, thread_id: str | None, seq: Any) -> None:
        if thread_id is None:
            if type(seq) is int:
                pg_recall.forget(self.conn, sid, [seq])
            self.conn.execute(_SQL_DELETE_MESSAGE, (sid, seq))
        else:
            self.conn.execute(_SQL_DELETE_THREAD_ROW, (sid, thread_id, seq))

    def renumber(self, sid: str, thread_id: str | None, kept: Sequence[Any]) -> None:
        """Give the rows ``kept`` (old seqs, in their new order) the seqs 0..len-1.

        In two steps (each to a distinct negative, then to its final seq): PostgreSQL
        checks a primary key row by row, so no intermediate state may hold a duplicate.
        """
        sql = _SQL_RENUMBER_MESSAGE if thread_id is None else _SQL_RENUMBER_THREAD_ROW
        key: tuple[str, ...] = (sid,) if thread_id is None else (sid, thread_id)
        moves = [(old, new) for new, old in enumerate(kept) if old != new]
        low = min([0, *(old for old in kept if type(old) is int)]) - 1
        self.conn.executemany(sql, [(low - i, *key, old) for i, (old, _) in enumerate(moves)])
        self.conn.executemany(sql, [(new, *key, low - i) for i, (_, new) in enumerate(moves)])
        if thread_id is None and moves:
            pg_recall.forget(self.conn, sid, [s for m in moves for s in m if type(s) is int])
            pg_recall.reindex(self.conn, sid, [new for _, new in moves])

    # -- billing

    def billing_rows(self, sid: str) -> list[tuple[Any, ...]]:
        """``(row id, at, kind, model, prompt_tokens, completion_tokens, cost_usd,
        cached_prompt_tokens, cache_write_tokens)``."""
        return self.conn.execute(_SQL_BILLING, (sid,)).fetchall()

    # -- the recall index (agentmem.session_store.pg_recall; agentmem.recall ranks)

    def recall_rows(
        self,
        match: str,
        limit: int,
        *,
        session_ids: Sequence[str] | None = None,
        **filters: Any,
    ) -> list[tuple[Any, ...]]:
        """The ``limit`` best matches of ``match`` (FTS5's query syntax as
        :mod:`agentmem.recall` writes it: quoted words ORed) that pass the filters, by
        FTS5's BM25 computed from the postings (:func:`.pg_recall.match_rows`). Rows as
        :meth:`.sql.SessionsSQL.recall_rows`'."""
        passing, params, _ = _recall_filters(self.conn, dict(filters, session_ids=session_ids))
        best = pg_recall.match_rows(self.conn, match, passing, params)[:limit]
        return [row[:-1] for row in self._recall_by_doc(best)]

    def recall_top(
        self, weights: dict[str, int], limit: int, **filters: Any
    ) -> list[tuple[Any, ...]]:
        """The ``limit`` best messages by the postings' score that pass the filters: as
        :meth:`.sql.SessionsSQL.recall_top` (the same :func:`.postings.top_k`), rows
        ending with the query terms' frequencies."""
        passing, params, scope = _recall_filters(self.conn, filters)

        def accept(docs: list[int]) -> list[int]:
            return [int(r[0]) for r in self.conn.execute(passing, [docs, *params])]

        held: dict[int, dict[str, int]] = {}  # the best messages' frequencies (top_k's)
        if scope is not None:
            docs = (
                [
                    int(r[0])
                    for r in self.conn.execute(
                        "SELECT docid FROM recall_docs WHERE session_id IN "
                        f"({', '.join('?' * len(scope))})",
                        scope,
                    )
                ]
                if scope
                else []
            )
            scored = postings.score_docs(
                _portable(self.conn), weights, accept(docs) if docs else []
            )
            best = sorted(((v, d) for d, v in scored.items() if v > 0), key=lambda p: (-p[0], p[1]))
            best = best[:limit]
        else:
            best = postings.top_k(
                _portable(self.conn),
                weights,
                limit,
                accept if params else None,  # no filter: every message passes
                budget=postings.BUDGET,
                held=held,
            )
        ranked = [(doc, float(value)) for value, doc in best]
        if scope is not None:
            held = postings.frequencies(_portable(self.conn), list(weights), [d for d, _ in ranked])
        return [(*row[:-1], held[row[-1]]) for row in self._recall_by_doc(ranked)]

    def _recall_by_doc(self, ranked: Sequence[tuple[int, float]]) -> list[tuple[Any, ...]]:
        """Rows ``(session_id, seq, role, score, text, session name, created_at,
        updated_at, length, docid)`` of ``ranked`` ``(docid, score)``, in its order."""
        score = dict(ranked)
        ids = list(score)
        found = {int(row[0]): row for row in self.conn.execute(_SQL_RECALL_BY_DOC, (ids,))}
        return [(*found[doc][1:4], score[doc], *found[doc][4:], doc) for doc in ids if doc in found]

    def recall_stats(self, terms: Sequence[str]) -> tuple[dict[str, int], int, int, int]:
        """BM25's corpus statistics, as :meth:`.sql.SessionsSQL.recall_stats`: the term
        counts and the totals from ``recall_terms`` and ``recall_counts``."""
        docs = pg_recall.doc_frequencies(self.conn, terms) if terms else {}
        messages, tokens = pg_recall.totals(self.conn)
        row = self.conn.execute("SELECT count(*) FROM sessions").fetchone()
        return docs, messages, tokens, int(row[0]) if row is not None else 0

    def recall_session_sizes(self, sids: Sequence[str]) -> dict[str, int]:
        """How many messages each of the sessions ``sids`` holds (0 for none)."""
        out = dict.fromkeys((str(s) for s in sids), 0)
        if out:
            for sid, size in self.conn.execute(_SQL_RECALL_SESSION_SIZES, (list(out),)):
                out[str(sid)] = int(size or 0)
        return out

    def recall_queued(self) -> bool:
        """Always false: the index is written with the messages, nothing is queued."""
        return False

    def recall_texts(self, sid: str, first: int, last: int) -> dict[int, Any]:
        """Indexed text of the messages ``first..last`` of a session, by seq."""
        rows = self.conn.execute(
            "SELECT seq, text FROM recall_docs WHERE session_id = ? AND seq BETWEEN ? AND ?",
            (sid, first, last),
        ).fetchall()
        return {int(seq): text for seq, text in rows}

    def recall_problems(self) -> list[str]:
        """What is wrong with the recall index (:func:`.pg_recall.problems`; O(messages))."""
        return pg_recall.problems(self.conn)

    def recall_rebuild(self) -> str:
        """Index every message again (:func:`.pg_recall.rebuild`); ``""`` (nothing to say
        beyond it, as SQLite's plain rebuild)."""
        pg_recall.rebuild(self.conn)
        return ""


_SQL_RECALL_BY_DOC: Final = """
    SELECT d.docid, d.session_id, d.seq, d.role, d.text, s.name, s.created_at, s.updated_at,
           d.length
    FROM recall_docs AS d JOIN sessions AS s ON s.id = d.session_id
    WHERE d.docid = ANY(?::bigint[])
"""
# One backward index descent per session (recall_docs' unique (session_id, seq)).
_SQL_RECALL_SESSION_SIZES: Final = """
    SELECT j.sid, (SELECT seq + 1 FROM recall_docs WHERE session_id = j.sid
                   ORDER BY seq DESC LIMIT 1)
    FROM unnest(?::text[]) AS j (sid)
"""
_FEW_SESSIONS: Final = 50


class _ArrayCursor:
    """A cursor :mod:`.postings` sends lists of ids to as one array parameter each
    (``= ANY(?)``: psycopg neither caches nor cheaply parses a statement of more than
    50 placeholders)."""

    __slots__ = ("_cursor",)
    takes_arrays: Final = True

    def __init__(self, cursor: PgCursor) -> None:
        self._cursor = cursor

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> PgCursor:
        return self._cursor.execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> PgCursor:
        return self._cursor.executemany(sql, list(parameters))


def _portable(cursor: PgCursor) -> postings.Cursor:
    """The cursor as :mod:`.postings` reads it (:class:`_ArrayCursor`)."""
    return _ArrayCursor(cursor)


"""``max_sessions`` up to this many: their messages are scored (as on SQLite)."""


def _recall_filters(
    cur: PgCursor, filters: dict[str, Any]
) -> tuple[str, list[Any], list[str] | None]:
    """The query keeping the docids (its first parameter, an array) that pass
    ``filters``, its parameters after the docids, and the sessions to score when a few
    are asked for."""
    clauses: list[str] = []
    params: list[Any] = []
    session_ids = filters.get("session_ids")
    roles = filters.get("roles")
    max_sessions = filters.get("max_sessions")
    if roles is not None:
        clauses.append(f"d.role IN ({', '.join('?' * len(roles))})")
        params.extend(roles)
    if filters.get("since") is not None:
        clauses.append("s.updated_at >= ?")
        params.append(filters["since"])
    if filters.get("until") is not None:
        clauses.append("s.created_at <= ?")
        params.append(filters["until"])
    if filters.get("exclude_session") is not None:
        clauses.append("d.session_id != ?")
        params.append(filters["exclude_session"])
    scope = None if session_ids is None else [str(s) for s in session_ids]
    if scope is None and max_sessions is not None and max_sessions <= _FEW_SESSIONS:
        scope = [
            str(r[0])
            for r in cur.execute(
                "SELECT id FROM sessions ORDER BY updated_at DESC, ord DESC LIMIT ?",
                (max_sessions,),
            )
        ]
    elif max_sessions is not None:
        clauses.append(
            "d.session_id IN (SELECT id FROM sessions ORDER BY updated_at DESC, ord DESC LIMIT ?)"
        )
        params.append(max_sessions)
    if scope is not None:
        clauses.append(f"d.session_id IN ({', '.join('?' * len(scope))})" if scope else "FALSE")
        params.extend(scope)
    passing = (
        "SELECT d.docid FROM recall_docs AS d JOIN sessions AS s ON s.id = d.session_id "
        "WHERE d.docid = ANY(?::bigint[])" + "".join(f" AND {c}" for c in clauses)
    )
    return passing, params, scope


class _Abandoned(Exception):
    """Rolls back :meth:`PgEngine.one_snapshot`'s transaction (read only: nothing lost)."""


class _RegisteredLock:
    """A session's advisory lock that tells its engine while it is held (see
    :meth:`PgEngine.write`)."""

    def __init__(self, engine: PgEngine, session_id: str, lock: AdvisoryLock) -> None:
        self._engine = engine
        self._session_id = session_id
        self._lock = lock

    def try_acquire(self) -> bool:
        if not self._lock.try_acquire():
            return False
        with self._engine._guard:
            self._engine._held[self._session_id] = self._lock
        return True

    def release(self) -> None:
        with self._engine._guard:
            if self._engine._held.get(self._session_id) is self._lock:
                del self._engine._held[self._session_id]
        self._lock.release()


class PgEngine:
    """A sessions store's PostgreSQL database (see the module docstring).

    Args:
        database: A DSN (the engine makes and closes its own
            :class:`~agentmem._storage.postgres.PgDatabase`), or a shared one.
        durability: For a DSN: ``"full"`` or ``"normal"`` (see :class:`PgDatabase`).

    Raises:
        ConfigurationError: psycopg is not installed.
        StorageError: the server cannot be reached.
        FormatVersionError: the database holds a newer sessions schema.
    """

    def __init__(self, database: str | PgDatabase, *, durability: Durability = "full") -> None:
        if isinstance(database, PgDatabase):
            self._db, owned = database, False
        else:
            self._db, owned = PgDatabase(database, durability=durability), True
        self._owns_db = owned
        try:
            migrate(
                self._db,
                format_name=FORMAT_NAME,
                format_version=PG_FORMAT_VERSION,
                migrations=PG_MIGRATIONS,
            )
        except BaseException:
            if owned:
                self._db.close()
            raise
        self._lock_namespace = f"agentmem.sessions/{self._db.schema or ''}"
        # Weak: a lock dropped without release() is released when collected (its connection
        # closes), as a file lock is; the registry must not keep it alive.
        self._held: weakref.WeakValueDictionary[str, AdvisoryLock] = weakref.WeakValueDictionary()
        self._guard = threading.Lock()
        self._closed = False
        self._pinned = threading.local()  # .cursor: this thread's reads' snapshot (one_snapshot)

    @property
    def database(self) -> PgDatabase:
        """The database (its pool) this engine runs on."""
        return self._db

    @property
    def path(self) -> Path | None:
        return None

    @property
    def where(self) -> str:
        return self._db.where

    @property
    def closed(self) -> bool:
        return self._closed

    def _require_open(self) -> None:
        if self._closed:
            raise StorageError("the session store is closed")

    @contextmanager
    def write(self, action: str, *, session: str | None = None) -> Iterator[SessionTables]:
        """One write transaction. A write of a session whose lock this process holds runs
        on the lock's own connection (fenced by the lock); any other on the pool."""
        self._require_open()
        self._unpin()  # the reads after this write must see it: not the snapshot before
        lock = self._held.get(session) if session is not None else None
        transaction: AbstractContextManager[PgCursor] = (
            lock.transaction(action) if lock is not None else self._db.transaction(action)
        )
        with transaction as cursor:
            yield PgSessionsSQL(cursor)

    @contextmanager
    def read(self, action: str, *, snapshot: bool = False) -> Iterator[SessionTables]:
        """One read transaction; inside :meth:`one_snapshot` (on this thread), its
        snapshot's transaction."""
        self._require_open()
        pinned: PgCursor | None = getattr(self._pinned, "cursor", None)
        if pinned is None:
            with self._db.transaction(action, snapshot=snapshot) as cursor:
                yield PgSessionsSQL(cursor)
            return
        try:
            yield PgSessionsSQL(pinned)
        except self._db._psycopg.Error as exc:
            self._unpin()  # the snapshot's transaction failed: the next reads take their own
            raise self._db.error(action, exc) from exc

    @contextmanager
    def one_snapshot(self, action: str) -> Iterator[None]:
        """Run this thread's reads of the block (:meth:`read`) in one ``REPEATABLE READ
        READ ONLY`` transaction: they see one snapshot and share its ``BEGIN``/``COMMIT``
        (recall's dozen reads: a round trip each saved). A write in the block (on this
        thread) ends the sharing, the reads after it see it (the write takes a second
        pooled connection: recall itself never writes on PostgreSQL); so does a read
        that fails, the reads after it take their own transactions. Nested: the outer
        one's."""
        self._require_open()
        if getattr(self._pinned, "active", False):
            yield
            return
        self._pinned.active = True
        try:
            with self._db.transaction(action, snapshot=True) as cursor:
                self._pinned.cursor = cursor
                try:
                    yield
                finally:
                    unpinned = self._unpin()
                if unpinned is None:  # a read failed or a write came: end it without COMMIT
                    raise _Abandoned
        except _Abandoned:
            pass
        finally:
            self._pinned.active = False

    def _unpin(self) -> PgCursor | None:
        """End this thread's :meth:`one_snapshot` sharing; the cursor it had, if any."""
        cursor: PgCursor | None = getattr(self._pinned, "cursor", None)
        self._pinned.cursor = None
        return cursor

    def lock(self, session_id: str) -> SessionLock:
        advisory = self._db.advisory_lock(self._lock_namespace, session_id)
        return SessionLock(
            session_id,
            path=None,
            held=set(),
            guard=threading.Lock(),
            external=_RegisteredLock(self, session_id, advisory),
        )

    def close(self) -> None:
        self._closed = True
        if self._owns_db:
            self._db.close()
