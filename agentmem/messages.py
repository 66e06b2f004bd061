"""Message shapes: validation, UTF-8 sanitising, and the Anthropic codec.

agentmem keeps every message in one canonical shape, the OpenAI Chat
Completions message dict::

    {"role": "system" | "user" | "assistant" | "tool",
     "content": str | list[part] | None,
     "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}],
     "tool_call_id": str,            # tool messages
     "name": str,                    # optional
     "reasoning_content": str,       # optional, thinking-mode providers
     ...internal fields...}

Internal fields (:data:`INTERNAL_FIELDS`, plus any other key the host adds)
ride in the same dict and never reach a provider: payload builders copy
only the keys each role may send (:data:`API_FIELDS`).

Validation happens once, on the way in (:func:`normalize_message`). It
raises :class:`~agentmem.errors.InvalidMessageError` naming the message
index and the dotted field for anything a provider would reject and that
cannot be repaired without guessing: an unknown role, a tool message
without ``tool_call_id``, tool-call ``arguments`` that break the argument
rule, content of the wrong type, values that are not JSON. What counts as
JSON (64-bit integers, finite floats, bounded nesting) and as valid
arguments (a JSON object under the same rule, at most 100 levels deep) is
defined once, in :mod:`agentmem._json`, and used by every reader of
arguments, so a value accepted here reads the same in both codecs.
What *can* be repaired without guessing is normalised instead: strings
with lone surrogates or bytes with invalid UTF-8 are fixed with U+FFFD
(never raised), an empty ``arguments`` string becomes ``"{}"``, an empty
``tool_calls`` list is removed, a missing tool-call ``type`` becomes
``"function"``.

Anthropic Messages input (content blocks ``text``, ``image``, ``document``,
``tool_use``, ``tool_result``, ``thinking``, ``redacted_thinking``) is
recognised and converted: one Anthropic user turn may become several
canonical messages (its ``tool_result`` blocks become ``tool`` messages,
in order, followed by one ``user`` message with the rest). Signed thinking
blocks are kept verbatim in the internal ``thinking_blocks`` field, with
their text mirrored into ``reasoning_content``.

Why this module is long: it holds both directions of the Anthropic codec
next to the validation they share (field-naming checks, the canonical
shape); the JSON and tool-argument rule already lives in
:mod:`agentmem._json`, and the codec is the next thing to move out (into
``_codecs/``, as the design lays out) when a second codec arrives.

The reverse direction (canonical -> Anthropic) lives in
:func:`to_anthropic`; it expects a list that already satisfies the OpenAI
pairing rules (see :mod:`agentmem.repair`) and enforces the Anthropic-only
rules on top: system prompt split out, consecutive same-role turns merged,
``tool_result`` blocks first in a user turn, no empty or whitespace-only
text blocks, no trailing whitespace on assistant text, a user turn first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from agentmem._json import clean_value, encode_arguments, parse_arguments, sanitize_text
from agentmem.errors import InvalidArgumentError, InvalidMessageError

__all__ = [
    "API_FIELDS",
    "INTERNAL_FIELDS",
    "ROLES",
    "Message",
    "content_text",
    "from_anthropic",
    "is_anthropic_message",
    "is_real_user",
    "normalize_message",
    "normalize_messages",
    "sanitize_text",
    "to_anthropic",
]

Message = dict[str, Any]
"""A canonical message: an OpenAI Chat Completions message dict plus internal fields."""

ROLES: Final = frozenset({"system", "user", "assistant", "tool"})
"""The roles a canonical message may have."""

INTERNAL_FIELDS: Final = frozenset(
    {
        # Fields named by the design (shared with the Clacky seed).
        "task_id",
        "created_at",
        "system_injected",
        "session_context",
        "memory_update",
        "subagent_instructions",
        "subagent_result",
        "token_usage",
        "compressed_summary",
        "chunk_path",
        "truncated",
        "transient",
        "chunk_index",
        "chunk_count",
        # agentmem's own.
        "session_date",  # date stamped on a session_context message
        "thinking_blocks",  # verbatim Anthropic thinking / redacted_thinking blocks
        "is_error",  # Anthropic tool_result.is_error, kept on the tool message
        "synthesized",  # marks a message agentmem made up during repair
        "usage",  # usage block an LLM reply carries (see protocols.LLM)
    }
)
"""Keys that ride in message dicts but are never sent to a provider.

