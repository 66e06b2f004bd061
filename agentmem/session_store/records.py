"""What a sessions store hands out and takes in: records, argument checks, row codecs.

Everything here is plain data and pure functions, shared by the writer,
the store and the export, and free of SQL: a second backend reuses it as is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from agentmem.errors import InvalidArgumentError, InvalidMessageError
from agentmem.messages import Message

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "BillingRecord",
    "SessionInfo",
    "SessionRecord",
]

FORMAT_NAME: Final = "agentmem.sessions"
"""The ``meta.format`` of a sessions database."""

FORMAT_VERSION: Final = 1
"""The sessions database version this code writes and the newest it reads."""

EXPORT_FORMAT: Final = "agentmem.session-export"
"""The ``format`` of a JSON session export."""

EXPORT_VERSION: Final = 1
"""The ``version`` of a JSON session export."""

_SESSION_ID_RE: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")


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


# --------------------------------------------------------------------------- checks and codecs


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
