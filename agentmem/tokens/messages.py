"""What one OpenAI-format message costs: the strings a provider bills, and the framing.

Costs follow OpenAI's published accounting for chat models -- 3 tokens per
message, 1 more for ``name``, 3 for reply priming -- plus 3 per tool call
and a flat :data:`IMAGE_TOKEN_ESTIMATE` for every image, audio or file
part. :func:`message_text_pieces` is the one place that decides which
strings of a message dict a provider bills, so internal bookkeeping keys
that ride along in the same dict are never counted. Every name here is
re-exported by :mod:`agentmem.tokens`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agentmem.protocols import TokenCounter

__all__ = [
    "IMAGE_TOKEN_ESTIMATE",
    "MEDIA_PART_TYPES",
    "MESSAGE_OVERHEAD_TOKENS",
    "NAME_OVERHEAD_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "TOOL_CALL_OVERHEAD_TOKENS",
    "count_message",
    "count_messages",
    "message_overhead",
    "message_text_pieces",
]

MESSAGE_OVERHEAD_TOKENS = 3
"""Tokens every chat message costs for its framing."""

NAME_OVERHEAD_TOKENS = 1
"""Extra tokens a message with a ``name`` costs."""

TOOL_CALL_OVERHEAD_TOKENS = 3
"""Framing tokens per tool call in an assistant message."""

REPLY_PRIMING_TOKENS = 3
"""Tokens that prime the assistant's reply, counted once per request."""

IMAGE_TOKEN_ESTIMATE = 765
"""Flat cost of one image, audio or file content part (a 1024x1024 high-detail image)."""

MEDIA_PART_TYPES = frozenset({"image_url", "image", "input_audio", "file"})
"""Content-part ``type`` values billed at :data:`IMAGE_TOKEN_ESTIMATE`."""


def _append_str(pieces: list[str], value: object) -> None:
    if isinstance(value, str) and value:
        pieces.append(value)


def _arguments_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if value is None:
        return None
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        return None


def _as_mapping(value: object) -> Mapping[str, Any] | None:
    """``value`` if it is a mapping (annotations are not trusted at runtime)."""
    return value if isinstance(value, Mapping) else None


def _content_parts(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def message_text_pieces(message: Mapping[str, Any]) -> list[str]:
    """Every string a provider bills for in one OpenAI-format message.

    Collected, in order: ``role``; ``content`` when it is a string, else the
    ``text`` of each text part (type ``"text"`` or no type), the ``refusal``
    of each refusal part, and bare string parts; ``refusal``; ``name``;
    ``reasoning_content``; for each tool call its ``id``, function ``name``
    and ``arguments`` (non-string arguments are serialized as compact JSON);
    and ``tool_call_id`` of a ``tool`` message. Every other key is ignored,
    so internal fields stored in the same dict cost nothing. Empty strings
    are dropped.

    Args:
        message: An OpenAI Chat Completions message dict. Odd shapes (a
            ``None`` content, a tool call without ``function``...) are
            tolerated; a non-mapping yields no pieces.

    Returns:
        The billed strings.
    """
    pieces: list[str] = []
    msg = _as_mapping(message)
    if msg is None:
        return pieces
    _append_str(pieces, msg.get("role"))
    content = msg.get("content")
    if isinstance(content, str):
        _append_str(pieces, content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                _append_str(pieces, part)
            elif isinstance(part, Mapping):
                kind = part.get("type")
                if kind is None or kind == "text":
                    _append_str(pieces, part.get("text"))
                elif kind == "refusal":
                    _append_str(pieces, part.get("refusal"))
    _append_str(pieces, msg.get("refusal"))
    _append_str(pieces, msg.get("name"))
    _append_str(pieces, msg.get("reasoning_content"))
    tool_calls = msg.get("tool_calls")
    if isinstance(tool_calls, list):
        for call in tool_calls:
            if not isinstance(call, Mapping):
                continue
            _append_str(pieces, call.get("id"))
            function = call.get("function")
            if isinstance(function, Mapping):
                _append_str(pieces, function.get("name"))
                arguments = _arguments_text(function.get("arguments"))
                if arguments:
                    pieces.append(arguments)
    if msg.get("role") == "tool":
        _append_str(pieces, msg.get("tool_call_id"))
    return pieces


def message_overhead(message: Mapping[str, Any]) -> int:
    """Tokens one message costs beyond its text.

    :data:`MESSAGE_OVERHEAD_TOKENS` per message, :data:`NAME_OVERHEAD_TOKENS`
    when it has a non-empty ``name``, :data:`TOOL_CALL_OVERHEAD_TOKENS` per
    entry of ``tool_calls``, and :data:`IMAGE_TOKEN_ESTIMATE` per content part
    whose type is in :data:`MEDIA_PART_TYPES`.

    Args:
        message: An OpenAI-format message dict (odd shapes tolerated).

    Returns:
        The overhead in tokens.
    """
    overhead = MESSAGE_OVERHEAD_TOKENS
    msg = _as_mapping(message)
    if msg is None:
        return overhead
    name = msg.get("name")
    if isinstance(name, str) and name:
        overhead += NAME_OVERHEAD_TOKENS
    tool_calls = msg.get("tool_calls")
    if isinstance(tool_calls, list):
        overhead += TOOL_CALL_OVERHEAD_TOKENS * len(tool_calls)
    for part in _content_parts(msg):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if isinstance(kind, str) and kind in MEDIA_PART_TYPES:
            overhead += IMAGE_TOKEN_ESTIMATE
    return overhead


def count_message(message: Mapping[str, Any], counter: TokenCounter) -> int:
    """Tokens one message costs: :func:`message_overhead` plus its billed text.

    Args:
        message: An OpenAI-format message dict.
        counter: Any :class:`~agentmem.protocols.TokenCounter`.

    Returns:
        The token count.
    """
    return message_overhead(message) + sum(
        counter.count_text(piece) for piece in message_text_pieces(message)
    )


def count_messages(messages: Iterable[Mapping[str, Any]], counter: TokenCounter) -> int:
    """Tokens a request with ``messages`` costs, including :data:`REPLY_PRIMING_TOKENS`.

    Args:
        messages: OpenAI-format message dicts.
        counter: Any :class:`~agentmem.protocols.TokenCounter`.

    Returns:
        The sum of :func:`count_message` over ``messages`` plus 3.
    """
    return REPLY_PRIMING_TOKENS + sum(count_message(message, counter) for message in messages)
