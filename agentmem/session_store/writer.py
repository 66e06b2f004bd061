"""SessionWriter: a session's changes, one transaction each, before the history applies them.

The writer is built from what it uses, not from the store: a ``transaction``
callable (one write transaction of the store: its lock, rollback on any
exception, SQLite errors turned into :class:`~agentmem.errors.StorageError`)
and the store's ``clock``. So this module imports nothing of
:mod:`agentmem.session_store.sessions`, which builds writers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import orjson

from agentmem._validate import check_count
from agentmem.errors import InvalidArgumentError, SessionClosedError, SessionNotFoundError
from agentmem.session_store.engine import SessionTables
from agentmem.session_store.records import (
    BillingRecord,
    _check_optional_str,
    _encode_message,
    _encode_messages,
    _rows_at,
)

if TYPE_CHECKING:
    from agentmem.history import HistoryObserver

__all__ = ["TOUCH_INTERVAL_S", "SessionWriter", "Transaction"]

Transaction = Callable[[str], AbstractContextManager[SessionTables]]
"""``transaction(action)``: one write transaction of the store, committed when the block
ends, rolled back on any exception; ``action`` names the write in a StorageError."""

TOUCH_INTERVAL_S = 1.0
"""Appends move a session's ``updated_at`` at most once per this many seconds (every other
write moves it each time), so ``updated_at`` is the time of the last write to within it."""


class SessionWriter:
    """Persists one session's changes; a :class:`~agentmem.history.HistoryObserver`.

    Obtained from :meth:`SessionStore.writer` (which passes its write
    ``transaction`` and its ``clock``). Hand it to a
    :class:`~agentmem.history.MessageHistory` as ``observer`` and every
    change of the history is written, in one transaction, before the
    history applies it; if the write fails the history stays as it was.

    Every method is durable when it returns (per the store's durability),
    raises :class:`SessionNotFoundError` when the session was deleted
    meanwhile, and turns SQLite failures into
    :class:`~agentmem.errors.StorageError` after rolling back.
    """

    def __init__(
        self, session_id: str, *, transaction: Transaction, clock: Callable[[], float]
    ) -> None:
        self._transaction = transaction
        self._clock = clock
        self._id = session_id
        self._closed = False
        self._touched_at = -math.inf

    def close(self) -> None:
        """Refuse every later write with :class:`~agentmem.errors.SessionClosedError`.

        A session closes its writer when it releases the session lock: a
        write after that would race the session's next owner.
        """
        self._closed = True

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @contextmanager
    def _write(self, action: str) -> Iterator[SessionTables]:
        if self._closed:
            raise SessionClosedError(f"cannot {action}: the writer of session {self._id} is closed")
        with self._transaction(action) as sql:
            yield sql

    @property
    def session_id(self) -> str:
        """The session this writer writes."""
        return self._id

    def _touch(self, sql: SessionTables, *, throttled: bool = False) -> None:
        """Set ``updated_at`` (and check that the session still exists).

        ``throttled`` (appends): at most once per :data:`TOUCH_INTERVAL_S` of the store's
        clock. Touching rewrites the session row and its ``updated_at`` index entry, two
        pages in every commit on top of the new message; between touches the foreign key
        of the inserted rows checks that the session still exists
        (:meth:`SessionTables.insert_messages` raises :class:`SessionNotFoundError`).
        """
        now = self._clock()
        if throttled and 0 <= now - self._touched_at < TOUCH_INTERVAL_S:
            return  # the insert's foreign key still refuses a deleted session
        if not sql.touch(self._id, now):
            raise SessionNotFoundError(self._id)
        self._touched_at = now if throttled else -math.inf

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
        with self._write(f"append to session {self._id}") as sql:
            self._touch(sql, throttled=True)
            start = sql.next_seq(self._id)
            sql.insert_messages(self._id, start, _rows_at(start, rows))

    def on_replace(self, index: int, message: Mapping[str, Any]) -> None:
        """Replace the message at ``index`` (one row).

        Raises:
            InvalidArgumentError: the session has no message at ``index``.
            InvalidMessageError: ``message`` cannot be stored.
            SessionNotFoundError: the session no longer exists.
            StorageError: the write failed; nothing changed.
        """
        index = check_count("index", index)
        encoded = _encode_message(message, 0)
        with self._write(f"replace message {index} of session {self._id}") as sql:
            self._touch(sql)
            if not sql.replace_message(self._id, index, _rows_at(index, [encoded])[0]):
                count = sql.next_seq(self._id)
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
        start = check_count("start", start)
        rows = _encode_messages(tail)
        with self._write(f"rewrite session {self._id} from {start}") as sql:
            self._touch(sql)
            count = sql.next_seq(self._id)
            if start > count:
                raise InvalidArgumentError(
                    f"session {self._id} has {count} messages; cannot rewrite from {start}"
                )
            sql.truncate(self._id, start)
            sql.insert_messages(self._id, start, _rows_at(start, rows))

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
        text = _encode_state(state)
        with self._write(f"save the state of session {self._id}") as sql:
            if not sql.save_state(self._id, text, self._clock()):
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
        prompt = check_count("prompt_tokens", record.prompt_tokens)
        completion = check_count("completion_tokens", record.completion_tokens)
        cached = check_count("cached_prompt_tokens", record.cached_prompt_tokens)
        written = check_count("cache_write_tokens", record.cache_write_tokens)
        if cached + written > prompt:
            raise InvalidArgumentError(
                f"cached_prompt_tokens + cache_write_tokens ({cached} + {written}) exceed "
                f"prompt_tokens ({prompt}): the cached parts are part of the prompt"
            )
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
        with self._write(f"add billing to session {self._id}") as sql:
            self._touch(sql)
            sql.insert_billing(
                self._id,
                (
                    float(record.at),
                    record.kind,
                    model,
                    prompt,
                    completion,
                    float(record.cost_usd),
                    cached,
                    written,
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
        _check_thread_id(thread_id)
        rows = _encode_messages(messages)
        if not rows:
            return
        with self._write(f"append to thread {thread_id} of session {self._id}") as sql:
            self._touch(sql)
            start = sql.next_seq(self._id, thread_id)
            sql.insert_thread_rows(self._id, thread_id, start, _rows_at(start, rows))

    def save_state_and_threads(
        self, state: Mapping[str, Any], threads: Mapping[str, Sequence[Mapping[str, Any]]]
    ) -> None:
        """Append to side threads and replace the state, in one transaction.

        A session saves its YaRN side threads this way: the messages archived
        since its last save (O(their size); stored rows are never rewritten)
        with the state that lists the threads' order. Either both are written
        or, on any failure or kill, neither.

        Args:
            state: As for :meth:`save_state`.
            threads: Thread id -> messages to append after that thread's rows.

        Raises:
            InvalidArgumentError: ``state`` is not a JSON-serialisable mapping,
                or a thread id is not a non-empty string.
            InvalidMessageError: a message cannot be stored.
            SessionNotFoundError: the session no longer exists.
            StorageError: the write failed; the previous state and threads are intact.
        """
        encoded = [(_check_thread_id(tid), _encode_messages(ms)) for tid, ms in threads.items()]
        text = _encode_state(state)
        with self._write(f"save the state and threads of session {self._id}") as sql:
            if any(rows for _, rows in encoded):
                self._touch(sql)  # a deleted session is SessionNotFoundError, not a foreign key
            for thread_id, rows in encoded:
                if rows:
                    start = sql.next_seq(self._id, thread_id)
                    sql.insert_thread_rows(self._id, thread_id, start, _rows_at(start, rows))
            if not sql.save_state(self._id, text, self._clock()):
                raise SessionNotFoundError(self._id)

    def rename(self, name: str | None) -> None:
        """Set the session's name (``updated_at`` is left alone: renaming is not activity).

        Raises:
            SessionNotFoundError: the session no longer exists.
        """
        if self._closed:
            raise SessionClosedError(f"cannot rename: the writer of session {self._id} is closed")
        name = _check_optional_str(name, "name")
        with self._write(f"rename session {self._id}") as sql:
            if not sql.rename(self._id, name):
                raise SessionNotFoundError(self._id)

    def __repr__(self) -> str:
        return f"<SessionWriter {self._id!r}>"


def _check_thread_id(thread_id: Any) -> str:
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidArgumentError(f"thread_id must be a non-empty string, got {thread_id!r}")
    return thread_id


def _encode_state(state: Any) -> str:
    if not isinstance(state, Mapping):
        raise InvalidArgumentError(f"state must be a dict, got {type(state).__name__}")
    try:
        return orjson.dumps(state if isinstance(state, dict) else dict(state)).decode("utf-8")
    except orjson.JSONEncodeError as exc:
        raise InvalidArgumentError(f"state is not JSON-serialisable: {exc}") from exc


if TYPE_CHECKING:

    def _writer_is_an_observer(writer: SessionWriter) -> HistoryObserver:
        # mypy proves here that SessionWriter satisfies the HistoryObserver protocol.
        return writer
