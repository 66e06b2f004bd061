"""The OpenAI Responses codec: Responses input items <-> canonical (OpenAI Chat) messages.

**Items -> canonical** (:func:`items_to_canonical`). The input is a list of
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
texts, its tool calls in order, the summary text of its reasoning items in
``reasoning_content``. Every canonical message keeps the items it was made
from, verbatim, in the internal field ``responses_items``: together they
are the input list.

**Canonical -> items** (:func:`to_responses_items`) expects repaired
messages (see :mod:`agentmem.repair`). A message whose stored
``responses_items`` still describe it (converting them again gives the same
role, content, tool calls, tool-call id and refusal) is sent as those
items, each cut down to the keys the SDK's input type defines. Otherwise
its opaque items are kept and the rest is built from the canonical fields.
Item-level passes then enforce the Responses-only rules (see
:func:`_item_passes`).

The results of ``items_to_canonical`` are not validated here:
:mod:`agentmem.messages` owns validation and calls into this module; this
module never imports it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import orjson

from agentmem._codecs._responses_schema import (
    CALLS,
    IDLESS,
    IMAGE_DETAILS,
    INPUT_PARTS,
    ITEM_FIELDS,
    ITEM_KEYS,
    MESSAGE_ROLES,
    NAME_RE,
    OPAQUE_ASSISTANT,
    OPAQUE_CLIENT,
    OUTPUT_PARTS,
    OUTPUTS,
    PART_KEYS,
    RESPONSES_ITEM_TYPES,
    Spec,
)
from agentmem._json import parse_arguments, type_name
from agentmem._shape import Message, require_str
from agentmem.errors import InvalidArgumentError, InvalidMessageError

__all__ = [
    "ITEMS_FIELD",
    "RESPONSES_ITEM_TYPES",
    "ItemCache",
    "is_responses_only",
    "items_to_canonical",
    "looks_like_responses_item",
    "to_responses_items",
]

ITEMS_FIELD: Final = "responses_items"
"""The internal field holding the Responses items a canonical message was made from."""


def _item_type(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else None


def _part_type(part: Any) -> str | None:
    kind = part.get("type") if isinstance(part, Mapping) else None
    return kind if isinstance(kind, str) else None


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
        return any(_part_type(p) in marks for p in content)
    return kind == "message" and isinstance(content, str) and "role" in message


def is_responses_only(message: Mapping[str, Any]) -> bool:
    """True for an assistant message that carries nothing but opaque Responses items.

    Reasoning or hosted-tool items with no text and no call of their own (a
    turn's items appended one at a time, a standalone ``mcp_approval_response``)
    have no Chat or Anthropic form: repair keeps such a message (it is not
    empty for the Responses API), and the Chat and Anthropic renderers leave it out.
    """
    if message.get("role") != "assistant" or message.get("tool_calls"):
        return False
    content = message.get("content")
    if content not in (None, "", []) or message.get("refusal") or message.get("audio"):
        return False
    items = message.get(ITEMS_FIELD)
    return isinstance(items, list) and any(
        isinstance(item, Mapping) and _is_opaque(item) for item in items
    )


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
        kind = _part_type(part)
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
    kind = _item_type(item)
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
        for key, part_type in (("summary", "summary_text"), ("content", "reasoning_text")):
            for i, part in enumerate(item.get(key) or ()):
                if _part_type(part) != part_type:
                    raise _bad(f"{key} parts are {part_type} objects", index, f"{key}[{i}]")
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


def items_to_canonical(items: Sequence[Any], start: int = 0) -> list[tuple[int, Message]]:
    """Convert cleaned Responses items into canonical messages, not yet validated.

    Each message carries its source items (deep copies) in :data:`ITEMS_FIELD`
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
        msg[ITEMS_FIELD] = [copy.deepcopy(dict(item))]
        out.append((index, msg))
    flush()
    return out


def _assistant_turn(run: list[tuple[int, str, Mapping[str, Any]]]) -> Message:
    texts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
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
        elif kind == "reasoning":
            summary = "\n".join(p["text"] for p in item["summary"] if p["text"])
            if summary:
                reasoning.append(summary)
    msg: Message = {"role": "assistant"}
    if len(texts) == 1 and texts[0]["type"] == "text":
        msg["content"] = texts[0]["text"]
    else:
        msg["content"] = texts or None
    if calls:
        msg["tool_calls"] = calls
    if reasoning:
        msg["reasoning_content"] = "\n\n".join(reasoning)
    msg[ITEMS_FIELD] = [copy.deepcopy(dict(item)) for _, _, item in run]
    return msg


# --------------------------------------------------------------------------- canonical -> items


_COMPARED: Final = ("role", "content", "tool_calls", "tool_call_id", "refusal")

Derive = Callable[[list[Any]], list[Message]]
"""Converts stored items to validated canonical messages (raises InvalidMessageError)."""


def _originals(msg: Message, derive: Derive) -> tuple[list[dict[str, Any]], bool]:
    """``(items, still_valid)``: the message's stored items and whether they still describe it."""
    items = msg.get(ITEMS_FIELD)
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        return [], False
    try:
        derived = derive(items)
    except InvalidMessageError:
        return [], False
    if len(derived) != 1:
        return [], False
    again = derived[0]
    return items, all(again.get(key) == msg.get(key) for key in _COMPARED)


def _image_part(image: Mapping[str, Any]) -> dict[str, Any]:
    detail = image.get("detail")
    return {
        "type": "input_image",
        "image_url": image["url"],
        "detail": detail if detail in IMAGE_DETAILS else "auto",
    }


def _built_parts(content: Any, *, tool: bool = False) -> str | list[dict[str, Any]]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            parts.append({"type": "input_text", "text": part["text"]})
        elif kind == "refusal":
            parts.append({"type": "input_text", "text": part["refusal"]})
        elif kind == "image_url":
            parts.append(_image_part(part["image_url"]))
        elif kind == "file" and not tool:
            body = part["file"]
            file = {"type": "input_file"}
            file.update({k: body[k] for k in ("file_data", "file_id", "filename") if body.get(k)})
            parts.append(file)
        else:
            label = "audio" if kind == "input_audio" else (kind or "attachment")
            parts.append({"type": "input_text", "text": f"[{label} omitted]"})
    if not parts:
        return ""
    return parts


def _built(msg: Message) -> list[dict[str, Any]]:
    """The items for one canonical message, built from its Chat fields."""
    role = msg["role"]
    if role in ("system", "user"):
        return [{"type": "message", "role": role, "content": _built_parts(msg.get("content"))}]
    if role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": msg["tool_call_id"],
                "output": _built_parts(msg.get("content"), tool=True),
            }
        ]
    items: list[dict[str, Any]] = []
    content = msg.get("content")
    texts: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        texts.extend(p["text"] if p["type"] == "text" else p["refusal"] for p in content)
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and refusal:
        texts.append(refusal)
    items.extend(
        {"type": "message", "role": "assistant", "content": text} for text in texts if text
    )
    items.extend(_built_call(call) for call in msg.get("tool_calls") or ())
    return items