Any key that is not in :data:`API_FIELDS` for the message's role is stripped
from payloads too; this set names the ones agentmem itself reads or writes.
"""

API_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "system": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset(
        {"role", "content", "name", "tool_calls", "refusal", "audio", "reasoning_content"}
    ),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
"""For each role, the keys an OpenAI Chat Completions payload may carry."""

# OpenAI: "Expected a string that matches the pattern '^[^\s<|\\/>]+$'" for message names.
_NAME_RE: Final = re.compile(r"^[^\s<|\\/>]+$")
# Tool (function) names: OpenAI "^[a-zA-Z0-9_-]{1,64}$"; Anthropic accepts the same set.
_FUNCTION_NAME_RE: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_USER_PART_TYPES: Final = frozenset({"text", "image_url", "input_audio", "file"})
_ASSISTANT_PART_TYPES: Final = frozenset({"text", "refusal"})
_TOOL_PART_TYPES: Final = frozenset({"text", "image_url"})
_IMAGE_DETAILS: Final = frozenset({None, "auto", "low", "high"})
_AUDIO_FORMATS: Final = frozenset({"wav", "mp3"})
_ANTHROPIC_ONLY_BLOCKS: Final = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}
)
ANTHROPIC_IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

SYSTEM_NOTE_TAG: Final = "system-reminder"
"""Tag wrapping a mid-conversation system message when it becomes user text for Anthropic."""

EMPTY_USER_PLACEHOLDER: Final = "(empty message)"
"""Text sent for a user turn whose content was empty (Anthropic rejects empty content)."""

LEADING_USER_PLACEHOLDER: Final = "(conversation continues)"
"""User turn inserted when an Anthropic payload would otherwise start with the assistant."""


# --------------------------------------------------------------------------- sanitising


def _clean(value: Any, field: str, index: int) -> Any:
    """Deep-copy ``value`` into plain JSON types under the value rule of :mod:`agentmem._json`."""
    return clean_value(value, field, index)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _require_str(value: Any, field: str, index: int, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidMessageError(
            f"expected a string, got {_type_name(value)}", index=index, field=field
        )
    if nonempty and not value:
        raise InvalidMessageError("must not be empty", index=index, field=field)
    return value


def _check_parts(
    parts: list[Any], allowed: frozenset[str], field: str, index: int, role: str
) -> None:
    for i, part in enumerate(parts):
        where = f"{field}[{i}]"
        if not isinstance(part, dict):
            raise InvalidMessageError(
                f"content parts must be objects, got {_type_name(part)}", index=index, field=where
            )
        kind = part.get("type")
        if not isinstance(kind, str) or kind not in allowed:
            raise InvalidMessageError(
                f"content part type {kind!r} is not allowed in a {role} message "
                f"(allowed: {', '.join(sorted(allowed))})",
                index=index,
                field=f"{where}.type",
            )
        if kind in ("text", "refusal"):
            _require_str(part.get(kind), f"{where}.{kind}", index)
        elif kind == "image_url":
            image = part.get("image_url")
            if not isinstance(image, dict):
                raise InvalidMessageError(
                    "expected an object with a 'url'", index=index, field=f"{where}.image_url"
                )
            _require_str(image.get("url"), f"{where}.image_url.url", index, nonempty=True)
            if image.get("detail") not in _IMAGE_DETAILS:
                raise InvalidMessageError(
                    "detail must be 'auto', 'low' or 'high'",
                    index=index,
                    field=f"{where}.image_url.detail",
                )
        elif kind == "input_audio":
            audio = part.get("input_audio")
            if not isinstance(audio, dict):
                raise InvalidMessageError(
                    "expected an object with 'data' and 'format'",
                    index=index,
                    field=f"{where}.input_audio",
                )
            _require_str(audio.get("data"), f"{where}.input_audio.data", index)
            if audio.get("format") not in _AUDIO_FORMATS:
                raise InvalidMessageError(
                    "format must be 'wav' or 'mp3'",
                    index=index,
                    field=f"{where}.input_audio.format",
                )
        elif kind == "file":
            file = part.get("file")
            if not isinstance(file, dict):
                raise InvalidMessageError("expected an object", index=index, field=f"{where}.file")
            for key in ("file_data", "file_id", "filename"):
                if file.get(key) is not None:
                    _require_str(file[key], f"{where}.file.{key}", index)
            if not isinstance(file.get("file_data"), str) and not isinstance(
                file.get("file_id"), str
            ):
                raise InvalidMessageError(
                    "a file part needs file_data or file_id", index=index, field=f"{where}.file"
                )


def _check_content(msg: Message, index: int) -> None:
    role = msg["role"]
    content = msg.get("content")
    if role == "assistant":
        if content is None or isinstance(content, str):
            return
        if isinstance(content, list):
            _check_parts(content, _ASSISTANT_PART_TYPES, "content", index, role)
            if not content:
                msg["content"] = None
            return
        raise InvalidMessageError(
            f"expected a string, a list of parts or null, got {_type_name(content)}",
            index=index,
            field="content",
        )
    if isinstance(content, str):
        return
    if isinstance(content, list):
        allowed = {
            "system": frozenset({"text"}),
            "user": _USER_PART_TYPES,
            "tool": _TOOL_PART_TYPES,
        }[role]
        _check_parts(content, allowed, "content", index, role)
        if not content:
            # An empty part list is the same as empty text; providers reject [].
            msg["content"] = ""
        return
    raise InvalidMessageError(
        f"a {role} message needs string or list content, got {_type_name(content)}",
        index=index,
        field="content",
    )


def _check_tool_calls(msg: Message, index: int) -> None:
    calls = msg.get("tool_calls")
    if calls is None:
        msg.pop("tool_calls", None)
        return
    if not isinstance(calls, list):
        raise InvalidMessageError(
            f"expected a list, got {_type_name(calls)}", index=index, field="tool_calls"
        )
    if not calls:
        del msg["tool_calls"]
        return
    for i, call in enumerate(calls):
        where = f"tool_calls[{i}]"
        if not isinstance(call, dict):
            raise InvalidMessageError(
                f"expected an object, got {_type_name(call)}", index=index, field=where
            )
        _require_str(call.get("id"), f"{where}.id", index, nonempty=True)
        kind = call.get("type", "function")
        if kind != "function":
            raise InvalidMessageError(
                f"only function tool calls are supported, got {kind!r}",
                index=index,
                field=f"{where}.type",
            )
        function = call.get("function")
        if not isinstance(function, dict):
            raise InvalidMessageError(
                f"expected an object with 'name' and 'arguments', got {_type_name(function)}",
                index=index,
                field=f"{where}.function",
            )
        name = _require_str(function.get("name"), f"{where}.function.name", index, nonempty=True)
        if not _FUNCTION_NAME_RE.fullmatch(name):
            raise InvalidMessageError(
                f"function name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$ "
                "(the pattern OpenAI and Anthropic require of tool names)",
                index=index,
                field=f"{where}.function.name",
            )
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            raise InvalidMessageError(
                f"arguments must be a JSON object encoded as a string, got "
                f"{_type_name(arguments)} (use json.dumps)",
                index=index,
                field=f"{where}.function.arguments",
            )
        # Canonical key order (id, type, function) keeps stored JSON and payloads tidy.
        calls[i] = {"id": call["id"], "type": "function", "function": function} | call
        # One rule for what arguments may hold (agentmem._json): the same text must
        # read the same as an OpenAI string and as an Anthropic tool_use input.
        parsed = parse_arguments(arguments, index=index, field=f"{where}.function.arguments")
        if parsed.text is not arguments:
            function["arguments"] = parsed.text


def _validate_canonical(msg: Message, index: int) -> Message:
    """Check (and lightly normalise, in place) one cleaned canonical message."""
    role = msg["role"]
    if "name" in msg:
        name = msg["name"]
        if name is None:
            del msg["name"]
        elif not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise InvalidMessageError(
                "name must be a non-empty string without whitespace or any of <|\\/>",
                index=index,
                field="name",
            )
    if role == "tool":
        if msg.get("tool_call_id") is None:
            raise InvalidMessageError(
                "a tool message needs tool_call_id, the id of the call it answers",
                index=index,
                field="tool_call_id",
            )
        _require_str(msg["tool_call_id"], "tool_call_id", index, nonempty=True)
    elif "tool_call_id" in msg:
        raise InvalidMessageError(
            f"only tool messages carry tool_call_id, not {role} messages",
            index=index,
            field="tool_call_id",
        )
    if role == "assistant":
        _check_tool_calls(msg, index)
        for key in ("reasoning_content", "refusal"):
            if key in msg:
                if msg[key] is None:
                    del msg[key]
                else:
                    _require_str(msg[key], key, index)
        if "audio" in msg:
            audio = msg["audio"]
            if audio is None:
                del msg["audio"]
            elif not isinstance(audio, dict):
                raise InvalidMessageError(
                    f"expected an object with an 'id', got {_type_name(audio)}",
                    index=index,
                    field="audio",
                )
            else:
                _require_str(audio.get("id"), "audio.id", index, nonempty=True)
    elif "tool_calls" in msg:
        if msg["tool_calls"]:
            raise InvalidMessageError(
                f"only assistant messages carry tool_calls, not {role} messages",
                index=index,
                field="tool_calls",
            )
        del msg["tool_calls"]
    _check_content(msg, index)
    blocks = msg.get("thinking_blocks")
    if blocks is not None and not (
        isinstance(blocks, list) and all(isinstance(b, dict) for b in blocks)
    ):
        raise InvalidMessageError(
            "expected a list of Anthropic thinking blocks", index=index, field="thinking_blocks"
        )
    return msg


def is_real_user(message: Mapping[str, Any]) -> bool:
    """True for a user message the user typed: role ``user`` and none of the injection flags.

    A message marked ``system_injected``, ``session_context`` (the session's
    date and environment) or ``memory_update`` (a memory consolidation
    prompt) rides in the user role but is not a request of the user: it is
    never the task anchor, never pinned, and never a request in a summary.
    The newest real user message is the task anchor the context pipeline
    always keeps.
    """
    return (
        message.get("role") == "user"
        and not message.get("system_injected")
        and not message.get("session_context")
        and not message.get("memory_update")
    )


def is_anthropic_message(message: object) -> bool:
    """True when ``message`` uses Anthropic-only content blocks.

    A message whose content is a string or only ``text`` parts reads the same
    in both shapes and is treated as canonical.
    """
    if not isinstance(message, Mapping):
        return False
    content = message.get("content")
    if message.get("role") not in ("user", "assistant") or not isinstance(content, list):
        return False
    return any(
        isinstance(b, Mapping)
        and isinstance(b.get("type"), str)
        and b["type"] in _ANTHROPIC_ONLY_BLOCKS
        for b in content
    )


def normalize_message(message: Any, *, index: int = 0) -> list[Message]:
    """Validate one incoming message and return its canonical form.

    Args:
        message: An OpenAI Chat Completions message dict (with any internal
            fields) or an Anthropic Messages message dict.
        index: Position reported in errors (the message's index in a batch).

    Returns:
        One canonical message, or several when an Anthropic user turn carried
        ``tool_result`` blocks. The returned dicts are fresh copies owned by
        the caller; the input is never modified.

    Raises:
        InvalidMessageError: ``message`` cannot be accepted; the error names
            the index and the field.
    """
    if not isinstance(message, Mapping):
        raise InvalidMessageError(
            f"expected a message mapping, got {_type_name(message)}", index=index
        )
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        hint = " (use 'system')" if role == "developer" else ""
        raise InvalidMessageError(
            f"unknown role {role!r}; expected one of system, user, assistant, tool{hint}",
            index=index,
            field="role",
        )
    if role != "assistant" and "content" not in message:
        raise InvalidMessageError(f"a {role} message needs content", index=index, field="content")
    cleaned = _clean(message, "", index)
    task_id = cleaned.get("task_id")
    if task_id is not None and (isinstance(task_id, bool) or not isinstance(task_id, int | str)):
        raise InvalidMessageError(
            f"task_id must be an int or a string, got {_type_name(task_id)}",
            index=index,
            field="task_id",
        )
    if is_anthropic_message(cleaned):
        return [_validate_canonical(m, index) for m in _anthropic_to_canonical(cleaned, index)]
    return [_validate_canonical(cleaned, index)]


def normalize_messages(messages: Iterable[Any]) -> list[Message]:
    """Validate a batch; the first invalid message raises and nothing is returned.

    Raises:
        InvalidArgumentError: ``messages`` is not an iterable of messages (a
            single dict or a string was passed, say).
        InvalidMessageError: a message is invalid; ``index`` says which.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidArgumentError(
            f"expected an iterable of message mappings, got {_type_name(messages)}"
        )
    out: list[Message] = []
    for i, message in enumerate(messages):
        out.extend(normalize_message(message, index=i))
    return out


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


# --------------------------------------------------------------------------- Anthropic -> canonical


def _anthropic_image_to_part(block: Mapping[str, Any], index: int, field: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, Mapping):
        if source.get("type") == "base64":
            media = _require_str(source.get("media_type"), f"{field}.source.media_type", index)
            data = _require_str(source.get("data"), f"{field}.source.data", index)
            return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
        if source.get("type") == "url":
            url = _require_str(source.get("url"), f"{field}.source.url", index, nonempty=True)
            return {"type": "image_url", "image_url": {"url": url}}
    raise InvalidMessageError(
        "only base64 and url image sources are supported", index=index, field=f"{field}.source"
    )


def _anthropic_document_to_part(block: Mapping[str, Any], index: int, field: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, Mapping):
        kind = source.get("type")
        if kind == "base64":
            media = _require_str(source.get("media_type"), f"{field}.source.media_type", index)
            data = _require_str(source.get("data"), f"{field}.source.data", index)
            title = block.get("title")
            filename = title if isinstance(title, str) and title else "document.pdf"
            return {
                "type": "file",
                "file": {"file_data": f"data:{media};base64,{data}", "filename": filename},
            }
        if kind == "text":
            return {"type": "text", "text": _require_str(source.get("data"), field, index)}
    raise InvalidMessageError(
        "only base64 and text document sources are supported",
        index=index,
        field=f"{field}.source",
    )


def _anthropic_tool_result(
    block: Mapping[str, Any], extras: Mapping[str, Any], index: int, field: str
) -> Message:
    tool_use_id = _require_str(
        block.get("tool_use_id"), f"{field}.tool_use_id", index, nonempty=True
    )
    raw = block.get("content", "")
    content: str | list[dict[str, Any]]
    if raw is None:
        content = ""
    elif isinstance(raw, str):
        content = raw
    elif isinstance(raw, list):
        parts: list[dict[str, Any]] = []
        for j, item in enumerate(raw):
            where = f"{field}.content[{j}]"
            kind = item.get("type") if isinstance(item, Mapping) else None
            if kind == "text":
                parts.append({"type": "text", "text": _require_str(item.get("text"), where, index)})
            elif kind == "image":
                parts.append(_anthropic_image_to_part(item, index, where))
            else:
                raise InvalidMessageError(
                    f"tool_result content block type {kind!r} is not supported",
                    index=index,
                    field=where,
                )
        content = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
    else:
        raise InvalidMessageError(
            f"expected a string or a list of blocks, got {_type_name(raw)}",
            index=index,
            field=f"{field}.content",
        )
    msg: Message = {**extras, "role": "tool", "tool_call_id": tool_use_id, "content": content}
    if block.get("is_error") is True:
        msg["is_error"] = True
    return msg


def _anthropic_to_canonical(message: Message, index: int) -> list[Message]:
    """Convert one (cleaned) Anthropic message into canonical messages."""
    role = message["role"]
    extras = {k: v for k, v in message.items() if k not in ("role", "content")}
    blocks: list[Any] = message["content"]
    if role == "user":
        tool_msgs: list[Message] = []
        parts: list[dict[str, Any]] = []
        for i, block in enumerate(blocks):
            field = f"content[{i}]"
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                tool_msgs.append(_anthropic_tool_result(block, extras, index, field))
            elif kind == "text":
                parts.append(
                    {"type": "text", "text": _require_str(block.get("text"), field, index)}
                )
            elif kind == "image":
                parts.append(_anthropic_image_to_part(block, index, field))
            elif kind == "document":
                parts.append(_anthropic_document_to_part(block, index, field))
            else:
                raise InvalidMessageError(
                    f"block type {kind!r} is not supported in a user message",
                    index=index,
                    field=f"{field}.type",
                )
        out = tool_msgs
        if parts or not tool_msgs:
            content: str | list[dict[str, Any]] = (
                parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
            )
            out.append({**extras, "role": "user", "content": content})
        return out

    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        field = f"content[{i}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(_require_str(block.get("text"), f"{field}.text", index))
        elif kind == "tool_use":
            call_input = block.get("input", {})
            if not isinstance(call_input, dict):
                raise InvalidMessageError(
                    f"tool_use input must be an object, got {_type_name(call_input)}",
                    index=index,
                    field=f"{field}.input",
                )
            calls.append(
                {
                    "id": _require_str(block.get("id"), f"{field}.id", index, nonempty=True),
                    "type": "function",
                    "function": {
                        "name": _require_str(
                            block.get("name"), f"{field}.name", index, nonempty=True
                        ),
                        "arguments": encode_arguments(
                            call_input, index=index, field=f"{field}.input"
                        ),
                    },
                }
            )
        elif kind == "thinking":
            _require_str(block.get("thinking"), f"{field}.thinking", index)
            thinking.append({k: v for k, v in block.items() if k != "cache_control"})
        elif kind == "redacted_thinking":
            _require_str(block.get("data"), f"{field}.data", index)
            thinking.append({k: v for k, v in block.items() if k != "cache_control"})
        else:
            raise InvalidMessageError(
                f"block type {kind!r} is not supported in an assistant message",
                index=index,
                field=f"{field}.type",
            )
    msg: Message = {**extras, "role": "assistant"}
    if len(texts) == 1:
        msg["content"] = texts[0]
    elif texts:
        msg["content"] = [{"type": "text", "text": t} for t in texts]
    else:
        msg["content"] = None
    if calls:
        msg["tool_calls"] = calls
    if thinking:
        msg["thinking_blocks"] = thinking
        reasoning = [b["thinking"] for b in thinking if b.get("type") == "thinking"]
        if reasoning:
            msg["reasoning_content"] = "\n".join(reasoning)
    return [msg]


def from_anthropic(
    messages: Sequence[Mapping[str, Any]], system: str | Sequence[Mapping[str, Any]] | None = None
) -> list[Message]:
    """Convert an Anthropic Messages conversation into canonical messages.

    Args:
        messages: Anthropic ``messages`` (user/assistant turns with string
            content or content blocks).
        system: The Anthropic ``system`` parameter: a string, a list of text
            blocks, or ``None``.

    Returns:
        Canonical (OpenAI-shaped) messages; the system prompt, when given,
        is the first one.

    Raises:
        InvalidArgumentError: ``messages`` is not a sequence of turns.
        InvalidMessageError: ``system``, a turn or a block cannot be converted.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidArgumentError(
            f"expected a sequence of Anthropic turns, got {_type_name(messages)}"
        )
    out: list[Message] = []
    if system is not None:
        if isinstance(system, str):
            if system:
                out.append({"role": "system", "content": sanitize_text(system)})
        elif isinstance(system, bytes | Mapping) or not isinstance(system, Iterable):
            raise InvalidMessageError(
                f"expected a string or a list of text blocks, got {_type_name(system)}",
                field="system",
            )
        else:
            parts = []
            for i, block in enumerate(system):
                if not isinstance(block, Mapping) or block.get("type") != "text":
                    raise InvalidMessageError(
                        "system blocks must be text blocks", field=f"system[{i}]"
                    )
                parts.append(
                    {
                        "type": "text",
                        "text": sanitize_text(
                            _require_str(block.get("text"), f"system[{i}].text", 0)
                        ),
                    }
                )
            if parts:
                out.append({"role": "system", "content": parts})
    for i, message in enumerate(messages):
        if isinstance(message, Mapping) and message.get("role") not in ("user", "assistant"):
            raise InvalidMessageError(
                f"Anthropic turns are user or assistant, got {message.get('role')!r}",
                index=i,
                field="role",
            )
        if isinstance(message, Mapping) and isinstance(message.get("content"), list):
            cleaned = _clean(message, "", i)
            out.extend(_validate_canonical(m, i) for m in _anthropic_to_canonical(cleaned, i))
        else:
            out.extend(normalize_message(message, index=i))
    return out


# --------------------------------------------------------------------------- canonical -> Anthropic


_DATA_URL_RE: Final = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)


def _placeholder(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image_block(url: str) -> dict[str, Any]:
    match = _DATA_URL_RE.match(url)
    if match:
        media, data = match.group(1).lower(), match.group(2)
        if media in ANTHROPIC_IMAGE_TYPES:
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": media, "data": data},
            }
        return _placeholder(f"[image omitted: {media} is not supported]")
    if url.startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    return _placeholder("[image omitted: unsupported image reference]")


def _file_block(file: Mapping[str, Any]) -> dict[str, Any]:
    data = file.get("file_data")
    name = file.get("filename")
    if isinstance(data, str):
        match = _DATA_URL_RE.match(data)
        if match and match.group(1).lower() == "application/pdf":
            block: dict[str, Any] = {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": match.group(2),
                },
            }
            if isinstance(name, str) and name.strip():
                block["title"] = name
            return block
    label = name if isinstance(name, str) and name.strip() else "attachment"
    return _placeholder(f"[file omitted: {label}]")


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    """Anthropic blocks for a canonical content value (user, tool or assistant)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "refusal":
            blocks.append({"type": "text", "text": part["refusal"]})
        elif kind == "image_url":
            blocks.append(_image_block(part["image_url"]["url"]))
        elif kind == "input_audio":
            blocks.append(_placeholder("[audio omitted: not supported by this provider]"))
        elif kind == "file":
            blocks.append(_file_block(part["file"]))
    return blocks


def _is_blank_text(block: Mapping[str, Any]) -> bool:
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


def _message_turn(msg: Message) -> dict[str, Any] | None:
    """One canonical message as an (unmerged) Anthropic turn; ``None`` when it carries nothing.

    A system message here is a mid-conversation note (leading ones are the
    system prompt and never reach this function).
    """
    role = msg["role"]
    if role == "system":
        text = content_text(msg.get("content"))
        if not text.strip():
            return None
        note = f"<{SYSTEM_NOTE_TAG}>\n{text}\n</{SYSTEM_NOTE_TAG}>"
        return {"role": "user", "content": [{"type": "text", "text": note}]}
    if role == "user":
        blocks = [b for b in _content_blocks(msg.get("content")) if not _is_blank_text(b)]
        return {"role": "user", "content": blocks or [_placeholder(EMPTY_USER_PLACEHOLDER)]}
    if role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg["tool_call_id"]}
        inner = [b for b in _content_blocks(msg.get("content")) if not _is_blank_text(b)]
        if len(inner) == 1 and inner[0]["type"] == "text":
            result["content"] = inner[0]["text"]
        elif inner:
            result["content"] = inner
        if msg.get("is_error") is True:
            result["is_error"] = True
        return {"role": "user", "content": [result]}
    blocks = []
    for block in msg.get("thinking_blocks") or ():
        if block.get("type") == "thinking" and isinstance(block.get("signature"), str):
            blocks.append(
                {"type": "thinking", "thinking": block["thinking"], "signature": block["signature"]}
            )
        elif block.get("type") == "redacted_thinking" and isinstance(block.get("data"), str):
            blocks.append({"type": "redacted_thinking", "data": block["data"]})
    texts = _content_blocks(msg.get("content"))
    refusal = msg.get("refusal")
    if isinstance(refusal, str):
        texts.append({"type": "text", "text": refusal})
    for block in texts:
        if block["type"] == "text":
            # Anthropic rejects a final assistant turn ending in whitespace; trimming
            # every assistant text keeps the payload prefix stable as turns are added.
            block["text"] = block["text"].rstrip()
        if not _is_blank_text(block):
            blocks.append(block)
    for i, call in enumerate(msg.get("tool_calls") or ()):
        arguments = parse_arguments(
            call["function"]["arguments"], field=f"tool_calls[{i}].function.arguments"
        )
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": call["function"]["name"],
                "input": arguments.value,
            }
        )
    if all(b["type"] in _FRONT_BLOCKS["assistant"] for b in blocks):
        # Nothing but thinking (or nothing at all): the API refuses a final
        # assistant turn that ends in a thinking block, and thinking alone
        # tells the model nothing, so the turn is left out.
        return None
    return {"role": "assistant", "content": blocks}


