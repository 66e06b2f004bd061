"""What the recall index holds of a message on PostgreSQL: index rules 2 in Python.

On SQLite the rules are SQL (the views ``recall_raw`` and ``recall_source`` of
:mod:`.recall_index`); PostgreSQL's index (:mod:`.pg_recall`) computes the same text
in the client, with :func:`indexed_text`, from the message's raw body and role and the
body of the nearest assistant message before it (for a tool message answering the
memory tool). ``tests/test_recall_backends.py`` checks that both give the same text.

The rules (see :mod:`.recall_index`): a body that is not JSON, or that carries one of
:data:`~.recall_index.INJECTED_FLAGS` set, or a tool message answering a call to
:data:`~.recall_index.MEMORY_TOOL`, gives ``""``; else the text content (string, or the
parts' texts joined by spaces) and the name and arguments of every call to another tool,
trimmed, with the first block of each of :data:`~.recall_index.INJECTED_TAGS` cut out,
and ``""`` when it starts with :data:`~.recall_index.CHECKPOINT_HEADER`.
"""

from __future__ import annotations

import json
from typing import Any, Final

from agentmem.session_store.recall_index import (
    CHECKPOINT_HEADER,
    INJECTED_FLAGS,
    INJECTED_TAGS,
    MEMORY_TOOL,
)

__all__ = ["indexed_text", "parsed", "tool_calls"]

_FALSY: Final = (0, "", "[]", "{}")


def _reject_constant(name: str) -> Any:
    raise ValueError(name)  # NaN, Infinity: not JSON to SQLite's json_valid


def parsed(body: str | bytes | None) -> Any:
    """The body's JSON value, or ``None`` when it is not JSON (``json_valid`` false)."""
    if body is None:
        return None
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None


def _sql(value: Any) -> str | None:
    """A JSON value as ``json_extract`` gives it to SQL, as text (``None`` for null)."""
    if value is None:
        return None
    if value is True:
        return "1"
    if value is False:
        return "0"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format(value, ".15g") if value != int(value) else f"{value:.1f}"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _flagged(body: dict[str, Any]) -> bool:
    for field in INJECTED_FLAGS:
        if field in body:
            value = body[field]
            if value is None or value is False:
                continue
            if isinstance(value, list | dict):
                if value:
                    return True
                continue
            if value not in _FALSY or isinstance(value, bool):
                return True
    return False


def tool_calls(body: Any) -> list[Any] | None:
    """The ``tool_calls`` array of a parsed body (``None`` when it has none)."""
    if isinstance(body, dict):
        calls = body.get("tool_calls")
        if isinstance(calls, list):
            return calls
    return None


def _function(call: Any, key: str) -> Any:
    if isinstance(call, dict):
        function = call.get("function")
        if isinstance(function, dict):
            return function.get(key)
    return None


def _answers_memory_call(body: dict[str, Any], before: Any) -> bool:
    if body.get("name") == MEMORY_TOOL:
        return True
    calls = tool_calls(before)
    if calls is None:
        return False
    wanted = body.get("tool_call_id")
    return any(
        isinstance(call, dict)
        and call.get("id") == wanted
        and type(call.get("id")) is type(wanted)
        and _function(call, "name") == MEMORY_TOOL
        for call in calls
    )


def _content(body: dict[str, Any]) -> str:
    content = body.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        texts: list[str] = []
        for part in content:
            text: str | None = None
            if isinstance(part, dict):
                text = _sql(part.get("text"))
                if text is None and isinstance(part.get("content"), str):
                    text = part["content"]
            texts.append(text or "")
        return " ".join(texts)
    return ""


def _calls(body: dict[str, Any], raw: str) -> str:
    calls = tool_calls(body)
    if calls is None or '"tool_calls"' not in raw:
        return ""
    out = [
        (_sql(_function(call, "name")) or "") + " " + (_sql(_function(call, "arguments")) or "")
        for call in calls
        if _function(call, "name") != MEMORY_TOOL
    ]
    return " ".join(out)


def _cut(text: str, tag: str) -> str:
    start = text.find(f"<{tag}")
    if start < 0:
        return text
    end = text.find(f"</{tag}>")
    if end > start:
        return text[:start] + " " + text[end + len(tag) + 3 :]
    return text[:start]


def _final(text: str) -> str:
    head = text.lstrip(" ")[: len(CHECKPOINT_HEADER)]
    if len(head) == len(CHECKPOINT_HEADER) and all(
        a == b or (a.isascii() and a.lower() == b.lower())
        for a, b in zip(head, CHECKPOINT_HEADER, strict=True)
    ):
        return ""  # SQLite's LIKE: ASCII letters match whatever their case
    return text.strip(" ")


def indexed_text(role: str, raw: str, before: Any = None) -> str:
    """The text the recall index holds for a message (its role and raw body).

    ``before``: the parsed body of the nearest assistant message before it (only read
    for a tool message).
    """
    body = parsed(raw)
    if body is None:
        return ""
    if not isinstance(body, dict):
        return ""  # JSON, but not an object: json_extract finds neither content nor calls
    if _flagged(body):
        return ""
    if role == "tool" and _answers_memory_call(body, before):
        return ""
    text = (_content(body) + " " + _calls(body, raw)).strip(" ")
    if "<" not in text:
        return _final(text)
    for tag in INJECTED_TAGS:
        text = _cut(text, tag)
    return _final(text)
