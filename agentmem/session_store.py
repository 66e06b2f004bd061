"""SessionStore: durable, resumable agent sessions in one SQLite database.

A session is everything needed to resume an agent where it stopped: its
messages, a small JSON *state* (window position, thread summary,
counters), billing records, YaRN side threads, and metadata (name,
working directory, model, context window, timestamps). All sessions of a
project live in one SQLite file (WAL mode, see :mod:`agentmem._storage.sqlite`
and ``docs/storage.md`` for why SQLite and not an append-only journal).

How writes reach the store. A :class:`SessionWriter` implements
:class:`~agentmem.history.HistoryObserver`: a
:class:`~agentmem.history.MessageHistory` calls it *before* changing its
list in memory, and if the write raises, the history is left unchanged.
So memory never runs ahead of disk, and every change is one transaction:

* ``on_append`` inserts the new rows at the next sequence numbers. Its cost
  is O(size of the new messages): earlier rows are never read or
  rewritten, whatever the length of the session.
* ``on_replace`` updates one row; ``on_rewrite`` deletes the rows from
  ``start`` on and inserts the new tail (truncate, undo, rollback), all or
  nothing.

Guarantees.

* **Durable on return.** With ``durability="full"`` (the default) a call
  that returned has been fsynced and survives power loss; with
  ``"normal"`` it survives a crash or ``kill -9`` of the process but the
  last commits may be lost on power loss (measured costs in
  ``docs/storage.md``). Either way a process killed at any instant leaves
  the database readable and every acknowledged write present.
* **Contiguous order.** Message ``seq`` numbers are 0..n-1 with no gap, so
  index ``i`` of the history is ``seq`` ``i`` of the store.
* **Nothing unreadable is hidden or overwritten.** A file that is not a
  readable SQLite database is moved aside (``<name>.corrupt-<timestamp>``,
  with its ``-wal``/``-shm``), a warning names both paths on the
  ``agentmem.storage`` logger, :attr:`SessionStore.recovered_from` records
  it, and the store continues empty. A message row that does not parse is
  moved to a ``quarantine`` table by :meth:`SessionStore.load`, logged, and
  reported in :attr:`SessionRecord.quarantined`; the rest loads.
* **Versioned.** The database carries ``format = "agentmem.sessions"`` and
  :data:`FORMAT_VERSION`; older databases are upgraded by named
  migrations, newer ones are refused with a :class:`StorageError`.
* **One agent per session.** :meth:`SessionStore.lock` takes an exclusive
  file lock (``flock``) per session, released by the kernel when the
  process dies, so a killed agent never wedges its session.

What it does not do: it does not validate messages beyond "a JSON object
with a string ``role``" (the history validates on the way in), and it does
not coordinate two writers on one session (take :meth:`SessionStore.lock`).

Thread safety: one connection per store, guarded by a lock; writers share it.
"""

from __future__ import annotations

import builtins
import html
import json
import logging
import math
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

import filelock
import orjson

from agentmem._json import decode_arguments
from agentmem._storage.files import SQLITE_COMPANIONS, atomic_write_text, move_aside
from agentmem._storage.sqlite import (
    DURABILITIES,
    Durability,
    Migration,
    connect,
    enable_wal,
    header_problem,
    is_corruption,
    migrate,
    pending_migrations,
    transaction,
)
from agentmem.errors import (
    CorruptStoreError,
    InvalidArgumentError,
    InvalidMessageError,
    SessionNotFoundError,
    StorageError,
    StoreLockedError,
)
from agentmem.messages import Message

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "BillingRecord",
    "Durability",
    "SessionInfo",
    "SessionLock",
    "SessionNotFoundError",
    "SessionRecord",
    "SessionStore",
    "SessionWriter",
]

if TYPE_CHECKING:
    from agentmem.history import HistoryObserver

logger = logging.getLogger("agentmem.storage")

FORMAT_NAME: Final = "agentmem.sessions"
"""The ``meta.format`` of a sessions database."""

FORMAT_VERSION: Final = 1
"""The sessions database version this code writes and the newest it reads."""

EXPORT_FORMAT: Final = "agentmem.session-export"
"""The ``format`` of a JSON session export."""

EXPORT_VERSION: Final = 1
"""The ``version`` of a JSON session export."""

_SESSION_ID_RE: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_EXPORT_FORMATS: Final = {".json": "json", ".html": "html", ".htm": "html"}


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session's metadata, as listed by :meth:`SessionStore.list`."""

    id: str
    """The session id: 1-128 characters of ``[A-Za-z0-9_.-]``."""
    name: str | None
    """A human title, or ``None``."""
    created_at: float
    """Creation time, epoch seconds."""
    updated_at: float
    """Time of the last write (message, state, billing, thread), epoch seconds."""
    working_directory: str | None
    """The directory the agent worked in, when known."""
    model: str | None
    """The model the session was started with, when known."""
    context_window: int | None
    """The model's context window in tokens, when known."""
    message_count: int
    """How many messages the session holds (side threads not included)."""


@dataclass(frozen=True, slots=True)
class BillingRecord:
    """One priced LLM call (or an aggregate the host chooses to record)."""

    at: float
    """When the cost was incurred, epoch seconds."""
    kind: str
    """What incurred it, for example ``"llm"`` or ``"memory_update"``."""
    model: str | None = None
    """The model billed, when known."""
    prompt_tokens: int = 0
    """Input tokens."""
    completion_tokens: int = 0
    """Output tokens."""
    cost_usd: float = 0.0
    """Cost in US dollars."""


@dataclass(slots=True)
class SessionRecord:
    """Everything stored for one session, as returned by :meth:`SessionStore.load`."""

    info: SessionInfo
    """The session's metadata."""
    messages: list[Message]
    """The messages, in order (index ``i`` is ``seq`` ``i``)."""
    state: dict[str, Any]
    """The session's small JSON state, as last saved (``{}`` when never saved)."""
    billing: list[BillingRecord]
    """Billing records, oldest first."""
    threads: dict[str, list[Message]]
    """YaRN side threads: thread id -> messages in order."""
    quarantined: list[int] = field(default_factory=list)
    """Original ``seq`` numbers of message rows that did not parse and were moved to quarantine
    during this load (the remaining rows were renumbered to stay contiguous)."""
    quarantined_threads: dict[str, list[int]] = field(default_factory=dict)
    """Same as :attr:`quarantined`, for side-thread rows: thread id -> original seqs."""
    state_quarantined: bool = False
    """``True`` when the stored state did not parse, was quarantined, and was reset to ``{}``."""


