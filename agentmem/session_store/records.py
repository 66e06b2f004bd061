"""What a sessions store hands out and takes in: records, argument checks, row codecs.

Everything here is plain data and pure functions, shared by the writer,
the store and the export, and free of SQL: a second backend reuses it as is.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from agentmem.errors import InvalidArgumentError, InvalidMessageError
from agentmem.history import ValidatedMessages
from agentmem.messages import Message, normalize_message

Row = tuple[str, str, int | None]
"""A message row as written: ``(role, body as JSON text, crc or None)``."""

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

FORMAT_VERSION: Final = 6
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
    damaged: tuple[str, ...] = ()
    """Columns whose stored value was unreadable (bad UTF-8, wrong type): each is shown as
    ``None`` (timestamps as ``0.0``) and logged on ``agentmem.storage``; the row is kept."""


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
    cached_prompt_tokens: int = 0
    """Part of ``prompt_tokens`` read from the provider's prompt cache (billed at a discount)."""
    cache_write_tokens: int = 0
    """Part of ``prompt_tokens`` written to the prompt cache (Anthropic bills it at a premium)."""


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
    repaired: list[Any] = field(default_factory=list)
    """Stored ``seq`` values of message rows whose position was damaged (a gap, a duplicate,
    a changed or non-integer ``seq``) and was repaired during this load: put back where their
    checksum says they belong, or, without one, kept in stored order."""
    checksum_failed: list[int] = field(default_factory=list)
    """Seqs of message rows whose checksum failed but whose body is still a valid message:
    kept, with a copy in the ``quarantine`` table as evidence."""
    billing_quarantined: int = 0
    """How many billing rows had unreadable columns and were moved to quarantine."""
    validated: bool = True
    """Whether every message is in canonical form (checked when written or during this load),
    so a :class:`~agentmem.history.MessageHistory` may take them without re-validating."""

    def reports(self) -> dict[str, Any]:
        """What loading found damaged and quarantined or repaired: the non-empty reports only."""
        found: dict[str, Any] = {
            "quarantined": self.quarantined,
            "repaired": self.repaired,
            "checksum_failed": self.checksum_failed,
            "quarantined_threads": self.quarantined_threads,
            "billing_quarantined": self.billing_quarantined,
            "state_quarantined": self.state_quarantined,
            "damaged_columns": list(self.info.damaged),
        }
        return {key: value for key, value in found.items() if value}


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
    if value is not None and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(
                f"{name} is not valid Unicode text (a lone surrogate at position {exc.start})"
            ) from None
    return value


def _encode_message(
    message: object, index: int, *, canonical: bool = False
) -> tuple[str, bytes, bool]:
    """``(role, body, canonical)`` for one message; the body is its orjson serialisation.

    The message must pass :func:`~agentmem.messages.normalize_message` (the rule a row is
    held to when it is read back, so nothing written is quarantined on load).
    ``canonical``: it is exactly what ``normalize_message`` makes of it (always so for
    messages coming from a history), so its row carries a checksum and is loaded without
    validating it again. With ``canonical=True`` (messages a history hands over as
    :class:`~agentmem.history.ValidatedMessages`) that is known and not checked twice.
    """
    if not isinstance(message, Mapping):
        raise InvalidMessageError(
            f"a message must be a dict, got {type(message).__name__}", index=index
        )
    role = message.get("role")
    if not isinstance(role, str):
        raise InvalidMessageError("role must be a string", index=index, field="role")
    if canonical:
        body = orjson.dumps(message)  # a history's own message: validated when appended
        return role, body, True
    try:
        normalized = normalize_message(message)
    except InvalidMessageError as exc:
        raise InvalidMessageError(exc.reason, index=index, field=exc.field) from exc
    try:
        body = orjson.dumps(message if isinstance(message, dict) else dict(message))
    except orjson.JSONEncodeError as exc:
        raise InvalidMessageError(f"not JSON-serialisable: {exc}", index=index) from exc
    return role, body, len(normalized) == 1 and normalized[0] == message


