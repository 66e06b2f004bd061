"""HybridRecall: recall re-ranked by an embedder, checked with a fake deterministic embedder.

No model is needed: ``ConceptEmbedder`` maps words to a few concepts, so the
expected semantic scores can be computed independently here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentmem
from agentmem.embedders import HybridRecall, fuse
from agentmem.errors import ConfigurationError, InvalidArgumentError

CONCEPTS = {
    "cat": 0,
    "kitten": 0,
    "feline": 0,
    "dog": 1,
    "puppy": 1,
    "hound": 1,
    "car": 2,
    "engine": 2,
    "garage": 2,
    "food": 3,
    "dinner": 3,
    "lunch": 3,
}


class ConceptEmbedder:
    """Counts each concept's words; one extra dimension for any other word."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [concept_vector(t) for t in texts]


def concept_vector(text: str) -> list[float]:
    vector = [0.0] * 5
    for word in text.lower().replace(":", " ").replace(".", " ").split():
        vector[CONCEPTS.get(word, 4)] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


SESSIONS = [
    [
        "user: my cat likes tuna food",
        "assistant: a kitten needs lunch twice a day",
        "user: the feline sleeps all day",
        "assistant: food for a dog differs",
    ],
    [
        "user: the car engine broke, food truck outside",
        "assistant: the garage fixed the car",
        "user: dinner with the puppy then food shopping",
        "assistant: the hound chased a cat",
        "user: food food food everywhere",
    ],
    [
        "user: lunch at noon, cat video after",
        "assistant: nothing about animals here",
        "user: kitten kitten feline food",
    ],
]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[agentmem.Memory]:
    memory = agentmem.Memory(root=tmp_path / "m")
    for n, texts in enumerate(SESSIONS):
        with memory.session(name=f"session {n}") as s:
            for i, text in enumerate(texts):
                s.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    yield memory
    memory.close()


def texts_by_key(mem: agentmem.Memory) -> dict[tuple[str, int], str]:
    out = {}
    for info in mem.sessions.list():
        with mem.session(info.id) as s:
            for i, message in enumerate(s.history):
                out[(info.id, i)] = str(message["content"])
    return out


def expected_scores(
    mem: agentmem.Memory, query: str, candidates: int, weight: float, share: float, reach: int
) -> dict[tuple[str, int], float]:
    """The fused score of each candidate, computed here from the formula in the docs."""
    hits = mem.recall(query, max_results=candidates)
    texts = texts_by_key(mem)
    q = concept_vector(query)

    def sim(key: tuple[str, int]) -> float:
        if key not in texts:
            return 0.0
        return sum(a * b for a, b in zip(q, concept_vector(texts[key]), strict=True))

    semantic = []
    for h in hits:
        score = sim((h.session_id, h.index))
        for d in range(1, reach + 1):
            around = sim((h.session_id, h.index - d)) + sim((h.session_id, h.index + d))
            score += share * around / d
        semantic.append(score)

    def norm(values: list[float]) -> list[float]:
        low, high = min(values), max(values)
        return [(v - low) / (high - low) if high > low else 0.0 for v in values]

    lexical = norm([h.score for h in hits])
    sem = norm(semantic)
    return {
        (h.session_id, h.index): (1 - weight) * lexical[i] + weight * sem[i]
        for i, h in enumerate(hits)
    }


def keys(hits: Sequence[Any]) -> list[tuple[str, int]]:
    return [(h.session_id, h.index) for h in hits]


def test_weight_zero_is_recalls_own_order(mem: agentmem.Memory) -> None:
    embedder = ConceptEmbedder()
    hybrid = HybridRecall(mem, embedder, weight=0.0, candidates=10)
    for query in ("cat food", "car garage", "kitten"):
        assert hybrid.recall(query, max_results=4) == mem.recall(query, max_results=4)
    assert embedder.calls == []


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.sampled_from(["cat food", "kitten lunch", "car food", "dog dinner", "feline"]),
    weight=st.floats(0.05, 1.0),
    share=st.sampled_from([0.0, 0.3, 1.0]),
    reach=st.integers(0, 2),
    limit=st.integers(1, 6),
)
def test_fusion_order_matches_an_independent_computation(
    mem: agentmem.Memory, query: str, weight: float, share: float, reach: int, limit: int
) -> None:
    hybrid = HybridRecall(
        mem, ConceptEmbedder(), weight=weight, candidates=8, neighbours=share, reach=reach
    )
    hits = hybrid.recall(query, max_results=limit)
    expected = expected_scores(mem, query, 8, weight, share, reach)
    assert len(hits) == min(limit, len(expected))
    got = keys(hits)
    for hit in hits:
        assert hit.score == pytest.approx(expected[(hit.session_id, hit.index)], abs=1e-5)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    left_out = [v for k, v in expected.items() if k not in got]
    assert all(v <= min(scores) + 1e-5 for v in left_out)


def test_a_semantic_match_overtakes_a_lexical_one(mem: agentmem.Memory) -> None:
    # "food" alone: lexically the "food food food" turn wins; semantically, with the
    # "lunch"/"dinner" turns around it, the kitten-lunch turn in session 0 rises.
    lexical = keys(mem.recall("food lunch", max_results=10))
    hybrid = keys(
        HybridRecall(mem, ConceptEmbedder(), weight=1.0, neighbours=0.0, reach=0).recall(
            "food lunch", max_results=10
        )
    )
    assert set(hybrid) == set(lexical)
    assert hybrid != lexical
    texts = texts_by_key(mem)
    q = concept_vector("food lunch")
    sims = [sum(a * b for a, b in zip(q, concept_vector(texts[k]), strict=True)) for k in hybrid]
    assert sims == sorted(sims, reverse=True)