def _built_call(call: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call["id"],
        "name": call["function"]["name"],
        "arguments": call["function"]["arguments"],
    }


def _is_opaque(item: Mapping[str, Any]) -> bool:
    kind = _item_type(item)
    return kind in OPAQUE_ASSISTANT or kind in OPAQUE_CLIENT


def _message_view(item: Mapping[str, Any]) -> dict[str, Any]:
    role = item["role"]
    content = item["content"]
    if role == "assistant":
        if isinstance(content, list):
            parts = []
            for part in content:
                view = {k: v for k, v in part.items() if k in PART_KEYS[part["type"]]}
                if part["type"] == "output_text" and not isinstance(view.get("annotations"), list):
                    view["annotations"] = []
                parts.append(view)
            if isinstance(item.get("id"), str):
                out = {"type": "message", "role": role, "id": item["id"], "content": parts}
                out["status"] = item.get("status") or "completed"
                if item.get("phase") is not None:
                    out["phase"] = item["phase"]
                return out
            text = "".join(p.get("text") or p.get("refusal") or "" for p in parts)
            content = text
        out = {"type": "message", "role": role, "content": content}
        if item.get("phase") is not None:
            out["phase"] = item["phase"]
        return out
    if isinstance(content, list):
        parts = []
        for part in content:
            view = {k: v for k, v in part.items() if k in PART_KEYS[part["type"]] and v is not None}
            if part["type"] == "input_image" and view.get("detail") not in IMAGE_DETAILS:
                view["detail"] = "auto"
            parts.append(view)
        content = parts
    out = {"type": "message", "role": role, "content": content}
    if isinstance(content, list) and item.get("status") is not None:
        out["status"] = item["status"]
    return out


