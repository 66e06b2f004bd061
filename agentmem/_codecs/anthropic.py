"""The Anthropic Messages codec: Anthropic turns <-> canonical (OpenAI Chat) messages.

**Anthropic -> canonical** (:func:`anthropic_to_canonical`, one turn;
:func:`anthropic_system_to_canonical`, the ``system`` parameter). Content
blocks ``text``, ``image``, ``document``, ``tool_use``, ``tool_result``,
``thinking`` and ``redacted_thinking`` are converted: one Anthropic user
turn may become several canonical messages (its ``tool_result`` blocks
become ``tool`` messages, in order, followed by one ``user`` message with
the rest). Signed thinking blocks are kept verbatim in the internal
``thinking_blocks`` field, with their text mirrored into
``reasoning_content``. The results are not validated here:
:mod:`agentmem.messages` (``normalize_message``, ``from_anthropic``) owns
validation and calls into this module; this module never imports it.

**Canonical -> Anthropic** (:func:`to_anthropic`) expects a list that
already satisfies the OpenAI pairing rules (see :mod:`agentmem.repair`) and
enforces the Anthropic-only rules on top: system prompt split out,
consecutive same-role turns merged, ``tool_result`` blocks first in a user
turn, no empty or whitespace-only text blocks, no trailing whitespace on
assistant text, a user turn first.

Tool-call arguments cross in both directions through the one argument rule
of :mod:`agentmem._json`, so a value accepted on one side reads the same on
the other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from agentmem._json import encode_arguments, parse_arguments, sanitize_text, type_name
from agentmem._shape import Message, message_text, require_str
from agentmem.errors import InvalidArgumentError, InvalidMessageError

__all__ = [
    "ANTHROPIC_IMAGE_TYPES",
    "EMPTY_USER_PLACEHOLDER",
    "LEADING_USER_PLACEHOLDER",
    "SYSTEM_NOTE_TAG",
    "TurnCache",
    "anthropic_system_to_canonical",
    "anthropic_to_canonical",
    "is_anthropic_message",
    "to_anthropic",
]

_ANTHROPIC_ONLY_BLOCKS: Final = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}
)
ANTHROPIC_IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""Image media types Anthropic takes as a base64 source; others become a text placeholder."""

SYSTEM_NOTE_TAG: Final = "system-reminder"
"""Tag wrapping a mid-conversation system message when it becomes user text for Anthropic."""

EMPTY_USER_PLACEHOLDER: Final = "(empty message)"
"""Text sent for a user turn whose content was empty (Anthropic rejects empty content)."""

LEADING_USER_PLACEHOLDER: Final = "(conversation continues)"
"""User turn inserted when an Anthropic payload would otherwise start with the assistant."""


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


# --------------------------------------------------------------------------- Anthropic -> canonical


def _anthropic_image_to_part(block: Mapping[str, Any], index: int, field: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, Mapping):
        if source.get("type") == "base64":
            media = require_str(source.get("media_type"), f"{field}.source.media_type", index)
            data = require_str(source.get("data"), f"{field}.source.data", index)
            return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
        if source.get("type") == "url":
            url = require_str(source.get("url"), f"{field}.source.url", index, nonempty=True)
            return {"type": "image_url", "image_url": {"url": url}}
    raise InvalidMessageError(
        "only base64 and url image sources are supported", index=index, field=f"{field}.source"
    )


def _anthropic_document_to_part(block: Mapping[str, Any], index: int, field: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, Mapping):
        kind = source.get("type")
        if kind == "base64":
            media = require_str(source.get("media_type"), f"{field}.source.media_type", index)
            data = require_str(source.get("data"), f"{field}.source.data", index)
            title = block.get("title")
            filename = title if isinstance(title, str) and title else "document.pdf"
            return {
                "type": "file",
                "file": {"file_data": f"data:{media};base64,{data}", "filename": filename},
            }
        if kind == "text":
            return {"type": "text", "text": require_str(source.get("data"), field, index)}
    raise InvalidMessageError(
        "only base64 and text document sources are supported",
        index=index,
        field=f"{field}.source",
    )


