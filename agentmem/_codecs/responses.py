"""The OpenAI Responses codec, items -> canonical: Responses input items as Chat messages.

:func:`items_to_canonical`. The input is a list of
Responses input items (``ResponseInputItemParam``), already cleaned to JSON
types. Items fall in four groups:

* **messages** (``type: "message"``, or no ``type`` with a ``role``): a
  ``user``, ``system`` or ``developer`` message becomes a canonical
  ``user`` / ``system`` message (parts ``input_text`` -> ``text``,
  ``input_image`` -> ``image_url``, ``input_file`` -> ``file``); an
  ``assistant`` message contributes its ``output_text`` and ``refusal``
  parts to an assistant turn;
* **client calls** the host answers (``function_call``,
  ``custom_tool_call``, ``computer_call``, ``local_shell_call``,
  ``shell_call``, ``apply_patch_call``) become canonical tool calls (a
  non-function call is named after its kind, its payload JSON in the
  arguments), and their outputs (``function_call_output``, ...) become
  ``tool`` messages;
* **opaque assistant-side items** (``reasoning``, the hosted-tool calls
  ``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
  ``image_generation_call``, ``mcp_*``, ``tool_search_*``, ``compaction``,
  ``program*``) have no Chat form: they ride on the assistant turn;
* **opaque client-side items** (``mcp_approval_response``,
  ``item_reference``, ``compaction_trigger``, ``additional_tools``,
  ``configuration_update``) become an assistant message with no content.

A maximal run of assistant-side items (assistant messages, client calls,
opaque assistant-side items) becomes ONE canonical assistant message: its
texts and its tool calls in order. Reasoning is not mirrored into
``reasoning_content`` (a Chat field only DeepSeek-style providers accept:
an OpenAI Chat payload of a Responses history stays free of it). Every
canonical message keeps the items it was made from, verbatim, in the
internal field ``responses_items``: together they are the input list.

The other direction is :mod:`agentmem._codecs.responses_render`; the
tables both read (transcribed from the SDK's types) are in
:mod:`agentmem._codecs._responses_schema`.

The results of ``items_to_canonical`` are not validated here:
:mod:`agentmem.messages` owns validation and calls into this module; this
module never imports it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentmem._codecs._responses_schema import (
    CALLS,
    IMAGE_DETAILS,
    INPUT_PARTS,
    ITEM_FIELDS,
    ITEM_KEYS,
    ITEMS_FIELD,
    MESSAGE_ROLES,
    NAME_RE,
    OPAQUE_ASSISTANT,
    OUTPUT_PARTS,
    OUTPUTS,
    RESPONSES_ITEM_TYPES,
    Spec,
    is_responses_only,
    item_type,
    part_type,
)
from agentmem._json import parse_arguments, type_name
from agentmem._shape import Message, require_str
from agentmem.errors import InvalidMessageError

__all__ = [
    "ITEMS_FIELD",
    "RESPONSES_ITEM_TYPES",
    "is_responses_only",
    "items_to_canonical",
    "looks_like_responses_item",
]

_PART_MARKS: Final = INPUT_PARTS | {"output_text"}


def looks_like_responses_item(message: Mapping[str, Any]) -> bool:
    """True when ``message`` can only be a Responses input item.

    An item with a Responses ``type`` other than ``message``; a ``message``
    (typed, or an easy input message) whose content uses Responses parts
    (``input_text``, ``output_text``, ``input_image``, ``input_file``); or a
    typed ``message`` with string content. A Chat message (no ``type``,
    string or Chat parts) and an Anthropic message (``text`` / ``tool_use``
    blocks) are not.
    """
    kind = message.get("type")
    if isinstance(kind, str) and kind != "message":
        return kind in ITEM_KEYS
    content = message.get("content")
    if isinstance(content, list):
        # A refusal part marks a typed message only: Chat assistant content has them too.
        marks = _PART_MARKS | {"refusal"} if kind == "message" else _PART_MARKS
        return any(part_type(p) in marks for p in content)
    return kind == "message" and isinstance(content, str) and "role" in message


# --------------------------------------------------------------------------- items -> canonical


def _bad(text: str, index: int, field: str) -> InvalidMessageError:
    return InvalidMessageError(text, index=index, field=field)


def _input_part(part: Any, index: int, field: str, *, tool: bool = False) -> dict[str, Any]:
    """One ``input_*`` part as a canonical content part."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind == "input_text":
        return {"type": "text", "text": require_str(part.get("text"), f"{field}.text", index)}
    if kind == "input_image":
        url = part.get("image_url")
        detail = part.get("detail")
        if detail is not None and (not isinstance(detail, str) or detail not in IMAGE_DETAILS):
            raise _bad(
                "detail must be 'auto', 'low', 'high' or 'original'", index, f"{field}.detail"
            )
        if isinstance(url, str) and url:
            image: dict[str, Any] = {"url": url}
            if detail in ("auto", "low", "high"):
                image["detail"] = detail
            return {"type": "image_url", "image_url": image}
        file_id = require_str(part.get("file_id"), f"{field}.file_id", index, nonempty=True)
        return {"type": "text", "text": f"[image: file {file_id}]"}
    if kind == "input_file":
        body = {
            key: require_str(part[key], f"{field}.{key}", index)
            for key in ("file_data", "file_id", "filename", "file_url")
            if part.get(key) is not None
        }
        if not any(key in body for key in ("file_data", "file_id", "file_url")):
            raise _bad("an input_file needs file_data, file_id or file_url", index, field)
        detail = part.get("detail")
        if detail is not None and detail not in ("auto", "low", "high"):
            raise _bad("detail must be 'auto', 'low' or 'high'", index, f"{field}.detail")
        label = body.get("filename") or body.get("file_url") or body.get("file_id") or "attachment"
        if tool or "file_url" in body or ("file_data" not in body and "file_id" not in body):
            return {"type": "text", "text": f"[file: {label}]"}
        return {
            "type": "file",
            "file": {k: body[k] for k in ("file_data", "file_id", "filename") if k in body},
        }
    raise _bad(f"part type {kind!r} is not an input part", index, f"{field}.type")


