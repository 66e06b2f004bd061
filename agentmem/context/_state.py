"""The context manager's incremental state: what a build keeps for the next one.

Private to the :mod:`agentmem.context` package: the cached system prompt and summary
(with their counts), the key and state of the incremental repair stream,
and the structural copy of a cached OpenAI view. Each cache is keyed by the
objects it was built from (compared by identity) and the token counter's
epoch, so a change to any of them rebuilds it and nothing else.

All of it is held per working window in one :class:`WindowState`: the
manager keeps one per window it has built (an
:class:`~agentmem.context._identity.IdentityCache` keyed by the window), so
building another window never resets or reuses this one's state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from agentmem._codecs.anthropic import (
    EMPTY_USER_PLACEHOLDER,
    LEADING_USER_PLACEHOLDER,
    SYSTEM_NOTE_TAG,
)
from agentmem.context._identity import IdentityCache
from agentmem.context._shrink import PayloadShrinker
from agentmem.context.types import NoteMap
from agentmem.history import MessageHistory
from agentmem.messages import (
    ItemCache,
    Message,
    TurnCache,
    is_responses_only,
    message_text,
    to_anthropic,
    to_responses_items,
)
from agentmem.protocols import TokenCounter, counter_epoch
from agentmem.repair import RepairStream
from agentmem.stm import ShortTermMemory
from agentmem.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, count_message
from agentmem.yarn import YaRN

__all__ = [
    "Prefix",
    "PrefixKey",
    "Repaired",
    "SummaryCache",
    "SystemCache",
    "WindowState",
    "anthropic_extra",
    "chat_visible",
    "copy_view",
    "has_reasoning",
    "other_payload",
    "prompt_tokens_in",
    "same_notes",
]


def copy_view(view: Mapping[str, Any]) -> dict[str, Any]:
    """Copy the containers of an OpenAI message view; strings and numbers are shared.

    As safe as a deep copy for a caller that mutates the payload (strings are
    immutable) at a fraction of the cost: only lists and dicts are rebuilt.
    """
    out = dict(view)
    content = out.get("content")
    if type(content) is list:
        out["content"] = [
            {k: (dict(v) if type(v) is dict else v) for k, v in part.items()} for part in content
        ]
    calls = out.get("tool_calls")
    if calls:
        out["tool_calls"] = [{**call, "function": dict(call["function"])} for call in calls]
    audio = out.get("audio")
    if type(audio) is dict:
        out["audio"] = dict(audio)
    return out


@dataclass(frozen=True)
class SystemCache:
    prompt: Message | None  # history[0] when it is a system message
    injections: tuple[str, ...]
    message: Message | None  # prompt with injections appended
    tokens: int
    epoch: int


@dataclass(frozen=True)
class SummaryCache:
    summary: Any  # the ThreadSummary object the message was rendered from
    message: Message | None
    tokens: int
    epoch: int


@dataclass(frozen=True)
class PrefixKey:
    """Everything the incremental repair state depends on (objects compared by identity)."""

    history: Any
    revision: int
    epoch: int
    start: int
    pinned: tuple[int, ...]
    system: Message | None
    summary: Message | None
    chain: frozenset[Any] | None
    notes: NoteMap  # the turn notes: their messages and notes compared by identity

    def same(self, other: PrefixKey) -> bool:
        return (
            self.history is other.history
            and self.system is other.system
            and self.summary is other.summary
            and (self.revision, self.epoch, self.start, self.pinned, self.chain)
            == (other.revision, other.epoch, other.start, other.pinned, other.chain)
            and same_notes(self.notes, other.notes)
        )


def same_notes(a: NoteMap, b: NoteMap) -> bool:
    """The same pairs in the same order, by identity (a map reused as is: at once)."""
    return a is b or (
        len(a) == len(b)
        and all(x[0] is y[0] and x[1] is y[1] for x, y in zip(a.values(), b.values(), strict=True))
    )


@dataclass
class Prefix:
    """Incremental repair state for one window position (valid until a trim or a rewrite)."""

    key: PrefixKey
    stream: RepairStream
    upto: int  # history messages consumed (exclusive index)
    tokens: int  # count of stream.out
    counted: int  # entries of stream.out included in `tokens`
    reasoning: bool  # some assistant entry carries reasoning_content


class Repaired(NamedTuple):
    """The repaired canonical payload, as :meth:`ContextManager._repaired` returns it."""

    messages: list[Message]
    tokens: int  # its count, reply priming included
    reasoning: bool  # some assistant entry carries reasoning_content (pad the others)


@dataclass
class WindowState:
    """Everything the builds over one working window keep for the next build.

    Each field is valid for this window only; a trim calls
    :meth:`after_trim`. Counts inside are keyed by the counter's epoch.
    """

    views: IdentityCache[Message, dict[str, Any]] = field(default_factory=IdentityCache)
    """OpenAI views of payload messages (see :func:`copy_view`)."""
    turns: TurnCache = field(default_factory=dict)
    """Anthropic turns of payload messages (the codec's own identity cache)."""
    items: ItemCache = field(default_factory=dict)
    """Responses items of payload messages (the codec's own identity cache)."""
    shrinker: PayloadShrinker = field(default_factory=PayloadShrinker)
    system: SystemCache | None = None
    summary: SummaryCache | None = None
    prefix: Prefix | None = None

    def after_trim(self, alive: Sequence[Message]) -> None:
        """Forget what a trim made stale; keep views of the messages still in the window."""
        self.prefix = None
        self.views.keep_only(alive)
        self.shrinker.reset()
        live = {id(m) for m in alive}
        self.turns = {k: v for k, v in self.turns.items() if k in live}
        self.items = {k: v for k, v in self.items.items() if k in live}

    def system_message(
        self, history: MessageHistory, injections: Sequence[str]
    ) -> tuple[Message | None, int]:
        """The system prompt (history[0] when it is a system message) with injections appended,
        and its token count.

        The same object is returned while neither changes, so downstream caches hold.
        """
        counter = history.token_counter
        epoch = counter_epoch(counter)
        prompt = history[0] if history.has_system_prompt() else None
        extra = tuple(text for text in injections if text and text.strip())
        cache = self.system
        if (
            cache is not None
            and cache.prompt is prompt
            and cache.injections == extra
            and cache.epoch == epoch
        ):
            return cache.message, cache.tokens
        message: Message | None
        if not extra:
            message = prompt
        else:
            parts = [message_text(prompt)] if prompt is not None else []
            parts.extend(extra)
            message = {"role": "system", "content": "\n\n".join(p for p in parts if p)}
        tokens = count_message(message, counter) if message is not None else 0
        self.system = SystemCache(prompt, extra, message, tokens, epoch)
        return message, tokens

    def summary_message(
        self, yarn: YaRN | None, counter: TokenCounter
    ) -> tuple[Message | None, int]:
        """YaRN's summary message and its token count, cached while the summary is unchanged."""
        if yarn is None:
            return None, 0
        summary = yarn.summary
        epoch = counter_epoch(counter)
        cache = self.summary
        if cache is not None and cache.summary is summary and cache.epoch == epoch:
            return cache.message, cache.tokens
        message = yarn.render_message()
        tokens = count_message(message, counter) if message is not None else 0
        self.summary = SummaryCache(summary, message, tokens, epoch)
        return message, tokens

    def repaired(
        self,
        window: ShortTermMemory,
        yarn: YaRN | None,
        system: Message | None,
        chain: frozenset[Any] | None,
        notes: NoteMap,
    ) -> Repaired:
        """The repaired canonical payload, its token count and whether it carries reasoning.

        Between trims the window only grows at the end, so the repair stream
        and the running count are kept and only new messages are processed.
        """
        history = window.history
        counter = history.token_counter
        prefix = self._prefix_for(window, yarn, system, chain, notes)
        stream = prefix.stream
        for i in range(prefix.upto, len(history)):
            msg = history[i]
            if chain is None or msg.get("task_id") is None or msg.get("task_id") in chain:
                before = len(stream.out)
                stream.push(msg)
                note = notes.get(id(msg))
                if note is not None and note[0] is msg:
                    stream.push(note[1])
                for entry in stream.out[before:]:
                    prefix.tokens += (
                        history.message_tokens(i) if entry is msg else count_message(entry, counter)
                    )
                    prefix.reasoning = prefix.reasoning or has_reasoning(entry)
                prefix.counted = len(stream.out)
        prefix.upto = len(history)
        messages = stream.finish()
        total = prefix.tokens + REPLY_PRIMING_TOKENS
        for entry in messages[len(stream.out) :]:
            total += count_message(entry, counter)
        return Repaired(messages, total, prefix.reasoning)

    def _prefix_for(
        self,
        window: ShortTermMemory,
        yarn: YaRN | None,
        system: Message | None,
        chain: frozenset[Any] | None,
        notes: NoteMap,
    ) -> Prefix:
        """The incremental repair state, started afresh when anything in its key changed."""
        history = window.history
        counter = history.token_counter
        summary, summary_tokens = self.summary_message(yarn, counter)
        key = PrefixKey(
            history,
            history.revision,
            counter_epoch(counter),
            window.start,
            window.pinned,
            system,
            summary,
            chain,
            notes,
        )
        prefix = self.prefix
        if prefix is not None and prefix.key.same(key) and len(history) >= prefix.upto:
            return prefix
        stream = RepairStream()
        if system is not None:
            stream.push(system)
        if summary is not None:
            stream.push(summary)
        for i in window.pinned:
            stream.push(history[i])
            note = notes.get(id(history[i]))
            if note is not None and note[0] is history[i]:
                stream.push(note[1])
        first = window.start
        if first == 0 and history.has_system_prompt():
            first = 1  # already pushed as `system`
        # Cached counts for the parts pushed unchanged (a pin is a history message).
        known: IdentityCache[Message | None, int] = IdentityCache()
        for i in window.pinned:
            known.put(history[i], history.message_tokens(i))
        if system is not None and self.system is not None:
            known.put(system, self.system.tokens)
        known.put(summary, summary_tokens)
        tokens = 0
        for entry in stream.out:
            hit = known.get(entry)
            tokens += hit if hit is not None else count_message(entry, counter)
        reasoning = any(has_reasoning(entry) for entry in stream.out)
        self.prefix = Prefix(key, stream, first, tokens, len(stream.out), reasoning)
        return self.prefix


def chat_visible(messages: Sequence[Message]) -> Sequence[Message]:
    """``messages`` less those carrying only opaque Responses items (no Chat form)."""
    if not any(is_responses_only(m) for m in messages):
        return messages
    return [m for m in messages if not is_responses_only(m)]


def other_payload(
    provider: str, messages: Sequence[Message], state: WindowState
) -> tuple[str | None, list[dict[str, Any]]] | list[dict[str, Any]]:
    """The Anthropic or Responses payload of repaired ``messages`` (each message converted
    once per window, by the codec's identity cache)."""
    if provider == "anthropic":
        return to_anthropic(messages, cache=state.turns)
    return to_responses_items(messages, cache=state.items)


def has_reasoning(msg: Mapping[str, Any]) -> bool:
    return msg["role"] == "assistant" and isinstance(msg.get("reasoning_content"), str)


def prompt_tokens_in(window: ShortTermMemory) -> int:
    """Tokens of the system prompt when the window still starts at it (index 0), else 0."""
    history = window.history
    return history.message_tokens(0) if window.start == 0 and history.has_system_prompt() else 0


def anthropic_extra(messages: Sequence[Message], counter: TokenCounter) -> int:
    """Tokens the Anthropic conversion of repaired ``messages`` adds to their canonical count.

    :func:`agentmem.messages.to_anthropic` sends a system message that follows
    the first turn as user text wrapped in ``<system-reminder>`` tags, an
    empty user turn as a placeholder text, and puts a placeholder user turn
    first when the conversation would start with the assistant. Those texts
    are not in the canonical messages; each is counted here (a wrapper with
    one token of slack for where its tags meet the text). Only short
    constant strings are counted, so this costs a walk over the payload.
    """
    tags = counter.count_text(f"<{SYSTEM_NOTE_TAG}>\n") + counter.count_text(
        f"\n</{SYSTEM_NOTE_TAG}>"
    )
    extra = 0
    leading = True
    for msg in messages:
        role = msg["role"]
        if role == "system":
            if not leading and message_text(msg).strip():
                extra += tags + 1
            continue
        if leading and role != "user":
            extra += MESSAGE_OVERHEAD_TOKENS + counter.count_text("user")
            extra += counter.count_text(LEADING_USER_PLACEHOLDER)
        leading = False
        if role == "user" and not message_text(msg).strip():
            extra += counter.count_text(EMPTY_USER_PLACEHOLDER)
    return extra
