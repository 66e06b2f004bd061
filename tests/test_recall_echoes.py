"""Recall never returns its own echoes.

What the memory itself put in a conversation is not a recall hit: the memory tool's
calls and the tool messages answering them, messages flagged as injected, injected
blocks (``<memory-context>``, a recovery note, a thread summary, a system reminder)
and the trim checkpoint read back. The rules are applied when a message is indexed
(``agentmem.session_store.recall_index``), and a store indexed under the earlier
rules is re-indexed when it is opened.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

import agentmem
from agentmem.recall import Ranking, recall
from agentmem.session_store import SessionStore
from agentmem.session_store.recall_index import (
    CHECKPOINT_HEADER,
    INJECTED_FLAGS,
    INJECTED_TAGS,
    MEMORY_TOOL,
)
from agentmem.tools import TOOL_NAME

GOLDEN = Path(__file__).resolve().parent / "golden"
ALL = Ranking(candidates=10_000, common=1.0)
WORD = "xylophone"


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def test_the_memory_tool_name_is_the_tools_one() -> None:
    assert MEMORY_TOOL == TOOL_NAME


def test_how_did_we_run_the_tests_finds_the_pytest_call_not_the_echoes(tmp_path: Path) -> None:
    """The trial's case, through the facade: one session ran pytest; a later one asked the
    memory tool three times how the tests were run, was given a <memory-context> block
    and read the trim checkpoint back. Recall finds the pytest call, and no echo."""
    mem = agentmem.Memory(root=tmp_path / "m", durability="normal")
    with mem.session(name="flaky login test") as first:
        first.start_task("The login test is flaky; fix it.")
        first.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [_call("c1", "shell", {"command": "pytest -q tests/test_login.py"})],
            }
        )
        first.append({"role": "tool", "tool_call_id": "c1", "content": "3 passed in 0.41s"})
        first.append({"role": "assistant", "content": "Fixed the race in the login fixture."})
        pytest_call = (first.id, 1)
    echoes: set[tuple[str, int]] = set()
    with mem.session(name="release") as later:
        later.start_task("Prepare the release.")

        def add(message: dict[str, Any], *, echo: bool) -> None:
            later.append(message)
            if echo:
                echoes.add((later.id, len(later.history) - 1))

        for k in range(3):
            call = _call(
                f"m{k}",
                TOOL_NAME,
                {"operation": "recall_sessions", "query": "how did we run the tests"},
            )
            add({"role": "assistant", "content": None, "tool_calls": [call]}, echo=True)
            result = mem.tools.handle(call)  # the real answer: previews of earlier runs
            assert "tests" in result["content"]
            add(result, echo=True)
        add(
            {
                "role": "user",
                "content": '<memory-context source="semantic">\n- we run the tests with '
                "tox\n</memory-context>",
                "system_injected": True,
            },
            echo=True,
        )
        add(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [_call("r1", "read_file", {"path": "memory/session_progress.md"})],
            },
            echo=False,
        )
        add(
            {
                "role": "tool",
                "tool_call_id": "r1",
                "content": f"{CHECKPOINT_HEADER}\n\nCurrent task: how did we run the tests",
            },
            echo=True,
        )
    hits = mem.recall("how did we run the tests", max_results=5)
    keys = {(h.session_id, h.index) for h in hits}
    assert pytest_call in keys, hits
    assert not keys & echoes, [h for h in hits if (h.session_id, h.index) in echoes]
    everything = {
        (h.session_id, h.index)
        for h in recall(mem.sessions, "how did we run the tests", max_results=1000, ranking=ALL)
    }
    assert not everything & echoes
    mem.close()


def _store_with(messages: list[dict[str, Any]]) -> tuple[SessionStore, str]:
    store = SessionStore(None)
    control = store.create(name="control").id
    store.writer(control).on_append([{"role": "user", "content": f"the {WORD} lesson"}])
    sid = store.create(name="echoes").id
    store.writer(sid).on_append(messages)
    return store, control


def _found(store: SessionStore, word: str = WORD) -> set[tuple[str, int]]:
    return {(h.session_id, h.index) for h in recall(store, word, max_results=1000, ranking=ALL)}


def _memory_call(call_id: str = "m1") -> dict[str, Any]:
    return _call(call_id, MEMORY_TOOL, {"operation": "search", "query": WORD})


ECHOES: dict[str, list[dict[str, Any]]] = {
    "memory call": [{"role": "assistant", "content": None, "tool_calls": [_memory_call()]}],
    "memory result": [
        {"role": "assistant", "content": None, "tool_calls": [_memory_call()]},
        {"role": "tool", "tool_call_id": "m1", "content": json.dumps({"notes": [WORD]})},
    ],
    "memory result after other results": [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call("a", "shell", {"cmd": "ls"}), _memory_call("m2")],
        },
        {"role": "tool", "tool_call_id": "a", "content": "README.md"},
        {"role": "tool", "tool_call_id": "m2", "content": f"found {WORD}"},
    ],
    "checkpoint": [
        {"role": "tool", "tool_call_id": "x", "content": f"{CHECKPOINT_HEADER}\n{WORD}"}
    ],
    **{
        f"flag {flag}": [{"role": "user", "content": f"{WORD} injected", flag: True}]
        for flag in INJECTED_FLAGS
    },
    **{
        f"block {tag}": [{"role": "user", "content": f'hello <{tag} a="1">{WORD}</{tag}> bye'}]
        for tag in INJECTED_TAGS
    },
    **{
        f"block {tag} in a part": [
            {"role": "user", "content": [{"type": "text", "text": f"<{tag}>\n{WORD}\n</{tag}>"}]}
        ]
        for tag in INJECTED_TAGS
    },
    "unclosed block": [{"role": "user", "content": f"hi <memory-context>{WORD}"}],
}


@pytest.mark.parametrize("kind", list(ECHOES), ids=list(ECHOES))
def test_an_echo_is_never_a_hit(kind: str) -> None:
    store, control = _store_with(ECHOES[kind])
    assert _found(store) == {(control, 0)}
    assert store.check_recall_index(repair=False) == []
    store.close()


KEPT: dict[str, tuple[list[dict[str, Any]], int]] = {
    "text beside a memory call": (
        [
            {
                "role": "assistant",
                "content": f"Looking up the {WORD}.",
                "tool_calls": [_memory_call()],
            }
        ],
        0,
    ),
    "another tool's result": (
        [
            {"role": "assistant", "content": None, "tool_calls": [_call("a", "shell", {})]},
            {"role": "tool", "tool_call_id": "a", "content": f"{WORD} found"},
        ],
        1,
    ),
    "another tool's call": (
        [{"role": "assistant", "content": None, "tool_calls": [_call("a", "grep", {"q": WORD})]}],
        0,
    ),
    "a false flag": ([{"role": "user", "content": f"{WORD}", "system_injected": False}], 0),
    "words around a block": (
        [{"role": "user", "content": f"<memory-context>x</memory-context> {WORD}"}],
        0,
    ),
    "a checkpoint mentioned, not read": (
        [{"role": "user", "content": f"what does {CHECKPOINT_HEADER} say about {WORD}"}],
        0,
    ),
}


@pytest.mark.parametrize("kind", list(KEPT), ids=list(KEPT))
def test_the_conversation_around_an_echo_is_still_found(kind: str) -> None:
    messages, index = KEPT[kind]
    store, control = _store_with(messages)
    sid = next(i.id for i in store.list() if i.name == "echoes")
    assert _found(store) == {(control, 0), (sid, index)}
    store.close()


def test_the_memory_call_of_a_message_with_text_is_not_indexed() -> None:
    store, _ = _store_with(
        [{"role": "assistant", "content": "Checking my notes.", "tool_calls": [_memory_call()]}]
    )
    assert {h.preview for h in recall(store, "notes checking", ranking=ALL)} == {
        "Checking my notes."
    }
    store.close()


def test_a_store_indexed_with_its_echoes_is_reindexed_on_open(tmp_path: Path) -> None:
    """A format-3 store (index rules 1) held the memory call, its result and an injected
    message in its index; opening it runs migration 0004, and recall finds only the
    conversation."""
    db = tmp_path / "sessions.sqlite"
    shutil.copy(GOLDEN / "recall-echoes-v3.sqlite", db)
    with SessionStore(db) as store:
        assert store.recovery is None
        assert store.recall_repairs == []  # the migration re-indexed it, not a repair
        assert _found(store, "tests") == {("echoes", 0)}
        assert len(store.load("echoes").messages) == 6
        assert store.check_recall_index(repair=False) == []


# ---------------------------------------------------------------- the class, by hypothesis

TERMS = ["zebra", "quartz", "violin"]


def _turn(kind: str, words: list[str], n: int) -> tuple[list[dict[str, Any]], list[set[str]]]:
    """Messages of one turn of ``kind`` and, for each, the words recall must find in it."""
    text = " ".join(words)
    found = set(words)
    if kind == "user":
        return [{"role": "user", "content": f"say {text}"}], [found]
    if kind == "tool":
        call = _call(f"t{n}", "shell", {"cmd": text})
        return (
            [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"t{n}", "content": f"out {text}"},
            ],
            [found, found],
        )
    if kind == "memory":
        call = _call(f"m{n}", MEMORY_TOOL, {"operation": "search", "query": text})
        return (
            [
                {"role": "assistant", "content": f"note {text}", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"m{n}", "content": f"hits {text}"},
            ],
            [found, set()],  # the text beside the call is the agent's own: found
        )
    if kind.startswith("flag "):
        return [{"role": "user", "content": f"x {text}", kind[5:]: True}], [set()]
    tag = kind[6:]
    return [{"role": "user", "content": f"<{tag}>{text}</{tag}> kept"}], [set()]


KINDS = ["user", "tool", "memory"] + [f"flag {f}" for f in INJECTED_FLAGS[:3]]
KINDS += [f"block {t}" for t in INJECTED_TAGS]


@given(
    turns=st.lists(
        st.tuples(st.sampled_from(KINDS), st.lists(st.sampled_from(TERMS), max_size=3)),
        min_size=1,
        max_size=12,
    )
)
@settings(max_examples=scaled(60))
def test_recall_finds_exactly_the_conversation(turns: list[tuple[str, list[str]]]) -> None:
    """Any mix of conversation and echoes: each word is found in exactly the messages of
    the conversation that hold it, whatever echoes hold it too."""
    store = SessionStore(None)
    sid = store.create().id
    messages: list[dict[str, Any]] = []
    searchable: list[set[str]] = []
    for n, (kind, words) in enumerate(turns):
        batch, found = _turn(kind, words, n)
        messages += batch
        searchable += found
    store.writer(sid).on_append(messages)
    for term in TERMS:
        expected = {(sid, i) for i, words in enumerate(searchable) if term in words}
        assert _found(store, term) == expected, term
    assert store.check_recall_index(repair=False) == []
    store.close()