TurnCache = dict[int, tuple[Message, "dict[str, Any] | None"]]
"""Identity cache of :func:`_message_turn` results (see :func:`to_anthropic`)."""


def _turns(
    messages: Sequence[Message], cache: TurnCache | None = None
) -> tuple[list[str], list[dict[str, Any]]]:
    """Convert canonical messages to unmerged Anthropic turns, splitting out the system prompt."""
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []
    leading = True
    for msg in messages:
        if leading and msg["role"] == "system":
            text = content_text(msg.get("content"))
            if text.strip():
                system_parts.append(text)
            continue
        leading = False
        if cache is None:
            turn = _message_turn(msg)
        else:
            cached = cache.get(id(msg))
            if cached is None or cached[0] is not msg:
                cached = (msg, _message_turn(msg))
                cache[id(msg)] = cached
            turn = cached[1]
        if turn is not None:
            turns.append(turn)
    return system_parts, turns


def _merge_same_role(turns: list[dict[str, Any]], *, copy: bool = False) -> list[dict[str, Any]]:
    """Anthropic: roles alternate. Merge runs of same-role turns into one turn.

    In a merged user turn the ``tool_result`` blocks come first (the API
    requires it), other blocks keep their order. In a merged assistant turn
    thinking blocks move to the front, where the API expects them. Turn
    dicts and content lists are always new; with ``copy`` the blocks are
    copied too (their strings are shared).
    """
    merged: list[dict[str, Any]] = []
    runs: list[int] = []  # how many turns went into each merged turn
    for turn in turns:
        blocks = [_copy_block(b) for b in turn["content"]] if copy else list(turn["content"])
        if merged and merged[-1]["role"] == turn["role"]:
            merged[-1]["content"].extend(blocks)
            runs[-1] += 1
        else:
            merged.append({"role": turn["role"], "content": blocks})
            runs.append(1)
    for turn, run in zip(merged, runs, strict=True):
        if run == 1:
            continue  # a single message's blocks are already in API order
        front = _FRONT_BLOCKS[turn["role"]]
        blocks = turn["content"]
        first = [b for b in blocks if b["type"] in front]
        if first and len(first) != len(blocks):
            turn["content"] = first + [b for b in blocks if b["type"] not in front]
    return merged


