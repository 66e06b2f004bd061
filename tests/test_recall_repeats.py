"""A text met again in one search is read once: its keywords searched and its preview
scrubbed once, with the same hits as reading it each time.

An agent's store repeats itself (the same command, the same tool output, in many
sessions), so one search meets the same text as many candidates and as many previews.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

import agentmem.recall as recall_module
from agentmem.recall import Ranking, keywords, recall
from agentmem.recall._porter import Matcher
from agentmem.session_store import SessionStore

LONG = "pytest output: " + " ".join(f"tests/test_mod{i}.py::test_case PASSED" for i in range(30))
REPEATED = [
    {"role": "user", "content": "run the tests with pytest please"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "shell", "arguments": '{"cmd": "cd /testbed && pytest"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": LONG},
    {"role": "assistant", "content": "pytest passed, token sk-proj-abc123def456ghi789jkl012"},
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    s = SessionStore(tmp_path / "s.sqlite", durability="normal")
    for n in range(8):
        sid = s.create(name=f"run {n}").id
        s.writer(sid).on_append([*REPEATED, {"role": "user", "content": f"session {n} done"}])
    yield s
    s.close()


RANKINGS = pytest.mark.parametrize(
    "ranking", [Ranking(), Ranking(every_match=0)], ids=["all", "postings"]
)


@RANKINGS
def test_a_repeated_text_is_scrubbed_once(
    store: SessionStore, ranking: Ranking, monkeypatch: pytest.MonkeyPatch
) -> None:
    scrubbed: Counter[str] = Counter()
    scrub_near = recall_module.scrub_near

    def counting_scrub(text: str, words: list[str], margin: int) -> str:
        scrubbed[text] += 1
        return scrub_near(text, words, margin)

    monkeypatch.setattr(recall_module, "scrub_near", counting_scrub)
    hits = recall(store, "pytest tests passed", max_results=8, ranking=ranking)
    assert len(hits) == 8
    # Every hit is one of the repeated messages, in 8 sessions: the texts repeat.
    assert sum(scrubbed.values()) == len(scrubbed) < 3 * len(hits)
    assert all("sk-proj-" not in (h.preview + (h.previous or "") + (h.next or "")) for h in hits)


@RANKINGS
def test_a_repeated_text_is_searched_once(
    store: SessionStore, ranking: Ranking, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: Counter[tuple[int, str]] = Counter()
    count = Matcher.count

    def counting_count(self: Matcher, text: str) -> tuple[dict[str, int], set[str], int]:
        counted[(id(self), text)] += 1
        return count(self, text)

    monkeypatch.setattr(Matcher, "count", counting_count)
    assert len(recall(store, "pytest tests passed", max_results=8, ranking=ranking)) == 8
    assert len(counted) >= 2 and max(counted.values()) == 1


@settings(max_examples=scaled(25))
@given(
    texts=st.lists(
        st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "key=abc123def456"]))
        .map(" ".join)
        .filter(bool),
        min_size=1,
        max_size=4,
    ),
    picks=st.lists(st.integers(0, 3), min_size=2, max_size=12),
    query=st.sampled_from(["alpha beta", "gamma", "delta alpha gamma", "beta key"]),
    every=st.booleans(),
)
def test_each_hit_shows_its_own_text(
    tmp_path_factory: pytest.TempPathFactory,
    texts: list[str],
    picks: list[int],
    query: str,
    every: bool,
) -> None:
    """Whatever repeats, each hit's preview (and its neighbours') is its own text's."""
    s = SessionStore(tmp_path_factory.mktemp("r") / "s.sqlite", durability="normal")
    try:
        for _ in range(3):
            sid = s.create(name=None).id
            messages = [{"role": "user", "content": texts[p % len(texts)]} for p in picks]
            s.writer(sid).on_append(messages)
        ranking = Ranking() if every else Ranking(every_match=0)
        words = keywords(query) or keywords(query, stopwords=False)
        for hit in recall(s, query, max_results=10, ranking=ranking):
            around = s.recall_texts(hit.session_id, hit.index - 1, hit.index + 1)
            assert hit.preview == recall_module._preview(around[hit.index], words)
            for shown, seq in ((hit.previous, hit.index - 1), (hit.next, hit.index + 1)):
                expected = around.get(seq)
                assert shown == (
                    None if expected is None else recall_module._preview(expected, words)
                )
    finally:
        s.close()
