"""ShortTermMemory: the working window over a conversation.

The window is what the model sees of the conversation: a contiguous tail
of a :class:`~agentmem.history.MessageHistory` (``history[start:]``), plus
*pinned* older messages that must stay visible (the newest real user
request, when a trim moved past it). It never holds messages of its own:
the history is the single source of truth, so nothing the window drops is
lost. What it evicts is returned by :meth:`ShortTermMemory.evict_to` (and
:meth:`~ShortTermMemory.enforce`, :meth:`~ShortTermMemory.add`) and also
handed to the optional ``on_evict`` observer. The context manager
(:mod:`agentmem.context`) is what passes evictions to
:class:`~agentmem.yarn.YaRN`, from the returned list, with the current task;
a session leaves ``on_evict`` unset.

Eviction works in whole *units*. A unit starts at every non-tool message and
includes the tool messages that follow it, so an assistant message and the
results of its tool calls always leave together: the window never starts
with a tool result whose call it no longer shows. The newest unit is never
evicted, whatever the bounds say (a window must show the latest turn;
callers deal with a single oversized unit by truncating the payload).

Bounds are optional and combine: ``max_messages`` and ``max_tokens``.
Counting uses the history's cached per-message counts and a running total,
so checking the bounds after an append costs O(appended messages); after a
non-append change of the history (``history.revision`` moved) or a counter
epoch change, the window re-validates its positions and recounts, O(window).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentmem._storage.formats import check_format
from agentmem.errors import InvalidArgumentError
from agentmem.history import MessageHistory
from agentmem.messages import Message, is_real_user
from agentmem.protocols import counter_epoch

__all__ = ["ShortTermMemory"]

STATE_FORMAT = "agentmem.window"
STATE_VERSION = 1


class ShortTermMemory:
    """A bounded working window over a :class:`MessageHistory`.

    Args:
        history: The conversation; a new empty one when omitted.
        max_messages: Most messages the window may hold (pins included).
        max_tokens: Most tokens the window may hold, counted with the
            history's token counter (pins included).
        start: Index of the first message of the contiguous window.
        pinned: Indices before ``start`` that stay in the window.
        on_evict: Optional observer, called with the messages each eviction
            removes, oldest first (the same list the evicting call returns).

    Raises:
        InvalidArgumentError: a bound is not a positive integer.
    """

    def __init__(
        self,
        history: MessageHistory | None = None,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        start: int = 0,
        pinned: Sequence[int] = (),
        on_evict: Callable[[list[Message]], None] | None = None,
    ) -> None:
        for name, value in (("max_messages", max_messages), ("max_tokens", max_tokens)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidArgumentError(
                    f"{name} must be a positive integer or None, got {value!r}"
                )
        self.history = history if history is not None else MessageHistory()
        self.max_messages = max_messages
        self.max_tokens = max_tokens
        self.on_evict = on_evict
        self._start = start
        # The messages before the start, as the window left them behind: a rewrite of the
        # history's tail below the start (truncate, then append) brings in messages the
        # window never showed, and these tell where they begin.
        self._behind: list[Message] | None = None  # None: adopt history[:start] as is
        self._pinned: tuple[int, ...] = tuple(pinned)
        # Running token total of the pinned messages plus history[start:counted].
        self._total = 0
        self._counted = start
        self._revision = -1  # force a sync on first use
        self._epoch = counter_epoch(self.history.token_counter)

    # ------------------------------------------------------------------ positions

    @property
    def start(self) -> int:
        """Index in the history of the first message of the contiguous window."""
        self.sync()
        return self._start

    @property
    def pinned(self) -> tuple[int, ...]:
        """Indices of older messages kept visible (the task anchor after a trim)."""
        self.sync()
        return self._pinned

    def sync(self) -> None:
        """Re-validate positions after the history changed other than by appending.

        Clamps the start into range; moves it back to the first message the
        window has not left behind when the history was rewritten below it
        (a message it never showed is never skipped); moves it back to the
        beginning of its unit if it points at a tool message; and drops pins
        that no longer point at a real user message before the start.
        Recounts the window.
        """
        history = self.history
        epoch = counter_epoch(history.token_counter)
        if self._revision == history.revision and self._epoch == epoch:
            return
        n = len(history)
        start = min(max(self._start, 0), n)
        behind = self._behind
        if behind is None:
            behind = self._behind = []
        elif len(behind) != start or (start and history[start - 1] is not behind[start - 1]):
            # Rewrites keep the untouched prefix's objects: find where it ends.
            kept = min(start, len(behind))
            while kept and history[kept - 1] is not behind[kept - 1]:
                kept -= 1
            start = kept
        del behind[start:]
        while 0 < start < n and history[start]["role"] == "tool":
            start -= 1
        self._start = start
        self._pinned = tuple(i for i in self._pinned if 0 <= i < start and is_real_user(history[i]))
        behind.extend(history[i] for i in range(len(behind), start))
        self._total = sum(history.message_tokens(i) for i in self._pinned)
        self._counted = start
        self._revision = history.revision
        self._epoch = epoch

    def indices(self) -> list[int]:
        """History indices of the window's messages, in order (pins first)."""
        self.sync()
        return [*self._pinned, *range(self._start, len(self.history))]

    def messages(self) -> list[Message]:
        """The window's messages (the history's own objects; do not modify them)."""
        history = self.history
        return [history[i] for i in self.indices()]

    def message_count(self) -> int:
        """Number of messages in the window."""
        self.sync()
        return len(self._pinned) + len(self.history) - self._start

    def token_count(self) -> int:
        """Tokens the window's messages cost (cached per message, summed incrementally)."""
        self.sync()
        history = self.history
        for i in range(self._counted, len(history)):
            self._total += history.message_tokens(i)
        self._counted = len(history)
        return self._total

    def unit_starts(self) -> list[int]:
        """History indices where the window's units begin (every non-tool message)."""
        self.sync()
        history = self.history
        return [i for i in range(self._start, len(history)) if history[i]["role"] != "tool"]

    # ------------------------------------------------------------------ adding and evicting

    def add(self, message: Mapping[str, Any]) -> list[Message]:
        """Append ``message`` to the history and enforce the bounds.

        Returns:
            The messages evicted to make room (also passed to ``on_evict``).
        """
        self.history.append(message)
        return self.enforce()

    def over_budget(self) -> bool:
        """True when the window exceeds one of its configured bounds."""
        if self.max_messages is not None and self.message_count() > self.max_messages:
            return True
        return self.max_tokens is not None and self.token_count() > self.max_tokens

    def enforce(self) -> list[Message]:
        """Evict oldest units until the configured bounds hold (or one unit is left)."""
        return self.evict_to(max_tokens=self.max_tokens, max_messages=self.max_messages)

    def evict_to(
        self,
        *,
        max_tokens: int | None = None,
        max_messages: int | None = None,
        pin_anchor: bool = True,
    ) -> list[Message]:
        """Evict whole units from the front until the window fits the given bounds.

        The newest unit always stays. When ``pin_anchor`` is true and the
        eviction moves past the newest real user message, that message is
        pinned so it stays visible; pins from an earlier trim are replaced.

        Returns:
            The evicted messages, oldest first (also passed to ``on_evict``).
        """
        self.sync()
        history = self.history
        starts = self.unit_starts()
        if len(starts) <= 1:
            return []
        tokens_of = history.message_tokens
        old_pins = self._pinned
        contiguous_tokens = self.token_count() - sum(tokens_of(i) for i in old_pins)
        contiguous_count = len(history) - self._start
        anchor = history.last_real_user_index() if pin_anchor else None

        def pins_for(new_start: int) -> tuple[int, ...]:
            if not pin_anchor or anchor is None:
                return old_pins
            return (anchor,) if anchor < new_start else ()

        def fits(new_start: int, tokens: int, count: int) -> bool:
            pins = pins_for(new_start)
            if max_tokens is not None and tokens + sum(tokens_of(i) for i in pins) > max_tokens:
                return False
            return max_messages is None or count + len(pins) <= max_messages

        within = (max_tokens is None or self.token_count() <= max_tokens) and (
            max_messages is None or self.message_count() <= max_messages
        )
        if within:
            return []
        k = 0
        while k < len(starts) - 1 and not fits(starts[k], contiguous_tokens, contiguous_count):
            begin, end = starts[k], starts[k + 1]
            contiguous_tokens -= sum(tokens_of(i) for i in range(begin, end))
            contiguous_count -= end - begin
            k += 1
        if k == 0:
            # Nothing to evict: the newest request is back inside the window, so an
            # older anchor pinned by an earlier trim is no longer needed.
            self._pinned = pins_for(self._start)
            self._total = sum(tokens_of(i) for i in self._pinned)
            self._counted = self._start
            return []
        old_start, new_start = self._start, starts[k]
        evicted = [history[i] for i in range(old_start, new_start)]
        self._start = new_start
        if self._behind is not None:
            self._behind.extend(evicted)
        self._pinned = pins_for(new_start)
        self._total = sum(tokens_of(i) for i in self._pinned)
        self._counted = new_start
        if self.on_evict is not None and evicted:
            self.on_evict(evicted)
        return evicted

    # ------------------------------------------------------------------ persistence

    def state(self) -> dict[str, Any]:
        """Position of the window, for the session store."""
        self.sync()
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "start": self._start,
            "pinned": list(self._pinned),
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Restore a position saved by :meth:`state` (re-validated against the history).

        Raises:
            InvalidArgumentError: ``state`` is not a window state.
        """
        check_format(state, kind=STATE_FORMAT, version=STATE_VERSION, what="window state")
        start = state.get("start", 0)
        pinned = state.get("pinned", [])
        if not isinstance(start, int) or not all(isinstance(i, int) for i in pinned):
            raise InvalidArgumentError("window state has non-integer positions")
        self._start = start
        self._behind = None
        self._pinned = tuple(pinned)
        self._revision = -1
        self.sync()

    def __repr__(self) -> str:
        return (
            f"ShortTermMemory(start={self.start}, messages={self.message_count()}, "
            f"max_messages={self.max_messages}, max_tokens={self.max_tokens})"
        )