def _parts(
    content: Any, allowed: frozenset[str], index: int, field: str
) -> list[Mapping[str, Any]]:
    if not isinstance(content, list):
        raise _bad(f"expected a string or a list of parts, got {type_name(content)}", index, field)
    for i, part in enumerate(content):
        kind = part_type(part)
        if kind is None or kind not in allowed:
            raise _bad(
                f"part type {kind!r} is not allowed here (allowed: {', '.join(sorted(allowed))})",
                index,
                f"{field}[{i}].type",
            )
    return content


def _user_message(item: Mapping[str, Any], index: int) -> Message:
    role = item["role"]
    content = item.get("content")
    canonical_role = "user" if role == "user" else "system"
    if isinstance(content, str):
        return {"role": canonical_role, "content": content}
    parts = _parts(content, INPUT_PARTS, index, "content")
    converted = [_input_part(p, index, f"content[{i}]") for i, p in enumerate(parts)]
    if canonical_role == "system" and any(p["type"] != "text" for p in converted):
        raise _bad("system and developer messages carry text only", index, "content")
    return {"role": canonical_role, "content": converted}


def _output(item: Mapping[str, Any], kind: str, index: int) -> str | list[dict[str, Any]]:
    """The canonical tool-message content of a call output item (a string or parts)."""
    key = "output" if item.get("output") is not None else "status"
    value = item.get(key)
    if kind == "computer_call_output" and isinstance(value, Mapping):
        url = value.get("image_url")
        if isinstance(url, str) and url:
            return [{"type": "image_url", "image_url": {"url": url}}]
        return "[computer screenshot]"
    if isinstance(value, str):
        return value
    if isinstance(value, list) and kind in ("function_call_output", "custom_tool_call_output"):
        parts = _parts(value, INPUT_PARTS, index, key)
        return [_input_part(p, index, f"{key}[{i}]", tool=True) for i, p in enumerate(parts)]
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _call_arguments(item: Mapping[str, Any], kind: str) -> str:
    if kind == "function_call":
        args = item["arguments"]
        assert isinstance(args, str)
        return args
    if kind == "custom_tool_call":
        body: dict[str, Any] = {"input": item["input"]}
    elif kind == "computer_call":
        body = {k: item[k] for k in ("action", "actions") if item.get(k) is not None}
    elif kind == "apply_patch_call":
        body = {"operation": item["operation"]}
    else:
        body = {"action": item["action"]}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


_MESSAGE_FIELDS: Final[Mapping[str, Spec]] = {
    "id": "str",
    "status": frozenset({"in_progress", "completed", "incomplete"}),
    "phase": frozenset({"commentary", "final_answer"}),
}