def _view(item: Mapping[str, Any]) -> dict[str, Any]:
    """A stored item cut down to the keys its SDK input type defines (a deep copy)."""
    kind = _item_type(item)
    if kind == "message":
        view = _message_view(item)
    else:
        assert kind is not None  # stored items were checked on the way in
        allowed = ITEM_KEYS[kind][0]
        view = {"type": kind} | {k: v for k, v in item.items() if k in allowed and v is not None}
        if kind in ("function_call_output", "custom_tool_call_output") and isinstance(
            view.get("output"), list
        ):
            view["output"] = [
                {k: v for k, v in p.items() if k in PART_KEYS[p["type"]] and v is not None}
                for p in view["output"]
            ]
    return copy.deepcopy(view)


ItemCache = dict[int, tuple[Message, "list[dict[str, Any]]"]]
"""Identity cache of one message's rendered items (see :func:`to_responses_items`)."""


def _render(msg: Message, derive: Derive) -> list[dict[str, Any]]:
    """One message's items, before the item-level passes."""
    originals, valid = _originals(msg, derive)
    if is_responses_only(msg):
        # Nothing but opaque items counts: an empty message item would be sent alone.
        return [_view(item) for item in originals if _is_opaque(item)]
    if valid:
        return [_view(item) for item in originals]
    rendered = [_view(item) for item in originals if _is_opaque(item)]
    rendered.extend(_built(msg))
    return rendered


def to_responses_items(
    messages: Sequence[Message], derive: Derive, *, cache: ItemCache | None = None
) -> list[dict[str, Any]]:
    """Convert repaired canonical messages to Responses input items.

    ``messages`` must satisfy the pairing rules (:func:`agentmem.repair.repair`).
    ``derive`` converts stored items back to validated canonical messages (it is
    :func:`agentmem.messages.from_responses_items`), which decides whether a
    message's stored items still describe it. With ``cache`` (a dict the caller
    keeps between calls) each message is rendered once while the same object is
    passed again. Either way the result is the caller's to modify.

    Raises:
        InvalidArgumentError: ``messages`` are not validated canonical messages.
    """
    items: list[dict[str, Any]] = []
    calls: dict[str, tuple[int, Mapping[str, Any]]] = {}  # call id -> (position, canonical call)
    answers: list[tuple[int, Message]] = []
    try:
        for msg in messages:
            if cache is None:
                rendered = _render(msg, derive)
            else:
                hit = cache.get(id(msg))
                if hit is None or hit[0] is not msg:
                    hit = (msg, _render(msg, derive))
                    cache[id(msg)] = hit
                rendered = hit[1]
            base = len(items)
            items.extend(rendered)
            if msg["role"] == "assistant":
                by_id = {call["id"]: call for call in msg.get("tool_calls") or ()}
                for k, item in enumerate(rendered):
                    if item["type"] in CALLS and item["call_id"] in by_id:
                        calls[item["call_id"]] = (base + k, by_id[item["call_id"]])
            elif msg["role"] == "tool" and rendered:
                answers.append((base + len(rendered) - 1, msg))
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise InvalidArgumentError(
            f"to_responses_items expects validated canonical messages ({type(exc).__name__}: {exc})"
        ) from exc
    _match_outputs(items, calls, answers)
    out = _item_passes(items)
    if cache is None:
        return out
    copied = orjson.loads(orjson.dumps(out))  # the cached items stay the cache's
    assert isinstance(copied, list)
    return copied


