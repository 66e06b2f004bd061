"""Reading a session back: every row checked, damage quarantined or repaired, and reported.

Rows written by agentmem carry a checksum: ``crc = crc32(body, seq)``, set
by the writer only for messages that are already in canonical form (what
:func:`agentmem.messages.normalize_message` returns unchanged), so a row
whose checksum matches was validated when written and is loaded with one
``orjson.loads`` (the *trusted path*: a 100k-message session loads without
re-validating anything). Every other row takes the *checked path*:

* a row whose checksum is missing (written before checksums, or a
  non-canonical message written straight through a writer) is validated
  with :func:`~agentmem.messages.normalize_message`;
* a row whose checksum does not match was damaged after it was written:
  its body is validated, and its ``seq`` is tested against the missing
  positions (a checksum that matches at another ``seq`` proves where the
  row belongs, so a damaged ``seq`` is put back);
* a row that fails validation is moved to the ``quarantine`` table with
  its raw bytes and the reason;
* positions that are not exactly ``0..n-1`` (a gap, a duplicate, a
  non-integer ``seq``) are renumbered in order.

Nothing here writes: :func:`check_rows` returns a :class:`RowsCheck` saying
what the rows hold and which repairs they need; the store applies them in
one write transaction (:func:`apply_repairs`) and reports them.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from agentmem.errors import InvalidMessageError
from agentmem.messages import Message, normalize_message
from agentmem.session_store.engine import SessionTables
from agentmem.session_store.records import row_crc

__all__ = ["RowsCheck", "apply_repairs", "check_rows", "validate_body"]

_MASK: Final = 0xFFFFFFFF


def validate_body(body: bytes) -> tuple[Message | None, str, bool]:
    """``(message, "", canonical)`` for a row body, or ``(None, reason, False)``."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return None, f"body is not valid JSON: {exc}", False
    if not isinstance(value, dict):
        return None, f"body is a JSON {type(value).__name__}, not an object", False
    if not isinstance(value.get("role"), str):
        return None, "body has no string 'role'", False
    try:
        normalized = normalize_message(value)
    except InvalidMessageError as exc:
        return None, f"message fails validation: {exc}", False
    except (TypeError, ValueError, RecursionError) as exc:  # defensive: never a raw error
        return None, f"message fails validation: {exc}", False
    return value, "", len(normalized) == 1 and normalized[0] == value


@dataclass(slots=True)
class RowsCheck:
    """What one sequence of rows (the main history or one side thread) holds and needs."""

    messages: list[Message]
    """The messages in their repaired order."""
    canonical: bool = True
    """Whether every message is canonical (validated when written, or now)."""
    quarantine: list[tuple[Any, bytes, str]] = field(default_factory=list)
    """Rows to quarantine: (stored seq, raw body, reason)."""
    order: list[Any] | None = None
    """Stored seqs of the kept rows in their repaired order, when they must be renumbered."""
    moved: list[Any] = field(default_factory=list)
    """Stored seqs whose position was repaired (a damaged, out-of-range or duplicate seq)."""
    mismatched: list[Any] = field(default_factory=list)
    """Stored seqs whose checksum failed but whose body is a valid message (kept)."""
    noted: list[tuple[Any, bytes, str]] = field(default_factory=list)
    """Kept rows a copy of which goes to quarantine as evidence: (stored seq, body, reason)."""
    new_crcs: list[tuple[Any, int | None]] = field(default_factory=list)
    """(stored seq, checksum to store): rows checked now, whose checksum is set or refreshed."""

    @property
    def needs_write(self) -> bool:
        return bool(self.quarantine or self.noted or self.order is not None or self.new_crcs)

    @property
    def quarantined_seqs(self) -> list[int]:
        return [seq if type(seq) is int else -1 for seq, _, _ in self.quarantine]


