"""The named records :class:`~agentmem.session_store.SessionStore`'s ``recall_*`` reads return.

:mod:`agentmem.recall` ranks from these; they carry decoded text (the index
stores raw bytes so a message with invalid UTF-8 never breaks a search: it is
decoded with replacement here, once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["RecallRow", "RecallStats"]


class RecallRow(NamedTuple):
    """One message the recall index matched (``SessionStore.recall_rows``)."""

    session_id: str
    seq: int
    """Its position in its session's history (``RecallHit.index``)."""
    role: str
    bm25: float
    """FTS5's BM25 score, negated: higher is better."""
    text: str
    """Its indexed text."""
    session_name: str | None
    created_at: float
    """When its session was created (epoch seconds)."""
    updated_at: float
    """When its session was last updated (epoch seconds)."""
    length: int
    """Its length in index tokens."""
    frequencies: dict[str, int] | None = None
    """How many times it holds each asked term (``recall_rows`` given term weights: from the
    postings), or ``None`` (``recall_rows``: count them in ``text``)."""

    @classmethod
    def from_sql(cls, row: Sequence[Any]) -> RecallRow:
        """The record of one raw row of ``SessionsSQL.recall_rows`` (or ``recall_top``,
        whose rows end with the frequencies), decoded."""
        sid, seq, role, score, text, name, created, updated, length = row[:9]
        # tuple.__new__ and bytes.decode inline: as cls(...) and decoded(), a quarter faster
        # (150 rows a search).
        return tuple.__new__(
            cls,
            (
                str(sid),
                int(seq),
                role.decode("utf-8", "replace") if type(role) is bytes else decoded(role),
                float(score),
                text.decode("utf-8", "replace") if type(text) is bytes else decoded(text),
                None
                if name is None
                else name.decode("utf-8", "replace")
                if type(name) is bytes
                else decoded(name),
                float(created),
                float(updated),
                int(length),
                dict(row[9]) if len(row) > 9 else None,
            ),
        )


class RecallStats(NamedTuple):
    """BM25's corpus statistics of the recall index (``SessionStore.recall_stats``)."""

    docs: dict[str, int]
    """How many messages hold each asked term (terms no message holds left out)."""
    messages: int
    """Messages indexed (0 for an empty index)."""
    tokens: int
    """Tokens in them."""
    sessions: int
    """Sessions in the store."""


def decoded(value: object) -> str:
    """A raw index value as text (``None``: empty; bytes: UTF-8 with replacement)."""
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
