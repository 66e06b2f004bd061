"""SessionStore: the sessions of a project in one database (see the package docstring).

The store speaks to its database through an engine (:mod:`.engine`): one SQLite
file by default (:mod:`.sqlite_engine`), or PostgreSQL (:meth:`SessionStore.postgres`,
:mod:`.pg`).

Why this module is long: it is the one facade of every sessions operation on both
engines (sessions, messages, the recall index's reads, checks and repairs).
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

import orjson

from agentmem._events import emit, operation
from agentmem._storage.files import atomic_write_text
from agentmem._storage.gc import gc_paused
from agentmem._storage.recovery import Recovery
from agentmem._storage.sqlite import (
    DURABILITIES,
    DerivedDamage,
    Durability,
    is_busy,
    open_database,
)
from agentmem._validate import check_count, check_path
from agentmem.errors import (
    CorruptStoreError,
    InvalidArgumentError,
    SessionNotFoundError,
    StorageError,
)
from agentmem.session_store import recall_index
from agentmem.session_store.engine import SessionTables, StoreEngine
from agentmem.session_store.export import export_html, export_json
from agentmem.session_store.loading import apply_repairs, check_rows
from agentmem.session_store.lock import SessionLock
from agentmem.session_store.recall_records import RecallRow, RecallStats, decoded
from agentmem.session_store.records import (
    _SESSION_ID_RE,
    FORMAT_NAME,
    FORMAT_VERSION,
    BillingRecord,
    SessionInfo,
    SessionRecord,
    _billing_from_row,
    _check_lookup_id,
    _check_optional_str,
    _check_session_id,
    _info_from_row,
)
from agentmem.session_store.sql import (
    MIGRATIONS,
    flush_recall_index,
)
from agentmem.session_store.sqlite_engine import SqliteEngine
from agentmem.session_store.writer import SessionWriter

if TYPE_CHECKING:
    from agentmem._storage.postgres import PgDatabase
    from agentmem.protocols import ProgressReporter
    from agentmem.time_machine import TaskTreeView

__all__ = ["SessionStore"]

logger = logging.getLogger("agentmem.storage")

_EXPORT_FORMATS: Final = {".json": "json", ".html": "html", ".htm": "html"}
_T = TypeVar("_T")
_Transaction = AbstractContextManager[SessionTables]


class SessionStore:
    """All sessions of a project, in one SQLite database.

    Args:
        path: The database file (created with its directory when missing),
            or ``None`` (or ``":memory:"``) for an in-memory store that
            writes nothing to disk (incognito mode).
        durability: ``"full"`` (default): every write is fsynced before it
            returns and survives power loss. ``"normal"``: faster; survives a
            crash or ``kill -9`` of the process, but the last writes may be
            lost on power loss.
        clock: Returns the current time in epoch seconds; ``time.time`` by
            default. Tests pass a fixed clock for reproducible timestamps.
        reporter: Told about recall index rebuilds and exports
            (``recall.index_rebuild.*``, ``export.*``; docs/progress.md).
        purge: Called by :meth:`delete` with the id of a deleted session, under
            its lock, to remove what other parts keep for it outside this
            database (the facade passes the time machine's
            :func:`~agentmem.time_machine.delete_stored_session`).
        task_tree: Called by :meth:`export` with a session id for the session's
            task tree, shown in the HTML page; it must neither lock nor write
            (the facade passes the time machine's
            :func:`~agentmem.time_machine.read_task_tree`). Without it the page
            lists the tasks the messages name.

    Raises:
        InvalidArgumentError: unknown ``durability``.
        StorageError: the database belongs to something else, was written by
            a newer agentmem, or cannot be opened (permissions, a directory
            at ``path``, a filesystem without WAL support).

    A file that is not a readable SQLite database is not an error: it is
    moved aside and the store starts empty (see :attr:`recovered_from`).

    :meth:`postgres` opens the same store on a PostgreSQL database instead.
    """

    recovered_from: Path | None
    """Where an unreadable database found at :attr:`path` was moved on open, else ``None``."""
    recovery: Recovery | None
    """What was done on open about an unreadable database (moved where, why, whether its
    readable commits were recovered), else ``None``."""

    def __init__(
        self,
        path: str | Path | None,
        *,
        durability: Durability = "full",
        clock: Callable[[], float] | None = None,
        reporter: ProgressReporter | None = None,
        purge: Callable[[str], object] | None = None,
        task_tree: Callable[[str], TaskTreeView] | None = None,
    ) -> None:
        self._setup(durability, clock, reporter, purge, task_tree)
        if path is not None and not isinstance(path, str | Path):
            raise InvalidArgumentError(f"path must be a str, a Path or None, got {path!r}")
        self._path = None if path is None or path == ":memory:" else Path(path)
        engine = SqliteEngine(self._path, opener=self._try_open)
        self._engine: StoreEngine = engine
        self._lock = engine.mutex  # the one connection's lock (the recall index's maintenance)
        self.recovery = engine.recovery
        self.recovered_from = None if engine.recovery is None else engine.recovery.moved_to
        self._check_recall_on_open()

    @classmethod
    def postgres(
        cls,
        database: str | PgDatabase,
        *,
        durability: Durability = "full",
        clock: Callable[[], float] | None = None,
        reporter: ProgressReporter | None = None,
        purge: Callable[[str], object] | None = None,
        task_tree: Callable[[str], TaskTreeView] | None = None,
    ) -> SessionStore:
        """The same store on a PostgreSQL database (the ``postgres`` extra; docs/backends.md).

        Args:
            database: A DSN (``"postgresql://user@host:5432/db"``: the store opens and
                closes its own pool), or a :class:`~agentmem._storage.postgres.PgDatabase`
                shared with other stores (its ``durability`` applies; not closed here).
            durability, clock, reporter, purge, task_tree: As for the SQLite store.

        Raises:
            ConfigurationError: psycopg is missing (``pip install 'agentmem[postgres]'``).
            StorageError: the server cannot be reached or refused the connection.
            FormatVersionError: the database was written by a newer agentmem.
        """
        from agentmem.session_store.pg import PgEngine

        store = cls.__new__(cls)
        store._setup(durability, clock, reporter, purge, task_tree)
        store._path = None
        store._engine = PgEngine(database, durability=durability)
        store._lock = threading.Lock()
        return store

    def _setup(
        self,
        durability: Durability,
        clock: Callable[[], float] | None,
        reporter: ProgressReporter | None,
        purge: Callable[[str], object] | None,
        task_tree: Callable[[str], TaskTreeView] | None,
    ) -> None:
        self.reporter = reporter  # progress events: recall index rebuilds, exports
        self._purge = purge
        self._task_tree = task_tree
        if durability not in DURABILITIES:
            raise InvalidArgumentError(
                f"durability must be one of {', '.join(DURABILITIES)}; got {durability!r}"
            )
        self._durability: Durability = durability
        self._now: Callable[[], float] = clock or time.time
        self.recovered_from = None
        self.recovery = None
        self.recall_repairs: builtins.list[str] = []
        """Each rebuild of the recall index from the messages (why), oldest first."""

    # ------------------------------------------------------------------ opening

    def _try_open(self, path: Path | None) -> sqlite3.Connection:
        """Connect and migrate; let sqlite3 errors through so corruption can be told apart."""
        return open_database(
            path,
            durability=self._durability,
            format_name=FORMAT_NAME,
            format_version=FORMAT_VERSION,
            migrations=MIGRATIONS,
            derived=recall_index.is_recall_object,
            rebuild_derived=self._rebuild_damaged_recall_schema,
        )

    def _rebuild_damaged_recall_schema(
        self, conn: sqlite3.Connection, damage: DerivedDamage
    ) -> None:
        """Opening found the recall index's schema damaged (a dropped table or trigger): the
        index is rebuilt from the messages, never the database set aside."""
        with self._rebuilding(damage.reason):
            done = recall_index.rebuild(conn, drop=not damage.shared_pages)
        self._report_recall_rebuild(damage.reason + (f"; {done}" if done else ""))

    # ------------------------------------------------------------------ plumbing

    def _sqlite(self) -> SqliteEngine:
        """The SQLite engine, for what only SQLite has (the recall index's maintenance)."""
        if not isinstance(self._engine, SqliteEngine):
            raise StorageError(f"{self._engine.where} is not a SQLite file (SQLite maintenance)")
        return self._engine

    @property
    def _conn(self) -> sqlite3.Connection | None:
        """The SQLite connection (``None`` once closed); hold :attr:`_lock` to use it."""
        return self._sqlite().connection

    def _require_open(self) -> sqlite3.Connection:
        return self._sqlite().require_open()

    def _error(self, action: str, exc: sqlite3.Error) -> StorageError:
        return self._sqlite().error(action, exc)

    def _write(self, action: str, *, session: str | None = None) -> _Transaction:
        """One write transaction of ``session`` (:meth:`.engine.StoreEngine.write`)."""
        return self._engine.write(action, session=session)

    def _read(self, action: str, *, snapshot: bool = False) -> _Transaction:
        """Reads; ``snapshot`` wraps them in one read transaction."""
        return self._engine.read(action, snapshot=snapshot)

    # ------------------------------------------------------------------ properties

    @property
    def path(self) -> Path | None:
        """The database file, or ``None`` for an in-memory (or PostgreSQL) store."""
        return self._path

    @property
    def durability(self) -> Durability:
        """``"full"`` or ``"normal"``."""
        return self._durability

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._engine.closed

    # ------------------------------------------------------------------ sessions

    def create(
        self,
        *,
        session_id: str | None = None,
        name: str | None = None,
        working_directory: str | None = None,
        model: str | None = None,
        context_window: int | None = None,
    ) -> SessionInfo:
        """Create an empty session.

        Args:
            session_id: The id; a random ``uuid4().hex`` when ``None``.
            name: A human title.
            working_directory: The directory the agent works in.
            model: The model name.
            context_window: The model's context window in tokens.

        Returns:
            The new session's info.

        Raises:
            InvalidArgumentError: the id is taken or malformed (1-128 characters
                of ``[A-Za-z0-9_.-]``), or another argument has the wrong type.
            StorageError: the write failed.
        """
        sid = uuid.uuid4().hex if session_id is None else _check_session_id(session_id)
        name = _check_optional_str(name, "name")
        working_directory = _check_optional_str(working_directory, "working_directory")
        model = _check_optional_str(model, "model")
        if context_window is not None:
            context_window = check_count("context_window", context_window, positive=True)
        now = float(self._now())
        with self._write(f"create session {sid}") as sql:
            if sql.exists(sid):
                raise InvalidArgumentError(f"a session with id {sid!r} already exists")
            sql.create(sid, name, now, working_directory, model, context_window)
        return SessionInfo(
            id=sid,
            name=name,
            created_at=now,
            updated_at=now,
            working_directory=working_directory,
            model=model,
            context_window=context_window,
            message_count=0,
        )

    def exists(self, session_id: str) -> bool:
        """Whether a session with this id exists."""
        sid = _check_lookup_id(session_id)
        with self._read("look up a session") as sql:
            return sql.exists(sid)

    def info(self, session_id: str) -> SessionInfo:
        """One session's metadata, without loading its messages.

        Raises:
            SessionNotFoundError: no such session.
        """
        sid = _check_lookup_id(session_id)
        with self._read(f"read session {sid}") as sql:
            row = sql.info_row(sid)
        if row is None:
            raise SessionNotFoundError(sid)
        return _info_from_row(row)

    def list(self, *, limit: int | None = None) -> builtins.list[SessionInfo]:
        """Sessions, most recently updated first.

        Uses the ``updated_at`` index and one primary-key descent per session
        for its message count, so listing stays fast with thousands of sessions.

        Args:
            limit: Return at most this many; all when ``None``.
        """
        if limit is not None:
            limit = check_count("limit", limit)
        with self._read("list sessions") as sql:
            rows = sql.list_rows(limit)
        infos = [_info_from_row(row) for row in rows]
        for info in infos:
            if info.damaged:
                logger.warning(
                    "session %s: unreadable columns %s (shown as empty)",
                    info.id,
                    list(info.damaged),
                )
        return infos

    def load(self, session_id: str) -> SessionRecord:
        """Everything stored for a session, every row checked (see :mod:`.loading`).

        A row that does not parse or fails validation is never skipped
        silently: within one transaction it is moved to the ``quarantine``
        table (raw bytes and reason kept), the rows after it are renumbered
        so ``seq`` stays contiguous, a warning names the session and
        ``seq``, and the record reports it (:attr:`SessionRecord.quarantined`).
        Damaged positions (gaps, duplicates, changed seqs) are repaired and
        reported (:attr:`SessionRecord.repaired`); unreadable billing rows
        are quarantined (:attr:`SessionRecord.billing_quarantined`).

        Raises:
            SessionNotFoundError: no such session.
            StorageError: the database could not be read, or a damaged row
                could not be quarantined.
        """
        sid = _check_lookup_id(session_id)
        with gc_paused():
            with self._read(f"load session {sid}", snapshot=True) as sql:
                record = self._read_record(sql, sid, repair=False)
            if record is not None:
                return record
            with self._write(f"repair damaged rows of session {sid}") as sql:
                record = self._read_record(sql, sid, repair=True)
        assert record is not None
        where = self._engine.where
        for seq in record.quarantined:
            logger.warning(
                "session %s: message seq %s did not parse or failed validation; moved it to "
                "the quarantine table of %s and renumbered the later messages",
                sid,
                seq,
                where,
            )
        if record.repaired:
            logger.warning(
                "session %s: damaged message positions (seq %s) were repaired in %s",
                sid,
                record.repaired,
                where,
            )
        if record.checksum_failed:
            logger.warning(
                "session %s: message seq %s changed after it was written (checksum mismatch) "
                "but is still a valid message; kept it, copied it to quarantine in %s",
                sid,
                record.checksum_failed,
                where,
            )
        for thread_id, seqs in record.quarantined_threads.items():
            logger.warning(
                "session %s: thread %s rows seq %s did not parse; moved them to quarantine",
                sid,
                thread_id,
                seqs,
            )
        if record.billing_quarantined:
            logger.warning(
                "session %s: %d billing rows were unreadable; moved them to quarantine",
                sid,
                record.billing_quarantined,
            )
        if record.state_quarantined:
            logger.warning(
                "session %s: its state did not parse; moved it to quarantine and reset it to {}",
                sid,
            )
        return record

    def _read_record(self, sql: SessionTables, sid: str, *, repair: bool) -> SessionRecord | None:
        """Read a session; ``None`` when something needs repairing and ``repair`` is off."""
        row = sql.info_row(sid)
        if row is None:
            raise SessionNotFoundError(sid)
        now = float(self._now())

        main = check_rows(sql.message_rows(sid))
        if main.needs_write and not repair:
            return None
        by_thread: dict[str, builtins.list[tuple[Any, bytes, Any]]] = {}
        for thread_id, seq, body, crc in sql.thread_rows(sid):
            by_thread.setdefault(str(thread_id), []).append((seq, body, crc))
        thread_checks = {tid: check_rows(rows) for tid, rows in by_thread.items()}
        if not repair and any(c.needs_write for c in thread_checks.values()):
            return None

        # State.
        state_bytes = sql.state(sid)
        state_quarantined = False
        try:
            state = orjson.loads(state_bytes)
            reason = "" if isinstance(state, dict) else f"state is a JSON {type(state).__name__}"
        except orjson.JSONDecodeError as exc:
            state, reason = None, f"state is not valid JSON: {exc}"
        if reason:
            if not repair:
                return None
            sql.quarantine(sid, None, None, state_bytes, reason, now)
            sql.reset_state(sid)
            state, state_quarantined = {}, True

        billing: builtins.list[BillingRecord] = []
        bad_billing = 0
        for raw in sql.billing_rows(sid):
            record, reason = _billing_from_row(raw)
            if record is not None:
                billing.append(record)
                continue
            if not repair:
                return None
            sql.quarantine(sid, None, None, repr(raw[1:]).encode(), f"billing: {reason}", now)
            sql.delete_billing(raw[0])
            bad_billing += 1

        if repair:
            apply_repairs(sql, sid, None, main, now)
            for tid, check in thread_checks.items():
                apply_repairs(sql, sid, tid, check, now)
        info = _info_from_row(row)
        if info.damaged:
            logger.warning(
                "session %s: unreadable columns %s (shown as empty)", info.id, list(info.damaged)
            )
        if info.message_count != len(main.messages):
            info = dataclasses.replace(info, message_count=len(main.messages))
        return SessionRecord(
            info=info,
            messages=main.messages,
            state=state,
            billing=billing,
            threads={tid: c.messages for tid, c in thread_checks.items() if c.messages},
            quarantined=main.quarantined_seqs,
            quarantined_threads={
                tid: c.quarantined_seqs for tid, c in thread_checks.items() if c.quarantine
            },
            state_quarantined=state_quarantined,
            repaired=main.moved,
            checksum_failed=[s for s in main.mismatched if type(s) is int],
            billing_quarantined=bad_billing,
            validated=main.canonical,
        )

    def delete(self, session_id: str) -> bool:
        """Delete a session and everything it owns, under its lock.

        Its rows (messages, billing, threads, quarantine, recall index) go in one
        transaction; then what ``purge`` removes for it (the time machine's
        records and the blobs no other session uses) and its lock file. If the
        files could not be removed, deleting the id again removes what was left.

        Returns:
            ``True`` if the session existed.

        Raises:
            StoreLockedError: the session is open (here or in another process);
                nothing was deleted.
            StorageError: the rows or the session's files could not be removed.
        """
        sid = _check_lookup_id(session_id)
        if not _SESSION_ID_RE.fullmatch(sid):  # no row, lock or snapshot can carry it
            return False
        lock = self.lock(sid)
        try:
            with self._write(f"delete session {sid}") as sql:
                existed = sql.delete(sid)
            if self._purge is not None:
                self._purge(sid)
        finally:
            lock.discard()
        return existed

    def rename(self, session_id: str, name: str | None) -> None:
        """Set a session's name.

        Raises:
            SessionNotFoundError: no such session.
            InvalidArgumentError: ``name`` is not a string or ``None``.
        """
        sid = _check_lookup_id(session_id)
        name = _check_optional_str(name, "name")
        with self._write(f"rename session {sid}") as sql:
            if not sql.rename(sid, name):
                raise SessionNotFoundError(sid)

    # ------------------------------------------------------------------ recall index

    def recall_rows(
        self, match: str | dict[str, int], limit: int, **filters: Any
    ) -> builtins.list[RecallRow]:
        """The best BM25 matches from the recall index (see :meth:`SessionsSQL.recall_rows`);
        with term weights for ``match``, the best by the postings (:meth:`SessionsSQL.recall_top`).

        Ranking is :mod:`agentmem.recall`'s job; use :meth:`agentmem.Memory.recall`. An
        index found damaged is rebuilt from the messages (reported in
        :attr:`recall_repairs` and on the ``agentmem.storage`` logger) and searched again.

        Raises:
            StorageError: the search failed (for instance a malformed FTS5 query).
            CorruptStoreError: the database itself is damaged.
        """
        rows = self._read_recall_index(
            lambda sql: (
                sql.recall_rows(match, limit, **filters)
                if isinstance(match, str)
                else sql.recall_top(match, limit, **filters)
            ),
            ("search the recall index", "a search", "search the rebuilt recall index"),
        )
        return [RecallRow.from_sql(row) for row in rows]

    def recall_stats(self, terms: builtins.list[str]) -> RecallStats:
        """BM25's corpus statistics (see :meth:`SessionsSQL.recall_stats`), after indexing
        what is still queued: messages holding each index term, messages indexed, tokens
        in them, sessions. An index found damaged is rebuilt, as by :meth:`recall_rows`."""
        return self._read_recall_index(
            lambda sql: RecallStats(*sql.recall_stats(terms)),
            (
                "read the recall index's statistics",
                "reading its statistics",
                "read the rebuilt recall index's statistics",
            ),
        )

    def recall_snapshot(self) -> AbstractContextManager[object]:
        """A recall's reads in one snapshot (PostgreSQL: :meth:`.pg.PgEngine.one_snapshot`)."""
        pin = getattr(self._engine, "one_snapshot", nullcontext)  # SQLite: each read its own
        return cast(AbstractContextManager[object], pin("recall"))

    def recall_session_sizes(self, session_ids: builtins.list[str]) -> dict[str, int]:
        """How many messages each of ``session_ids`` holds, from the recall index."""
        with self._read("read the recall index's session sizes") as sql:
            return sql.recall_session_sizes(session_ids)

    def recall_texts(self, session_id: str, first: int, last: int) -> dict[int, str]:
        """The indexed text of messages ``first..last`` of a session, by index."""
        with self._read(f"read the recall index of session {session_id}") as sql:
            rows = sql.recall_texts(session_id, first, last)
        return {int(seq): decoded(text) for seq, text in rows.items()}

    def check_recall_index(self, *, repair: bool = True) -> builtins.list[str]:
        """Check the recall index against the messages; rebuild it when it is wrong.

        Cost: O(messages) (the index's state row, FTS5 ``integrity-check`` and a join of the
        index rows with the message rows). The index is maintained in the same transaction
        as every write and checked cheaply on open (see :mod:`.recall_index`), so this
        only finds damage that check cannot see (a flipped byte in a page, an index row
        altered together with the flag that would have told).

        Args:
            repair: Rebuild a damaged or drifted index from the messages (reported in
                :attr:`recall_repairs` and on the ``agentmem.storage`` logger). ``False``
                rebuilds nothing, but is not read-only: messages still queued for the index
                are indexed first (``agentmem.doctor`` runs it on a copy).

        Returns:
            The problems found (empty when the index matched the messages).
        """
        try:
            self._flush_recall_index()
            with self._read("check the recall index", snapshot=True) as sql:
                on_sqlite = isinstance(self._engine, SqliteEngine)  # else PostgreSQL
                problems = recall_index.quick_problems(sql.conn) if on_sqlite else []
                problems += sql.recall_problems()
        except StorageError as exc:
            if is_busy(exc):
                raise
            problems = [str(exc)]
        if problems and repair:
            self._rebuild_recall_index("; ".join(problems))
        return problems

    def _check_recall_on_open(self) -> None:
        """The cheap open-time check of the recall index (:func:`.recall_index.quick_problems`);
        an index found wrong or unreadable is rebuilt from the messages and reported.

        A failure here never fails the open: an index that cannot be rebuilt (the messages
        themselves unreadable) is logged, and recall reports the error when it is used.
        """
        try:
            self._flush_recall_index()
            with self._read("check the recall index", snapshot=True) as sql:
                problems = recall_index.quick_problems(sql.conn)
        except StorageError as exc:
            if is_busy(exc):  # another process holds the database: not damage, check next time
                logger.warning("recall index of %s not checked on open: %s", self._path, exc)
                return
            problems = [f"reading it failed ({exc})"]
        if not problems:
            return
        try:
            self._rebuild_recall_index("; ".join(problems))
        except StorageError as exc:
            logger.warning(
                "recall index of %s is damaged (%s) and could not be rebuilt: %s",
                self._path or ":memory:",
                "; ".join(problems),
                exc,
            )

    def _read_recall_index(
        self, read: Callable[[SessionTables], _T], actions: tuple[str, str, str]
    ) -> _T:
        """``read`` the recall index once the queued changes are indexed; an index found
        damaged is rebuilt from the messages (reported) and read again.

        ``actions``: what the read is (for errors), who found the damage (for the report),
        what the read of the rebuilt index is.
        """
        action, finder, again = actions
        try:
            self._flush_recall_index()
            with self._read(action) as sql:
                return read(sql)
        except CorruptStoreError as exc:
            self._rebuild_recall_index(f"{finder} found it damaged ({exc})")
        with self._read(again) as sql:
            return read(sql)

    def _flush_recall_index(self) -> None:
        """Index the message changes still queued (fewer than ``RECALL_BATCH``).

        The triggers index the queue every ``RECALL_BATCH`` changes, inside the changing
        transaction; a search indexes the rest first, so it always sees every message.
        Costs one read (the queue is empty) unless something is queued.
        """
        with self._read("look for unindexed messages") as sql:
            if not sql.recall_queued():
                return
        with self._write("index the queued messages") as sql:
            flush_recall_index(sql.conn)

    def _rebuild_recall_index(self, why: str) -> None:
        if not isinstance(self._engine, SqliteEngine):  # PostgreSQL (.pg_recall.rebuild)
            with self._rebuilding(why), self._write("rebuild the recall index") as sql:
                done = sql.recall_rebuild()  # type: ignore[attr-defined]
        else:
            with self._lock, self._rebuilding(why):
                try:
                    done = recall_index.rebuild(self._require_open())
                except sqlite3.Error as exc:
                    raise self._error("rebuild the recall index", exc) from exc
        self._report_recall_rebuild(why + (f"; {done}" if done else ""))

    def _rebuilding(self, why: str) -> AbstractContextManager[dict[str, Any]]:
        """``recall.index_rebuild.started`` now, ``.finished`` when the block ends."""
        where = self._path if self._path is not None else ":memory:"
        return operation(self.reporter, "recall.index_rebuild", database=str(where), reason=why)

    def _report_recall_rebuild(self, why: str) -> None:
        where = self._path if self._path is not None else ":memory:"
        report = f"recall index of {where} rebuilt from the messages: {why}"
        logger.warning(report)
        self.recall_repairs.append(report)

    def writer(self, session_id: str) -> SessionWriter:
        """A :class:`SessionWriter` for an existing session.

        Raises:
            SessionNotFoundError: no such session.
        """
        sid = _check_lookup_id(session_id)
        if not self.exists(sid):
            raise SessionNotFoundError(sid)
        # The writer gets the store's write transaction and clock, not the store.
        transaction = functools.partial(self._write, session=sid)
        return SessionWriter(sid, transaction=transaction, clock=lambda: self._now())

    def lock(self, session_id: str) -> SessionLock:
        """Take the exclusive lock on a session (the session need not exist yet).

        Returns:
            The held lock; release it with ``release()`` or a ``with`` block.

        Raises:
            StoreLockedError: another process or object holds it.
            InvalidArgumentError: malformed id.
        """
        return self._engine.lock(_check_session_id(session_id)).acquire()

    # ------------------------------------------------------------------ export

    def export(
        self,
        session_id: str,
        path: str | Path,
        *,
        format: Literal["json", "html"] | None = None,
        progress: ProgressReporter | None = None,
    ) -> Path:
        """Write a session to a self-contained JSON or HTML file, atomically.

        JSON: ``{"format": "agentmem.session-export", "version": 1, "session",
        "messages", "state", "billing", "threads"}``, UTF-8, indented, keys in
        a stable order. HTML: one page with inline CSS, no scripts and no
        external resources (:func:`~agentmem.session_store.export_html`: the
        thread summary, the task tree, billing, the transcript with tool
        outputs collapsed); every stored string is escaped.

        Reads only: no lock is taken (an open session may be exported while
        it runs; the export holds what was committed when it was read). The
        file is written to a temporary file beside it and renamed into place,
        so ``path`` holds either its old content or the whole export; an
        existing file at ``path`` is replaced.

        Args:
            session_id: The session to export.
            path: The file to write (its directory must exist).
            format: ``"json"`` or ``"html"``; by default taken from the
                extension (``.json``, ``.html``).
            progress: Told about this export (``export.started``,
                ``export.progress`` every 1,000 messages, ``export.finished``;
                docs/progress.md) instead of the store's ``reporter``.

        Returns:
            The written path.

        Raises:
            InvalidArgumentError: unknown format or extension, ``path`` is not a path,
                or it is the store's own database file.
            SessionNotFoundError: no such session.
            StorageError: the file could not be written.
        """
        target = check_path("path", path)
        own = self.path
        if (
            own is not None
            and target.name.startswith(own.name)  # the database, its -wal, -shm, -journal
            and target.resolve().parent == own.resolve().parent
        ):
            raise InvalidArgumentError(f"path {target} is the session store's own database")
        if format is None:
            fmt = _EXPORT_FORMATS.get(target.suffix.lower())
            if fmt is None:
                raise InvalidArgumentError(
                    f"cannot tell the export format from {target.name!r}: use a .json or .html "
                    "file name, or pass format='json' or format='html'"
                )
        elif format in ("json", "html"):
            fmt = format
        else:
            raise InvalidArgumentError(f"format must be 'json' or 'html', got {format!r}")
        record = self.load(session_id)
        reporter = progress if progress is not None else self.reporter
        about = {"session_id": record.info.id, "path": str(target), "format": fmt}

        def step(count: int, total: int) -> None:
            emit(reporter, "export.progress", {**about, "done": count, "total": total})

        on_progress = step if reporter is not None else None
        with operation(reporter, "export", **about) as done:
            if fmt == "json":
                text = export_json(record, on_progress=on_progress)
            else:
                tasks = self._task_tree(record.info.id) if self._task_tree is not None else None
                text = export_html(record, tasks=tasks, on_progress=on_progress)
            try:
                atomic_write_text(target, text)
            except OSError as exc:
                raise StorageError(f"cannot write the export {target}: {exc}", path=target) from exc
            done["bytes"] = len(text.encode("utf-8", "surrogatepass"))
        return target

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the database (idempotent). Locks handed out stay held until released."""
        self._engine.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._engine.closed else ""
        return f"<SessionStore {self._engine.where} durability={self._durability}{state}>"