def check_rows(rows: Sequence[tuple[Any, bytes, Any]]) -> RowsCheck:
    """Check rows ``(seq, body, crc)`` as read in ``seq`` order (see the module docstring).

    The trusted path runs in C loops (``map`` over ``zlib.crc32`` and
    ``orjson.loads``); callers reading a large session wrap it in
    :func:`agentmem._storage.gc.gc_paused`.
    """
    if not rows:
        return RowsCheck([])
    seqs, bodies, crcs = zip(*rows, strict=True)
    n = len(rows)
    if seqs == tuple(range(n)) and list(map(zlib.crc32, bodies, seqs)) == list(crcs):
        try:
            return RowsCheck(list(map(orjson.loads, bodies)))
        except orjson.JSONDecodeError:
            pass  # a checksum collision on a damaged body: let the checked path say so
    return _check_slowly(rows)


@dataclass(slots=True)
class _Entry:
    seq: Any
    body: bytes
    crc: Any
    message: Message
    trusted: bool
    canonical: bool
    key: float = 0.0


def _check_slowly(rows: Sequence[tuple[Any, bytes, Any]]) -> RowsCheck:
    result = RowsCheck([])
    entries: list[_Entry] = []
    for seq, body, crc in rows:
        trusted = type(seq) is int and crc is not None and crc == row_crc(seq, body)
        message: Message | None = None
        if trusted:
            try:
                message = orjson.loads(body)
            except orjson.JSONDecodeError:
                trusted = False
        canonical = trusted
        if not trusted:
            message, reason, canonical = validate_body(body)
            if message is None:
                result.quarantine.append((seq, body, reason))
                continue
        assert message is not None
        entries.append(_Entry(seq, body, crc, message, trusted, canonical))
    n = len(rows)
    taken = {e.seq for e in entries if e.trusted}
    free = [p for p in range(n) if p not in taken]
    for index, e in enumerate(entries):
        e.key = e.seq if e.trusted else math.inf
        if e.trusted:
            continue
        if e.crc is not None:
            # A checksum seeded with the true seq says where a row with a damaged seq belongs.
            home = next((p for p in free if row_crc(p, e.body) == e.crc), None)
            if home is not None:
                free.remove(home)
                e.key = home
                result.moved.append(e.seq)
                continue
            result.mismatched.append(e.seq)
            result.noted.append(
                (
                    e.seq,
                    e.body,
                    "checksum mismatch: the row changed after it was written; its body is "
                    "still a valid message and was kept",
                )
            )
        if type(e.seq) is int and 0 <= e.seq < n and e.seq not in taken:
            taken.add(e.seq)
            e.key = e.seq
        else:
            result.moved.append(e.seq)
            e.key = n + index  # out of range, duplicate or not an integer: keep the stored order
    entries.sort(key=lambda e: e.key)
    result.messages = [e.message for e in entries]
    result.canonical = all(e.canonical for e in entries)
    order = [e.seq for e in entries]
    if order != list(range(len(order))):
        result.order = order
    for position, e in enumerate(entries):
        if e.trusted and e.seq == position:
            continue
        crc = row_crc(position, e.body) if e.canonical else None
        if crc != e.crc:
            result.new_crcs.append((e.seq, crc))
    return result


def apply_repairs(
    sql: SessionTables, sid: str, thread_id: str | None, check: RowsCheck, now: float
) -> None:
    """Quarantine, renumber and re-checksum rows as ``check`` says, in the caller's transaction."""
    for seq, body, reason in check.quarantine:
        sql.quarantine(sid, thread_id, seq, body, reason, now)
        sql.delete_row(sid, thread_id, seq)
    for seq, body, reason in check.noted:
        sql.quarantine(sid, thread_id, seq, body, reason, now)
    if check.order is not None:
        sql.renumber(sid, thread_id, check.order)
    position = {s: i for i, s in enumerate(check.order)} if check.order is not None else None
    for seq, crc in check.new_crcs:
        new_seq = position[seq] if position is not None else seq
        sql.set_crc(sid, thread_id, new_seq, crc)
