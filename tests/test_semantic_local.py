"""LocalMemoryClient: storage, dedupe, scopes, search, LLM reconciliation, history, recovery."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)
from profiles import scaled

import agentmem
from agentmem.errors import (
    ConfigurationError,
    InvalidArgumentError,
    LLMError,
    MemoryNotFoundError,
    StorageError,
)
from agentmem.protocols import MemoryClient, MemoryRecord
from agentmem.semantic import SEMANTIC_FILE, LocalMemoryClient
from agentmem.testing import ScriptedLLM

CHILD = Path(__file__).parent / "_semantic_writer_child.py"
KILL_CHILD = Path(__file__).parent / "_semantic_kill9_child.py"
KEY = "sk-proj-4f9Qx2LmZ8rT1vB7nK3pW6yH0cJ5dA"


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def reply(data: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": json.dumps(data)}


def facts(*items: str) -> dict[str, Any]:
    return reply({"facts": list(items)})


def ops(*items: dict[str, Any]) -> dict[str, Any]:
    return reply({"memory": list(items)})


def texts(records: list[MemoryRecord]) -> set[str]:
    return {r.memory for r in records}


# --------------------------------------------------------------------------- basics


def test_it_is_a_memory_client_and_stores_in_the_root(tmp_path: Path) -> None:
    with LocalMemoryClient(tmp_path / "root") as client:
        assert isinstance(client, MemoryClient)
        assert client.path == tmp_path / "root" / SEMANTIC_FILE
        client.add("I prefer tabs over spaces.", user_id="martin")
    conn = sqlite3.connect(tmp_path / "root" / SEMANTIC_FILE)
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    assert (meta["format"], meta["version"]) == ("agentmem.semantic", "1")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert [r[0] for r in conn.execute("SELECT name FROM migrations")] == ["0001_initial"]
    assert conn.execute("SELECT text FROM memories").fetchall() == [("I prefer tabs over spaces.",)]
    conn.close()


def test_only_user_words_are_stored() -> None:
    client = LocalMemoryClient(None)
    events = client.add(
        [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "My   name is\n Ada."},
            {"role": "assistant", "content": "Nice to meet you, Ada."},
            {"role": "tool", "tool_call_id": "c1", "content": "tool output"},
            {"role": "user", "content": [{"type": "text", "text": "I live in Lyon."}]},
            {
                "role": "user",
                "content": "<memory-context>old</memory-context>",
                "system_injected": True,
            },
        ],
        user_id="ada",
    )
    assert [e["event"] for e in events] == ["ADD", "ADD"]
    assert texts(client.get_all(user_id="ada")) == {"My name is Ada.", "I live in Lyon."}


def test_the_same_statement_is_never_stored_twice_in_a_scope() -> None:
    client = LocalMemoryClient(None)
    first = client.add("I prefer tabs over spaces.", user_id="u")
    again = client.add("  i PREFER tabs   over spaces. ", user_id="u")
    assert first[0]["event"] == "ADD"
    assert again == [
        {"id": first[0]["id"], "memory": "I prefer tabs over spaces.", "event": "NOOP"}
    ]
    other_agent = client.add("I prefer tabs over spaces.", user_id="u", agent_id="a")
    assert other_agent[0]["event"] == "ADD"  # another scope
    assert len(client.get_all(user_id="u")) == 2
    assert len(client.get_all(user_id="u", agent_id="a")) == 1


def test_reads_and_delete_all_filter_by_the_ids_given() -> None:
    client = LocalMemoryClient(None)
    client.add("plain fact", user_id="u")
    client.add("agent a fact", user_id="u", agent_id="a")
    client.add("agent b fact", user_id="u", agent_id="b")
    client.add("agent a run r fact", user_id="u", agent_id="a", run_id="r")
    client.add("other user fact", user_id="v")
    assert len(client.get_all(user_id="u")) == 4
    assert texts(client.get_all(user_id="u", agent_id="a")) == {
        "agent a fact",
        "agent a run r fact",
    }
    assert texts(client.search("fact", user_id="u", run_id="r")) == {"agent a run r fact"}
    assert client.delete_all(user_id="u", agent_id="a") == 2
    assert texts(client.get_all(user_id="u")) == {"plain fact", "agent b fact"}
    assert client.delete_all(user_id="u") == 2
    assert texts(client.get_all(user_id="v")) == {"other user fact"}


@pytest.mark.parametrize("bad", [None, "", "   ", 3])
def test_delete_all_requires_a_user(bad: Any) -> None:
    client = LocalMemoryClient(None)
    client.add("keep me", user_id="u")
    with pytest.raises(InvalidArgumentError, match="user_id"):
        client.delete_all(user_id=bad)
    assert len(client.get_all(user_id="u")) == 1


def test_delete_unknown_id_and_history() -> None:
    client = LocalMemoryClient(None)
    [event] = client.add("a fact to forget", user_id="u")
    client.delete(event["id"])
    assert client.get_all(user_id="u") == []
    with pytest.raises(MemoryNotFoundError) as info:
        client.delete(event["id"])
    assert isinstance(info.value, KeyError)
    assert info.value.memory_id == event["id"]
    entries = client.history(event["id"])
    assert [(h.event, h.old_memory, h.new_memory) for h in entries] == [
        ("ADD", None, "a fact to forget"),
        ("DELETE", "a fact to forget", None),
    ]
    with pytest.raises(MemoryNotFoundError):
        client.history("nope")
    with pytest.raises(MemoryNotFoundError):
        client.get("nope")


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda c: c.add(5, user_id="u"), "messages"),
        (lambda c: c.add("x", user_id="u", metadata={"k": object()}), "metadata"),
        (lambda c: c.add("x", user_id="u", metadata=[1]), "metadata"),
        (lambda c: c.add("x", user_id="u", agent_id=""), "agent_id"),
        (lambda c: c.add("x", user_id="u", infer="yes"), "infer"),
        (lambda c: c.search("x", user_id="u", limit=0), "limit"),
        (lambda c: c.search("x", user_id="u", filters={"k": [1]}), "filters"),
        (lambda c: c.search("x", user_id="u", threshold="high"), "threshold"),
        (lambda c: c.search(None, user_id="u"), "query"),
        (lambda c: c.get_all(user_id="u", limit=True), "limit"),
        (lambda c: c.delete(""), "memory_id"),
    ],
)
def test_bad_arguments_are_named(call: Any, field: str) -> None:
    client = LocalMemoryClient(None)
    client.add("kept", user_id="u")
    with pytest.raises(InvalidArgumentError, match=field):
        call(client)
    assert texts(client.get_all(user_id="u")) == {"kept"}


def test_bad_configuration_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="mem_or_root"):
        LocalMemoryClient(42)
    with pytest.raises(ConfigurationError, match="embedder"):
        LocalMemoryClient(None, embedder=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="vector_weight"):
        LocalMemoryClient(None, vector_weight=2)
    with pytest.raises(ConfigurationError, match="scrubber"):
        LocalMemoryClient(None, scrubber=3)  # type: ignore[arg-type]
    (tmp_path / "x").write_text("a file")
    with pytest.raises(StorageError):
        LocalMemoryClient(tmp_path / "x")


def test_closed_client_raises_storage_error() -> None:
    client = LocalMemoryClient(None)
    client.close()
    client.close()
    with pytest.raises(StorageError, match="closed"):
        client.get_all(user_id="u")


# --------------------------------------------------------------------------- search


def test_search_scores_are_the_share_of_query_keywords_held() -> None:
    client = LocalMemoryClient(None)
    client.add("I prefer tabs over spaces", user_id="u")
    client.add("Tabs are used in the Makefile", user_id="u")
    client.add("The cat sleeps all day", user_id="u")
    hits = client.search("do I prefer tabs?", user_id="u")
    assert [(h.memory, h.score) for h in hits] == [
        ("I prefer tabs over spaces", 1.0),
        ("Tabs are used in the Makefile", 0.5),
    ]
    assert all(0.0 <= (h.score or 0) <= 1.0 for h in hits)
    assert [h.memory for h in client.search("prefer tabs", user_id="u", threshold=0.6)] == [
        "I prefer tabs over spaces"
    ]
    assert client.search("preferring", user_id="u")[0].memory == "I prefer tabs over spaces"
    assert client.search("tabs", user_id="u", limit=1)[0].score == 1.0
    assert client.search("nothing matches", user_id="u") == []
    assert client.search("tabs", user_id="someone else") == []


def test_search_filters_are_metadata_equality() -> None:
    client = LocalMemoryClient(None)
    client.add("likes green tea", user_id="u", metadata={"topic": "food", "n": 1})
    client.add("likes green walls", user_id="u", metadata={"topic": "home", "n": True})
    assert texts(client.search("green", user_id="u", filters={"topic": "food"})) == {
        "likes green tea"
    }
    assert texts(client.search("green", user_id="u", filters={"n": 1})) == {"likes green tea"}
    assert texts(client.get_all(user_id="u", filters={"n": True})) == {"likes green walls"}
    assert client.get_all(user_id="u", filters={"missing": None}) == []
    [record] = client.get_all(user_id="u", filters={"topic": "food"})
    assert record.metadata == {"topic": "food", "n": 1}


def test_filters_apply_before_the_limit_past_the_first_candidates() -> None:
    client = LocalMemoryClient(None)
    for i in range(120):
        client.add(f"blue sky number{i}", user_id="u", metadata={"keep": False})
    client.add("blue", user_id="u", metadata={"keep": True})  # one of the two words: 0.5
    client.add("blue sea kept", user_id="u", metadata={"keep": True})
    hits = client.search("blue sky", user_id="u", filters={"keep": True}, limit=5)
    assert [h.memory for h in hits] == ["blue", "blue sea kept"]
    assert all(h.score == 0.5 for h in hits)
    assert len(client.search("blue sky", user_id="u", limit=200)) == 122


class SynonymEmbedder:
    """Bag of concepts: each word maps to a concept axis; synonyms share one."""

    AXES: ClassVar[dict[str, int]] = {
        "car": 0,
        "automobile": 0,
        "vehicle": 0,
        "dog": 1,
        "puppy": 1,
        "red": 2,
    }

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Any) -> list[list[float]]:
        self.calls.append(list(texts))
        out = []
        for text in texts:
            vec = [0.0, 0.0, 0.0, 0.01]
            for word in text.lower().replace(".", " ").split():
                if word in self.AXES:
                    vec[self.AXES[word]] += 1.0
            out.append(vec)
        return out


def test_vectors_blend_with_bm25() -> None:
    embedder = SynonymEmbedder()
    client = LocalMemoryClient(None, embedder=embedder)
    client.add("I drive a red car", user_id="u")
    client.add("My puppy barks", user_id="u")
    hits = client.search("automobile", user_id="u")
    assert hits[0].memory == "I drive a red car"
    assert hits[0].score is not None and 0.3 < hits[0].score < 0.5  # 0.5 * cosine, no keyword
    both = client.search("red car", user_id="u")[0]
    assert both.memory == "I drive a red car" and both.score is not None and both.score > 0.9
    lexical_only = LocalMemoryClient(None)
    lexical_only.add("I drive a red car", user_id="u")
    assert lexical_only.search("automobile", user_id="u") == []


class AxisEmbedder:
    """``alpha`` and ``beta`` are two axes; a text with neither gets the zero vector."""

    def embed(self, texts: Any) -> list[list[float]]:
        return [[float("alpha" in t), float("beta" in t)] for t in texts]


def test_a_zero_vector_has_cosine_zero_not_a_lexical_only_score() -> None:
    client = LocalMemoryClient(None, embedder=AxisEmbedder())
    client.add("alpha tea", user_id="u")  # vector (1, 0): cosine 0 with the query
    client.add("green tea", user_id="u")  # zero vector: cosine 0 too, by the Embedder contract
    hits = client.search("beta tea", user_id="u")
    # Both hold one of the two keywords (0.5) and have cosine 0: 0.5 * 0.5 + 0.5 * 0.
    assert sorted((h.memory, h.score) for h in hits) == [("alpha tea", 0.25), ("green tea", 0.25)]
    assert client.search("beta tea", user_id="u", threshold=0.3) == []
    # A zero query vector says nothing: lexical alone, for every memory.
    plain = client.search("tea", user_id="u")
    assert sorted((h.memory, h.score) for h in plain) == [("alpha tea", 1.0), ("green tea", 1.0)]


def test_a_memory_without_a_vector_is_scored_lexically_alone() -> None:
    client = LocalMemoryClient(None)
    client.add("beta tea before the embedder", user_id="u")
    client.embedder = AxisEmbedder()
    client.add("alpha tea", user_id="u")
    scores = {h.memory: h.score for h in client.search("beta tea", user_id="u")}
    assert scores == {"beta tea before the embedder": 1.0, "alpha tea": 0.25}


def test_bad_embedder_output_is_a_configuration_error() -> None:
    class Broken:
        def embed(self, texts: Any) -> list[list[float]]:
            return [[1.0]]

    client = LocalMemoryClient(None, embedder=Broken())
    with pytest.raises(ConfigurationError, match="embedder"):
        client.add(
            [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], user_id="u"
        )
    assert client.get_all(user_id="u") == []


# --------------------------------------------------------------------------- the state machine


WORDS = [f"w{i}q" for i in range(12)]
SCOPES = [("u1", None, None), ("u1", "a", None), ("u1", "a", "r"), ("u2", None, None)]


class SemanticMachine(RuleBasedStateMachine):
    """The client against a dict model: add without LLM, delete, delete_all, get_all, search."""

    memories = Bundle("memories")

    @initialize()
    def start(self) -> None:
        self.client = LocalMemoryClient(None, clock=Clock())
        # model: id -> (scope triple, normalised text)
        self.model: dict[str, tuple[tuple[str, str | None, str | None], str]] = {}
        self.counter = 0

    def teardown(self) -> None:
        self.client.close()

    @rule(
        target=memories,
        scope=st.sampled_from(SCOPES),
        words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
        repeat=st.booleans(),
    )
    def add(self, scope: tuple[str, str | None, str | None], words: list[str], repeat: bool) -> str:
        if repeat and self.model:
            # An existing statement again, spelled differently, in its own scope: a NOOP.
            memory_id, (scope, text) = sorted(self.model.items())[0]
            events = self.client.add(
                "  " + text.upper() + " ", user_id=scope[0], agent_id=scope[1], run_id=scope[2]
            )
            assert events == [{"id": memory_id, "memory": text, "event": "NOOP"}]
            return memory_id
        self.counter += 1
        text = f"u{self.counter}z " + " ".join(words)
        events = self.client.add(text, user_id=scope[0], agent_id=scope[1], run_id=scope[2])
        assert [e["event"] for e in events] == ["ADD"]
        self.model[events[0]["id"]] = (scope, text)
        return str(events[0]["id"])

    @rule(memory_id=consumes(memories))
    def delete(self, memory_id: str) -> None:
        if memory_id in self.model:
            self.client.delete(memory_id)
            del self.model[memory_id]
        else:
            with pytest.raises(MemoryNotFoundError):
                self.client.delete(memory_id)

    @rule(scope=st.sampled_from([*SCOPES, ("u1", "a", None)]), narrow=st.integers(0, 2))
    def delete_all(self, scope: tuple[str, str | None, str | None], narrow: int) -> None:
        user, agent, run = (
            scope[0],
            scope[1] if narrow >= 1 else None,
            scope[2] if narrow >= 2 else None,
        )
        doomed = [k for k, (s, _) in self.model.items() if _covers((user, agent, run), s)]
        assert self.client.delete_all(user_id=user, agent_id=agent, run_id=run) == len(doomed)
        for key in doomed:
            del self.model[key]

    @invariant()
    def get_all_matches_the_model(self) -> None:
        for scope in [*SCOPES, ("u1", "a", None)]:
            for narrow in range(3):
                user, agent, run = (
                    scope[0],
                    scope[1] if narrow >= 1 else None,
                    scope[2] if narrow >= 2 else None,
                )
                want = {k for k, (s, _) in self.model.items() if _covers((user, agent, run), s)}
                got = {
                    r.id
                    for r in self.client.get_all(
                        user_id=user, agent_id=agent, run_id=run, limit=1000
                    )
                }
                assert got == want

    @invariant()
    def search_finds_each_memory_by_its_unique_word_in_its_scope_only(self) -> None:
        for memory_id, (scope, text) in self.model.items():
            unique = text.split()[0]
            hits = self.client.search(unique, user_id=scope[0], agent_id=scope[1], run_id=scope[2])
            assert [h.id for h in hits] == [memory_id]
            assert hits[0].memory == text and hits[0].score == 1.0
            other = "u2" if scope[0] == "u1" else "u1"
            assert self.client.search(unique, user_id=other) == []


def _covers(
    query: tuple[str, str | None, str | None], scope: tuple[str, str | None, str | None]
) -> bool:
    return (
        all(q is None or q == s for q, s in zip(query, scope, strict=True)) and query[0] == scope[0]
    )


TestSemanticMachine = SemanticMachine.TestCase
TestSemanticMachine.settings = settings(
    settings.default, max_examples=scaled(40), stateful_step_count=25, deadline=None
)


# --------------------------------------------------------------------------- LLM reconciliation


def test_llm_add_without_similar_memories_makes_one_call() -> None:
    llm = ScriptedLLM([facts("Prefers dark mode", "Lives in Lyon")])
    client = LocalMemoryClient(None, llm=llm)
    events = client.add(
        [{"role": "user", "content": "I like dark mode. I live in Lyon."}], user_id="u"
    )
    assert [(e["event"], e["memory"]) for e in events] == [
        ("ADD", "Prefers dark mode"),
        ("ADD", "Lives in Lyon"),
    ]
    llm.assert_complete()
    sent = llm.calls[0][0]
    assert "I like dark mode. I live in Lyon." in sent[-1]["content"]
    assert '{"facts"' in sent[0]["content"]


def _seeded(llm: ScriptedLLM) -> tuple[LocalMemoryClient, dict[str, str]]:
    client = LocalMemoryClient(None, llm=llm, clock=Clock())
    ids = {}
    for text in ("Prefers dark mode", "Works at Acme"):
        [event] = client.add(text, user_id="u", infer=False)
        ids[text] = event["id"]
    return client, ids


def test_llm_update_keeps_history_delete_noop_and_add() -> None:
    llm = ScriptedLLM(
        [
            facts("Prefers light mode", "Works at Acme", "Has a cat", "Left Acme"),
            ops(
                {"event": "UPDATE", "id": "0", "text": "Prefers light mode"},
                {"event": "NOOP", "id": "1"},
                {"event": "ADD", "text": "Has a cat"},
                {"event": "DELETE", "id": "1"},
            ),
        ]
    )
    client, ids = _seeded(llm)
    events = client.add("I switched to light mode, I have a cat and I left Acme.", user_id="u")
    assert [(e["event"], e["id"]) for e in events][:2] == [
        ("UPDATE", ids["Prefers dark mode"]),
        ("NOOP", ids["Works at Acme"]),
    ]
    assert events[0]["previous_memory"] == "Prefers dark mode"
    assert events[2]["event"] == "ADD" and events[2]["memory"] == "Has a cat"
    assert events[3] == {"id": ids["Works at Acme"], "memory": "Works at Acme", "event": "DELETE"}
    assert texts(client.get_all(user_id="u")) == {"Prefers light mode", "Has a cat"}
    history = client.history(ids["Prefers dark mode"])
    assert [(h.event, h.old_memory, h.new_memory) for h in history] == [
        ("ADD", None, "Prefers dark mode"),
        ("UPDATE", "Prefers dark mode", "Prefers light mode"),
    ]
    shown = json.loads(llm.calls[1][0][-1]["content"])
    assert {m["text"] for m in shown["existing_memories"]} == {"Prefers dark mode", "Works at Acme"}
    assert all(m["id"] in ("0", "1") for m in shown["existing_memories"])  # aliases, not ids
    llm.assert_complete()


def test_invented_ids_are_rejected_and_reported() -> None:
    llm = ScriptedLLM(
        [
            facts("Prefers vim", "Works at Initech"),
            ops(
                {"event": "DELETE", "id": "7"},
                {"event": "UPDATE", "id": "deadbeef", "text": "Prefers vim"},
                {"event": "ADD", "text": "Works at Initech"},
            ),
        ]
    )
    client, ids = _seeded(llm)
    events = client.add("I use vim at Initech now", user_id="u")
    assert [(e["event"], e["id"]) for e in events[:2]] == [
        ("REJECTED", "7"),
        ("REJECTED", "deadbeef"),
    ]
    assert events[0]["requested"] == "DELETE" and "not among" in events[0]["reason"]
    assert texts(client.get_all(user_id="u")) == {
        "Prefers dark mode",
        "Works at Acme",
        "Works at Initech",
    }
    assert len(client.history(ids["Prefers dark mode"])) == 1


def test_a_real_id_of_a_memory_not_shown_is_rejected() -> None:
    client = LocalMemoryClient(None)
    [outsider] = client.add("Prefers emacs", user_id="someone else", infer=False)
    client.add("Prefers nano", user_id="u", infer=False)
    # The model "copies" a real id, of another user's memory it was never shown.
    client.llm = ScriptedLLM([facts("Prefers vim"), ops({"event": "DELETE", "id": outsider["id"]})])
    events = client.add("I prefer vim", user_id="u")
    assert [(e["event"], e["id"]) for e in events] == [("REJECTED", outsider["id"])]
    assert texts(client.get_all(user_id="someone else")) == {"Prefers emacs"}
    assert texts(client.get_all(user_id="u")) == {"Prefers nano"}


def test_an_update_to_an_existing_text_merges_into_it() -> None:
    llm = ScriptedLLM(
        [facts("Prefers light mode"), ops({"event": "UPDATE", "id": "0", "text": "works at acme"})]
    )
    client, ids = _seeded(llm)
    events = client.add("light mode, acme", user_id="u")
    assert events == [
        {
            "id": ids["Prefers dark mode"],
            "memory": "Prefers dark mode",
            "event": "DELETE",
            "duplicate_of": ids["Works at Acme"],
        }
    ]
    assert texts(client.get_all(user_id="u")) == {"Works at Acme"}
    assert client.history(ids["Prefers dark mode"])[-1].event == "DELETE"


@pytest.mark.parametrize(
    "bad_reply",
    [
        {"role": "assistant", "content": "Sure! The user likes tea."},
        {"role": "assistant", "content": '["likes tea"]'},
        reply({"fact": ["likes tea"]}),
        reply({"facts": "likes tea"}),
        reply({"facts": [1]}),
        {"role": "assistant", "content": None},
    ],
)
def test_unusable_fact_extraction_raises_and_stores_nothing(bad_reply: dict[str, Any]) -> None:
    client = LocalMemoryClient(None, llm=ScriptedLLM([bad_reply]))
    with pytest.raises(LLMError, match="fact extraction"):
        client.add("I like tea", user_id="u")
    assert client.get_all(user_id="u") == []


@pytest.mark.parametrize(
    "bad_ops",
    [
        {"role": "assistant", "content": '```json\n{"memory": [ {"event": "ADD"} ]}\n```'},
        {"role": "assistant", "content": "not json at all"},
        reply({"memory": [{"event": "MERGE", "id": "0"}]}),
        reply({"memory": [{"event": "UPDATE", "text": "no id"}]}),
        reply({"memory": [{"event": "DELETE", "id": ["0"]}]}),
        reply({"memory": {"event": "ADD", "text": "x"}}),
        reply({"memory": ["ADD"]}),
    ],
)
def test_unusable_reconciliation_raises_and_changes_nothing(bad_ops: dict[str, Any]) -> None:
    llm = ScriptedLLM([facts("Prefers light mode", "Likes tea"), bad_ops])
    client, _ = _seeded(llm)
    before = client.get_all(user_id="u")
    with pytest.raises(LLMError, match="reconciliation"):
        client.add("light mode please, and tea", user_id="u")
    assert client.get_all(user_id="u") == before


def test_a_fenced_reply_and_none_spelling_are_accepted() -> None:
    fenced = {
        "role": "assistant",
        "content": "```json\n" + json.dumps({"facts": ["Prefers dark mode"]}) + "\n```",
    }
    llm = ScriptedLLM([fenced, ops({"event": "NONE", "id": "0"})])
    client, ids = _seeded(llm)
    assert client.add("dark mode", user_id="u") == [
        {"id": ids["Prefers dark mode"], "memory": "Prefers dark mode", "event": "NOOP"}
    ]


def test_an_llm_that_raises_stores_nothing() -> None:
    def boom(messages: Any, tools: Any = None) -> dict[str, Any]:
        raise RuntimeError("provider down")

    client = LocalMemoryClient(None, llm=boom)
    with pytest.raises(RuntimeError, match="provider down"):
        client.add("I like tea", user_id="u")
    assert client.get_all(user_id="u") == []


def _script() -> list[dict[str, Any]]:
    return [
        facts("Prefers light mode", "Has a cat"),
        ops(
            {"event": "UPDATE", "id": "0", "text": "Prefers light mode"},
            {"event": "ADD", "text": "Has a cat"},
            {"event": "DELETE", "id": "5"},
        ),
    ]


def test_sync_and_async_llms_give_the_same_results() -> None:
    sync_llm = ScriptedLLM(_script())
    sync_client, _ = _seeded(sync_llm)
    sync_events = sync_client.add("light mode now, and I have a cat", user_id="u")

    scripted = ScriptedLLM(_script())

    class AsyncLLM:
        async def __call__(self, messages: Any, tools: Any = None) -> dict[str, Any]:
            await asyncio.sleep(0)
            return scripted(messages, tools)

    async_client, _ = _seeded(ScriptedLLM([]))
    async_client.llm = AsyncLLM()
    with pytest.raises(LLMError, match="async"):
        async_client.add("light mode now, and I have a cat", user_id="u")
    async_events = asyncio.run(async_client.aadd("light mode now, and I have a cat", user_id="u"))

    def strip(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(e["event"], e["memory"]) for e in events]

    assert strip(sync_events) == strip(async_events)
    assert strip(sync_events)[0] == ("UPDATE", "Prefers light mode")
    assert texts(sync_client.get_all(user_id="u")) == texts(async_client.get_all(user_id="u"))
    assert [m for m, _ in sync_llm.calls] == [m for m, _ in scripted.calls]
    # Storing as said calls no model, so an async LLM does not stop the sync call.
    assert async_client.add("plain statement", user_id="u", infer=False)[0]["event"] == "ADD"


# --------------------------------------------------------------------------- scrubbing, recovery


def test_secrets_are_scrubbed_before_storing_and_before_the_llm(tmp_path: Path) -> None:
    with LocalMemoryClient(tmp_path) as client:
        client.add(f"my openai key is {KEY} ok", user_id="u", metadata={"note": f"api_key={KEY}"})
        [record] = client.get_all(user_id="u")
        assert KEY not in record.memory and "[REDACTED" in record.memory
        assert KEY not in json.dumps(dict(record.metadata))
        llm = ScriptedLLM([facts(f"Uses key {KEY}")])
        client.llm = llm
        [event] = client.add(f"remember {KEY} for later", user_id="v")
        assert KEY not in json.dumps(llm.calls[0][0])
        assert KEY not in event["memory"]
    for path in tmp_path.iterdir():
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    with LocalMemoryClient(tmp_path, scrubber=False) as raw:
        raw.add(f"key {KEY}", user_id="w")
        assert KEY in raw.get_all(user_id="w")[0].memory


def test_built_from_a_memory_it_uses_its_root_and_llm(tmp_path: Path) -> None:
    llm = ScriptedLLM([facts("Prefers tabs")])
    with agentmem.Memory(root=tmp_path / "mem", llm=llm) as mem:
        client = LocalMemoryClient(mem)
        assert client.path == tmp_path / "mem" / SEMANTIC_FILE
        assert client.add("tabs!", user_id="u")[0]["memory"] == "Prefers tabs"
        assert "key [REDACTED" in client.add(f"key {KEY}", user_id="u", infer=False)[0]["memory"]
        client.close()


def test_incognito_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with agentmem.Memory(root=root, working_dir=tmp_path, incognito=True) as mem:
        client = LocalMemoryClient(mem)
        assert client.path is None
        client.add("I prefer tabs", user_id="u")
        client.delete_all(user_id="u")
        client.add("still here", user_id="u")
        assert texts(client.get_all(user_id="u")) == {"still here"}
        client.close()
    assert list(tmp_path.rglob("*")) == []


def test_a_corrupt_database_is_moved_aside_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    garbage = b"this is not a database" * 100
    (tmp_path / SEMANTIC_FILE).write_bytes(garbage)
    with caplog.at_level(logging.WARNING, logger="agentmem.storage"):
        client = LocalMemoryClient(tmp_path)
    assert client.recovery is not None and client.recovered_from is not None
    assert client.recovered_from.read_bytes() == garbage
    assert client.recovered_from.name.startswith(SEMANTIC_FILE + ".corrupt-")
    assert any(str(client.recovered_from) in r.getMessage() for r in caplog.records)
    client.add("fresh start", user_id="u")
    assert texts(client.get_all(user_id="u")) == {"fresh start"}
    client.close()
    again = LocalMemoryClient(tmp_path)
    assert again.recovery is None and texts(again.get_all(user_id="u")) == {"fresh start"}
    again.close()


def test_a_newer_format_is_refused_not_overwritten(tmp_path: Path) -> None:
    LocalMemoryClient(tmp_path).close()
    conn = sqlite3.connect(tmp_path / SEMANTIC_FILE)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="newer"):
        LocalMemoryClient(tmp_path)
    assert (tmp_path / SEMANTIC_FILE).exists()


def test_the_index_follows_every_change_in_the_same_transaction() -> None:
    client = LocalMemoryClient(None)
    [event] = client.add("alpha beta", user_id="u")
    conn = client._db._conn
    assert conn is not None
    assert (
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        is not None
    )
    client.delete(event["id"])
    assert (
        conn.execute(
            "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'alpha'"
        ).fetchone()[0]
        == 0
    )


# --------------------------------------------------------------------------- processes


def test_four_processes_adding_at_once_lose_nothing(tmp_path: Path) -> None:
    workers, count = 4, 8
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(CHILD), str(tmp_path), str(w), str(count), str(go)],
            stderr=subprocess.PIPE,
        )
        for w in range(workers)
    ]
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    with LocalMemoryClient(tmp_path) as client:
        stored = client.get_all(user_id="team", limit=1000)
    texts_ = [r.memory for r in stored]
    assert len(texts_) == workers * count + 1
    assert sum("fridays" in t.lower() for t in texts_) == 1
    for w in range(workers):
        for i in range(count):
            assert f"worker{w} statement{i} zz{w}x{i}" in texts_


# --------------------------------------------------------------------------- golden file


def test_golden_v1_database_reads_back(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent / "golden"))
    try:
        import make_golden_semantic as golden
    finally:
        sys.path.pop(0)
    shutil.copyfile(Path(__file__).parent / "golden" / golden.DB_NAME, tmp_path / SEMANTIC_FILE)

    class QueryEmbedder:
        def embed(self, texts: Any) -> list[list[float]]:
            return [
                golden.VECTORS["Has a dog named Rex"] if t == "pet?" else [0.0, 1.0, 0.0]
                for t in texts
            ]

    with LocalMemoryClient(tmp_path, embedder=QueryEmbedder()) as client:
        assert client.recovery is None
        got = [
            (r.memory, r.user_id, r.agent_id, r.run_id, dict(r.metadata))
            for user in ("martin", "ada")
            for r in client.get_all(user_id=user)
        ]
        assert sorted(got, key=str) == sorted(golden.EXPECTED_MEMORIES, key=str)
        by_text = {r.memory: r for user in ("martin", "ada") for r in client.get_all(user_id=user)}
        [light] = [r for r in by_text.values() if r.memory == "Prefers light mode"]
        assert light.created_at == "2023-11-14T22:14:20.000000Z"
        history = [(h.event, h.old_memory, h.new_memory) for h in client.history(light.id)]
        assert history == golden.EXPECTED_HISTORY["Prefers light mode"]
        conn = sqlite3.connect(tmp_path / SEMANTIC_FILE)
        [(gone_id,)] = conn.execute(
            "SELECT memory_id FROM history WHERE new_text = 'Forgotten fact'"
        ).fetchall()
        conn.close()
        history = [(h.event, h.old_memory, h.new_memory) for h in client.history(gone_id)]
        assert history == golden.EXPECTED_HISTORY["Forgotten fact"]
        # The stored float32 vector is read back: the same vector scores 0.5 * cosine 1.0.
        [dog] = client.search("pet?", user_id="ada")
        assert dog.memory == "Has a dog named Rex"
        assert dog.score == pytest.approx(0.5)
        client.add("a new fact after the upgrade check", user_id="ada")


def test_threads_sharing_one_client_lose_nothing() -> None:
    # A background recorder adds while the agent's thread searches the same client.
    client = LocalMemoryClient(None)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(40):
                client.add(f"thread{n} item{i} t{n}x{i}", user_id="u")
                client.search(f"item{i}", user_id="u")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(client.get_all(user_id="u", limit=1000)) == 160


def test_kill9_leaves_every_returned_add_and_a_consistent_index(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(KILL_CHILD), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    returned = []
    for line in proc.stdout:
        returned.append(line.split())
        if len(returned) >= 60:
            break
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)  # also closes the pipes
    with LocalMemoryClient(tmp_path) as client:
        assert client.recovery is None
        stored = {r.id: r.memory for r in client.get_all(user_id="u", limit=100_000)}
        for memory_id, word in returned:
            assert memory_id in stored
            assert [h.id for h in client.search(word, user_id="u")] == [memory_id]
    conn = sqlite3.connect(tmp_path / SEMANTIC_FILE)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
    [(adds,)] = conn.execute("SELECT count(*) FROM history WHERE event = 'ADD'").fetchall()
    assert adds == len(stored)
    conn.close()


def test_a_client_built_from_a_memory_follows_its_scrub_setting(tmp_path: Path) -> None:
    from agentmem import Memory
    from agentmem.semantic import LocalMemoryClient

    secret = "my key is sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    with (
        Memory(root=tmp_path / "on") as on,
        Memory(root=tmp_path / "off", scrub_secrets=False) as off,
    ):
        scrubbed = LocalMemoryClient(on)
        kept = LocalMemoryClient(off)
        try:
            scrubbed.add(secret, user_id="u", infer=False)
            kept.add(secret, user_id="u", infer=False)
            assert "sk-proj-" not in scrubbed.get_all(user_id="u")[0].memory
            assert kept.get_all(user_id="u")[0].memory == secret
        finally:
            scrubbed.close()
            kept.close()
