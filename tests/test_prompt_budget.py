"""The one budget rule and the one renderer of the blocks the library adds to a prompt.

:func:`agentmem._prompt_budget.render_within` is checked against properties a
reader can state without its code (fits, keeps order, leaves out only what
could not fit), and each part that renders a prompt block (long-term memory,
topic files, the semantic persona) is checked for the rule it shares: an
item that does not fit is skipped, and smaller ones after it still get in.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled
from semantic_fakes import FakeClient

from agentmem import LongTermMemory
from agentmem._prompt_budget import block_budget, render_within
from agentmem.semantic import SemanticMemoryExtension
from agentmem.tokens import HeuristicCounter
from agentmem.topics import TopicStore


class WordCounter:
    """One token per whitespace-separated word: simple, and monotone in the text."""

    def count_text(self, text: str) -> int:
        return len(text.split())


def _item(k: int, words: int) -> str:
    return f"item{k}" + " w" * words


@st.composite
def _blocks(draw: st.DrawFn) -> list[tuple[str | None, str]]:
    """Items with consecutive groups (``None``: no group heading)."""
    sizes = draw(st.lists(st.integers(0, 12), max_size=12))
    groups = draw(st.lists(st.sampled_from([None, "g"]), min_size=len(sizes), max_size=len(sizes)))
    items: list[tuple[str | None, str]] = []
    heading = 0
    for k, (size, group) in enumerate(zip(sizes, groups, strict=True)):
        if group is not None and (not items or items[-1][0] is None or draw(st.booleans())):
            heading += 1  # a new group starts here
        items.append((None if group is None else f"## group{heading}", _item(k, size)))
    return items


@settings(max_examples=scaled(200))
@given(items=_blocks(), budget=st.integers(0, 80), tail=st.booleans())
def test_render_within_fits_keeps_order_and_skips_only_what_cannot_fit(
    items: list[tuple[str | None, str]], budget: int, tail: bool
) -> None:
    counter = WordCounter()
    end = "END" if tail else None
    text = render_within(items, budget, counter, head="HEAD", tail=end)
    assert counter.count_text(text) <= budget
    if not text:
        # Nothing fits on its own: head, the item's group heading, the item, the tail.
        for group, item in items:
            alone = ["HEAD", *([group] if group else []), item, *([end] if end else [])]
            assert counter.count_text("\n".join(alone)) > budget
        return
    lines = text.split("\n")
    assert lines[0] == "HEAD"
    assert (lines[-1] == "END") is tail
    chosen = [k for k, (_, item) in enumerate(items) if item in lines]
    assert [line for line in lines if line.startswith("item")] == [items[k][1] for k in chosen]
    # A group heading stands right before the first chosen item of its group, once.
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == list(dict.fromkeys(items[k][0] for k in chosen if items[k][0]))
    for heading in headings:
        first = next(k for k in chosen if items[k][0] == heading)
        assert lines[lines.index(heading) + 1] == items[first][1]
    # Maximal: every item left out would take the text over the budget (the counter is
    # monotone, so what did not fit when it was tried does not fit now either).
    for k in range(len(items)):
        if k in chosen:
            continue
        with_it = sorted([*chosen, k])
        rendered = render_within([items[j] for j in with_it], 10**9, counter, head="HEAD", tail=end)
        assert counter.count_text(rendered) > budget


def test_an_item_that_does_not_fit_is_skipped_not_a_stop() -> None:
    items: list[tuple[str | None, str]] = [
        (None, _item(0, 1)),
        (None, _item(1, 50)),
        (None, _item(2, 1)),
    ]
    text = render_within(items, 10, WordCounter(), head="HEAD")
    assert text == "HEAD\nitem0 w\nitem2 w"
    assert render_within(items, 1, WordCounter(), head="HEAD") == ""
    assert render_within([], 100, WordCounter(), head="HEAD") == ""


def test_block_budget_is_the_cap_and_at_most_a_tenth_of_the_window() -> None:
    assert block_budget(2000, 128_000) == 2000
    assert block_budget(2000, 8_000) == 800
    assert block_budget(2000, 256) == 25


# ------------------------------------------------------------------ the parts share the rule


def test_ltm_skips_a_line_too_long_and_keeps_the_shorter_ones_after_it() -> None:
    ltm = LongTermMemory(None)
    ltm.add_discovery("a long discovery " + "word " * 200, confidence=0.99)  # rendered first
    ltm.add_discovery("short fact one", confidence=0.5)
    ltm.add_discovery("short fact two", confidence=0.5)
    counter = HeuristicCounter()
    text = ltm.render_for_prompt(60, token_counter=counter)
    assert "short fact one" in text and "short fact two" in text
    assert "a long discovery" not in text
    assert text.startswith("# Long-term memory\n## Known facts about this project\n- short fact")
    assert counter.count_text(text) <= 60


def test_topics_skip_a_topic_too_big_and_keep_the_older_small_one(tmp_path: Path) -> None:
    store = TopicStore(None)
    store.write("small", "a small topic")
    store.write("big", "big " * 1000)  # newer, tried first
    text = store.render_for_prompt(100, token_counter=HeuristicCounter())
    assert "## small" in text and "## big" not in text


def test_persona_skips_a_memory_too_long_and_keeps_the_older_short_ones() -> None:
    client = FakeClient()
    client.remember("likes tea")
    client.remember("works on the billing service")
    client.remember("a very long memory " + "detail " * 300)  # the newest, tried first
    ext = SemanticMemoryExtension(client=client, user_id="martin", persona_tokens=80)
    persona = ext.persona_prompt(HeuristicCounter())
    assert "- likes tea" in persona and "- works on the billing service" in persona
    assert "a very long memory" not in persona
    assert HeuristicCounter().count_text(persona) <= 80
    ext.close()