# --------------------------------------------------------------------------- schema

_MIGRATIONS: Final = (
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
)

# Every statement is a module-level constant: sqlite3 keeps a per-connection cache of prepared
# statements keyed by the SQL text, so each one is compiled once per connection and reused.
_INFO_COLUMNS: Final = """
    SELECT s.id, s.name, s.created_at, s.updated_at, s.working_directory, s.model,
           s.context_window,
           COALESCE((SELECT MAX(m.seq) FROM messages AS m WHERE m.session_id = s.id), -1) + 1
    FROM sessions AS s
"""
_SQL_INFO: Final = _INFO_COLUMNS + " WHERE s.id = ?"
_SQL_LIST: Final = _INFO_COLUMNS + " ORDER BY s.updated_at DESC, s.rowid DESC LIMIT ?"
_SQL_EXISTS: Final = "SELECT 1 FROM sessions WHERE id = ?"
_SQL_CREATE: Final = (
    "INSERT INTO sessions (id, name, created_at, updated_at, working_directory, model, "
    "context_window) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_SQL_DELETE_SESSION: Final = "DELETE FROM sessions WHERE id = ?"
_SQL_RENAME: Final = "UPDATE sessions SET name = ? WHERE id = ?"
_SQL_TOUCH: Final = "UPDATE sessions SET updated_at = ? WHERE id = ?"
_SQL_STATE: Final = "SELECT CAST(state AS BLOB) FROM sessions WHERE id = ?"
_SQL_SAVE_STATE: Final = "UPDATE sessions SET state = ?, updated_at = ? WHERE id = ?"
_SQL_RESET_STATE: Final = "UPDATE sessions SET state = '{}' WHERE id = ?"
# With the (session_id, seq) primary key, MAX(seq) is one B-tree descent, not a scan.
_SQL_NEXT_SEQ: Final = "SELECT COALESCE(MAX(seq), -1) + 1 FROM messages WHERE session_id = ?"
_SQL_INSERT_MESSAGE: Final = (
    "INSERT INTO messages (session_id, seq, role, body) VALUES (?, ?, ?, ?)"
)
_SQL_REPLACE_MESSAGE: Final = (
    "UPDATE messages SET role = ?, body = ? WHERE session_id = ? AND seq = ?"
)
_SQL_TRUNCATE: Final = "DELETE FROM messages WHERE session_id = ? AND seq >= ?"
# CAST: read raw bytes, so a body that is not valid UTF-8 is quarantined, not a failed load.
_SQL_MESSAGES: Final = (
    "SELECT seq, CAST(body AS BLOB) FROM messages WHERE session_id = ? ORDER BY seq"
)
_SQL_DELETE_MESSAGE: Final = "DELETE FROM messages WHERE session_id = ? AND seq = ?"
_SQL_RENUMBER_MESSAGE: Final = "UPDATE messages SET seq = ? WHERE session_id = ? AND seq = ?"
_SQL_INSERT_BILLING: Final = (
    "INSERT INTO billing (session_id, at, kind, model, prompt_tokens, completion_tokens, "
    "cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_SQL_BILLING: Final = (
    "SELECT at, kind, model, prompt_tokens, completion_tokens, cost_usd FROM billing "
    "WHERE session_id = ? ORDER BY id"
)
_SQL_NEXT_THREAD_SEQ: Final = (
    "SELECT COALESCE(MAX(seq), -1) + 1 FROM threads WHERE session_id = ? AND thread_id = ?"
)
_SQL_INSERT_THREAD: Final = (
    "INSERT INTO threads (session_id, thread_id, seq, body) VALUES (?, ?, ?, ?)"
)
_SQL_THREADS: Final = (
    "SELECT thread_id, seq, CAST(body AS BLOB) FROM threads WHERE session_id = ? "
    "ORDER BY thread_id, seq"
)
_SQL_DELETE_THREAD_ROW: Final = (
    "DELETE FROM threads WHERE session_id = ? AND thread_id = ? AND seq = ?"
)
_SQL_RENUMBER_THREAD_ROW: Final = (
    "UPDATE threads SET seq = ? WHERE session_id = ? AND thread_id = ? AND seq = ?"
)
_SQL_QUARANTINE: Final = (
    "INSERT INTO quarantine (session_id, thread_id, seq, body, reason, at) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


# --------------------------------------------------------------------------- helpers


def _check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str) or not _SESSION_ID_RE.fullmatch(session_id):
        raise InvalidArgumentError(
            f"session id must be 1-128 characters of letters, digits, '_', '.', '-'; "
            f"got {session_id!r}"
        )
    return session_id


def _check_lookup_id(session_id: object) -> str:
    if not isinstance(session_id, str):
        raise InvalidArgumentError(f"session id must be a string, got {type(session_id).__name__}")
    return session_id


def _check_optional_str(value: object, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentError(f"{name} must be a string or None, got {type(value).__name__}")
    return value


def _check_count(value: object, name: str, *, positive: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        bound = "a positive" if positive else "a non-negative"
        raise InvalidArgumentError(f"{name} must be {bound} integer, got {value!r}")
    return value


def _encode_message(message: object, index: int) -> tuple[str, str]:
    """``(role, body)`` for one message; the body is its orjson serialisation."""
    if not isinstance(message, Mapping):
        raise InvalidMessageError(
            f"a message must be a dict, got {type(message).__name__}", index=index
        )
    role = message.get("role")
    if not isinstance(role, str):
        raise InvalidMessageError("role must be a string", index=index, field="role")
    try:
        body = orjson.dumps(message if isinstance(message, dict) else dict(message))
    except orjson.JSONEncodeError as exc:
        raise InvalidMessageError(f"not JSON-serialisable: {exc}", index=index) from exc
    return role, body.decode("utf-8")


def _encode_messages(messages: object) -> list[tuple[str, str]]:
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidArgumentError(
            f"messages must be a sequence of dicts, got {type(messages).__name__}"
        )
    return [_encode_message(m, i) for i, m in enumerate(messages)]


def _decode_message(body: bytes) -> tuple[Message | None, str]:
    """The message stored in ``body``, or ``(None, reason)`` when it does not parse."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return None, f"body is not valid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"body is a JSON {type(value).__name__}, not an object"
    if not isinstance(value.get("role"), str):
        return None, "body has no string 'role'"
    return value, ""


def _iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _info_from_row(row: Sequence[Any]) -> SessionInfo:
    return SessionInfo(
        id=row[0],
        name=row[1],
        created_at=float(row[2]),
        updated_at=float(row[3]),
        working_directory=row[4],
        model=row[5],
        context_window=row[6],
        message_count=int(row[7]),
    )


def _renumber(
    conn: sqlite3.Connection, sql: str, key: tuple[str, ...], kept: Sequence[int]
) -> None:
    """Give the rows ``kept`` (old seqs, ascending) the seqs 0..len-1, without PK collisions.

    Moving in two steps (to negative, then to final) keeps every intermediate
    state free of duplicate keys whatever order SQLite visits the rows in.
    """
    moves = [(old, new) for new, old in enumerate(kept) if old != new]
    conn.executemany(sql, [(-1 - old, *key, old) for old, _ in moves])
    conn.executemany(sql, [(new, *key, -1 - old) for old, new in moves])


# --------------------------------------------------------------------------- locks


class SessionLock:
    """An exclusive, cross-process lock on one session.

    Obtained from :meth:`SessionStore.lock`, which acquires it. On disk it is
    an ``flock`` on ``<store dir>/locks/<id>.lock`` (via :mod:`filelock`),
    which the kernel drops when the holding process exits or is killed, so
    a crashed agent never wedges its session. For in-memory stores it is an
    entry in the store's set of held ids. Two locks on one id conflict even
    inside one process (two objects each think they own the session).

    Acquisition never waits: a held lock raises
    :class:`~agentmem.errors.StoreLockedError` at once. ``release()`` is
    idempotent, and a released lock can be acquired again.
    """

    def __init__(
        self,
        session_id: str,
        *,
        path: Path | None,
        held: builtins.set[str],
        guard: threading.Lock,
    ) -> None:
        self._session_id = session_id
        self._path = path
        self._held = held
        self._guard = guard
        self._file_lock = (
            filelock.FileLock(str(path), timeout=0, thread_local=False)
            if path is not None
            else None
        )
        self._locked = False

    @property
    def session_id(self) -> str:
        """The locked session's id."""
        return self._session_id

    @property
    def path(self) -> Path | None:
        """The lock file, or ``None`` for an in-memory store."""
        return self._path

    @property
    def locked(self) -> bool:
        """Whether this object currently holds the lock."""
        return self._locked

    def acquire(self) -> SessionLock:
        """Take the lock, without waiting. Does nothing when this object already holds it.

        Returns:
            ``self``.

        Raises:
            StoreLockedError: another process or object holds the lock.
            StorageError: the lock file could not be created.
        """
        with self._guard:
            if self._locked:
                return self
            if self._file_lock is None:
                if self._session_id in self._held:
                    raise self._locked_error()
                self._held.add(self._session_id)
            else:
                assert self._path is not None
                try:
                    self._path.parent.mkdir(parents=True, exist_ok=True)
                    self._file_lock.acquire(timeout=0)
                except filelock.Timeout:
                    raise self._locked_error() from None
                except OSError as exc:
                    raise StorageError(
                        f"cannot lock session {self._session_id}: {exc}", path=self._path
                    ) from exc
            self._locked = True
            return self

    def release(self) -> None:
        """Release the lock; does nothing when it is not held."""
        with self._guard:
            if not self._locked:
                return
            if self._file_lock is None:
                self._held.discard(self._session_id)
            else:
                self._file_lock.release(force=True)
            self._locked = False

    def _locked_error(self) -> StoreLockedError:
        return StoreLockedError(
            f"session {self._session_id} is already open in another process or object",
            path=self._path,
        )

    def __enter__(self) -> SessionLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "locked" if self._locked else "unlocked"
        return f"<SessionLock {self._session_id!r} {state}>"


# --------------------------------------------------------------------------- writer


class SessionWriter:
    """Persists one session's changes; a :class:`~agentmem.history.HistoryObserver`.

    Obtained from :meth:`SessionStore.writer`. Hand it to a
    :class:`~agentmem.history.MessageHistory` as ``observer`` and every
    change of the history is written, in one transaction, before the
    history applies it; if the write fails the history stays as it was.

    Every method is durable when it returns (per the store's durability),
    raises :class:`SessionNotFoundError` when the session was deleted
    meanwhile, and turns SQLite failures into
    :class:`~agentmem.errors.StorageError` after rolling back.
    """

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self._store = store
        self._id = session_id

    @property
    def session_id(self) -> str:
        """The session this writer writes."""
        return self._id

    def _touch(self, conn: sqlite3.Connection) -> None:
        if conn.execute(_SQL_TOUCH, (self._store._now(), self._id)).rowcount == 0:
            raise SessionNotFoundError(self._id)

    # -- HistoryObserver

    def on_append(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Append ``messages`` after the session's last message, in one transaction.

        Args:
            messages: JSON-safe message dicts (each with a string ``role``).

        Raises:
            InvalidMessageError: a message is not a dict with a string role, or
                is not JSON-serialisable; nothing was written.
            SessionNotFoundError: the session no longer exists.
            StorageError: the write failed; nothing was written.
        """
        rows = _encode_messages(messages)
        if not rows:
            return
        # Cost: serialising the new messages, one B-tree descent for MAX(seq), and one
        # B-tree insert per new row. Earlier rows are never read or rewritten, and in WAL
        # mode the commit appends only the few pages that changed, so the cost of an
        # append is O(size of the new messages), flat in the length of the session.
        with self._store._write(f"append to session {self._id}") as conn:
            self._touch(conn)
            start = conn.execute(_SQL_NEXT_SEQ, (self._id,)).fetchone()[0]
            conn.executemany(
                _SQL_INSERT_MESSAGE,
                [(self._id, start + i, role, body) for i, (role, body) in enumerate(rows)],
            )

    def on_replace(self, index: int, message: Mapping[str, Any]) -> None:
        """Replace the message at ``index`` (one row).

        Raises:
            InvalidArgumentError: the session has no message at ``index``.
            InvalidMessageError: ``message`` cannot be stored.
            SessionNotFoundError: the session no longer exists.
            StorageError: the write failed; nothing changed.
        """
        index = _check_count(index, "index")
        role, body = _encode_message(message, 0)
        with self._store._write(f"replace message {index} of session {self._id}") as conn:
            self._touch(conn)
            if conn.execute(_SQL_REPLACE_MESSAGE, (role, body, self._id, index)).rowcount == 0:
                count = conn.execute(_SQL_NEXT_SEQ, (self._id,)).fetchone()[0]
                raise InvalidArgumentError(
                    f"session {self._id} has {count} messages; there is no message {index}"
                )

    def on_rewrite(self, start: int, tail: Sequence[Mapping[str, Any]]) -> None:
        """Replace everything from ``start`` on with ``tail``, in one transaction.

        Costs O(rows removed + size of ``tail``).

        Raises:
            InvalidArgumentError: ``start`` is past the end (it would leave a gap).
            InvalidMessageError: a message in ``tail`` cannot be stored.
            SessionNotFoundError: the session no longer exists.
            StorageError: the write failed; nothing changed.
        """
        start = _check_count(start, "start")
        rows = _encode_messages(tail)
        with self._store._write(f"rewrite session {self._id} from {start}") as conn:
            self._touch(conn)
            count = conn.execute(_SQL_NEXT_SEQ, (self._id,)).fetchone()[0]
            if start > count:
                raise InvalidArgumentError(
                    f"session {self._id} has {count} messages; cannot rewrite from {start}"
                )
            conn.execute(_SQL_TRUNCATE, (self._id, start))
            conn.executemany(
                _SQL_INSERT_MESSAGE,
                [(self._id, start + i, role, body) for i, (role, body) in enumerate(rows)],
            )

    # -- the rest of the session

    def save_state(self, state: Mapping[str, Any]) -> None:
        """Replace the session's JSON state (window position, summary, counters) as a whole.

        Args:
            state: A JSON-serialisable mapping with string keys. Keep it small:
                it is rewritten whole on every save.

        Raises:
            InvalidArgumentError: ``state`` is not a JSON-serialisable mapping.
            SessionNotFoundError: the session no longer exists.
            StorageError: the write failed; the previous state is intact.
        """
        if not isinstance(state, Mapping):
            raise InvalidArgumentError(f"state must be a dict, got {type(state).__name__}")
        try:
            text = orjson.dumps(state if isinstance(state, dict) else dict(state)).decode("utf-8")
        except orjson.JSONEncodeError as exc:
            raise InvalidArgumentError(f"state is not JSON-serialisable: {exc}") from exc
        with self._store._write(f"save the state of session {self._id}") as conn:
            if conn.execute(_SQL_SAVE_STATE, (text, self._store._now(), self._id)).rowcount == 0:
                raise SessionNotFoundError(self._id)

    def add_billing(self, record: BillingRecord) -> None:
        """Record one billed call.

        Raises:
            InvalidArgumentError: ``record`` is not a :class:`BillingRecord`, has
                negative token counts or a non-finite cost or time.
            SessionNotFoundError: the session no longer exists.
            StorageError: the write failed.
        """
        if not isinstance(record, BillingRecord):
            raise InvalidArgumentError(
                f"record must be a BillingRecord, got {type(record).__name__}"
            )
        prompt = _check_count(record.prompt_tokens, "prompt_tokens")
        completion = _check_count(record.completion_tokens, "completion_tokens")
        for name in ("at", "cost_usd"):
            value = getattr(record, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise InvalidArgumentError(f"{name} must be a finite number, got {value!r}")
        if not isinstance(record.kind, str) or not record.kind:
            raise InvalidArgumentError(f"kind must be a non-empty string, got {record.kind!r}")
        model = _check_optional_str(record.model, "model")
        with self._store._write(f"add billing to session {self._id}") as conn:
            self._touch(conn)
            conn.execute(
                _SQL_INSERT_BILLING,
                (
                    self._id,
                    float(record.at),
                    record.kind,
                    model,
                    prompt,
                    completion,
                    float(record.cost_usd),
                ),
            )

    def append_thread(self, thread_id: str, messages: Sequence[Mapping[str, Any]]) -> None:
        """Append messages to a YaRN side thread (created on first use), in one transaction.

        Args:
            thread_id: The thread's id, a non-empty string.
            messages: JSON-safe message dicts (each with a string ``role``).

        Raises:
            InvalidArgumentError: ``thread_id`` is empty or not a string.
            InvalidMessageError: a message cannot be stored; nothing was written.
            SessionNotFoundError: the session no longer exists.
            StorageError: the write failed; nothing was written.
        """
        if not isinstance(thread_id, str) or not thread_id:
            raise InvalidArgumentError(f"thread_id must be a non-empty string, got {thread_id!r}")
        rows = _encode_messages(messages)
        if not rows:
            return
        with self._store._write(f"append to thread {thread_id} of session {self._id}") as conn:
            self._touch(conn)
            start = conn.execute(_SQL_NEXT_THREAD_SEQ, (self._id, thread_id)).fetchone()[0]
            conn.executemany(
                _SQL_INSERT_THREAD,
                [(self._id, thread_id, start + i, body) for i, (_, body) in enumerate(rows)],
            )

    def rename(self, name: str | None) -> None:
        """Set the session's name (``updated_at`` is left alone: renaming is not activity).

        Raises:
            SessionNotFoundError: the session no longer exists.
        """
        self._store.rename(self._id, name)

    def __repr__(self) -> str:
        return f"<SessionWriter {self._id!r}>"


if TYPE_CHECKING:

    def _writer_is_an_observer(writer: SessionWriter) -> HistoryObserver:
        # mypy proves here that SessionWriter satisfies the HistoryObserver protocol.
        return writer


# --------------------------------------------------------------------------- store


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

    Raises:
        InvalidArgumentError: unknown ``durability``.
        StorageError: the database belongs to something else, was written by
            a newer agentmem, or cannot be opened (permissions, a directory
            at ``path``, a filesystem without WAL support).

    A file that is not a readable SQLite database is not an error: it is
    moved aside and the store starts empty (see :attr:`recovered_from`).
    """

    def __init__(
        self,
        path: str | Path | None,
        *,
        durability: Durability = "full",
        clock: Callable[[], float] | None = None,
    ) -> None:
        if durability not in DURABILITIES:
            raise InvalidArgumentError(
                f"durability must be one of {', '.join(DURABILITIES)}; got {durability!r}"
            )
        if path is not None and not isinstance(path, str | Path):
            raise InvalidArgumentError(f"path must be a str, a Path or None, got {path!r}")
        self._path = None if path is None or path == ":memory:" else Path(path)
        self._durability: Durability = durability
        self._now: Callable[[], float] = clock or time.time
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._held_guard = threading.Lock()
        self.recovered_from: Path | None = None
        """Where an unreadable database found at :attr:`path` was moved on open, else ``None``."""
        self._conn: sqlite3.Connection | None = (
            self._open_memory() if self._path is None else self._open_file(self._path)
        )

    # ------------------------------------------------------------------ opening

    def _open_memory(self) -> sqlite3.Connection:
        conn = connect(None, durability=self._durability)
        try:
            self._migrate(conn, None)
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection, path: Path | None) -> None:
        migrate(
            conn,
            format_name=FORMAT_NAME,
            format_version=FORMAT_VERSION,
            migrations=_MIGRATIONS,
            path=path,
        )

    def _try_open(self, path: Path) -> sqlite3.Connection:
        """Connect and migrate; let sqlite3 errors through so corruption can be told apart."""
        conn = connect(path, durability=self._durability, wal=False)
        try:
            # Refuse someone else's (or a newer) database before changing anything in it.
            pending_migrations(
                conn,
                format_name=FORMAT_NAME,
                format_version=FORMAT_VERSION,
                migrations=_MIGRATIONS,
                path=path,
            )
            enable_wal(conn, path)
            self._migrate(conn, path)
        except BaseException:
            conn.close()
            raise
        return conn

    def _probe(self, path: Path) -> tuple[sqlite3.Connection | None, str]:
        """Open ``path``; ``(None, reason)`` when it is not a readable SQLite database.

        The header is checked by hand first: SQLite would delete the ``-wal``
        beside a file whose header it cannot read, and that log must be kept
        with the file when it is moved aside.
        """
        try:
            problem = header_problem(path)
        except OSError as exc:
            raise StorageError(f"cannot read session store {path}: {exc}", path=path) from exc
        if problem is not None:
            return None, problem
        try:
            return self._try_open(path), ""
        except sqlite3.Error as exc:
            if not is_corruption(exc):
                raise StorageError(f"cannot open session store {path}: {exc}", path=path) from exc
            return None, str(exc)

    def _open_file(self, path: Path) -> sqlite3.Connection:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create {path.parent}: {exc}", path=path) from exc
        if path.is_dir():
            raise StorageError(f"{path} is a directory, not a session database", path=path)
        conn, reason = self._probe(path)
        if conn is not None:
            return conn
        # Unreadable. Serialise recovery across processes and look again under the lock:
        # another process may have moved it aside already, and we must not move its fresh store.
        recovery_lock = filelock.FileLock(
            str(path.parent / "locks" / "@recover.lock"), thread_local=False
        )
        try:
            (path.parent / "locks").mkdir(exist_ok=True)
            recovery_lock.acquire(timeout=30)
        except (OSError, filelock.Timeout) as exc:
            raise StorageError(f"cannot recover unreadable {path}: {exc}", path=path) from exc
        try:
            conn, reason = self._probe(path)
            if conn is not None:
                return conn
            try:
                moved = move_aside(path, companions=SQLITE_COMPANIONS)
            except OSError as exc:
                raise CorruptStoreError(
                    f"{path} is not a readable session database ({reason}) and could not be "
                    f"moved aside: {exc}",
                    path=path,
                ) from exc
            logger.warning(
                "session store %s is not a readable SQLite database (%s); moved it to %s "
                "and started an empty store",
                path,
                reason,
                moved,
            )
            self.recovered_from = moved
            try:
                return self._try_open(path)
            except sqlite3.Error as exc:
                raise StorageError(f"cannot create session store {path}: {exc}", path=path) from exc
        finally:
            recovery_lock.release()

    # ------------------------------------------------------------------ plumbing

    def _require_open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError("the session store is closed", path=self._path)
        return self._conn

    def _error(self, action: str, exc: sqlite3.Error) -> StorageError:
        where = self._path if self._path is not None else ":memory:"
        if is_corruption(exc):
            return CorruptStoreError(
                f"cannot {action}: {where} is damaged ({exc}); it was left in place. Copy it "
                "somewhere safe and check it with `sqlite3 <file> 'PRAGMA integrity_check'`",
                path=self._path,
            )
        return StorageError(f"cannot {action} in {where}: {exc}", path=self._path)

    @contextmanager
    def _write(self, action: str) -> Iterator[sqlite3.Connection]:
        """One write transaction under the store lock; sqlite3 errors become StorageError."""
        with self._lock:
            conn = self._require_open()
            try:
                with transaction(conn):
                    yield conn
            except sqlite3.Error as exc:
                raise self._error(action, exc) from exc

    @contextmanager
    def _read(self, action: str, *, snapshot: bool = False) -> Iterator[sqlite3.Connection]:
        """Reads under the store lock; ``snapshot`` wraps them in one read transaction."""
        with self._lock:
            conn = self._require_open()
            try:
                if snapshot:
                    with transaction(conn, immediate=False):
                        yield conn
                else:
                    yield conn
            except sqlite3.Error as exc:
                raise self._error(action, exc) from exc

    # ------------------------------------------------------------------ properties

    @property
    def path(self) -> Path | None:
        """The database file, or ``None`` for an in-memory store."""
        return self._path

    @property
    def durability(self) -> Durability:
        """``"full"`` or ``"normal"``."""
        return self._durability

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._conn is None

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
            context_window = _check_count(context_window, "context_window", positive=True)
        now = float(self._now())
        with self._write(f"create session {sid}") as conn:
            if conn.execute(_SQL_EXISTS, (sid,)).fetchone() is not None:
                raise InvalidArgumentError(f"a session with id {sid!r} already exists")
            conn.execute(
                _SQL_CREATE, (sid, name, now, now, working_directory, model, context_window)
            )
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
        with self._read("look up a session") as conn:
            return conn.execute(_SQL_EXISTS, (sid,)).fetchone() is not None

    def info(self, session_id: str) -> SessionInfo:
        """One session's metadata, without loading its messages.

        Raises:
            SessionNotFoundError: no such session.
        """
        sid = _check_lookup_id(session_id)
        with self._read(f"read session {sid}") as conn:
            row = conn.execute(_SQL_INFO, (sid,)).fetchone()
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
            limit = _check_count(limit, "limit")
        with self._read("list sessions") as conn:
            rows = conn.execute(_SQL_LIST, (-1 if limit is None else limit,)).fetchall()
        return [_info_from_row(row) for row in rows]

    def load(self, session_id: str) -> SessionRecord:
        """Everything stored for a session.

        A row that does not parse is never skipped silently: within one
        transaction it is moved to the ``quarantine`` table (raw bytes and
        reason kept), the rows after it are renumbered so ``seq`` stays
        contiguous, a warning names the session and ``seq``, and the
        record reports it (:attr:`SessionRecord.quarantined`).

        Raises:
            SessionNotFoundError: no such session.
            StorageError: the database could not be read, or a damaged row
                could not be quarantined.
        """
        sid = _check_lookup_id(session_id)
        with self._read(f"load session {sid}", snapshot=True) as conn:
            record = self._read_record(conn, sid, quarantine=False)
        if record is not None:
            return record
        with self._write(f"quarantine damaged rows of session {sid}") as conn:
            record = self._read_record(conn, sid, quarantine=True)
        assert record is not None
        for seq in record.quarantined:
            logger.warning(
                "session %s: message seq %d did not parse; moved it to the quarantine table "
                "of %s and renumbered the later messages",
                sid,
                seq,
                self._path or ":memory:",
            )
        for thread_id, seqs in record.quarantined_threads.items():
            for seq in seqs:
                logger.warning(
                    "session %s: thread %s row seq %d did not parse; moved it to quarantine",
                    sid,
                    thread_id,
                    seq,
                )
        if record.state_quarantined:
            logger.warning(
                "session %s: its state did not parse; moved it to quarantine and reset it to {}",
                sid,
            )
        return record

    def _read_record(
        self, conn: sqlite3.Connection, sid: str, *, quarantine: bool
    ) -> SessionRecord | None:
        """Read a session; ``None`` when a row is damaged and ``quarantine`` is off."""
        row = conn.execute(_SQL_INFO, (sid,)).fetchone()
        if row is None:
            raise SessionNotFoundError(sid)
        now = float(self._now())

        # Messages.
        messages: builtins.list[Message] = []
        kept: builtins.list[int] = []
        bad: builtins.list[int] = []
        for seq, body in conn.execute(_SQL_MESSAGES, (sid,)).fetchall():
            message, reason = _decode_message(body)
            if message is None:
                if not quarantine:
                    return None
                conn.execute(_SQL_QUARANTINE, (sid, None, seq, body, reason, now))
                conn.execute(_SQL_DELETE_MESSAGE, (sid, seq))
                bad.append(seq)
            else:
                messages.append(message)
                kept.append(seq)
        if bad:
            _renumber(conn, _SQL_RENUMBER_MESSAGE, (sid,), kept)

        # Side threads.
        threads: dict[str, builtins.list[Message]] = {}
        thread_kept: dict[str, builtins.list[int]] = {}
        thread_bad: dict[str, builtins.list[int]] = {}
        for thread_id, seq, body in conn.execute(_SQL_THREADS, (sid,)).fetchall():
            message, reason = _decode_message(body)
            if message is None:
                if not quarantine:
                    return None
                conn.execute(_SQL_QUARANTINE, (sid, thread_id, seq, body, reason, now))
                conn.execute(_SQL_DELETE_THREAD_ROW, (sid, thread_id, seq))
                thread_bad.setdefault(thread_id, []).append(seq)
                threads.setdefault(thread_id, [])
            else:
                threads.setdefault(thread_id, []).append(message)
                thread_kept.setdefault(thread_id, []).append(seq)
        for thread_id in thread_bad:
            _renumber(
                conn, _SQL_RENUMBER_THREAD_ROW, (sid, thread_id), thread_kept.get(thread_id, [])
            )
        threads = {k: v for k, v in threads.items() if v}

        # State.
        state_bytes = conn.execute(_SQL_STATE, (sid,)).fetchone()[0]
        state_quarantined = False
        try:
            state = orjson.loads(state_bytes)
            reason = "" if isinstance(state, dict) else f"state is a JSON {type(state).__name__}"
        except orjson.JSONDecodeError as exc:
            state, reason = None, f"state is not valid JSON: {exc}"
        if reason:
            if not quarantine:
                return None
            conn.execute(_SQL_QUARANTINE, (sid, None, None, state_bytes, reason, now))
            conn.execute(_SQL_RESET_STATE, (sid,))
            state, state_quarantined = {}, True

        billing = [
            BillingRecord(
                at=float(b[0]),
                kind=b[1],
                model=b[2],
                prompt_tokens=int(b[3]),
                completion_tokens=int(b[4]),
                cost_usd=float(b[5]),
            )
            for b in conn.execute(_SQL_BILLING, (sid,)).fetchall()
        ]
        info = _info_from_row(row)
        if bad:
            info = _info_from_row((*row[:7], len(messages)))
        return SessionRecord(
            info=info,
            messages=messages,
            state=state,
            billing=billing,
            threads=threads,
            quarantined=bad,
            quarantined_threads=thread_bad,
            state_quarantined=state_quarantined,
        )

    def delete(self, session_id: str) -> bool:
        """Delete a session and everything it owns (messages, billing, threads, quarantine).

        Locks are not consulted: a writer still holding the session gets
        :class:`SessionNotFoundError` on its next write.

        Returns:
            ``True`` if the session existed.
        """
        sid = _check_lookup_id(session_id)
        with self._write(f"delete session {sid}") as conn:
            return conn.execute(_SQL_DELETE_SESSION, (sid,)).rowcount > 0

    def rename(self, session_id: str, name: str | None) -> None:
        """Set a session's name.

        Raises:
            SessionNotFoundError: no such session.
            InvalidArgumentError: ``name`` is not a string or ``None``.
        """
        sid = _check_lookup_id(session_id)
        name = _check_optional_str(name, "name")
        with self._write(f"rename session {sid}") as conn:
            if conn.execute(_SQL_RENAME, (name, sid)).rowcount == 0:
                raise SessionNotFoundError(sid)

    def writer(self, session_id: str) -> SessionWriter:
        """A :class:`SessionWriter` for an existing session.

        Raises:
            SessionNotFoundError: no such session.
        """
        sid = _check_lookup_id(session_id)
        if not self.exists(sid):
            raise SessionNotFoundError(sid)
        return SessionWriter(self, sid)

    def lock(self, session_id: str) -> SessionLock:
        """Take the exclusive lock on a session (the session need not exist yet).

        Returns:
            The held lock; release it with ``release()`` or a ``with`` block.

        Raises:
            StoreLockedError: another process or object holds it.
            InvalidArgumentError: malformed id.
        """
        sid = _check_session_id(session_id)
        path = None if self._path is None else self._path.parent / "locks" / f"{sid}.lock"
        return SessionLock(sid, path=path, held=self._held, guard=self._held_guard).acquire()

    # ------------------------------------------------------------------ export

    def export(
        self,
        session_id: str,
        path: str | Path,
        *,
        format: Literal["json", "html"] | None = None,
    ) -> Path:
        """Write a session to a self-contained JSON or HTML file, atomically.

        JSON: ``{"format": "agentmem.session-export", "version": 1, "session",
        "messages", "state", "billing", "threads"}``, UTF-8, indented, keys in
        a stable order. HTML: one file with inline CSS, no scripts and no
        external resources; every stored string is escaped.

        Args:
            session_id: The session to export.
            path: The file to write (its directory must exist).
            format: ``"json"`` or ``"html"``; by default taken from the
                extension (``.json``, ``.html``).

        Returns:
            The written path.

        Raises:
            InvalidArgumentError: unknown format or extension.
            SessionNotFoundError: no such session.
            StorageError: the file could not be written.
        """
        target = Path(path)
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
        text = export_json(record) if fmt == "json" else export_html(record)
        try:
            atomic_write_text(target, text)
        except OSError as exc:
            raise StorageError(f"cannot write the export {target}: {exc}", path=target) from exc
        return target

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the database (idempotent). Locks handed out stay held until released."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error as exc:
                raise self._error("close the store", exc) from exc

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
        where = str(self._path) if self._path is not None else ":memory:"
        state = " closed" if self._conn is None else ""
        return f"<SessionStore {where} durability={self._durability}{state}>"


# --------------------------------------------------------------------------- export: JSON


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


# Message keys in reading order; any other key follows, alphabetically.
_EXPORT_KEY_ORDER: Final = (
    "role",
    "name",
    "content",
    "refusal",
    "reasoning_content",
    "tool_calls",
    "tool_call_id",
)


def _export_message(message: Message) -> dict[str, Any]:
    rank = {key: i for i, key in enumerate(_EXPORT_KEY_ORDER)}
    keys = sorted(message, key=lambda k: (rank.get(k, len(rank)), k))
    return {key: _sorted_keys(message[key]) for key in keys}


def export_data(record: SessionRecord) -> dict[str, Any]:
    """The JSON export of a session, as a dict (see :meth:`SessionStore.export`).

    Top-level, ``session`` and billing keys come in a fixed order; a
    message starts with ``role``, ``name``, ``content``, ``refusal``,
    ``reasoning_content``, ``tool_calls``, ``tool_call_id`` and continues
    with its other keys alphabetically; keys nested deeper are sorted. Equal
    sessions export to equal bytes.
    """
    info = record.info
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": {
            "id": info.id,
            "name": info.name,
            "created_at": info.created_at,
            "created_at_iso": _iso(info.created_at),
            "updated_at": info.updated_at,
            "updated_at_iso": _iso(info.updated_at),
            "working_directory": info.working_directory,
            "model": info.model,
            "context_window": info.context_window,
            "message_count": info.message_count,
        },
        "messages": [_export_message(m) for m in record.messages],
        "state": _sorted_keys(record.state),
        "billing": [
            {
                "at": b.at,
                "at_iso": _iso(b.at),
                "kind": b.kind,
                "model": b.model,
                "prompt_tokens": b.prompt_tokens,
                "completion_tokens": b.completion_tokens,
                "cost_usd": b.cost_usd,
            }
            for b in record.billing
        ],
        "threads": {
            tid: [_export_message(m) for m in record.threads[tid]] for tid in sorted(record.threads)
        },
    }


def export_json(record: SessionRecord) -> str:
    """The JSON export of a session as text: UTF-8-ready, two-space indented, newline-terminated."""
    return json.dumps(export_data(record), indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- export: HTML

_CSS: Final = """
:root { color-scheme: light dark; --muted: #6b7280; --line: #d1d5db; --code: #f3f4f6; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 60rem; padding: 1.5rem; }
header.session h1 { margin: 0 0 .5rem; font-size: 1.4rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.msg { border: 1px solid var(--line); border-left-width: 4px; border-radius: 6px;
       margin: .8rem 0; padding: .5rem .8rem; }
.msg > .head { font-size: .8rem; color: var(--muted); margin-bottom: .3rem; }
.msg .role { font-weight: 700; text-transform: uppercase; letter-spacing: .04em; }
.role-system { border-left-color: #6b7280; }
.role-user { border-left-color: #2563eb; }
.role-assistant { border-left-color: #16a34a; }
.role-tool { border-left-color: #d97706; }
.role-unknown { border-left-color: #dc2626; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
.empty { color: var(--muted); font-style: italic; }
.refusal { color: #b91c1c; }
pre { background: var(--code); color: inherit; padding: .5rem; border-radius: 4px;
      overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; margin: .3rem 0; }
@media (prefers-color-scheme: dark) { :root { --code: #1f2937; --line: #374151; } }
.tool-call .fn { font-family: ui-monospace, monospace; font-weight: 600; }
.muted, .internal, .url { color: var(--muted); font-size: .8rem; }
.url { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
dl.internal { margin: .4rem 0 0; }
dl.internal dt { display: inline; font-family: ui-monospace, monospace; }
dl.internal dd { display: inline; margin: 0 0 0 .3rem; font-family: ui-monospace, monospace;
                 overflow-wrap: anywhere; }
dl.internal dd::after { content: ""; display: block; }
img { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
summary { cursor: pointer; }
table { border-collapse: collapse; font-size: .85rem; }
td, th { border: 1px solid var(--line); padding: .2rem .5rem; text-align: left; }
section { margin-top: 2rem; }
""".strip()

# Content-Security-Policy as a second line of defence: even if markup slipped through the
# escaping, the browser would run no script and fetch nothing from the network.
_CSP: Final = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

# Raster images only (an SVG could carry markup), base64 only, nothing after the payload.
_DATA_IMAGE_RE: Final = re.compile(
    r"data:image/(?:png|jpeg|jpg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}", re.IGNORECASE
)

_SHOWN_FIELDS: Final = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content", "refusal"}
)


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _render_image(url: object) -> str:
    if isinstance(url, str) and _DATA_IMAGE_RE.fullmatch(url):
        return f'<div><img alt="image" src="{_esc(url)}"></div>'
    if isinstance(url, str) and url.startswith("data:"):
        return '<div class="url">[image: unsupported data URL, not shown]</div>'
    # A remote URL is shown as text and never fetched: opening an export must not phone home.
    return f'<div class="url">[image: {_esc(url)}]</div>'


def _render_part(part: Any) -> str:
    if not isinstance(part, dict):
        return f"<pre>{_esc(_pretty_json(part))}</pre>"
    kind = part.get("type")
    if kind == "text":
        return f'<div class="text">{_esc(part.get("text", ""))}</div>'
    if kind == "refusal":
        return f'<div class="text refusal">{_esc(part.get("refusal", ""))}</div>'
    if kind == "image_url":
        image = part.get("image_url")
        return _render_image(image.get("url") if isinstance(image, dict) else image)
    if kind == "input_audio":
        audio = part.get("input_audio")
        fmt = audio.get("format", "?") if isinstance(audio, dict) else "?"
        return f'<div class="url">[audio: {_esc(fmt)}, not shown]</div>'
    if kind == "file":
        file = part.get("file")
        label = file.get("filename") if isinstance(file, dict) else None
        return f'<div class="url">[file: {_esc(label or "attachment")}, not shown]</div>'
    return f"<pre>{_esc(_pretty_json(part))}</pre>"


def _render_content(content: Any) -> str:
    if content is None or content == "" or content == []:
        return '<div class="empty">(no content)</div>'
    if isinstance(content, str):
        return f'<div class="text">{_esc(content)}</div>'
    if isinstance(content, list):
        return "".join(_render_part(part) for part in content)
    return f"<pre>{_esc(_pretty_json(content))}</pre>"


def _render_tool_call(call: Any) -> str:
    if not isinstance(call, dict):
        return f"<pre>{_esc(_pretty_json(call))}</pre>"
    function = call.get("function")
    if not isinstance(function, dict):
        function = {}
    name = function.get("name", "?")
    arguments = function.get("arguments", "")
    decoded = decode_arguments(arguments)
    shown = _pretty_json(decoded) if decoded is not None else None
    if shown is None:
        shown = arguments if isinstance(arguments, str) else _pretty_json(arguments)
    return (
        '<div class="tool-call">'
        f'<div><span class="fn">{_esc(name)}</span> '
        f'<span class="muted">{_esc(call.get("id", ""))}</span></div>'
        f"<pre>{_esc(shown)}</pre></div>"
    )


def _render_message(index: int, message: Message, anchor: str) -> str:
    role = message.get("role")
    role_text = role if isinstance(role, str) else "?"
    css = role_text if role_text in ("system", "user", "assistant", "tool") else "unknown"
    out = [f'<article class="msg role-{css}" id="{_esc(anchor)}">']
    head = f'<span class="role">{_esc(role_text)}</span> <span>#{index}</span>'
    if isinstance(message.get("name"), str):
        head += f" <span>{_esc(message['name'])}</span>"
    out.append(f'<div class="head">{head}</div>')
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        out.append(
            '<details class="reasoning"><summary>Reasoning</summary>'
            f'<div class="text">{_esc(reasoning)}</div></details>'
        )
    body = _render_content(message.get("content"))
    if role == "tool":
        call_id = message.get("tool_call_id", "")
        out.append(
            f'<details class="tool-result"><summary>Tool result <span class="muted">'
            f"{_esc(call_id)}</span></summary>{body}</details>"
        )
    elif message.get("content") is not None or not message.get("tool_calls"):
        out.append(body)
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        out.append(f'<div class="text refusal">{_esc(refusal)}</div>')
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        out.extend(_render_tool_call(call) for call in calls)
    internal = {k: v for k, v in message.items() if k not in _SHOWN_FIELDS}
    if internal:
        out.append('<dl class="internal">')
        for key in sorted(internal):
            value = json.dumps(internal[key], ensure_ascii=False, sort_keys=True)
            out.append(f"<dt>{_esc(key)}</dt><dd>{_esc(value)}</dd>")
        out.append("</dl>")
    out.append("</article>")
    return "\n".join(out)


def export_html(record: SessionRecord) -> str:
    """The HTML export of a session: one self-contained, script-free page.

    Every stored string goes through :func:`html.escape`; images are shown
    only when embedded as base64 raster ``data:`` URLs; remote URLs appear
    as text and are never loaded.
    """
    info = record.info
    title = info.name or f"Session {info.id}"
    meta_rows = [
        ("Session id", info.id),
        ("Created", _iso(info.created_at)),
        ("Updated", _iso(info.updated_at)),
        ("Model", info.model or "unknown"),
        ("Context window", f"{info.context_window:,} tokens" if info.context_window else "unknown"),
        ("Working directory", info.working_directory or "unknown"),
        ("Messages", str(info.message_count)),
    ]
    if record.billing:
        cost = sum(b.cost_usd for b in record.billing)
        tokens = sum(b.prompt_tokens + b.completion_tokens for b in record.billing)
        meta_rows.append(("Usage", f"{tokens:,} tokens, ${cost:.4f}"))
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="agentmem">',
        f"<title>{_esc(title)}</title>",
        f"<style>\n{_CSS}\n</style>",
        "</head>",
        "<body>",
        '<header class="session">',
        f"<h1>{_esc(title)}</h1>",
        '<dl class="meta">',
    ]
    out.extend(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in meta_rows)
    out.append("</dl>")
    if record.quarantined:
        seqs = ", ".join(str(s) for s in record.quarantined)
        out.append(f'<p class="refusal">Damaged messages were quarantined: seq {_esc(seqs)}.</p>')
    out.append("</header>")
    out.append("<main>")
    out.extend(_render_message(i, m, f"m{i}") for i, m in enumerate(record.messages))
    out.append("</main>")
    if record.threads:
        out.append("<section><h2>Side threads</h2>")
        for t, thread_id in enumerate(sorted(record.threads)):
            messages = record.threads[thread_id]
            out.append(
                f"<details><summary>Thread {_esc(thread_id)} "
                f'<span class="muted">({len(messages)} messages)</span></summary>'
            )
            out.extend(_render_message(i, m, f"t{t}-{i}") for i, m in enumerate(messages))
            out.append("</details>")
        out.append("</section>")
    if record.billing:
        out.append("<section><h2>Billing</h2><table>")
        out.append(
            "<tr><th>At</th><th>Kind</th><th>Model</th><th>Prompt</th><th>Completion</th>"
            "<th>Cost (USD)</th></tr>"
        )
        for b in record.billing:
            cells = (
                _iso(b.at),
                b.kind,
                b.model or "",
                str(b.prompt_tokens),
                str(b.completion_tokens),
                f"{b.cost_usd:.6f}",
            )
            out.append("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in cells) + "</tr>")
        out.append("</table></section>")
    if record.state:
        out.append(
            "<section><details><summary>Session state</summary>"
            f"<pre>{_esc(_pretty_json(record.state))}</pre></details></section>"
        )
    out.append("</body>")
    out.append("</html>")
    return "\n".join(out) + "\n"
