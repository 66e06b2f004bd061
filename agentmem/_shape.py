"""The canonical message type and the field readers below messages.py and the codecs.

:mod:`agentmem.messages` (validation) and :mod:`agentmem._codecs` (provider
shapes) both read message fields the same way; the pieces they share live
here so that neither imports the other's internals and imports flow one
way: ``messages -> _codecs -> _shape -> _json``. :mod:`agentmem.messages`
re-exports :data:`Message`, :func:`content_text` and :func:`message_text`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentmem._json import type_name
from agentmem.errors import InvalidMessageError

__all__ = ["Message", "content_text", "message_text", "require_str"]

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
    """The plain text of a content value (string, list of parts/blocks, or None).

    See :func:`message_text` for exactly what is included.
    """
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


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message: what it says, the one definition the parts share.

    Exactly its ``content`` as plain text (:func:`content_text`): a string
    content as it is; of a list of parts (or Anthropic blocks), the ``text`` of
    each part that has one, else its ``refusal``, joined with newlines; images,
    audio, files and parts without text contribute nothing; ``None`` gives
    ``""``. A tool result's text is its ``content`` like any other message's.
    Not included: tool calls (their names and arguments), reasoning, and the
    internal fields. Readers that need another meaning say so where they are:
    :func:`agentmem.tokens.message_text_pieces` (every piece a provider
    bills, tool-call arguments included), the recall index's SQL views
    (:mod:`agentmem.session_store.recall_index`: what search sees, without the
    memory's own echoes) and ``message_summary`` (a one-line task summary).
    """
    return content_text(message.get("content"))
