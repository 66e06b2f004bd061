"""The OpenAI Responses codec, canonical -> items: the input list a Responses request sends.

:func:`to_responses_items` expects repaired messages (see
:mod:`agentmem.repair`). A message whose stored ``responses_items`` still
describe it (converting them again gives the same role, content, tool calls,
tool-call id and refusal) is sent as those items, each cut down to the keys
the SDK's input type defines. Otherwise its opaque items (reasoning,
hosted-tool items) are kept and the rest is built from the canonical fields.
Item-level passes then enforce the Responses-only rules (see
:func:`to_responses_items`). The other direction is
:mod:`agentmem._codecs.responses`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import orjson

from agentmem._codecs._responses_schema import (
    CALLS,
    IDLESS,
    IMAGE_DETAILS,
    ITEM_KEYS,
    ITEMS_FIELD,
    OPAQUE_ASSISTANT,
    PART_KEYS,
    is_opaque,
    is_responses_only,
    item_type,
)
from agentmem._shape import Message
from agentmem.errors import InvalidArgumentError, InvalidMessageError

__all__ = ["FAKE_ID", "Derive", "ItemCache", "to_responses_items"]

_COMPARED: Final = ("role", "content", "tool_calls", "tool_call_id", "refusal")

FAKE_ID: Final = "__fake_id__"
"""The OpenAI Agents SDK's placeholder item id (``agents.models.fake_id.FAKE_RESPONSES_ID``)."""

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


def _message_view(item: Mapping[str, Any]) -> dict[str, Any]:
    role = item["role"]
    content = item["content"]
    if role == "assistant":
        if isinstance(content, list):
            parts = []
            for part in content:
                keys = PART_KEYS[part["type"]]
                view = {k: v for k, v in part.items() if k in keys and v is not None}
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
    """A stored item cut down to the keys its SDK input type defines (nested values shared)."""
    kind = item_type(item)
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
    return view


ItemCache = dict[int, tuple[Message, "list[dict[str, Any]]"]]
"""Identity cache of one message's rendered items (see :func:`to_responses_items`)."""


def _render(msg: Message, derive: Derive) -> list[dict[str, Any]]:
    """One message's items, before the item-level passes."""
    originals, valid = _originals(msg, derive)
    # Reasoning another provider produced (through the Agents SDK's LiteLLM models, say)
    # carries its provider_data; the Responses API cannot read it (the SDK drops it too).
    originals = [i for i in originals if i.get("type") != "reasoning" or not i.get("provider_data")]
    if is_responses_only(msg):
        # Nothing but opaque items counts: an empty message item would be sent alone.
        return [_view(item) for item in originals if is_opaque(item)]
    if valid:
        return [_view(item) for item in originals]
    rendered = [_view(item) for item in originals if is_opaque(item)]
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
    slots: list[dict[str, Any] | None] = list(items)
    _unique_ids(slots, calls)
    _match_outputs(slots, calls, answers)
    out = _item_passes([item for item in slots if item is not None])
    # Views share nested values with the stored items (and the cache): the caller gets a copy.
    copied = orjson.loads(orjson.dumps(out))
    assert isinstance(copied, list)
    return copied


def _unique_ids(
    items: list[dict[str, Any] | None], calls: Mapping[str, tuple[int, Mapping[str, Any]]]
) -> None:
    """Item ids are unique ("Duplicate item found with id ..."), in place.

    A later item repeating an ``id`` loses the id when its type allows none (an
    assistant message becomes a plain one, left out when its text is empty),
    becomes the ``function_call`` its canonical form describes when it is a
    call that needs an id (its answer follows in :func:`_match_outputs`), else
    is left out (``None``). The Agents SDK's placeholder id (:data:`FAKE_ID`,
    for providers that assign none) is never sent: it counts as a repeat.
    """
    seen: set[str] = set()
    for position, item in enumerate(items):
        assert item is not None
        item_id = item.get("id")
        kind = item["type"]
        if not isinstance(item_id, str) or kind == "local_shell_call_output":
            continue  # that output's id names its call
        if item_id not in seen and item_id != FAKE_ID:
            seen.add(item_id)
            continue
        replacement: dict[str, Any] | None = None
        if kind == "message":
            replacement = _message_view({k: v for k, v in item.items() if k != "id"})
            if replacement["content"] == "":
                replacement = None  # an empty plain message says nothing
        elif kind in IDLESS:
            replacement = {k: v for k, v in item.items() if k != "id"}
        elif kind in CALLS and item["call_id"] in calls:
            replacement = _built_call(calls[item["call_id"]][1])
        items[position] = replacement


def _match_outputs(
    items: list[dict[str, Any] | None],
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
        # Calls and outputs are never dropped (a repeated call id is rebuilt, not dropped).
        assert output is not None
        assert call_item is not None
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
    """The Responses-only rules left after :func:`_unique_ids` and :func:`_match_outputs`.

    1. A reply to an earlier item needs that item: an ``mcp_approval_response``
       without its ``mcp_approval_request``, a ``program_output`` without its
       ``program``, a ``tool_search_output`` naming a ``call_id`` no earlier
       ``tool_search_call`` has, are dropped; so is a ``compaction_trigger``
       that is not the last item.
    2. A ``reasoning`` item is followed by the output item it belongs to (an
       assistant message, a call, a hosted-tool item): one that is not is dropped.
    """
    kept = items
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