def _encode_messages(messages: object) -> list[tuple[str, bytes, bool]]:
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidArgumentError(
            f"messages must be a sequence of dicts, got {type(messages).__name__}"
        )
    canonical = type(messages) is ValidatedMessages  # validated by the history already
    return [_encode_message(m, i, canonical=canonical) for i, m in enumerate(messages)]


def row_crc(seq: int, body: bytes) -> int:
    """The checksum stored with a canonical message row: CRC-32 of its body, seeded with its seq.

    Seeding with the seq makes a row that moved (a damaged ``seq``) fail its checksum, and
    tells where it belongs.
    """
    return zlib.crc32(body, seq & 0xFFFFFFFF)


def _rows_at(start: int, encoded: Sequence[tuple[str, bytes, bool]]) -> list[Row]:
    """Rows ready to store at seqs ``start``..., checksummed when canonical."""
    return [
        (role, body.decode("utf-8"), row_crc(start + i, body) if canonical else None)
        for i, (role, body, canonical) in enumerate(encoded)
    ]


def _iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(value: Any) -> tuple[str | None, bool]:
    """A text column read raw: ``(text, True)``, or ``(None, False)`` when unreadable."""
    if value is None or type(value) is str:
        return value, True
    if type(value) is bytes:
        try:
            return value.decode("utf-8"), True
        except UnicodeDecodeError:
            return None, False
    return None, False


def _time(value: Any) -> tuple[float, bool]:
    if type(value) in (int, float) and math.isfinite(value):
        return float(value), True
    return 0.0, False


def _info_from_row(row: Sequence[Any]) -> SessionInfo:
    """A :class:`SessionInfo` from a raw row; unreadable columns are named in ``damaged``."""
    damaged: list[str] = []
    sid, ok = _text(row[0])
    if not ok or sid is None:
        damaged.append("id")
        raw = row[0] if type(row[0]) is bytes else repr(row[0]).encode()
        sid = raw.decode("utf-8", "backslashreplace")
    texts: dict[str, str | None] = {}
    for name, value in (("name", row[1]), ("working_directory", row[4]), ("model", row[5])):
        texts[name], ok = _text(value)
        if not ok:
            damaged.append(name)
    created_at, ok = _time(row[2])
    if not ok:
        damaged.append("created_at")
    updated_at, ok = _time(row[3])
    if not ok:
        damaged.append("updated_at")
    window = row[6]
    if window is not None and (type(window) is not int or window < 1):
        damaged.append("context_window")
        window = None
    return SessionInfo(
        id=sid,
        name=texts["name"],
        created_at=created_at,
        updated_at=updated_at,
        working_directory=texts["working_directory"],
        model=texts["model"],
        context_window=window,
        message_count=int(row[7]) if type(row[7]) is int else 0,
        damaged=tuple(damaged),
    )


def _billing_from_row(row: Sequence[Any]) -> tuple[BillingRecord | None, str]:
    """A :class:`BillingRecord` from a raw row ``(id, at, kind, model, ...)``, or a reason."""
    _, at, kind, model, prompt, completion, cost, cached, written = row
    at_value, ok = _time(at)
    if not ok:
        return None, f"at is {at!r}"
    kind_text, ok = _text(kind)
    if not ok or not kind_text:
        return None, f"kind is {kind!r}"
    model_text, ok = _text(model)
    if not ok:
        return None, f"model is {model!r}"
    for name, count in (
        ("prompt_tokens", prompt),
        ("completion_tokens", completion),
        ("cached_prompt_tokens", cached),
        ("cache_write_tokens", written),
    ):
        if type(count) is not int or count < 0:
            return None, f"{name} is {count!r}"
    cost_value, ok = _time(cost)
    if not ok:
        return None, f"cost_usd is {cost!r}"
    return (
        BillingRecord(
            at=at_value,
            kind=kind_text,
            model=model_text,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost_usd=cost_value,
            cached_prompt_tokens=cached,
            cache_write_tokens=written,
        ),
        "",
    )
