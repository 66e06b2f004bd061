"""One semantic memory row as read from either engine, and the codecs around it.

:class:`Row` is what every query of :mod:`agentmem.semantic._store` returns, from
SQLite (text columns read as bytes through ``CAST AS BLOB``, so a byte damaged in
place costs one row) or from PostgreSQL (text columns as ``str``: the server checks
their encoding on the way in). Also the fact's dedupe hash, the vector blob codec and
the cosine used to score vectors in the client.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import sqlite3
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from agentmem.semantic._common import normalise_text

__all__ = [
    "COLUMNS",
    "NAMES",
    "Report",
    "Row",
    "cosine",
    "decode_row",
    "decode_vector",
    "encode_vector",
    "fact_hash",
    "metadata_json",
    "read_row",
    "text_of",
]

NAMES = (
    "docid",
    "id",
    "user_id",
    "agent_id",
    "run_id",
    "text",
    "hash",
    "metadata",
    "vector",
    "created_at",
    "updated_at",
)
# Text columns are read as bytes and decoded here: a byte damaged in place (which SQLite
# cannot notice) makes one row unreadable, not every query that meets it.
COLUMNS = ", ".join(
    name if name in ("docid", "vector") else f"CAST({name} AS BLOB)" for name in NAMES
)


def text_of(value: object) -> str:
    """A text column as read (bytes from SQLite's ``CAST AS BLOB``, str from PostgreSQL)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8")
    raise TypeError(f"a text column is {type(value).__name__}")


Report = Callable[[str], None]
"""Told what is wrong with a damaged row (``"memory row 12: ..."``), which is then left out."""


class Row(NamedTuple):
    """One stored memory as read from ``memories``."""

    docid: int
    id: str
    user_id: str
    agent_id: str | None
    run_id: str | None
    text: str
    hash: str
    metadata: dict[str, Any]
    vector: bytes | None
    created_at: str
    updated_at: str


_TEXT_COLUMNS = ("id", "user_id", "agent_id", "run_id", "text", "hash", "metadata")


def decode_row(raw: Sequence[Any]) -> Row | str:
    """The row, or what is wrong with it (a column that is not UTF-8, metadata not an object)."""
    texts: list[str] = []
    for index, value in enumerate(raw[1:11], start=1):
        if index == 8:
            continue  # the vector
        name = _TEXT_COLUMNS[index - 1] if index <= 7 else ("created_at", "updated_at")[index - 9]
        if isinstance(value, bytes):  # SQLite, through CAST AS BLOB
            try:
                texts.append(value.decode("utf-8"))
            except UnicodeDecodeError as exc:
                return f"column {name!r} is not UTF-8 (byte {exc.start})"
        elif isinstance(value, str):  # PostgreSQL
            texts.append(value)
        else:
            return f"column {name!r} is {type(value).__name__}, not text"
    ident, user, agent, run, text, digest, meta, created, updated = texts
    try:
        metadata = json.loads(meta)
    except ValueError as exc:
        return f"column 'metadata' is not JSON ({exc})"
    if not isinstance(metadata, dict):
        return "column 'metadata' is not a JSON object"
    vector = raw[8]
    return Row(
        int(raw[0]),
        ident,
        user,
        agent or None,
        run or None,
        text,
        digest,
        metadata,
        None if vector is None else bytes(vector),
        created,
        updated,
    )


def read_row(raw: Sequence[Any], report: Report | None) -> Row | None:
    """The row; a damaged one is told to ``report`` and left out (``None``), or, without
    ``report``, raised as :class:`sqlite3.DatabaseError` (the caller maps it)."""
    row = decode_row(raw)
    if isinstance(row, Row):
        return row
    if report is None:
        raise sqlite3.DatabaseError(f"malformed memory row {raw[0]}: {row}")
    report(f"memory row {raw[0]}: {row}; left out of the results and left in place")
    return None


def metadata_json(metadata: Mapping[str, Any]) -> str:
    """The ``metadata`` column: the object as JSON, keys sorted."""
    return json.dumps(dict(metadata), ensure_ascii=False, sort_keys=True)


def fact_hash(text: str) -> str:
    """The dedupe key of a statement: SHA-256 of its normalised, case-folded text."""
    return hashlib.sha256(normalise_text(text).casefold().encode("utf-8")).hexdigest()


def encode_vector(vector: Sequence[float]) -> bytes:
    """A vector as little-endian float32 bytes (the ``vector`` column)."""
    return struct.pack(f"<{len(vector)}f", *vector)


def decode_vector(blob: bytes) -> tuple[float, ...]:
    """The inverse of :func:`encode_vector` (empty for a blob of the wrong size)."""
    if len(blob) % 4:
        return ()
    return struct.unpack(f"<{len(blob) // 4}f", blob)


def cosine(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cosine similarity, or ``None`` when the lengths differ or a vector is zero."""
    if len(a) != len(b) or not a:
        return None
    # map/hypot run in C: several times faster than a generator over zip.
    dot = float(sum(map(operator.mul, a, b)))
    norm = math.hypot(*a) * math.hypot(*b)
    if not norm or not math.isfinite(dot / norm):
        return None
    return max(-1.0, min(1.0, dot / norm))
