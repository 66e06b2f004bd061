"""Payload-level truncation: cut content until a payload fits its ceiling.

When whole-unit eviction is not enough (one unit alone is too big, or only
the newest unit may stay), the context manager cuts *content in the
payload*; the stored history keeps every character. The order follows the
design's priority (system prompt, anchor, newest units, summary): the
thread summary gives way first (re-rendered, never cut into: it keeps its
tags, header, current task and newest entries, and goes below its reserve
only after everything else), then tool results (largest first), then other
conversation messages, and the task anchor only if the window itself is
exceeded. The system prompt and synthesised notes are never cut.

Each cut starts from the original message (a second round aims lower, it
does not re-cut a cut), and the cuts of the last build are kept, keyed by
the original message and the aim, so a steady payload re-uses them: a giant
message is read and cut once, not on every build.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from agentmem._json import parse_arguments
from agentmem._truncate import truncate_text
from agentmem.messages import Message, content_text, is_real_user, message_text
from agentmem.protocols import TokenCounter, counter_epoch
from agentmem.tokens import REPLY_PRIMING_TOKENS, count_message

__all__ = ["PayloadShrinker", "truncate_message"]

SummaryRenderer = Callable[..., Message | None]
"""``render_message(max_chars=..., keep_task=...)`` of the YaRN the summary came from."""


@dataclass(frozen=True)
class _CutKey:
    original: int  # id() of the original message, checked against _Cut.original
    aim: int
    keep_task: bool
    epoch: int


@dataclass(frozen=True)
class _Cut:
    original: Message
    message: Message | None
    tokens: int


class PayloadShrinker:
    """Cuts payload content to a ceiling, re-using the previous build's cuts."""

    def __init__(self) -> None:
        self._cuts: dict[_CutKey, _Cut] = {}

    def reset(self) -> None:
        """Forget the kept cuts (after a trim or a change of window)."""
        self._cuts = {}

    def shrink(
        self,
        messages: Sequence[Message],
        *,
        count: Callable[[Message], int],
        counter: TokenCounter,
        summary: SummaryRenderer | None,
        system: Message | None,
        ceiling: int,
        anchor_ceiling: int,
        summary_reserve: int,
    ) -> tuple[list[Message], int, int]:
        """Cut ``messages`` until their count fits ``ceiling``.

        Args:
            messages: The repaired canonical payload.
            count: Token count of a payload message (from the caller's caches).
            counter: Counts the cut copies.
            summary: Re-renders the thread summary to a budget, or ``None``.
            system: The system prompt, never cut (nor are synthesised notes).
            ceiling: Target for the whole payload, reply priming included.
            anchor_ceiling: The anchor (newest real user message) is cut only
                while the payload exceeds this.
            summary_reserve: Tokens the summary keeps until everything else was cut.

        Returns:
            The new payload, its count, and how many messages were cut.
        """
        epoch = counter_epoch(counter)
        out = list(messages)
        sizes = [count(m) for m in out]
        total = REPLY_PRIMING_TOKENS + sum(sizes)
        anchor = next((m for m in reversed(out) if is_real_user(m)), None)
        truncated = 0
        cuts = self._cuts
        used: dict[_CutKey, _Cut] = {}

        def rank(i: int) -> tuple[int, int]:
            # What to preserve, most important last: the summary gives way first, then
            # tool outputs (largest first), then other messages of the newest units.
            msg = out[i]
            if msg.get("compressed_summary"):
                group = 0
            elif msg["role"] == "tool":
                group = 1
            else:
                group = 2
            return (group, -sizes[i])

        # Never cut: the system prompt, the recovery note; the anchor only as a last resort.
        others = sorted(
            (
                i
                for i, m in enumerate(out)
                if m is not system and m is not anchor and not m.get("synthesized")
            ),
            key=rank,
        )
        last = [i for i, m in enumerate(out) if m is anchor]
        original = list(out)
        full = list(sizes)
        # Everything else is cut down to the target first (two rounds, since a cut lands
        # only near its aim), the summary no further than its reserve
        # (summary_max_fraction) and its header and current task; then, if still
        # needed, the summary below that; the anchor only if the window
        # itself is exceeded. A later cut starts again from the original message.
        rounds = ((others, ceiling, True), (others, ceiling, True), (others, ceiling, False))
        for candidates, bound, keep_task in (*rounds, (last, anchor_ceiling, False)):
            for i in candidates:
                if total <= bound:
                    break
                aim = max(sizes[i] - (total - bound), 8)
                is_summary = bool(original[i].get("compressed_summary")) and summary is not None
                if is_summary and keep_task:
                    aim = max(aim, min(full[i], summary_reserve))
                key = _CutKey(id(original[i]), aim, keep_task and is_summary, epoch)
                cached = used.get(key) or cuts.get(key)
                if cached is not None and cached.original is original[i]:
                    new_msg, new_size = cached.message, cached.tokens
                else:
                    if is_summary and summary is not None:
                        # The summary keeps its tags and its newest, most useful lines.
                        text = message_text(original[i])
                        chars = len(text) * aim // max(full[i], 1) * 9 // 10
                        new_msg = summary(max_chars=chars, keep_task=keep_task)
                    else:
                        new_msg = truncate_message(original[i], aim, full[i])
                    new_size = count_message(new_msg, counter) if new_msg is not None else 0
                used[key] = _Cut(original[i], new_msg, new_size)
                if new_msg is None:
                    continue
                if new_size >= sizes[i]:
                    continue
                if out[i] is original[i]:
                    truncated += 1
                total += new_size - sizes[i]
                out[i], sizes[i] = new_msg, new_size
        self._cuts = used
        return out, total, truncated


def truncate_message(msg: Message, max_tokens: int, tokens: int) -> Message | None:
    """A copy of ``msg`` with its text cut to roughly ``max_tokens`` (None if nothing to cut)."""
    content = msg.get("content")
    calls = msg.get("tool_calls") or []
    size = len(content_text(content)) + sum(len(c["function"]["arguments"]) for c in calls)
    if size == 0:
        return None
    # Scale by this message's own characters per token so the cut lands near the target.
    max_chars = int(size * max_tokens / max(tokens, 1) * 0.9)
    new: Message = {**msg, "truncated": True}
    if isinstance(content, str):
        new["content"] = truncate_text(content, max_chars)
    elif isinstance(content, list):
        texts = [p for p in content if p.get("type") == "text"]
        share = max_chars // max(len(texts), 1)
        new["content"] = [
            {**p, "text": truncate_text(p["text"], share)}
            if p.get("type") == "text"
            else {
                "type": "text",
                "text": f"[{p.get('type', 'part')} omitted to fit the context window]",
            }
            for p in content
        ]
    if calls:
        per_call = max(max_chars // (len(calls) + 1), 64)
        new["tool_calls"] = [
            {
                **c,
                "function": {
                    **c["function"],
                    "arguments": orjson.dumps(
                        _shrink_json_strings(
                            parse_arguments(c["function"]["arguments"]).value, per_call
                        )
                    ).decode(),
                },
            }
            for c in calls
        ]
    return new


def _shrink_json_strings(value: Any, max_chars: int) -> Any:
    if isinstance(value, str):
        return truncate_text(value, max_chars)
    if isinstance(value, list):
        return [_shrink_json_strings(v, max_chars) for v in value]
    if isinstance(value, dict):
        return {k: _shrink_json_strings(v, max_chars) for k, v in value.items()}
    return value