_FRONT_BLOCKS: Final = {
    "user": frozenset({"tool_result"}),
    "assistant": frozenset({"thinking", "redacted_thinking"}),
}


def _copy_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """Copy one Anthropic block: every dict and list new, strings and numbers shared."""
    out = dict(block)
    kind = out["type"]
    if kind == "tool_use":
        out["input"] = _copy_json(out["input"])
    elif kind in ("image", "document"):
        out["source"] = dict(out["source"])
    elif kind == "tool_result" and type(out.get("content")) is list:
        out["content"] = [_copy_block(b) for b in out["content"]]
    return out


def _copy_json(value: Any) -> Any:
    if type(value) is dict:
        return {k: (v if type(v) is str else _copy_json(v)) for k, v in value.items()}
    if type(value) is list:
        return [_copy_json(v) for v in value]
    return value


def to_anthropic(
    messages: Sequence[Message], *, cache: TurnCache | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """Convert repaired canonical messages to an Anthropic ``(system, messages)`` pair.

    ``messages`` must already satisfy the OpenAI pairing rules (every tool
    call answered right after its assistant message, ids unique and matching
    ``^[a-zA-Z0-9_-]+$``), as :func:`agentmem.repair.repair` guarantees.

    Leading system messages become the ``system`` string (``None`` when
    there is none); later system messages become user text wrapped in
    ``<system-reminder>`` so they keep their position.

    With ``cache`` (a dict the caller keeps between calls), each message is
    converted once while the same object is passed again, and the result is
    assembled from copies of the cached blocks. Either way the result is
    the caller's to modify.

    Raises:
        InvalidMessageError: a tool call's ``arguments`` break the argument
            rule (see :func:`normalize_message`).
        InvalidArgumentError: ``messages`` are not validated canonical
            messages (pass them through :func:`normalize_messages` first).
    """
    try:
        system_parts, turns = _turns(messages, cache)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise InvalidArgumentError(
            f"to_anthropic expects validated canonical messages ({type(exc).__name__}: {exc})"
        ) from exc
    merged = _merge_same_role(turns, copy=cache is not None)
    if merged and merged[0]["role"] != "user":
        merged.insert(
            0, {"role": "user", "content": [{"type": "text", "text": LEADING_USER_PLACEHOLDER}]}
        )
    system = "\n\n".join(system_parts) if system_parts else None
    return system, merged
