"""The canonical message type and the field readers below messages.py and the codecs.

:mod:`agentmem.messages` (validation) and :mod:`agentmem._codecs` (provider
shapes) both read message fields the same way; the pieces they share live
here so that neither imports the other's internals and imports flow one
way: ``messages -> _codecs -> _shape -> _json``. :mod:`agentmem.messages`
re-exports :data:`Message` and :func:`content_text`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentmem._json import type_name
from agentmem.errors import InvalidMessageError

__all__ = ["Message", "content_text", "require_str"]

Message = dict[str, Any]
"""A canonical message: an OpenAI Chat Completions message dict plus internal fields."""


def require_str(value: Any, field: str, index: int, *, nonempty: bool = False) -> str:
    """``value`` when it is a string (non-empty with ``nonempty``), else InvalidMessageError.

    The error names ``index`` (the message's position) and ``field`` (dotted path).
    """
    if not isinstance(value, str):
        raise InvalidMessageError(
            f"expected a string, got {type_name(value)}", index=index, field=field
        )
    if nonempty and not value:
        raise InvalidMessageError("must not be empty", index=index, field=field)
    return value


def content_text(content: Any) -> str:
    """The plain text of a content value (string, list of parts/blocks, or None)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text", part.get("refusal"))
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(texts)
    return ""