def _check_item(item: Any, index: int) -> str:
    """The item's type after checking its required keys (the SDK's ``Required`` ones)."""
    if not isinstance(item, Mapping):
        raise _bad(f"expected a Responses item object, got {type_name(item)}", index, "type")
    kind = item_type(item)
    if kind == "message":
        role = item.get("role")
        if not isinstance(role, str) or role not in MESSAGE_ROLES:
            raise _bad(
                f"message role {role!r} must be one of user, system, developer, assistant",
                index,
                "role",
            )
        if "content" not in item:
            raise _bad("a message needs content", index, "content")
        for key, rule in _MESSAGE_FIELDS.items():
            value = item.get(key)
            if value is not None and not _holds(value, rule):
                raise _bad(f"expected {_expected(rule)}, got {value!r:.40}", index, key)
        return "message"
    if not isinstance(kind, str) or kind not in ITEM_KEYS:
        raise _bad(f"unknown Responses item type {kind!r}", index, "type")
    for key in ITEM_KEYS[kind][1]:
        if item.get(key) is None:
            raise _bad(f"a {kind} item needs {key!r}", index, key)
    fields = ITEM_FIELDS[kind]
    for key, value in item.items():
        spec = fields.get(key)
        if spec is not None and value is not None and not _holds(value, spec):
            raise _bad(f"expected {_expected(spec)}, got {value!r:.40}", index, key)
    for key in ("id", "call_id", "approval_request_id"):
        if item.get(key) is not None:
            require_str(item[key], key, index, nonempty=True)
    if kind in CALLS or kind in OUTPUTS:
        key = OUTPUTS.get(kind, "call_id")
        require_str(item.get(key), key, index, nonempty=True)
    if kind in ("function_call", "custom_tool_call"):
        name = require_str(item["name"], "name", index, nonempty=True)
        if not NAME_RE.fullmatch(name):
            raise _bad(f"tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$", index, "name")
    if kind == "function_call":
        parse_arguments(
            require_str(item["arguments"], "arguments", index), index=index, field="arguments"
        )
    elif kind == "custom_tool_call":
        require_str(item["input"], "input", index)
    elif kind == "computer_call" and item.get("action") is None and item.get("actions") is None:
        raise _bad("a computer_call needs 'action' or 'actions'", index, "action")
    elif kind == "computer_call_output":
        screenshot = item["output"]
        if screenshot.get("type") != "computer_screenshot":
            raise _bad("expected a computer_screenshot", index, "output.type")
        for key in ("image_url", "file_id"):
            if screenshot.get(key) is not None:
                require_str(screenshot[key], f"output.{key}", index)
    elif kind == "reasoning":
        for key, wanted in (("summary", "summary_text"), ("content", "reasoning_text")):
            for i, part in enumerate(item.get(key) or ()):
                if part_type(part) != wanted:
                    raise _bad(f"{key} parts are {wanted} objects", index, f"{key}[{i}]")
                require_str(part.get("text"), f"{key}[{i}].text", index)
    return kind


def _expected(spec: Spec) -> str:
    return " or ".join(map(repr, sorted(spec))) if isinstance(spec, frozenset) else spec


def _holds(value: Any, spec: Spec) -> bool:
    """Whether a field's value is what the SDK's type says it holds (nested objects: shape only)."""
    if isinstance(spec, frozenset):
        return isinstance(value, str) and value in spec
    if spec == "str":
        return isinstance(value, str)
    if spec == "bool":
        return isinstance(value, bool)
    if spec == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if spec == "list":
        return isinstance(value, list)
    if spec == "dict":
        return isinstance(value, dict)
    if spec == "str|list":
        return isinstance(value, str | list)
    return True


def items_to_canonical(
    items: Sequence[dict[str, Any]], start: int = 0
) -> list[tuple[int, Message]]:
    """Convert cleaned Responses items into canonical messages, not yet validated.

    Each message carries its source items (the objects given: the caller passes
    fresh cleaned copies, see :func:`agentmem._json.clean_value`) in :data:`ITEMS_FIELD`
    and comes with the index of its first item (``start`` is ``items[0]``'s),
    the index errors report.
    """
    out: list[tuple[int, Message]] = []
    run: list[tuple[int, str, Mapping[str, Any]]] = []

    def flush() -> None:
        if run:
            out.append((run[0][0], _assistant_turn(run)))
            run.clear()

    for offset, item in enumerate(items):
        index = start + offset
        kind = _check_item(item, index)
        if (
            (kind == "message" and item["role"] == "assistant")
            or kind in CALLS
            or kind in OPAQUE_ASSISTANT
        ):
            run.append((index, kind, item))
            continue
        flush()
        msg: Message
        if kind == "message":
            msg = _user_message(item, index)
        elif kind in OUTPUTS:
            call_key = OUTPUTS[kind]
            msg = {
                "role": "tool",
                "tool_call_id": item[call_key],
                "content": _output(item, kind, index),
            }
        else:
            msg = {"role": "assistant", "content": None}
        msg[ITEMS_FIELD] = [item]
        out.append((index, msg))
    flush()
    return out


def _assistant_turn(run: list[tuple[int, str, Mapping[str, Any]]]) -> Message:
    texts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for index, kind, item in run:
        if kind == "message":
            content = item["content"]
            if isinstance(content, str):
                texts.append({"type": "text", "text": content})
                continue
            for i, part in enumerate(_parts(content, OUTPUT_PARTS, index, "content")):
                if part["type"] == "output_text":
                    text = require_str(part.get("text"), f"content[{i}].text", index)
                    texts.append({"type": "text", "text": text})
                else:
                    refusal = require_str(part.get("refusal"), f"content[{i}].refusal", index)
                    texts.append({"type": "refusal", "refusal": refusal})
        elif kind in CALLS:
            name = item["name"] if kind in ("function_call", "custom_tool_call") else kind[:-5]
            calls.append(
                {
                    "id": item["call_id"],
                    "type": "function",
                    "function": {"name": name, "arguments": _call_arguments(item, kind)},
                }
            )
    msg: Message = {"role": "assistant"}
    if len(texts) == 1 and texts[0]["type"] == "text":
        msg["content"] = texts[0]["text"]
    else:
        msg["content"] = texts or None
    if calls:
        msg["tool_calls"] = calls
    msg[ITEMS_FIELD] = [item for _, _, item in run]
    return msg