def test_filters_pass_through(mem: agentmem.Memory) -> None:
    hybrid = HybridRecall(mem, ConceptEmbedder())
    hits = hybrid.recall("cat food", max_results=10, roles=["assistant"])
    assert hits
    assert {h.role for h in hits} == {"assistant"}
    assert set(keys(hits)) == set(keys(mem.recall("cat food", max_results=10, roles=["assistant"])))


def test_vectors_are_cached_and_re_embedded_when_a_message_changes(
    mem: agentmem.Memory,
) -> None:
    embedder = ConceptEmbedder()
    hybrid = HybridRecall(mem, embedder, candidates=10, reach=1)
    first = hybrid.recall("cat food", max_results=3)
    embedded = sum(len(c) for c in embedder.calls)
    assert embedded > 1
    embedder.calls.clear()
    assert hybrid.recall("cat food", max_results=3) == first
    assert embedder.calls == [["cat food"]]  # only the query: every message came from the cache

    # Rewrite a stored message in place: same (session, index), new text.
    target = first[0]
    with mem.session(target.session_id) as s:
        messages = [dict(m) for m in s.history]
        messages[target.index]["content"] = "user: cat cat food kitten dinner garage"
        s.history.replace_all(messages)
    embedder.calls.clear()
    hybrid.recall("cat food", max_results=3)
    texts = [t for call in embedder.calls for t in call]
    assert "user: cat cat food kitten dinner garage" in texts
    assert texts.count("cat food") == 1
    assert len(texts) == 2  # the changed message and the query, nothing else


def test_the_cache_is_bounded(mem: agentmem.Memory) -> None:
    hybrid = HybridRecall(mem, ConceptEmbedder(), candidates=10, cache_size=3)
    hybrid.recall("cat food", max_results=5)
    assert hybrid.cached == 3
    hybrid.clear()
    assert hybrid.cached == 0


class Broken:
    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "embedder",
    [
        Broken(error=RuntimeError("model file vanished")),
        Broken(result=[]),  # too few vectors
        Broken(result=None),
        Broken(result=[["x"]]),
    ],
)
def test_a_failing_embedder_falls_back_to_the_lexical_order(
    mem: agentmem.Memory, embedder: Broken, caplog: pytest.LogCaptureFixture
) -> None:
    hybrid = HybridRecall(mem, embedder, weight=0.8)
    with caplog.at_level(logging.WARNING, logger="agentmem.embedders"):
        hits = hybrid.recall("cat food", max_results=4)
    assert hits == mem.recall("cat food", max_results=4)
    assert hybrid.failures == 1
    (record,) = [r for r in caplog.records if r.name == "agentmem.embedders"]
    assert record.levelno == logging.WARNING
    assert "Broken" in record.getMessage()
    assert "lexical order" in record.getMessage()


def test_keyboard_interrupt_from_the_embedder_propagates(mem: agentmem.Memory) -> None:
    hybrid = HybridRecall(mem, Broken(error=KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        hybrid.recall("cat food")


def test_no_hit_means_no_embedding(mem: agentmem.Memory) -> None:
    embedder = ConceptEmbedder()
    assert HybridRecall(mem, embedder).recall("zebra") == []
    assert embedder.calls == []


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"weight": 1.5}, "weight"),
        ({"weight": -0.1}, "weight"),
        ({"weight": math.nan}, "weight"),
        ({"weight": True}, "weight"),
        ({"neighbours": 2}, "neighbours"),
        ({"candidates": 0}, "candidates"),
        ({"reach": 6}, "reach"),
        ({"cache_size": 0}, "cache_size"),
    ],
)
def test_bad_settings_are_refused_by_name(
    mem: agentmem.Memory, kwargs: dict[str, Any], name: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=name):
        HybridRecall(mem, ConceptEmbedder(), **kwargs)


def test_bad_components_are_refused(mem: agentmem.Memory) -> None:
    with pytest.raises(ConfigurationError, match="embedder"):
        HybridRecall(mem, object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="memory"):
        HybridRecall(object(), ConceptEmbedder())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="max_results"):
        HybridRecall(mem, ConceptEmbedder()).recall("cat", max_results=0)


@given(
    st.lists(st.tuples(st.floats(-50, 50), st.floats(-1, 1)), min_size=1, max_size=12),
    st.floats(0, 1),
)
def test_fuse_is_a_convex_blend_of_normalised_scores(
    pairs: list[tuple[float, float]], weight: float
) -> None:
    lexical = [a for a, _ in pairs]
    semantic = [b for _, b in pairs]
    fused = fuse(lexical, semantic, weight)
    assert all(-1e-9 <= f <= 1 + 1e-9 for f in fused)
    if weight == 0:
        # the lexical order is kept
        order = sorted(range(len(pairs)), key=lambda i: -lexical[i])
        assert [fused[i] for i in order] == sorted(fused, reverse=True)


def test_fuse_refuses_lists_of_different_lengths() -> None:
    with pytest.raises(InvalidArgumentError, match="differ in length"):
        fuse([1.0], [1.0, 2.0], 0.5)
