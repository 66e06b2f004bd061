"""Message shapes: validation and UTF-8 sanitising; re-exports the Anthropic codec.

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
recognised here and converted by the codec in
:mod:`agentmem._codecs.anthropic`, then validated like any other message;
:func:`from_anthropic` does the same for a whole Anthropic conversation.
The reverse direction, :func:`to_anthropic`, lives in the codec and is
re-exported here with the codec's other public names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from agentmem._codecs.anthropic import (
    ANTHROPIC_IMAGE_TYPES,
    EMPTY_USER_PLACEHOLDER,
    LEADING_USER_PLACEHOLDER,
    SYSTEM_NOTE_TAG,
    TurnCache,
    anthropic_system_to_canonical,
    anthropic_to_canonical,
    is_anthropic_message,
    to_anthropic,
)
from agentmem._codecs.responses import (
    ITEMS_FIELD,
    RESPONSES_ITEM_TYPES,
    is_responses_only,
    items_to_canonical,
    looks_like_responses_item,
)
from agentmem._codecs.responses_render import ItemCache
from agentmem._codecs.responses_render import to_responses_items as _items_from_canonical
from agentmem._json import clean_value, parse_arguments, sanitize_text, type_name
from agentmem._shape import Message, content_text, message_text, require_str
from agentmem.errors import InvalidArgumentError, InvalidMessageError

__all__ = [
    "ANTHROPIC_IMAGE_TYPES",
    "API_FIELDS",
    "EMPTY_USER_PLACEHOLDER",
    "INTERNAL_FIELDS",
    "ITEMS_FIELD",
    "LEADING_USER_PLACEHOLDER",
    "RESPONSES_ITEM_TYPES",
    "ROLES",
    "SYSTEM_NOTE_TAG",
    "ItemCache",
    "Message",
    "TurnCache",
    "content_text",
    "from_anthropic",
    "from_responses_items",
    "is_anthropic_message",
    "is_real_user",
    "is_responses_only",
    "message_mapping",
    "message_text",
    "normalize_message",
    "normalize_messages",
    "sanitize_text",
    "to_anthropic",
    "to_responses_items",
]

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
        ITEMS_FIELD,  # verbatim OpenAI Responses input items the message was made from
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


# --------------------------------------------------------------------------- sanitising


def _check_parts(
    parts: list[Any], allowed: frozenset[str], field: str, index: int, role: str
) -> None:
    for i, part in enumerate(parts):
        where = f"{field}[{i}]"
        if not isinstance(part, dict):
            raise InvalidMessageError(
                f"content parts must be objects, got {type_name(part)}", index=index, field=where
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
            require_str(part.get(kind), f"{where}.{kind}", index)
        elif kind == "image_url":
            image = part.get("image_url")
            if not isinstance(image, dict):
                raise InvalidMessageError(
                    "expected an object with a 'url'", index=index, field=f"{where}.image_url"
                )
            require_str(image.get("url"), f"{where}.image_url.url", index, nonempty=True)
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
            require_str(audio.get("data"), f"{where}.input_audio.data", index)
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
                    require_str(file[key], f"{where}.file.{key}", index)
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
            f"expected a string, a list of parts or null, got {type_name(content)}",
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
        f"a {role} message needs string or list content, got {type_name(content)}",
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
            f"expected a list, got {type_name(calls)}", index=index, field="tool_calls"
        )
    if not calls:
        del msg["tool_calls"]
        return
    for i, call in enumerate(calls):
        where = f"tool_calls[{i}]"
        if not isinstance(call, dict):
            raise InvalidMessageError(
                f"expected an object, got {type_name(call)}", index=index, field=where
            )
        require_str(call.get("id"), f"{where}.id", index, nonempty=True)
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
                f"expected an object with 'name' and 'arguments', got {type_name(function)}",
                index=index,
                field=f"{where}.function",
            )
        name = require_str(function.get("name"), f"{where}.function.name", index, nonempty=True)
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
                f"{type_name(arguments)} (use json.dumps)",
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
        require_str(msg["tool_call_id"], "tool_call_id", index, nonempty=True)
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
                    require_str(msg[key], key, index)
        if "audio" in msg:
            audio = msg["audio"]
            if audio is None:
                del msg["audio"]
            elif not isinstance(audio, dict):
                raise InvalidMessageError(
                    f"expected an object with an 'id', got {type_name(audio)}",
                    index=index,
                    field="audio",
                )
            else:
                require_str(audio.get("id"), "audio.id", index, nonempty=True)
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
    items = msg.get(ITEMS_FIELD)
    if items is not None and not (
        isinstance(items, list) and all(isinstance(i, dict) for i in items)
    ):
        raise InvalidMessageError(
            "expected a list of OpenAI Responses items", index=index, field=ITEMS_FIELD
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


def _is_model(value: object) -> bool:
    return callable(getattr(value, "model_dump", None)) and not isinstance(value, type)


def _dump(value: Any, index: int | None, field: str | None) -> Any:
    """``value.model_dump(mode="json", exclude_none=True)``, its failure a named error."""
    try:
        return value.model_dump(mode="json", exclude_none=True)
    except Exception as exc:  # a host's model may raise anything from its serialiser
        raise InvalidMessageError(
            f"{type_name(value)}.model_dump() failed: {exc!r}", index=index, field=field
        ) from exc


def message_mapping(message: object, *, index: int | None = 0) -> Mapping[str, Any]:
    """``message`` as a mapping, SDK objects read through ``model_dump``.

    The provider SDKs return pydantic models (OpenAI's ``ChatCompletionMessage``,
    Anthropic's ``Message``); they are read with
    ``model_dump(mode="json", exclude_none=True)``, so the fields the SDK
    leaves unset (``None``) are not stored. So are SDK objects inside a
    message dict's ``content`` or ``tool_calls`` list
    (``{"role": "assistant", "content": response.content}``, as Anthropic's
    documentation writes it, or ``"tool_calls": message.tool_calls``).

    Raises:
        InvalidMessageError: ``message`` is neither a mapping nor an object
            whose ``model_dump()`` returns one, or a ``model_dump()`` failed.
    """
    if not isinstance(message, Mapping):
        if not _is_model(message):
            raise InvalidMessageError(
                f"expected a message mapping, got {type_name(message)}", index=index
            )
        dumped = _dump(message, index, None)
        if not isinstance(dumped, Mapping):
            raise InvalidMessageError(
                f"{type_name(message)}.model_dump() returned {type_name(dumped)}, not a mapping",
                index=index,
            )
        return dumped
    out: dict[str, Any] | None = None
    for key in ("content", "tool_calls"):
        items = message.get(key)
        if isinstance(items, list) and any(_is_model(item) for item in items):
            out = dict(message) if out is None else out
            out[key] = [
                _dump(item, index, f"{key}[{i}]") if _is_model(item) else item
                for i, item in enumerate(items)
            ]
    return message if out is None else out


def _is_anthropic_reply(message: Mapping[str, Any]) -> bool:
    """An assistant turn in the Anthropic shape, with or without Anthropic-only blocks.

    An Anthropic reply that carries only ``text`` blocks reads as an OpenAI
    list of text parts; it goes through the codec like one with ``tool_use``
    blocks, so every Anthropic reply is stored in one shape (a lone text
    block as the ``content`` string). The Anthropic SDK's ``Message``
    envelope (``"type": "message"``) marks one too.
    """
    if message.get("role") != "assistant":
        return False
    content = message.get("content")
    if not isinstance(content, list) or not content:
        return False
    return message.get("type") == "message" or all(
        isinstance(b, Mapping) and b.get("type") == "text" for b in content
    )


def normalize_message(message: Any, *, index: int = 0) -> list[Message]:
    """Validate one incoming message and return its canonical form.

    Args:
        message: An OpenAI Chat Completions message dict (with any internal
            fields), an Anthropic Messages message dict, or an SDK message
            object (a pydantic model; see :func:`message_mapping`).
        index: Position reported in errors (the message's index in the
            history it is added to).

    Returns:
        One canonical message, or several when an Anthropic user turn carried
        ``tool_result`` blocks. The returned dicts are fresh copies owned by
        the caller; the input is never modified.

    Raises:
        InvalidMessageError: ``message`` cannot be accepted; the error names
            the index and the field.
    """
    message = message_mapping(message, index=index)
    if looks_like_responses_item(message):
        return _from_items([message], index)
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        hint = (
            " (use 'system', or send it as a Responses item with type 'message')"
            if role == "developer"
            else ""
        )
        raise InvalidMessageError(
            f"unknown role {role!r}; expected one of system, user, assistant, tool{hint}",
            index=index,
            field="role",
        )
    if role != "assistant" and "content" not in message:
        raise InvalidMessageError(f"a {role} message needs content", index=index, field="content")
    cleaned = clean_value(message, "", index)
    task_id = cleaned.get("task_id")
    if task_id is not None and (isinstance(task_id, bool) or not isinstance(task_id, int | str)):
        raise InvalidMessageError(
            f"task_id must be an int or a string, got {type_name(task_id)}",
            index=index,
            field="task_id",
        )
    if is_anthropic_message(cleaned) or _is_anthropic_reply(cleaned):
        return [_validate_canonical(m, index) for m in anthropic_to_canonical(cleaned, index)]
    return [_validate_canonical(cleaned, index)]


def normalize_messages(messages: Iterable[Any], *, start: int = 0) -> list[Message]:
    """Validate a batch; the first invalid message raises and nothing is returned.

    Args:
        messages: The batch.
        start: Index of the batch's first message in the history it joins,
            so an error names the message's place in that history.

    Raises:
        InvalidArgumentError: ``messages`` is not an iterable of messages (a
            single dict or a string was passed, say).
        InvalidMessageError: a message is invalid; ``index`` says which.
    """
    if (
        isinstance(messages, str | bytes | Mapping)
        or not isinstance(messages, Iterable)
        or hasattr(messages, "model_dump")  # one SDK message object (iterable as fields)
    ):
        raise InvalidArgumentError(
            f"expected an iterable of message mappings, got {type_name(messages)}"
        )
    out: list[Message] = []
    for i, message in enumerate(messages, start):
        out.extend(normalize_message(message, index=i))
    return out


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
            f"expected a sequence of Anthropic turns, got {type_name(messages)}"
        )
    out: list[Message] = []
    system_message = anthropic_system_to_canonical(system)
    if system_message is not None:
        out.append(system_message)
    for i, item in enumerate(messages):
        message = message_mapping(item, index=i)
        if message.get("role") not in ("user", "assistant"):
            raise InvalidMessageError(
                f"Anthropic turns are user or assistant, got {message.get('role')!r}",
                index=i,
                field="role",
            )
        if isinstance(message.get("content"), list):
            cleaned = clean_value(message, "", i)
            out.extend(_validate_canonical(m, i) for m in anthropic_to_canonical(cleaned, i))
        else:
            out.extend(normalize_message(message, index=i))
    return out


def _from_items(items: Sequence[Any], start: int) -> list[Message]:
    """Clean, convert and validate Responses items (errors name the item's index)."""
    cleaned = [
        clean_value(message_mapping(item, index=i), "", i) for i, item in enumerate(items, start)
    ]
    out: list[Message] = []
    for index, msg in items_to_canonical(cleaned, start):
        # Internal fields a host put on an item ride on the message too (the item keeps them;
        # they never reach a payload, which carries only the keys the SDK types define).
        for item in msg[ITEMS_FIELD]:
            for key in INTERNAL_FIELDS.intersection(item):
                if key != ITEMS_FIELD:
                    msg.setdefault(key, item[key])
        out.append(_validate_canonical(msg, index))
    return out


def from_responses_items(items: Iterable[Any]) -> list[Message]:
    """Convert OpenAI Responses input items into canonical messages.

    Accepts every ``ResponseInputItemParam`` type (see
    :mod:`agentmem._codecs.responses` for how each is read), as dicts or as
    the SDK's pydantic objects, and easy input messages without ``type``.
    A run of assistant-side items (an assistant message, consecutive
    ``function_call`` items, the ``reasoning`` and hosted-tool items before
    them) becomes one assistant message; each output becomes a ``tool``
    message. Each canonical message keeps, in the internal field
    ``responses_items``, deep copies of the items it was made from: together,
    in order, they are the input items.

    Raises:
        InvalidArgumentError: ``items`` is not an iterable of items.
        InvalidMessageError: an item cannot be accepted; the error names its
            index in ``items`` and the field. Nothing is returned.
    """
    if (
        isinstance(items, str | bytes | Mapping)
        or not isinstance(items, Iterable)
        or hasattr(items, "model_dump")
    ):
        raise InvalidArgumentError(
            f"expected an iterable of Responses input items, got {type_name(items)}"
        )
    return _from_items(list(items), 0)


def _derive(items: list[Any]) -> list[Message]:
    return _from_items(items, 0)


def to_responses_items(
    messages: Sequence[Message], *, cache: ItemCache | None = None
) -> list[dict[str, Any]]:
    """Convert canonical messages to OpenAI Responses input items.

    A message's stored ``responses_items`` are sent (cut to the keys the
    SDK's input types define) while they still describe it; otherwise its
    items are built from its Chat fields, its reasoning and hosted-tool
    items kept. ``messages`` must already satisfy the pairing rules (use
    ``MessageHistory.to_api(provider="openai-responses")`` for a repaired
    payload of any history). With ``cache`` (a dict kept between calls) each
    message object is converted once.

    Raises:
        InvalidArgumentError: ``messages`` are not validated canonical messages.
    """
    return _items_from_canonical(messages, _derive, cache=cache)
