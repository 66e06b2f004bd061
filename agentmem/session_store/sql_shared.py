"""The statements and methods the two sessions dialects share (SQLite and PostgreSQL).

:class:`SharedSessionsSQL` holds what is written the same way for both;
:class:`~agentmem.session_store.sql.SessionsSQL` (SQLite) and
:class:`~agentmem.session_store.pg.PgSessionsSQL` add what differs. Their
connections take the same ``?`` placeholders (the PostgreSQL cursor translates).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Generic, Protocol, TypeVar

from agentmem.session_store.records import Row

__all__ = ["SharedSessionsSQL"]


class _Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...


class _Connection(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> _Cursor: ...

    def executemany(self, sql: str, parameters: Any, /) -> Any: ...


_SQL_EXISTS: Final = "SELECT 1 FROM sessions WHERE id = ?"
_SQL_RENAME: Final = "UPDATE sessions SET name = ? WHERE id = ?"
_SQL_TOUCH: Final = "UPDATE sessions SET updated_at = ? WHERE id = ?"
_SQL_SAVE_STATE: Final = "UPDATE sessions SET state = ?, updated_at = ? WHERE id = ?"
_SQL_RESET_STATE: Final = "UPDATE sessions SET state = '{}' WHERE id = ?"
_SQL_INSERT_THREAD: Final = (
    "INSERT INTO threads (session_id, thread_id, seq, body, crc) VALUES (?, ?, ?, ?, ?)"
)
_SQL_SET_CRC: Final = "UPDATE messages SET crc = ? WHERE session_id = ? AND seq = ?"
_SQL_SET_THREAD_CRC: Final = (
    "UPDATE threads SET crc = ? WHERE session_id = ? AND thread_id = ? AND seq = ?"
)
_SQL_QUARANTINE: Final = (
    "INSERT INTO quarantine (session_id, thread_id, seq, body, reason, at) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_SQL_INSERT_BILLING: Final = (
    "INSERT INTO billing (session_id, at, kind, model, prompt_tokens, completion_tokens, "
    "cost_usd, cached_prompt_tokens, cache_write_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SQL_DELETE_BILLING: Final = "DELETE FROM billing WHERE id = ?"


_C = TypeVar("_C", bound=_Connection)


class SharedSessionsSQL(Generic[_C]):
    """The sessions SQL both dialects write the same way, over ``conn`` (see the module)."""

    __slots__ = ("conn",)

    def __init__(self, conn: _C) -> None:
        self.conn = conn

    def exists(self, sid: str) -> bool:
        return self.conn.execute(_SQL_EXISTS, (sid,)).fetchone() is not None

    def rename(self, sid: str, name: str | None) -> bool:
        return self.conn.execute(_SQL_RENAME, (name, sid)).rowcount > 0

    def touch(self, sid: str, now: float) -> bool:
        return self.conn.execute(_SQL_TOUCH, (now, sid)).rowcount > 0

    def save_state(self, sid: str, text: str, now: float) -> bool:
        return self.conn.execute(_SQL_SAVE_STATE, (text, now, sid)).rowcount > 0

    def reset_state(self, sid: str) -> None:
        self.conn.execute(_SQL_RESET_STATE, (sid,))

    def insert_thread_rows(self, sid: str, thread_id: str, start: int, rows: Sequence[Row]) -> None:
        self.conn.executemany(
            _SQL_INSERT_THREAD,
            [(sid, thread_id, start + i, body, crc) for i, (_, body, crc) in enumerate(rows)],
        )

    def set_crc(self, sid: str, thread_id: str | None, seq: int, crc: int | None) -> None:
        if thread_id is None:
            self.conn.execute(_SQL_SET_CRC, (crc, sid, seq))
        else:
            self.conn.execute(_SQL_SET_THREAD_CRC, (crc, sid, thread_id, seq))

    def quarantine(
        self,
        sid: str,
        thread_id: str | None,
        seq: Any,
        body: bytes,
        reason: str,
        now: float,
    ) -> None:
        self.conn.execute(_SQL_QUARANTINE, (sid, thread_id, seq, body, reason, now))

    def insert_billing(self, sid: str, values: tuple[Any, ...]) -> None:
        self.conn.execute(_SQL_INSERT_BILLING, (sid, *values))

    def delete_billing(self, row_id: int) -> None:
        self.conn.execute(_SQL_DELETE_BILLING, (row_id,))
