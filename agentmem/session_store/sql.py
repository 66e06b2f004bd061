"""The sessions schema and every SQL statement, behind one narrow seam.

:class:`SessionsSQL` is the only place that speaks SQL for sessions. The
writer and the store call its methods (``insert_messages``, ``touch``,
``message_rows``...) inside a transaction the store opens, and never see a
statement. A second backend (PostgreSQL, say) implements the same methods;
there is no abstract base class until there is a second implementation.

Every statement is a module-level constant: sqlite3 keeps a per-connection
cache of prepared statements keyed by the SQL text, so each one is compiled
once per connection and reused.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from agentmem._storage.sqlite import Migration
from agentmem.errors import SessionNotFoundError
from agentmem.session_store import postings, recall_index
from agentmem.session_store.recall_index import (
    RECALL_BATCH,
    add_postings,
    create_recall_index_v1,
    upgrade_to_v2,
)
from agentmem.session_store.records import Row
from agentmem.session_store.sql_shared import SharedSessionsSQL

__all__ = [
    "MIGRATIONS",
    "RECALL_BATCH",
    "SessionsSQL",
    "flush_recall_index",
    "rebuild_recall_index",
]

MIGRATIONS: Final = (
    Migration(
        "0001_initial",
        (
            """
            CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                name TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL,
                working_directory TEXT,
                model TEXT,
                context_window INTEGER,
                state TEXT NOT NULL DEFAULT '{}'
            )
            """,
            "CREATE INDEX sessions_by_updated_at ON sessions (updated_at)",
            """
            CREATE TABLE messages (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                role TEXT NOT NULL,
                body TEXT NOT NULL,
                PRIMARY KEY (session_id, seq)
            ) WITHOUT ROWID
            """,
            """
            CREATE TABLE billing (
                id INTEGER PRIMARY KEY,
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                at REAL NOT NULL,
                kind TEXT NOT NULL,
                model TEXT,
                prompt_tokens INTEGER NOT NULL,
                completion_tokens INTEGER NOT NULL,
                cost_usd REAL NOT NULL
            )
            """,
            "CREATE INDEX billing_by_session ON billing (session_id, id)",
            """
            CREATE TABLE threads (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                thread_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                body TEXT NOT NULL,
                PRIMARY KEY (session_id, thread_id, seq)
            ) WITHOUT ROWID
            """,
            """
            CREATE TABLE quarantine (
                id INTEGER PRIMARY KEY,
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                thread_id TEXT,
                seq INTEGER,
                body BLOB,
                reason TEXT NOT NULL,
                at REAL NOT NULL
            )
            """,
        ),
    ),
    # crc32(body, seq) of rows validated when written: the trusted load path and the
    # detection of damaged rows and seqs (see agentmem.session_store.loading).
    Migration(
        "0002_row_checksums",
        (
            "ALTER TABLE messages ADD COLUMN crc INTEGER",
            "ALTER TABLE threads ADD COLUMN crc INTEGER",
        ),
    ),
    # The recall index (agentmem.recall): one recall_docs row per message (its searchable
    # text), an FTS5 index over it, and recall_pending, the changes not yet indexed.
    # Triggers on `messages` queue every change and index the queue every RECALL_BATCH
    # changes, so every statement that changes a message (append, replace, truncate,
    # renumber, a cascading session delete, quarantine) changes queue or index in the
    # same transaction: together they cannot drift from the messages, even across kill -9.
    # Existing messages are indexed here, so a store written by an earlier release is
    # searchable once opened. (Kept as released; 0004 re-indexes under the current rules.)
    Migration("0003_recall_index", lambda conn: create_recall_index_v1(conn)),
    # Index rules 2 (the memory's own messages left out), recall_state (the rules' version,
    # and the flag raised by a write to the index from outside), every message re-indexed.
    Migration("0004_recall_index_v2", lambda conn: upgrade_to_v2(conn)),
    # The cached parts of a billed prompt, kept apart because they cost differently
    # (issue 18). Rows written before hold 0: their cache split was not recorded.
    Migration(
        "0005_billing_cache_tokens",
        (
            "ALTER TABLE billing ADD COLUMN cached_prompt_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE billing ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0",
        ),
    ),
    # Impact-ordered postings beside the FTS5 index (recall_postings, recall_terms,
    # recall_unposted; agentmem.session_store.postings): recall's candidates in a cost
    # bounded by the k best, not by the number of matches. Every message posted here.
    Migration("0006_recall_postings", lambda conn: add_postings(conn)),
)


def flush_recall_index(conn: sqlite3.Connection) -> bool:
    """Index the queued message changes (inside the caller's write transaction).

    Returns whether there were any.
    """
    if conn.execute(_SQL_RECALL_PENDING).fetchone() is not None:
        recall_index.flush(conn)  # posts the new index rows too
    elif postings.unposted(conn):
        postings.post(conn)
    else:
        return False
    return True


def rebuild_recall_index(conn: sqlite3.Connection) -> str:
    """Re-derive the whole recall index from the messages (see :func:`.recall_index.rebuild`;
    in its own transactions). Returns ``""``, or what was done about damaged pages."""
    return recall_index.rebuild(conn)


def _raw(column: str) -> str:
    # Text comes back as bytes, so a value that is not valid UTF-8 is reported by the reader
    # (agentmem.session_store.records) instead of failing the whole query in sqlite3.
    return f"CASE typeof({column}) WHEN 'text' THEN CAST({column} AS BLOB) ELSE {column} END"


_INFO_COLUMNS: Final = f"""
    SELECT {_raw("s.id")}, {_raw("s.name")}, {_raw("s.created_at")}, {_raw("s.updated_at")},
           {_raw("s.working_directory")}, {_raw("s.model")}, {_raw("s.context_window")},
           COALESCE((SELECT MAX(m.seq) FROM messages AS m WHERE m.session_id = s.id), -1) + 1
    FROM sessions AS s
"""
_SQL_INFO: Final = _INFO_COLUMNS + " WHERE s.id = ?"
_SQL_LIST: Final = _INFO_COLUMNS + " ORDER BY s.updated_at DESC, s.rowid DESC LIMIT ?"
_SQL_CREATE: Final = (
    "INSERT INTO sessions (id, name, created_at, updated_at, working_directory, model, "
    "context_window) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_SQL_DELETE_SESSION: Final = "DELETE FROM sessions WHERE id = ?"
_SQL_STATE: Final = "SELECT CAST(state AS BLOB) FROM sessions WHERE id = ?"
# With the (session_id, seq) primary key, MAX(seq) is one B-tree descent, not a scan.
_SQL_NEXT_SEQ: Final = "SELECT COALESCE(MAX(seq), -1) + 1 FROM messages WHERE session_id = ?"
_SQL_INSERT_MESSAGE: Final = (
    "INSERT INTO messages (session_id, seq, role, body, crc) VALUES (?, ?, ?, ?, ?)"
)
_SQL_REPLACE_MESSAGE: Final = (
    "UPDATE messages SET role = ?, body = ?, crc = ? WHERE session_id = ? AND seq = ?"
)
_SQL_TRUNCATE: Final = "DELETE FROM messages WHERE session_id = ? AND seq >= ?"
# CAST: read raw bytes, so a body that is not valid UTF-8 is quarantined, not a failed load.
_SQL_MESSAGES: Final = (
    "SELECT seq, CAST(body AS BLOB), crc FROM messages WHERE session_id = ? ORDER BY seq"
)
_SQL_DELETE_MESSAGE: Final = "DELETE FROM messages WHERE session_id = ? AND seq = ?"
_SQL_RENUMBER_MESSAGE: Final = "UPDATE messages SET seq = ? WHERE session_id = ? AND seq = ?"
_SQL_BILLING: Final = (
    f"SELECT id, {_raw('at')}, {_raw('kind')}, {_raw('model')}, {_raw('prompt_tokens')}, "
    f"{_raw('completion_tokens')}, {_raw('cost_usd')}, {_raw('cached_prompt_tokens')}, "
    f"{_raw('cache_write_tokens')} FROM billing "
    "WHERE session_id = ? ORDER BY id"
)
_SQL_NEXT_THREAD_SEQ: Final = (
    "SELECT COALESCE(MAX(seq), -1) + 1 FROM threads WHERE session_id = ? AND thread_id = ?"
)
_SQL_THREADS: Final = (
    "SELECT thread_id, seq, CAST(body AS BLOB), crc FROM threads WHERE session_id = ? "
    "ORDER BY thread_id, seq"
)
_SQL_DELETE_THREAD_ROW: Final = (
    "DELETE FROM threads WHERE session_id = ? AND thread_id = ? AND seq = ?"
)
_SQL_RENUMBER_THREAD_ROW: Final = (
    "UPDATE threads SET seq = ? WHERE session_id = ? AND thread_id = ? AND seq = ?"
)

# -- recall (agentmem.recall ranks; these only fetch)

_SQL_RECALL: Final = f"""
    SELECT d.session_id, d.seq, {_raw("d.role")}, -bm25(recall_fts), {_raw("d.text")},
           {_raw("s.name")}, s.created_at, s.updated_at,
           (SELECT z.sz FROM recall_fts_docsize AS z WHERE z.id = recall_fts.rowid)
    FROM recall_fts
    JOIN recall_docs AS d ON d.docid = recall_fts.rowid
    JOIN sessions AS s ON s.id = d.session_id
    WHERE recall_fts MATCH ?{{filters}}
    ORDER BY rank LIMIT ?
"""
# The rows of recall_top's messages, by docid (the columns of _SQL_RECALL, docid first).
_SQL_RECALL_BY_DOC: Final = f"""
    SELECT d.docid, d.session_id, d.seq, {_raw("d.role")}, {_raw("d.text")},
           {_raw("s.name")}, s.created_at, s.updated_at,
           (SELECT z.sz FROM recall_fts_docsize AS z WHERE z.id = d.docid)
    FROM recall_docs AS d
    JOIN sessions AS s ON s.id = d.session_id
    WHERE d.docid IN ({{marks}})
"""
_SQL_RECENT_SESSIONS: Final = "SELECT id FROM sessions ORDER BY updated_at DESC, rowid DESC LIMIT ?"
_FEW_SESSIONS: Final = 50
"""``max_sessions`` up to this many: their messages are scored, not the whole lists read."""
_SQL_RECALL_TEXTS: Final = (
    f"SELECT seq, {_raw('text')} FROM recall_docs WHERE session_id = ? AND seq BETWEEN ? AND ?"
)
_SQL_RECALL_PENDING: Final = "SELECT 1 FROM recall_pending LIMIT 1"
# FTS5's "averages" record (row 1 of its %_data table): varints, the number of indexed rows
# then the number of tokens in them; what its own bm25() normalises lengths with.
_SQL_RECALL_AVERAGES: Final = "SELECT block FROM recall_fts_data WHERE id = 1"
_SQL_RECALL_SESSIONS: Final = "SELECT count(*) FROM sessions"
_SQL_RECALL_UNPOSTED_COUNT: Final = "SELECT count(*) FROM recall_unposted"
POST_PER_WRITE: Final = 16
"""Index rows a write transaction posts at least (when queued): see ``recall_post``."""
POST_BACKLOG: Final = 64
"""Index rows left queued for the next writes at most (``RECALL_BATCH``): see ``recall_post``."""
# How many messages each of the sessions (a JSON array of ids) holds: its last seq + 1, one
# index lookup per session.
_SQL_RECALL_SESSION_SIZES: Final = """
    SELECT j.value, (SELECT seq + 1 FROM recall_docs WHERE session_id = j.value
                     ORDER BY seq DESC LIMIT 1)
    FROM json_each(?) AS j
"""
_SQL_RECALL_INTEGRITY: Final = (
    "INSERT INTO recall_fts (recall_fts, rank) VALUES ('integrity-check', 1)"
)
# Messages without their index row, index rows without their message, and index rows whose
# role or text is not what their message gives (any of the three is drift).
_SQL_RECALL_DRIFT: Final = """
    SELECT (SELECT count(*) FROM messages AS m WHERE NOT EXISTS (
                SELECT 1 FROM recall_docs AS d
                WHERE d.session_id = m.session_id AND d.seq = m.seq)),
           (SELECT count(*) FROM recall_docs AS d WHERE NOT EXISTS (
                SELECT 1 FROM messages AS m WHERE m.session_id = d.session_id AND m.seq = d.seq)),
           (SELECT count(*) FROM recall_source AS x
                JOIN recall_docs AS d ON d.session_id = x.session_id AND d.seq = x.seq
                WHERE d.role IS NOT x.role OR d.text IS NOT x.text)
"""


def _varints(data: bytes) -> list[int]:
    """Decode SQLite's big-endian varints (7 bits a byte, the 9th byte 8 bits)."""
    out: list[int] = []
    i = 0
    while i < len(data):
        value = 0
        for n in range(9):
            if i >= len(data):
                return out
            byte = data[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def _token_count(size: object) -> int:
    """The first varint of an FTS5 ``%_docsize`` record (0 when there is none)."""
    if not isinstance(size, bytes) or not size:
        return 0
    first = size[0]
    if first < 0x80:
        return first
    values = _varints(size)
    return values[0] if values else 0


def _recall_filters(
    roles: Sequence[str] | None,
    since: float | None,
    until: float | None,
    exclude_session: str | None,
) -> tuple[list[str], list[Any]]:
    """The SQL clauses (over ``recall_docs AS d`` joined to ``sessions AS s``) and their
    parameters for recall's role, time-range and excluded-session filters."""
    clauses: list[str] = []
    params: list[Any] = []
    if roles is not None:
        clauses.append(f"d.role IN ({', '.join('?' * len(roles))})")
        params.extend(roles)
    if since is not None:
        clauses.append("s.updated_at >= ?")
        params.append(since)
    if until is not None:
        clauses.append("s.created_at <= ?")
        params.append(until)
    if exclude_session is not None:
        clauses.append("d.session_id != ?")
        params.append(exclude_session)
    return clauses, params


class SessionsSQL(SharedSessionsSQL[sqlite3.Connection]):
    """The SQL of a sessions store, over one connection the caller guards and transacts.

    Rows cross this seam as plain tuples and ``bytes``; no method commits,
    and none validates beyond what the schema enforces.
    """

    __slots__ = ()

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)

    # -- sessions

    def info_row(self, sid: str) -> tuple[Any, ...] | None:
        row = self.conn.execute(_SQL_INFO, (sid,)).fetchone()
        return None if row is None else tuple(row)

    def list_rows(self, limit: int | None) -> list[tuple[Any, ...]]:
        rows = self.conn.execute(_SQL_LIST, (-1 if limit is None else limit,)).fetchall()
        return [tuple(row) for row in rows]

    def create(
        self,
        sid: str,
        name: str | None,
        now: float,
        working_directory: str | None,
        model: str | None,
        context_window: int | None,
    ) -> None:
        self.conn.execute(
            _SQL_CREATE, (sid, name, now, now, working_directory, model, context_window)
        )

    def delete(self, sid: str) -> bool:
        return self.conn.execute(_SQL_DELETE_SESSION, (sid,)).rowcount > 0

    def state(self, sid: str) -> bytes:
        row = self.conn.execute(_SQL_STATE, (sid,)).fetchone()
        return b"{}" if row is None or row[0] is None else bytes(row[0])

    # -- messages and side threads (thread_id None is the main history)

    def next_seq(self, sid: str, thread_id: str | None = None) -> int:
        if thread_id is None:
            return int(self.conn.execute(_SQL_NEXT_SEQ, (sid,)).fetchone()[0])
        return int(self.conn.execute(_SQL_NEXT_THREAD_SEQ, (sid, thread_id)).fetchone()[0])

    def insert_messages(self, sid: str, start: int, rows: Sequence[Row]) -> None:
        """Insert rows ``(role, body, crc)`` at seqs ``start``, ``start + 1``...

        Raises:
            SessionNotFoundError: the session does not exist (its foreign key refused).
        """
        try:
            if len(rows) == 1:
                role, body, crc = rows[0]
                self.conn.execute(_SQL_INSERT_MESSAGE, (sid, start, role, body, crc))
                return
            self.conn.executemany(
                _SQL_INSERT_MESSAGE,
                [(sid, start + i, role, body, crc) for i, (role, body, crc) in enumerate(rows)],
            )
        except sqlite3.IntegrityError:
            if not self.exists(sid):
                raise SessionNotFoundError(sid) from None
            raise

    def replace_message(self, sid: str, seq: int, row: Row) -> bool:
        role, body, crc = row
        return self.conn.execute(_SQL_REPLACE_MESSAGE, (role, body, crc, sid, seq)).rowcount > 0

    def truncate(self, sid: str, start: int) -> None:
        self.conn.execute(_SQL_TRUNCATE, (sid, start))

    def message_rows(self, sid: str) -> list[tuple[Any, bytes, Any]]:
        """``(seq, raw body, crc)`` of the main history, in ``seq`` order."""
        return self.conn.execute(_SQL_MESSAGES, (sid,)).fetchall()

    def thread_rows(self, sid: str) -> list[tuple[Any, Any, bytes, Any]]:
        """``(thread_id, seq, raw body, crc)`` of every side thread, by thread then ``seq``."""
        return self.conn.execute(_SQL_THREADS, (sid,)).fetchall()

    def delete_row(self, sid: str, thread_id: str | None, seq: Any) -> None:
        if thread_id is None:
            self.conn.execute(_SQL_DELETE_MESSAGE, (sid, seq))
        else:
            self.conn.execute(_SQL_DELETE_THREAD_ROW, (sid, thread_id, seq))

    def renumber(self, sid: str, thread_id: str | None, kept: Sequence[Any]) -> None:
        """Give the rows ``kept`` (old seqs, in their new order) the seqs 0..len-1.

        Moving in two steps (to a distinct negative, then to the final seq)
        keeps every intermediate state free of duplicate keys whatever order
        SQLite visits the rows in, and works for damaged, non-integer seqs.
        """
        sql = _SQL_RENUMBER_MESSAGE if thread_id is None else _SQL_RENUMBER_THREAD_ROW
        key: tuple[str, ...] = (sid,) if thread_id is None else (sid, thread_id)
        moves = [(old, new) for new, old in enumerate(kept) if old != new]
        # Temporary seqs below every stored one (a damaged seq may be negative).
        low = min([0, *(old for old in kept if type(old) is int)]) - 1
        self.conn.executemany(sql, [(low - i, *key, old) for i, (old, _) in enumerate(moves)])
        self.conn.executemany(sql, [(new, *key, low - i) for i, (_, new) in enumerate(moves)])

    # -- billing

    def billing_rows(self, sid: str) -> list[tuple[Any, ...]]:
        """``(row id, at, kind, model, prompt_tokens, completion_tokens, cost_usd,
        cached_prompt_tokens, cache_write_tokens)``, raw."""
        return [tuple(row) for row in self.conn.execute(_SQL_BILLING, (sid,))]

    # -- recall index

    def recall_rows(
        self,
        match: str,
        limit: int,
        *,
        session_ids: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
        since: float | None = None,
        until: float | None = None,
        exclude_session: str | None = None,
        max_sessions: int | None = None,
    ) -> list[tuple[Any, ...]]:
        """The ``limit`` best BM25 matches of the FTS5 query ``match`` that pass the filters.

        Rows: ``(session_id, seq, raw role, bm25 score (higher is better), raw text,
        raw session name, created_at, updated_at, length in tokens)``. ``since``/``until``
        keep sessions active in that time range; ``max_sessions`` searches only the most recently
        updated sessions.
        """
        clauses: list[str] = []
        params: list[Any] = [match]
        if session_ids is not None:
            clauses.append(f"d.session_id IN ({', '.join('?' * len(session_ids))})")
            params.extend(session_ids)
        more, values = _recall_filters(roles, since, until, exclude_session)
        clauses += more
        params += values
        if max_sessions is not None:
            clauses.append(
                "d.session_id IN (SELECT id FROM sessions "
                "ORDER BY updated_at DESC, rowid DESC LIMIT ?)"
            )
            params.append(max_sessions)
        filters = "".join(f" AND {clause}" for clause in clauses)
        params.append(limit)
        rows = self.conn.execute(_SQL_RECALL.format(filters=filters), params).fetchall()
        # The last column is FTS5's size record (a varint): the message's length in tokens.
        return [(*row[:-1], _token_count(row[-1])) for row in rows]

    def recall_stats(self, terms: Sequence[str]) -> tuple[dict[str, int], int, int, int]:
        """Corpus statistics for BM25: messages holding each of ``terms``, the number of
        indexed messages, the number of tokens in them, and the number of sessions.

        Document frequencies come from the postings' term counts (``recall_terms``);
        messages and tokens from FTS5's own averages record (0, 0 when it cannot be
        read: an empty index). Cost: one B-tree lookup per term and three row reads.
        """
        docs = postings.doc_frequencies(self.conn, terms) if terms else {}
        row = self.conn.execute(_SQL_RECALL_AVERAGES).fetchone()
        values = _varints(bytes(row[0])) if row is not None and row[0] is not None else []
        messages, tokens = (values[0], values[1]) if len(values) >= 2 else (0, 0)
        sessions = int(self.conn.execute(_SQL_RECALL_SESSIONS).fetchone()[0])
        return docs, messages, tokens, sessions

    def recall_top(
        self,
        weights: dict[str, int],
        limit: int,
        *,
        session_ids: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
        since: float | None = None,
        until: float | None = None,
        exclude_session: str | None = None,
        max_sessions: int | None = None,
    ) -> list[tuple[Any, ...]]:
        """The ``limit`` best messages by the postings' score that pass the filters.

        ``weights``: each query term's weight (:func:`.postings.weight`). Rows as
        :meth:`recall_rows`', the score in place of BM25, then each row's frequencies of
        the query terms (a dict, from the postings). Cost: bounded by where the best
        messages sit in the terms' impact-ordered lists (:func:`.postings.top_k`); with
        ``session_ids`` (or a few ``max_sessions``), the messages of those sessions are
        scored instead.
        """
        clauses, params = _recall_filters(roles, since, until, exclude_session)
        scope = session_ids
        if scope is None and max_sessions is not None and max_sessions <= _FEW_SESSIONS:
            scope = [str(r[0]) for r in self.conn.execute(_SQL_RECENT_SESSIONS, (max_sessions,))]
        elif max_sessions is not None:
            clauses.append(
                "d.session_id IN (SELECT id FROM sessions "
                "ORDER BY updated_at DESC, rowid DESC LIMIT ?)"
            )
            params.append(max_sessions)
        filters = "".join(f" AND {clause}" for clause in clauses)
        passing = (
            "SELECT d.docid FROM recall_docs AS d JOIN sessions AS s ON s.id = d.session_id "
            "WHERE d.docid IN ({marks})" + filters
        )

        def accept(docs: list[int]) -> list[int]:
            marks = ", ".join("?" * len(docs))
            rows = self.conn.execute(passing.format(marks=marks), [*docs, *params])
            return [int(r[0]) for r in rows]

        held: dict[int, dict[str, int]] = {}  # each best message's frequencies of the terms
        if scope is not None:
            sids = list(scope)
            marks = ", ".join("?" * len(sids))
            docs = [
                int(r[0])
                for r in self.conn.execute(
                    f"SELECT docid FROM recall_docs WHERE session_id IN ({marks})", sids
                )
            ]
            scored = postings.score_docs(self.conn, weights, accept(docs) if docs else [])
            best = sorted(((v, d) for d, v in scored.items() if v > 0), key=lambda p: (-p[0], p[1]))
            best = best[:limit]
        else:
            best = postings.top_k(
                self.conn,
                weights,
                limit,
                accept if clauses else None,
                budget=postings.BUDGET,
                held=held,
            )
        if not best:
            return []
        ids = [doc for _, doc in best]
        found: dict[int, tuple[Any, ...]] = {}  # each message's row, by docid
        for start in range(0, len(ids), 400):
            chunk = ids[start : start + 400]
            marks = ", ".join("?" * len(chunk))
            for row in self.conn.execute(_SQL_RECALL_BY_DOC.format(marks=marks), chunk):
                found[int(row[0])] = row
        if scope is not None:
            held = postings.frequencies(self.conn, list(weights), ids)
        out: list[tuple[Any, ...]] = []
        for value, doc in best:  # best first
            row = found.get(doc)
            if row is not None:
                sid, seq, role, text, name, created, updated, size = row[1:]
                score, length = float(value), _token_count(size)
                out.append((sid, seq, role, score, text, name, created, updated, length, held[doc]))
        return out

    def recall_session_sizes(self, sids: Sequence[str]) -> dict[str, int]:
        """How many messages each of the sessions ``sids`` holds (0 for none)."""
        rows = self.conn.execute(_SQL_RECALL_SESSION_SIZES, (json.dumps(list(sids)),))
        return {str(sid): int(size or 0) for sid, size in rows}

    def recall_post(self) -> None:
        """Post some of the index rows the recall triggers queued (:func:`.postings.post`);
        one row read when there are none. Every write transaction ends with it.

        A write posts :data:`POST_PER_WRITE` queued rows, and more when over
        :data:`POST_BACKLOG` wait (a large append posts what it indexed but the last
        batch): the batch of ``RECALL_BATCH`` rows the FTS5 flush queues is posted over the
        next few appends, not all by the one that flushed (a bounded cost per append); a
        search posts what is left first (``recall_queued``), so it sees every message.
        """
        if not postings.unposted(self.conn):
            return
        queued = int(self.conn.execute(_SQL_RECALL_UNPOSTED_COUNT).fetchone()[0])
        postings.post(self.conn, limit=max(POST_PER_WRITE, queued - POST_BACKLOG))

    def recall_queued(self) -> bool:
        """Whether message changes wait in the recall index's queue, or index rows wait
        to be posted (two row reads)."""
        if self.conn.execute(_SQL_RECALL_PENDING).fetchone() is not None:
            return True
        return postings.unposted(self.conn)

    def recall_texts(self, sid: str, first: int, last: int) -> dict[int, Any]:
        """Indexed text (raw) of the messages ``first..last`` of a session, by seq."""
        return dict(self.conn.execute(_SQL_RECALL_TEXTS, (sid, first, last)).fetchall())

    def recall_problems(self) -> list[str]:
        """What is wrong with the recall index (empty when it matches the messages).

        Runs FTS5's ``integrity-check`` (index vs its content rows) and compares the index
        rows with the message rows. Cost: O(messages).
        """
        problems: list[str] = []
        try:
            self.conn.execute(_SQL_RECALL_INTEGRITY)
        except sqlite3.DatabaseError as exc:
            problems.append(f"integrity-check: {exc}")
        try:
            missing, extra, stale = self.conn.execute(_SQL_RECALL_DRIFT).fetchone()
        except sqlite3.DatabaseError as exc:
            problems.append(f"cannot compare the index with the messages: {exc}")
        else:
            if missing:
                problems.append(f"{missing} messages are missing from the index")
            if extra:
                problems.append(f"{extra} index rows have no message")
            if stale:
                problems.append(f"{stale} index rows differ from their message")
        try:
            problems.extend(f"postings: {p}" for p in postings.problems(self.conn))
        except sqlite3.DatabaseError as exc:
            problems.append(f"cannot compare the postings with the index: {exc}")
        return problems
