"""A Session is built from a SessionWiring: no Memory is needed to build, use or test one.

DESIGN section 1: "a ``Session`` is built from a small wiring object, never
from the ``Memory``". These tests build sessions from hand-made wirings over
in-memory stores, with ``Memory`` made unconstructible, and check what the
wiring decides: the prompt blocks (each under its cap, at most a tenth of
the window), incognito, and the close callback.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest

import agentmem
from agentmem import LongTermMemory
from agentmem.memory_updater import MemoryUpdateSettings
from agentmem.session import Session, SessionWiring
from agentmem.session_store import SessionStore
from agentmem.topics import TopicStore


@pytest.fixture(autouse=True)
def no_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a Memory anywhere in these tests fails them."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a Memory was built")

    monkeypatch.setattr(agentmem.Memory, "__init__", refuse)


def _wiring(tmp_path: Path, **fields: Any) -> SessionWiring:
    fields.setdefault("ltm", LongTermMemory(None))
    fields.setdefault("topics", TopicStore(None))
    return SessionWiring(
        sessions=SessionStore(None), working_dir=tmp_path, root=tmp_path / ".agentmem", **fields
    )


def _open(wiring: SessionWiring, context_window: int = 8000) -> Session:
    store = wiring.sessions
    info = store.create(name="wired", model="gpt-4o", context_window=context_window)
    return Session.create(wiring, info, store.lock(info.id))


def test_a_session_built_from_a_wiring_appends_and_builds_context(tmp_path: Path) -> None:
    ltm = LongTermMemory(None)
    ltm.add_discovery("Tests run with pytest -q.")
    topics = TopicStore(None)
    topics.write("deploy", "Deploy with make ship.")
    closed: list[Session] = []
    wiring = _wiring(tmp_path, ltm=ltm, topics=topics, on_close=closed.append)
    s = _open(wiring)
    s.history.append({"role": "system", "content": "You are a coding agent."})
    task = s.start_task("Make the failing test pass.")
    s.append({"role": "assistant", "content": "Done: the fixture was stale."})
    s.record_usage(120, 10)
    payload = s.context()
    assert payload[0]["role"] == "system"
    assert "You are a coding agent." in payload[0]["content"]
    assert "Tests run with pytest -q." in payload[0]["content"]  # the wiring's LTM
    assert "Deploy with make ship." in payload[0]["content"]  # the wiring's topics
    assert [m["content"] for m in payload[1:]] == [
        "Make the failing test pass.",
        "Done: the fixture was stale.",
    ]
    assert s.active_task_id == task and s.task_iterations() == 1
    # Every append is in the wiring's store; close calls the wiring's callback.
    record = wiring.sessions.load(s.id)
    assert [m["content"] for m in record.messages][1:] == [m["content"] for m in payload[1:]]
    s.close()
    assert closed == [s]
    # The stored session resumes from the same wiring, as it was.
    again = Session.resume(
        wiring,
        wiring.sessions.load(s.id),
        wiring.sessions.lock(s.id),
        model=None,
        context_window=None,
        name=None,
    )
    assert again.context() == payload
    assert again.usage.prompt_tokens == 120
    again.close()
    assert closed == [s, again]


def test_each_prompt_block_is_capped_at_a_tenth_of_the_window(tmp_path: Path) -> None:
    ltm = LongTermMemory(None)
    topics = TopicStore(None)
    for i in range(40):
        ltm.add_discovery(f"discovery {i}: " + "fact " * 10)
        topics.write(f"topic-{i}", "note " * 30)
    window = 2000
    s = _open(_wiring(tmp_path, ltm=ltm, topics=topics), context_window=window)
    counter = s.token_counter
    assert s.ltm_prompt and s.topics_prompt
    assert counter.count_text(s.ltm_prompt) <= window // 10
    assert counter.count_text(s.topics_prompt) <= window // 10
    s.close()


def test_the_wiring_decides_what_is_injected(tmp_path: Path) -> None:
    ltm = LongTermMemory(None)
    ltm.add_discovery("Tests run with pytest -q.")
    topics = TopicStore(None)
    topics.write("deploy", "Deploy with make ship.")
    cases: list[tuple[dict[str, Any], tuple[bool, bool]]] = [
        ({}, (True, True)),
        ({"ltm_enabled": False}, (False, True)),
        ({"memory_update": MemoryUpdateSettings(inject_topics=False)}, (True, False)),
        ({"incognito": True}, (False, False)),
    ]
    for fields, expected in cases:
        s = _open(_wiring(tmp_path, ltm=ltm, topics=topics, **fields))
        assert (bool(s.ltm_prompt), bool(s.topics_prompt)) == expected, fields
        s.close()


def test_an_unreadable_ltm_is_logged_and_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / ".agentmem").mkdir()
    path = tmp_path / ".agentmem" / "ltm.json"
    path.write_text('{"format": "agentmem.ltm", "version": 99}', encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="agentmem.memory"):
        s = _open(_wiring(tmp_path, ltm=LongTermMemory(path)))
    assert s.ltm_prompt == ""
    assert "long-term memory not injected" in caplog.text
    s.close()


def test_the_wiring_is_frozen(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        wiring.incognito = True  # type: ignore[misc]