def _match_outputs(
    items: list[dict[str, Any]],
    calls: Mapping[str, tuple[int, Mapping[str, Any]]],
    answers: Sequence[tuple[int, Message]],
) -> None:
    """A call is answered by an output of its own kind: else both are sent as a function call.

    An answer agentmem synthesised (or rebuilt) is a ``function_call_output``;
    a ``computer_call`` (say) cannot take it, so the call is rebuilt as the
    ``function_call`` its canonical form describes.
    """
    for position, tool in answers:
        found = calls.get(tool["tool_call_id"])
        if found is None:
            continue
        call_position, call = found
        output = items[position]
        call_item = items[call_position]
        if CALLS[call_item["type"]][0] != output["type"]:
            items[call_position] = _built_call(call)
            items[position] = _built(tool)[0]


_OUTPUT_ITEMS: Final = frozenset((OPAQUE_ASSISTANT - {"reasoning"}) | set(CALLS))


def _is_output_item(item: Mapping[str, Any]) -> bool:
    kind = item["type"]
    if kind == "message":
        return bool(item["role"] == "assistant")
    return kind in _OUTPUT_ITEMS


def _item_passes(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Responses-only rules, applied in order on the rendered items.

    1. Item ids are unique: a later item repeating an ``id`` loses the id when
       its type allows none (an assistant message becomes a plain one, dropped
       when its text is empty), else it is dropped.
    2. A reply to an earlier item needs that item: an ``mcp_approval_response``
       without its ``mcp_approval_request``, a ``program_output`` without its
       ``program``, a ``tool_search_output`` naming a ``call_id`` no earlier
       ``tool_search_call`` has, are dropped; so is a ``compaction_trigger``
       that is not the last item.
    3. A ``reasoning`` item is followed by the output item it belongs to (an
       assistant message, a call, a hosted-tool item): one that is not is dropped.
    """
    seen: set[str] = set()
    kept: list[dict[str, Any]] = []
    for item in items:
        item_id = item.get("id")
        kind = item["type"]
        if isinstance(item_id, str) and kind != "local_shell_call_output":
            if item_id in seen:
                if kind == "message":
                    item = _message_view({k: v for k, v in item.items() if k != "id"})
                    if item["content"] == "":
                        continue  # an empty plain message says nothing
                elif kind in IDLESS:
                    item = {k: v for k, v in item.items() if k != "id"}
                else:
                    continue
            seen.add(item_id)
        kept.append(item)
    requests: set[str] = set()
    programs: set[str] = set()
    searches: set[str] = set()
    answered: set[str] = set()
    paired: list[dict[str, Any]] = []
    for position, item in enumerate(kept):
        kind = item["type"]
        if kind == "mcp_approval_request":
            requests.add(item["id"])
        elif kind == "program":
            programs.add(item["call_id"])
        elif kind == "tool_search_call" and isinstance(item.get("call_id"), str):
            searches.add(item["call_id"])
        elif kind == "mcp_approval_response":
            request = item["approval_request_id"]
            if request not in requests or request in answered:
                continue
            answered.add(request)
        elif (
            (kind == "program_output" and item["call_id"] not in programs)
            or (
                kind == "tool_search_output"
                and isinstance(item.get("call_id"), str)
                and item["call_id"] not in searches
            )
            or (kind == "compaction_trigger" and position != len(kept) - 1)
        ):
            continue
        paired.append(item)
    out: list[dict[str, Any]] = []
    following_is_output = False
    for item in reversed(paired):
        if item["type"] == "reasoning":
            if not following_is_output:
                continue
            following_is_output = False
        else:
            following_is_output = _is_output_item(item)
        out.append(item)
    out.reverse()
    return out