def _collapse(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Content of parts or blocks: a lone text one reads as its string (both directions)."""
    return parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts


def _anthropic_tool_result(
    block: Mapping[str, Any], extras: Mapping[str, Any], index: int, field: str
) -> Message:
    tool_use_id = require_str(
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
                parts.append({"type": "text", "text": require_str(item.get("text"), where, index)})
            elif kind == "image":
                parts.append(_anthropic_image_to_part(item, index, where))
            else:
                raise InvalidMessageError(
                    f"tool_result content block type {kind!r} is not supported",
                    index=index,
                    field=where,
                )
        content = _collapse(parts)
    else:
        raise InvalidMessageError(
            f"expected a string or a list of blocks, got {type_name(raw)}",
            index=index,
            field=f"{field}.content",
        )
    msg: Message = {**extras, "role": "tool", "tool_call_id": tool_use_id, "content": content}
    if block.get("is_error") is True:
        msg["is_error"] = True
    return msg


def anthropic_to_canonical(message: Message, index: int) -> list[Message]:
    """Convert one (cleaned) Anthropic message into canonical messages, not yet validated."""
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
                parts.append({"type": "text", "text": require_str(block.get("text"), field, index)})
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
            out.append({**extras, "role": "user", "content": _collapse(parts)})
        return out

    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        field = f"content[{i}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(require_str(block.get("text"), f"{field}.text", index))
        elif kind == "tool_use":
            call_input = block.get("input", {})
            if not isinstance(call_input, dict):
                raise InvalidMessageError(
                    f"tool_use input must be an object, got {type_name(call_input)}",
                    index=index,
                    field=f"{field}.input",
                )
            calls.append(
                {
                    "id": require_str(block.get("id"), f"{field}.id", index, nonempty=True),
                    "type": "function",
                    "function": {
                        "name": require_str(
                            block.get("name"), f"{field}.name", index, nonempty=True
                        ),
                        "arguments": encode_arguments(
                            call_input, index=index, field=f"{field}.input"
                        ),
                    },
                }
            )
        elif kind == "thinking":
            require_str(block.get("thinking"), f"{field}.thinking", index)
            thinking.append({k: v for k, v in block.items() if k != "cache_control"})
        elif kind == "redacted_thinking":
            require_str(block.get("data"), f"{field}.data", index)
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


def anthropic_system_to_canonical(
    system: str | Sequence[Mapping[str, Any]] | None,
) -> Message | None:
    """The canonical system message for Anthropic's ``system`` parameter; ``None`` when empty.

    Raises:
        InvalidMessageError: ``system`` is neither a string nor a list of text blocks.
    """
    if system is None:
        return None
    if isinstance(system, str):
        return {"role": "system", "content": sanitize_text(system)} if system else None
    if isinstance(system, bytes | Mapping) or not isinstance(system, Iterable):
        raise InvalidMessageError(
            f"expected a string or a list of text blocks, got {type_name(system)}",
            field="system",
        )
    parts = []
    for i, block in enumerate(system):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise InvalidMessageError("system blocks must be text blocks", field=f"system[{i}]")
        parts.append(
            {
                "type": "text",
                "text": sanitize_text(require_str(block.get("text"), f"system[{i}].text", 0)),
            }
        )
    return {"role": "system", "content": parts} if parts else None


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
        text = message_text(msg)
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
        if inner:
            result["content"] = _collapse(inner)
        if msg.get("is_error") is True:
            result["is_error"] = True
        return {"role": "user", "content": [result]}
    if role != "assistant":
        raise InvalidArgumentError(f"to_anthropic expects validated messages: role {role!r}")
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
            text = message_text(msg)
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
            rule (see :func:`agentmem.messages.normalize_message`).
        InvalidArgumentError: ``messages`` are not validated canonical
            messages (pass them through :func:`agentmem.messages.normalize_messages` first).
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
