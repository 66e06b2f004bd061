"""The seam between :class:`~.sessions.SessionStore` and its database.

A :class:`StoreEngine` owns the store's connections: it opens them (with the
recovery and migrations its database needs), runs each write and read in a
transaction whose database errors come out as
:class:`~agentmem.errors.StorageError`, hands out the session locks, and
closes. Inside a transaction the store, the writer and the loader see a
:class:`SessionTables`: every statement of the sessions schema behind named
methods, with rows crossing as plain tuples and ``bytes``.

Two engines implement them: :class:`~.sqlite_engine.SqliteEngine` (one SQLite file,
:class:`~.sql.SessionsSQL`) and :class:`~.pg.PgEngine` (PostgreSQL,
:class:`~.pg.PgSessionsSQL`). Nothing above this seam knows which one it runs on.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentmem.session_store.records import Row

if TYPE_CHECKING:
    from agentmem.session_store.lock import SessionLock

__all__ = ["SessionTables", "StoreEngine"]


class SessionTables(Protocol):
    """The statements of a sessions store, inside one transaction its engine opened.

    No method commits, and none validates beyond what the schema enforces. The
    ``recall_*`` methods serve the recall index, where the engine has one.
    """

    @property
    def conn(self) -> Any:
        """The engine's connection (SQLite) or cursor (PostgreSQL) the statements run on."""
        ...

    # -- sessions
    def exists(self, sid: str) -> bool: ...
    def info_row(self, sid: str) -> tuple[Any, ...] | None: ...
    def list_rows(self, limit: int | None) -> list[tuple[Any, ...]]: ...
    def create(
        self,
        sid: str,
        name: str | None,
        now: float,
        working_directory: str | None,
        model: str | None,
        context_window: int | None,
    ) -> None: ...
    def delete(self, sid: str) -> bool: ...
    def rename(self, sid: str, name: str | None) -> bool: ...
    def touch(self, sid: str, now: float) -> bool: ...
    def state(self, sid: str) -> bytes: ...
    def save_state(self, sid: str, text: str, now: float) -> bool: ...
    def reset_state(self, sid: str) -> None: ...

    # -- messages and side threads (thread_id None is the main history)
    def next_seq(self, sid: str, thread_id: str | None = None) -> int: ...
    def insert_messages(self, sid: str, start: int, rows: Sequence[Row]) -> None: ...
    def insert_thread_rows(
        self, sid: str, thread_id: str, start: int, rows: Sequence[Row]
    ) -> None: ...
    def replace_message(self, sid: str, seq: int, row: Row) -> bool: ...
    def set_crc(self, sid: str, thread_id: str | None, seq: int, crc: int | None) -> None: ...
    def truncate(self, sid: str, start: int) -> None: ...
    def message_rows(self, sid: str) -> list[tuple[Any, bytes, Any]]: ...
    def thread_rows(self, sid: str) -> list[tuple[Any, Any, bytes, Any]]: ...
    def delete_row(self, sid: str, thread_id: str | None, seq: Any) -> None: ...
    def renumber(self, sid: str, thread_id: str | None, kept: Sequence[Any]) -> None: ...
    def quarantine(
        self, sid: str, thread_id: str | None, seq: Any, body: bytes, reason: str, now: float
    ) -> None: ...

    # -- billing
    def insert_billing(self, sid: str, values: tuple[Any, ...]) -> None: ...
    def billing_rows(self, sid: str) -> list[tuple[Any, ...]]: ...
    def delete_billing(self, row_id: int) -> None: ...

    # -- the recall index
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
    ) -> list[tuple[Any, ...]]: ...
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
    ) -> list[tuple[Any, ...]]: ...
    def recall_stats(self, terms: Sequence[str]) -> tuple[dict[str, int], int, int, int]: ...
    def recall_session_sizes(self, sids: Sequence[str]) -> dict[str, int]: ...
    def recall_queued(self) -> bool: ...
    def recall_texts(self, sid: str, first: int, last: int) -> dict[int, Any]: ...
    def recall_problems(self) -> list[str]: ...


class StoreEngine(Protocol):
    """A sessions store's database: its connections, transactions and session locks."""

    @property
    def path(self) -> Path | None:
        """The database file, or ``None`` (in memory, or not a file)."""
        ...

    @property
    def where(self) -> str:
        """The database, for messages (a path, ``":memory:"``, a DSN without password)."""
        ...

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        ...

    def write(
        self, action: str, *, session: str | None = None
    ) -> AbstractContextManager[SessionTables]:
        """One write transaction: committed when the block ends, rolled back on any
        exception; database errors become StorageError naming ``action``.

        ``session``: the session the write belongs to. An engine whose session locks
        live in the database runs it under the lock this process holds on it.
        """
        ...

    def read(self, action: str, *, snapshot: bool = False) -> AbstractContextManager[SessionTables]:
        """Reads; ``snapshot`` makes every read of the block see one consistent state."""
        ...

    def lock(self, session_id: str) -> SessionLock:
        """The session's lock, not yet taken (the store acquires it)."""
        ...

    def close(self) -> None:
        """Close the connections (idempotent); locks handed out stay held until released."""
        ...
