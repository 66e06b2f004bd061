"""Blocks the library adds to a request, under a token budget: one rule, one renderer.

Several parts put a block of their own into the system prompt of every
payload: long-term memory (:meth:`~agentmem.ltm.LongTermMemory.render_for_prompt`),
the memory updater's topic files (:meth:`~agentmem.topics.TopicStore.render_for_prompt`)
and the semantic extensions' resident persona. Each has a cap of its own
and, like the memory update's own turns, takes at most a tenth of the
model's window (:func:`block_budget`), so a small window is never filled by
what the library adds.

:func:`render_within` builds such a block from items in order of importance
under one rule: an item that would take the text over the budget is
**skipped**, and the items after it still get their chance (a smaller, less
important one may fit). Stopping at the first item that does not fit would
drop everything behind one long item; skipping loses least. The whole
candidate text is counted each time, so the result fits for any token
counter (token counts are not additive: two texts joined may count
differently from the sum of their counts).
"""

from __future__ import annotations

from collections.abc import Iterable

from agentmem.protocols import TokenCounter

__all__ = ["WINDOW_SHARE", "block_budget", "render_within"]

WINDOW_SHARE = 10
"""A block takes at most ``1 / WINDOW_SHARE`` of the context window."""


def block_budget(cap: int, context_window: int) -> int:
    """The tokens a block may take in a window: its ``cap``, at most a tenth of the window."""
    return min(cap, context_window // WINDOW_SHARE)


def render_within(
    items: Iterable[tuple[str | None, str]],
    max_tokens: int,
    counter: TokenCounter,
    *,
    head: str,
    tail: str | None = None,
    separator: str = "\n",
) -> str:
    """``head``, the items that fit, and ``tail``, joined by ``separator``; ``""`` if none fit.

    Items are tried in the order given (most important first). An item that
    would take the text over ``max_tokens`` is skipped; later items are still
    tried. ``head`` and ``tail`` are only there when at least one item is.

    Args:
        items: ``(group, text)`` pairs. A group heading (e.g. ``"## Discoveries"``)
            is placed before the first item of its group that fits, and only
            then; ``None`` for an item without one. The items of one group
            are consecutive.
        max_tokens: The budget of the whole text, as counted by ``counter``.
        counter: Counts the candidate text.
        head: The block's first line(s).
        tail: Its last line (``None``: none).
        separator: Between head, group headings, items and tail.

    Returns:
        Text whose ``counter.count_text`` is at most ``max_tokens``, or ``""``.
    """
    chosen: list[str] = []
    placed: set[str] = set()
    ending = [] if tail is None else [tail]
    text = ""
    for group, item in items:
        new = [item] if group is None or group in placed else [group, item]
        candidate = separator.join([head, *chosen, *new, *ending])
        if counter.count_text(candidate) > max_tokens:
            continue  # skipped: a later, smaller item may still fit
        chosen.extend(new)
        if group is not None:
            placed.add(group)
        text = candidate
    return text
