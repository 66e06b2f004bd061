"""Argument checks and shapes shared by the semantic memory clients (local and mem0).

Both clients implement :class:`~agentmem.protocols.MemoryClient` and must
refuse the same bad input the same way, send or store only what the user
said, and read scopes the same way. The rules live here once:

* **Scope.** ``user_id`` is a non-empty string (required for every call that
  takes a scope); ``agent_id`` and ``run_id`` are ``None`` or non-empty
  strings. A read (``search``/``get_all``) and ``delete_all`` *filter* by the
  ids given: ``user_id="u"`` alone covers every memory of user ``u``
  whatever its agent or run, ``agent_id="a"`` narrows it to agent ``a``'s.
  So ``delete_all`` deletes exactly what ``get_all`` with the same arguments
  lists, and never a memory of another user, agent or run.
* **User words only.** ``add`` takes a string (the user's own words) or a
  list of OpenAI-format message dicts, of which only real user turns count
  (:func:`~agentmem.messages.is_real_user`: role ``user``, not an injection
  such as a recalled ``<memory-context>`` block); content parts are reduced
  to their text. Assistant, tool and system content is never remembered.
* **Filters** are metadata equality on JSON scalars (string, number,
  boolean, null); **metadata** is a JSON object with string keys.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from agentmem._json import clean_value, sanitize_text, type_name
from agentmem._shape import content_text
from agentmem._validate import check_count
from agentmem.errors import AgentMemError, InvalidArgumentError
from agentmem.messages import is_real_user

__all__ = [
    "HistoryEntry",
    "Scope",
    "check_filters",
    "check_infer",
    "check_limit",
    "check_memory_id",
    "check_metadata",
    "check_query",
    "check_scope",
    "check_threshold",
    "matches_filters",
    "normalise_text",
    "user_texts",
]

FilterValue = str | int | float | bool | None


@dataclass(frozen=True)
class HistoryEntry:
    """One change of a memory, as ``history(memory_id)`` returns it."""

    memory_id: str
    """The memory changed."""
    event: str
    """``"ADD"``, ``"UPDATE"`` or ``"DELETE"``."""
    old_memory: str | None
    """The text before the change (``None`` for ``ADD``)."""
    new_memory: str | None
    """The text after the change (``None`` for ``DELETE``)."""
    at: str
    """When, ISO-8601 UTC."""


class Scope(NamedTuple):
    """Who a memory belongs to: a user, optionally narrowed to an agent and a run."""

    user_id: str
    agent_id: str | None = None
    run_id: str | None = None


def _optional_id(value: object, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{name} must be a non-empty string or None, got {value!r}")
    return value


def check_scope(user_id: object, agent_id: object = None, run_id: object = None) -> Scope:
    """The scope of a call; ``user_id`` is required.

    Raises:
        InvalidArgumentError: ``user_id`` missing or empty, or an id that is not a string.
    """
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidArgumentError(
            f"user_id is required (a non-empty string) to scope semantic memory, got {user_id!r}"
        )
    return Scope(user_id, _optional_id(agent_id, "agent_id"), _optional_id(run_id, "run_id"))


def check_memory_id(memory_id: object) -> str:
    """A memory id: a non-empty string."""
    if not isinstance(memory_id, str) or not memory_id:
        raise InvalidArgumentError(f"memory_id must be a non-empty string, got {memory_id!r}")
    return memory_id


def check_query(query: object) -> str:
    """A search query: a string."""
    if not isinstance(query, str):
        raise InvalidArgumentError(f"query must be a string, got {type(query).__name__}")
    return query


def check_infer(infer: object) -> bool:
    """``add``'s ``infer`` flag: a bool."""
    if not isinstance(infer, bool):
        raise InvalidArgumentError(f"infer must be a bool, got {type(infer).__name__}")
    return infer


def check_limit(limit: object, name: str = "limit") -> int:
    """A positive int (:func:`agentmem._validate.check_count`)."""
    return check_count(name, limit, positive=True)


def check_threshold(threshold: object) -> float | None:
    """``None`` or a finite number (scores are in [0, 1], so useful values are too)."""
    if threshold is None:
        return None
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not math.isfinite(threshold)
    ):
        raise InvalidArgumentError(f"threshold must be a number or None, got {threshold!r}")
    return float(threshold)


def check_filters(filters: object) -> dict[str, FilterValue]:
    """Metadata equality filters: string keys, JSON scalar values.

    Raises:
        InvalidArgumentError: not a mapping, a key that is not a non-empty
            string, or a value that is a list, a dict or a non-finite float.
    """
    if filters is None:
        return {}
    if not isinstance(filters, Mapping):
        raise InvalidArgumentError(f"filters must be a mapping or None, got {type_name(filters)}")
    out: dict[str, FilterValue] = {}
    for key, value in filters.items():
        if not isinstance(key, str) or not key:
            raise InvalidArgumentError(f"filters keys must be non-empty strings, got {key!r}")
        if value is not None and not isinstance(value, str | int | float | bool):
            raise InvalidArgumentError(
                f"filters[{key!r}] must be a string, number, boolean or None "
                f"(equality on a metadata value), got {type_name(value)}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidArgumentError(f"filters[{key!r}] must be finite, got {value!r}")
        out[key] = value
    return out


def _same(a: Any, b: Any) -> bool:
    """JSON equality that keeps booleans apart from numbers (``True`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def matches_filters(metadata: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` holds every key of ``filters`` with an equal value."""
    return all(key in metadata and _same(metadata[key], value) for key, value in filters.items())


def check_metadata(metadata: object) -> dict[str, Any]:
    """A JSON-safe deep copy of ``metadata`` (``{}`` for ``None``).

    Raises:
        InvalidArgumentError: not a mapping, or a value that is not plain JSON.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidArgumentError(f"metadata must be a mapping or None, got {type_name(metadata)}")
    try:
        cleaned = clean_value(dict(metadata), "metadata")
    except AgentMemError as exc:
        raise InvalidArgumentError(f"metadata is not plain JSON: {exc}") from exc
    if not isinstance(cleaned, dict):  # pragma: no cover - a dict stays a dict
        raise InvalidArgumentError("metadata must be a JSON object")
    return cleaned


def normalise_text(text: str) -> str:
    """``text`` with its whitespace runs collapsed to one space and trimmed (lone surrogates
    replaced), the form in which a statement is stored and compared."""
    return " ".join(sanitize_text(text).split())


def user_texts(messages: object) -> list[str]:
    """The user's own words in ``messages``, one string per user turn, as written.

    Args:
        messages: A string (the user's words) or a sequence of message dicts.

    Returns:
        The texts of the real user turns that hold more than whitespace, in
        order, not yet normalised (a scrubber sees them with their line breaks).

    Raises:
        InvalidArgumentError: ``messages`` is neither, an item is not a mapping, or a
            user turn's ``content`` is not a string, a list of parts or ``None``.
    """
    if isinstance(messages, str):
        return [messages] if messages.strip() else []
    if isinstance(messages, Mapping) or not isinstance(messages, Sequence):
        raise InvalidArgumentError(
            f"messages must be a string or a list of message dicts, got {type_name(messages)}"
        )
    out: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidArgumentError(
                f"messages[{index}] must be a message dict, got {type_name(message)}"
            )
        if not is_real_user(message):
            continue
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            # Not silently skipped: the user's words would be lost without a word.
            raise InvalidArgumentError(
                f"messages[{index}]['content'] must be a string, a list of content parts "
                f"or None, got {type_name(content)}"
            )
        text = sanitize_text(content_text(content))
        if text.strip():
            out.append(text)
    return out
