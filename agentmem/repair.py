"""Turn any stored message list into a payload a provider accepts.

The history may hold anything validation lets through: assistant tool
calls whose results never arrived (a crash, an interrupt, a deleted
message), tool results whose call was deleted or truncated away, the same
tool-call id used twice, ids a provider rejects, thinking-mode reasoning on
some assistant turns and not others. Rather than forbidding those states
(which would make deletion, truncation and undo fail in surprising ways),
agentmem repairs on the way out, in an ordered pipeline of small pure
passes. Each pass is named for the provider rule it enforces, is
deterministic (no clock, no random ids), is idempotent, never mutates its
input, and returns the input list itself when it has nothing to do:

1. :func:`drop_orphan_tool_results` -- a ``tool`` message must answer a call of
   the assistant message directly before its run of tool messages, once.
   Any other tool message is dropped.
2. :func:`answer_dangling_tool_calls` -- every tool call must be answered
   before the next non-tool message. A missing answer is synthesised right
   after the existing ones, with :data:`MISSING_TOOL_RESULT` as content and
   the internal ``synthesized`` flag.
3. :func:`drop_empty_assistant_messages` -- an assistant message with no
   content, no tool calls and no refusal carries nothing and is rejected by
   providers, so it is dropped.
4. :func:`make_tool_call_ids_unique` -- ids must be unique across the payload
   and match ``^[a-zA-Z0-9_-]{1,40}$`` (the intersection of OpenAI's 40
   character limit and Anthropic's pattern). Offending ids are replaced by
   ``call_<hash>`` derived from the original id and its occurrence count,
   and the answering tool messages follow.
5. :func:`pad_reasoning_content` -- thinking-mode providers (DeepSeek, Kimi)
   reject a payload where some assistant messages carry
   ``reasoning_content`` and others do not; the missing ones get ``""``.

User messages are never dropped or reordered. Everything a pass decides
depends only on the messages before the point it is looking at (plus the
run of tool messages right after an assistant message), so appending a
turn leaves the payload of earlier turns unchanged: provider prompt
caching keeps working. The one exception is rule 5, which by its nature
changes earlier assistant messages the first time reasoning appears.

:func:`build_payload` runs the passes and renders the result for one
provider: OpenAI dicts carrying, at every level (message, tool call,
function, audio, content part), only the keys the request schema defines
(:func:`openai_view`; a reply's ``tool_calls[i].index`` or ``audio.data``
never goes back), or the Anthropic ``(system, messages)`` pair, whose
blocks are built key by key (see :func:`agentmem.messages.to_anthropic`).
The payload is a deep copy: a host may mutate it (add ``cache_control``,
say) without touching the stored history.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any, Final, Literal, overload

import orjson

from agentmem.errors import InvalidArgumentError
from agentmem.messages import (
    API_FIELDS,
    Message,
    is_responses_only,
    to_anthropic,
    to_responses_items,
)

__all__ = [
    "MISSING_TOOL_RESULT",
    "PROVIDERS",
    "Provider",
    "RepairStream",
    "answer_dangling_tool_calls",
    "build_payload",
    "drop_empty_assistant_messages",
    "drop_orphan_tool_results",
    "make_tool_call_ids_unique",
    "openai_view",
    "pad_reasoning_content",
    "repair",
    "select_task_chain",
    "task_chain_set",
]

Provider = Literal["openai", "anthropic", "openai-responses"]
PROVIDERS: Final = ("openai", "anthropic", "openai-responses")

MISSING_TOOL_RESULT: Final = (
    "[no result: this tool call was interrupted before it returned a result]"
)
"""Content of a tool result synthesised for a call that was never answered."""

_VALID_ID: Final = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")
# The request schema of OpenAI Chat Completions, level by level (docs/messages.md lists
# the sources). Message-level keys per role are messages.API_FIELDS.
_OPENAI_PART_BODY_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "image_url": ("url", "detail"),
    "input_audio": ("data", "format"),
    "file": ("file_data", "file_id", "filename"),
}
"""For each non-text content part type, the keys its inner object may carry."""
_OPENAI_TEXT_PART_TYPES: Final = frozenset({"text", "refusal"})


def task_chain_set(task_chain: Collection[Any] | None) -> frozenset[Any] | None:
    """Validate a ``task_chain`` argument: ``None`` or a collection of hashable task ids.

    Raises:
        InvalidArgumentError: anything else (a string, an int, unhashable ids).
    """
    if task_chain is None or type(task_chain) is frozenset:
        return task_chain  # a frozenset passes as is: the context caches compare it by identity
    if isinstance(task_chain, str | bytes) or not isinstance(task_chain, Collection):
        raise InvalidArgumentError(
            f"task_chain must be a collection of task ids, got {type(task_chain).__name__}"
        )
    try:
        return frozenset(task_chain)
    except TypeError as exc:
        raise InvalidArgumentError("task ids in task_chain must be hashable") from exc


def select_task_chain(
    messages: Sequence[Message], task_chain: Collection[Any] | None
) -> Sequence[Message]:
    """Keep messages of the active task chain (time machine).

    A message tagged with a ``task_id`` outside ``task_chain`` belongs to an
    undone task or a sibling branch and is left out; untagged messages
    (system prompt, injections) always stay. ``None`` keeps everything.

    Raises:
        InvalidArgumentError: ``task_chain`` is not a collection of task ids.
    """
    chain = task_chain_set(task_chain)
    if chain is None:
        return messages
    kept = [m for m in messages if m.get("task_id") is None or m.get("task_id") in chain]
    return messages if len(kept) == len(messages) else kept


def drop_orphan_tool_results(messages: Sequence[Message]) -> Sequence[Message]:
    """OpenAI/Anthropic: a tool result must answer a call of the assistant message just before it.

    Walking forward, the calls of the latest assistant message stay open
    until a message of any role other than ``tool`` arrives. A tool message
    survives only if it answers one of those still-open calls (each call
    once); late, duplicate and unknown answers are dropped.
    """
    kept: list[Message] = []
    open_calls: list[str] = []
    dropped = False
    for msg in messages:
        role = msg["role"]
        if role == "tool":
            call_id = msg["tool_call_id"]
            if call_id in open_calls:
                open_calls.remove(call_id)
                kept.append(msg)
            else:
                dropped = True
            continue
        calls = msg.get("tool_calls") if role == "assistant" else None
        open_calls = [call["id"] for call in calls] if calls else []
        kept.append(msg)
    return kept if dropped else messages


def _missing_result(call_id: str, caller: Message) -> Message:
    """The synthesised answer to an unanswered call of ``caller`` (same task, marked)."""
    synthetic: Message = {
        "role": "tool",
        "tool_call_id": call_id,
        "content": MISSING_TOOL_RESULT,
        "synthesized": True,
    }
    if caller.get("task_id") is not None:
        synthetic["task_id"] = caller["task_id"]
    return synthetic


def answer_dangling_tool_calls(messages: Sequence[Message]) -> Sequence[Message]:
    """OpenAI/Anthropic: every tool call is answered before the next non-tool message.

    Expects orphan results already dropped. For each assistant message with
    tool calls, the calls its tool-message run does not answer get a
    synthesised answer appended to the run, in call order.
    """
    out: list[Message] = []
    changed = False
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        out.append(msg)
        i += 1
        calls = msg.get("tool_calls") if msg["role"] == "assistant" else None
        if not calls:
            continue
        pending = [call["id"] for call in calls]
        while i < n and messages[i]["role"] == "tool":
            call_id = messages[i]["tool_call_id"]
            if call_id in pending:
                pending.remove(call_id)
            out.append(messages[i])
            i += 1
        for call_id in pending:
            changed = True
            out.append(_missing_result(call_id, msg))
    return out if changed else messages


def _is_empty_content(content: Any) -> bool:
    return content is None or content == "" or content == []


def drop_empty_assistant_messages(messages: Sequence[Message]) -> Sequence[Message]:
    """OpenAI/Anthropic: an assistant message must carry content, a refusal or tool calls."""
    kept = [m for m in messages if m["role"] != "assistant" or not _is_empty_assistant(m)]
    return messages if len(kept) == len(messages) else kept


def _is_empty_assistant(msg: Message) -> bool:
    """Nothing for any provider. A message of opaque Responses items only is kept:
    the Responses API replays them; the Chat and Anthropic renderers leave it out."""
    return (
        not msg.get("tool_calls")
        and not msg.get("refusal")
        and not msg.get("audio")
        and _is_empty_content(msg.get("content"))
        and not is_responses_only(msg)
    )


def _replacement_id(original: str, occurrence: int, used: set[str]) -> str:
    salt = 0
    while True:
        seed = f"{original}\x00{occurrence}\x00{salt}".encode("utf-8", "surrogatepass")
        candidate = "call_" + hashlib.sha256(seed).hexdigest()[:24]
        if candidate not in used:
            return candidate
        salt += 1


def make_tool_call_ids_unique(messages: Sequence[Message]) -> Sequence[Message]:
    """OpenAI: ids are at most 40 characters; Anthropic: ids match ``^[a-zA-Z0-9_-]+$``;
    both: ids are unique in a request.

    Expects the pairing passes to have run, so every tool message sits in
    the run right after the assistant message whose call it answers. An id
    that is invalid or already used is replaced by a deterministic
    ``call_<hash>``; the k-th answer to an id in the run follows the k-th
    call with that id.
    """
    used: set[str] = set()
    seen_count: Counter[str] = Counter()
    out: list[Message] = []
    changed = False
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        out.append(msg)
        i += 1
        calls = msg.get("tool_calls") if msg["role"] == "assistant" else None
        if not calls:
            continue
        new_ids = []
        for call in calls:
            old = call["id"]
            seen_count[old] += 1
            valid = old not in used and _VALID_ID.fullmatch(old) is not None
            new = old if valid else _replacement_id(old, seen_count[old], used)
            used.add(new)
            new_ids.append(new)
        if all(call["id"] == new for call, new in zip(calls, new_ids, strict=True)):
            continue
        changed = True
        out[-1] = {
            **msg,
            "tool_calls": [
                call if call["id"] == new else {**call, "id": new}
                for call, new in zip(calls, new_ids, strict=True)
            ],
        }
        # The k-th answer to an id in the run follows the k-th call with that id.
        queues: dict[str, list[str]] = {}
        for call, new in zip(calls, new_ids, strict=True):
            queues.setdefault(call["id"], []).append(new)
        while i < n and messages[i]["role"] == "tool":
            tool = messages[i]
            i += 1
            queue = queues.get(tool["tool_call_id"])
            new_id = queue.pop(0) if queue else tool["tool_call_id"]
            out.append(tool if new_id == tool["tool_call_id"] else {**tool, "tool_call_id": new_id})
    return out if changed else messages


def pad_reasoning_content(messages: Sequence[Message], *, force: bool = False) -> Sequence[Message]:
    """Thinking-mode providers: if any assistant message carries ``reasoning_content``, all do.

    Missing ones get ``""``. With ``force`` every assistant message gets the
    field even when none had it (a host retrying after a "reasoning_content
    must be passed back" rejection).
    """
    assistants = [m for m in messages if m["role"] == "assistant"]
    if not assistants:
        return messages
    if not force and not any(isinstance(m.get("reasoning_content"), str) for m in assistants):
        return messages
    if all(isinstance(m.get("reasoning_content"), str) for m in assistants):
        return messages
    return [
        {**m, "reasoning_content": ""}
        if m["role"] == "assistant" and not isinstance(m.get("reasoning_content"), str)
        else m
        for m in messages
    ]


class RepairStream:
    """Passes 1-4 of :func:`repair`, applied one message at a time, resumable.

    :func:`repair` is the reference: small pure passes over a whole list.
    This class produces exactly the same output (a property test checks it)
    but consumes messages incrementally and can be :meth:`copy`-ed at any
    point, so a caller that only ever appends (the context manager, between
    trims) repairs each message once instead of the whole window per call.

    Output decided so far is in :attr:`out`. Everything in it is final
    except the run of tool results of the latest assistant message, whose
    missing answers are only synthesised by :meth:`finish`. Messages in
    :attr:`out` are the input objects themselves unless repair changed them
    (renamed ids, synthesised results), and a changed message is created
    once, so identity caches downstream keep working. Reasoning padding
    (pass 5) is left to the renderer.
    """

    __slots__ = ("_open", "_open_index", "_open_msg", "_seen", "_used", "out")

    def __init__(self) -> None:
        self.out: list[Message] = []
        self._used: set[str] = set()
        self._seen: Counter[str] = Counter()
        self._open: list[tuple[str, str]] = []  # (original id, payload id) still unanswered
        self._open_msg: Message | None = None
        self._open_index = 0

    def copy(self) -> RepairStream:
        """An independent stream in the same state."""
        other = RepairStream()
        other.out = list(self.out)
        other._used = set(self._used)
        other._seen = Counter(self._seen)
        other._open = list(self._open)
        other._open_msg = self._open_msg
        other._open_index = self._open_index
        return other

    @property
    def settled(self) -> int:
        """Length of the prefix of :attr:`out` that no later message can change."""
        return len(self.out) if self._open_msg is None else self._open_index

    def _close_run(self) -> None:
        msg = self._open_msg
        if msg is None:
            return
        for _, payload_id in self._open:
            self.out.append(_missing_result(payload_id, msg))
        self._open = []
        self._open_msg = None

    def push(self, msg: Message) -> None:
        """Feed the next message."""
        if msg["role"] == "tool":
            call_id = msg["tool_call_id"]
            for k, (original, payload_id) in enumerate(self._open):
                if original == call_id:
                    del self._open[k]
                    self.out.append(
                        msg if payload_id == call_id else {**msg, "tool_call_id": payload_id}
                    )
                    return
            return  # orphan: dropped
        self._close_run()
        if msg["role"] != "assistant":
            self.out.append(msg)
            return
        calls = msg.get("tool_calls")
        if not calls:
            if not _is_empty_assistant(msg):
                self.out.append(msg)
            return
        pairs = []
        for call in calls:
            old = call["id"]
            self._seen[old] += 1
            valid = old not in self._used and _VALID_ID.fullmatch(old) is not None
            new = old if valid else _replacement_id(old, self._seen[old], self._used)
            self._used.add(new)
            pairs.append((old, new))
        if any(old != new for old, new in pairs):
            msg = {
                **msg,
                "tool_calls": [
                    call if old == new else {**call, "id": new}
                    for call, (old, new) in zip(calls, pairs, strict=True)
                ],
            }
        self._open_index = len(self.out)
        self.out.append(msg)
        self._open = pairs
        self._open_msg = msg

    def finish(self) -> list[Message]:
        """The repaired list if the input ended here (the stream itself is unchanged)."""
        if self._open_msg is None:
            return list(self.out)
        tail = self.copy()
        tail._close_run()
        return tail.out


def repair(
    messages: Sequence[Message], *, force_reasoning_content_pad: bool = False
) -> Sequence[Message]:
    """Run every provider-neutral pass in order. Returns ``messages`` itself when already valid."""
    out = drop_orphan_tool_results(messages)
    out = answer_dangling_tool_calls(out)
    out = drop_empty_assistant_messages(out)
    out = make_tool_call_ids_unique(out)
    return pad_reasoning_content(out, force=force_reasoning_content_pad)


def _openai_part(part: dict[str, Any], role: str) -> dict[str, Any]:
    kind = part.get("type", "")
    if role == "tool" and kind != "text":
        # OpenAI tool messages take text parts only.
        return {
            "type": "text",
            "text": f"[{kind or 'attachment'} omitted: tool results carry text only]",
        }
    if kind in _OPENAI_TEXT_PART_TYPES:
        return {"type": kind, kind: part[kind]}
    body = part[kind]
    keys = _OPENAI_PART_BODY_KEYS[kind]
    return {"type": kind, kind: {k: body[k] for k in keys if body.get(k) is not None}}


def _openai_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call["function"]
    return {
        "id": call["id"],
        "type": "function",
        "function": {"name": function["name"], "arguments": function["arguments"]},
    }


def openai_view(msg: Message) -> dict[str, Any]:
    """The OpenAI Chat Completions form of one repaired message: only the keys the API defines.

    Every level is whitelisted against the request schema: the message keys
    its role may send (:data:`~agentmem.messages.API_FIELDS`), tool calls
    (``id``, ``type``, ``function``: ``name``, ``arguments``), ``audio``
    (``id``), and content parts with their inner objects. So keys a provider
    reply carries but a request may not (``tool_calls[i].index``,
    ``annotations``, ``audio.data``, ``image_url`` extras...) never leave.
    Keys whose value is ``None`` are left out, except ``content``.
    Non-text parts of a tool message become a text placeholder (OpenAI tool
    messages carry text only). Strings are shared with ``msg``; the view's
    own dicts and lists are new, but treat it as read-only (it may be cached).
    """
    role = msg["role"]
    allowed = API_FIELDS[role]
    view = {k: v for k, v in msg.items() if k in allowed and (v is not None or k == "content")}
    content = view.get("content")
    if isinstance(content, list):
        view["content"] = [_openai_part(p, role) for p in content]
    calls = view.get("tool_calls")
    if calls:
        view["tool_calls"] = [_openai_tool_call(c) for c in calls]
    audio = view.get("audio")
    if audio is not None:
        view["audio"] = {"id": audio["id"]}
    if role == "assistant" and "content" not in view:
        view["content"] = None
    return view


@overload
def build_payload(
    messages: Sequence[Message],
    *,
    provider: Literal["openai", "openai-responses"] = ...,
    force_reasoning_content_pad: bool = ...,
    task_chain: Collection[int] | None = ...,
) -> list[dict[str, Any]]: ...


@overload
def build_payload(
    messages: Sequence[Message],
    *,
    provider: Literal["anthropic"],
    force_reasoning_content_pad: bool = ...,
    task_chain: Collection[int] | None = ...,
) -> tuple[str | None, list[dict[str, Any]]]: ...


@overload
def build_payload(
    messages: Sequence[Message],
    *,
    provider: str,
    force_reasoning_content_pad: bool = ...,
    task_chain: Collection[int] | None = ...,
) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]: ...


def build_payload(
    messages: Sequence[Message],
    *,
    provider: str = "openai",
    force_reasoning_content_pad: bool = False,
    task_chain: Collection[int] | None = None,
) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]:
    """Repair ``messages`` and render them for ``provider``.

    Args:
        messages: Canonical messages (as validated by
            :func:`agentmem.messages.normalize_message`).
        provider: ``"openai"`` (Chat Completions, also most OpenAI-compatible
            servers), ``"anthropic"`` (Messages API) or ``"openai-responses"``
            (the Responses API's ``input`` items).
        force_reasoning_content_pad: Give every assistant message a
            ``reasoning_content`` even if none has one (OpenAI Chat shape only).
        task_chain: Task ids of the active time-machine chain; messages of
            other tasks are left out. ``None`` keeps all.

    Returns:
        For OpenAI, the list of message dicts. For Anthropic, ``(system,
        messages)``; pass ``system`` only when it is not ``None``. For the
        Responses API, the list of input items.

    Raises:
        InvalidArgumentError: ``provider`` is not one of :data:`PROVIDERS`, or
            ``messages`` were not validated (pass them through
            :func:`agentmem.messages.normalize_messages` first).
    """
    if provider not in PROVIDERS:
        raise InvalidArgumentError(
            f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}"
        )
    try:
        selected = select_task_chain(messages, task_chain)
        repaired = repair(selected, force_reasoning_content_pad=force_reasoning_content_pad)
        if provider == "anthropic":
            system, turns = to_anthropic(repaired)
            return system, orjson.loads(orjson.dumps(turns))
        if provider == "openai-responses":
            return to_responses_items(repaired)  # a fresh copy already
        views = [openai_view(m) for m in repaired if not is_responses_only(m)]
        payload = orjson.loads(orjson.dumps(views))
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise InvalidArgumentError(
            f"build_payload expects validated canonical messages ({type(exc).__name__}: {exc})"
        ) from exc
    assert isinstance(payload, list)
    return payload
