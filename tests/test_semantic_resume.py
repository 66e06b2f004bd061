"""A session with the semantic-memory extension resumes exactly (issue 13, B6).

After close and reopen with the same extension, ``s.context()`` is the payload the
session would have built without the close: the resident persona as it was placed
(even though the memories changed since), every old turn with its
``<memory-context>`` block, for OpenAI and Anthropic. Reopening without an extension
the session was created with logs a warning naming it, and keeps what it placed.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import scaled
from semantic_fakes import FakeClient

from agentmem import Memory
from agentmem.semantic import SemanticMemoryExtension

PROVIDERS = ("openai", "anthropic")


def make_ext(client: FakeClient, user: str = "martin", **kw: Any) -> SemanticMemoryExtension:
    kw.setdefault("resident_persona", True)
    return SemanticMemoryExtension(client=client, user_id=user, **kw)


def payloads(s: Any) -> dict[str, Any]:
    return {p: s.context(p) for p in PROVIDERS}


def blocks(payload: list[dict[str, Any]]) -> list[str]:
    return [
        m["content"]
        for m in payload
        if m["role"] == "system" and "<memory-context" in str(m["content"])
    ]


def conversation(s: Any, turns: list[str]) -> None:
    s.history.replace_system_prompt("You are a coding agent.")
    for i, text in enumerate(turns):
        s.start_task(text)
        s.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": "ls"})},
                    }
                ],
            }
        )
        s.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "a.py b.py"})
        s.append({"role": "assistant", "content": f"done {i}"})


def test_resume_gives_the_payload_the_session_would_have_given(tmp_path: Path) -> None:
    client = FakeClient()
    for fact in ("I prefer tabs over spaces.", "My name is Martin.", "I use vim for python."):
        client.remember(fact)
    root = tmp_path / ".agentmem"
    with Memory(root=root, working_dir=tmp_path, durability="normal") as mem:
        s = mem.session(extensions=[make_ext(client)])
        sid = s.id
        conversation(s, ["Which indent do I prefer?", "What editor for python files?"])
        before = payloads(s)
        assert len(blocks(before["openai"])) == 2  # both old turns carry a block
        assert "<user-persona" in before["openai"][0]["content"]
        s.close()
    # The memories change while the session is closed: a rebuilt persona would differ.
    client.remember("I moved to Lisbon.")
    with Memory(root=root, working_dir=tmp_path, durability="normal") as mem:
        resumed = mem.session(sid, extensions=[make_ext(client)])
        assert payloads(resumed) == before
        # and the next turn appends to that payload without rewriting it
        resumed.start_task("Anything about my editor?")
        after = resumed.context()
        assert after[: len(before["openai"])] == before["openai"]
        assert len(blocks(after)) == 3
        resumed.close()
        again = mem.session(sid, extensions=[make_ext(client)])
        assert again.context() == after
        again.close()


@pytest.mark.parametrize(("name", "shown"), [(None, "semantic:martin"), ("prefs", "prefs")])
def test_reopening_without_the_extension_warns_naming_it_and_keeps_its_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str | None, shown: str
) -> None:
    named = {"name": name} if name is not None else {}
    client = FakeClient()
    client.remember("I prefer tabs over spaces.")
    root = tmp_path / ".agentmem"
    with Memory(root=root, working_dir=tmp_path, durability="normal") as mem:
        s = mem.session(extensions=[make_ext(client, **named)])
        sid = s.id
        conversation(s, ["Which indent do I prefer?"])
        before = payloads(s)
        s.close()
        with caplog.at_level(logging.WARNING):
            bare = mem.session(sid)
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any(f"'{shown}'" in w and sid in w for w in warnings), warnings
        plain = bare.context()
        assert blocks(plain) == [] and "<user-persona" not in str(plain[0]["content"])
        bare.start_task("unrelated")  # saves the state: the extension's part must survive
        bare.close()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            back = mem.session(sid, extensions=[make_ext(client, **named)])
        assert not [r for r in caplog.records if shown in r.getMessage()]
        now = back.context()
        assert now[: len(before["openai"])] == before["openai"]
        back.close()


def test_a_new_extension_on_resume_gets_a_fresh_persona_the_old_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    a, b = FakeClient(), FakeClient()
    a.remember("Likes tea.", user_id="u1")
    b.remember("Works at ACME.", user_id="u2")
    with Memory(root=tmp_path / ".agentmem", working_dir=tmp_path, durability="normal") as mem:
        s = mem.session(extensions=[make_ext(a, "u1")])
        sid = s.id
        first = s.persona_prompt
        assert "Likes tea." in first
        s.close()
        a.remember("Likes coffee now.", user_id="u1")
        s = mem.session(sid, extensions=[make_ext(a, "u1"), make_ext(b, "u2")])
        assert s.persona_prompt.startswith(first)  # kept as placed
        assert "Likes coffee now." not in s.persona_prompt
        assert "Works at ACME." in s.persona_prompt  # the new extension computed its own
        s.close()


def test_a_damaged_extensions_state_is_reported_and_the_session_opens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient()
    client.remember("Likes tea.")
    with Memory(root=tmp_path / ".agentmem", working_dir=tmp_path, durability="normal") as mem:
        s = mem.session(extensions=[make_ext(client)])
        sid = s.id
        s.start_task("tea or coffee?")
        state = s._state()
        s.close()
        state["extensions"]["turns"] = [{"task_id": "x"}]
        mem.sessions.writer(sid).save_state(state)
        with caplog.at_level(logging.WARNING):
            resumed = mem.session(sid, extensions=[make_ext(client)])
        assert any("semantic memory state not restored" in r.getMessage() for r in caplog.records)
        assert "Likes tea." in resumed.persona_prompt  # computed afresh
        resumed.close()


@settings(
    max_examples=scaled(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    turns=st.lists(
        st.sampled_from(["tabs or spaces?", "which editor?", "my name?", "hello", "python"]),
        min_size=1,
        max_size=6,
    ),
    close_after=st.integers(0, 6),
    window=st.sampled_from([600, 2000, 128_000]),
)
def test_any_close_point_resumes_exactly(
    tmp_path_factory: pytest.TempPathFactory, turns: list[str], close_after: int, window: int
) -> None:
    """Close after any turn (trims included, with a small window): the payload is unchanged."""
    tmp = tmp_path_factory.mktemp("resume")
    client = FakeClient()
    for fact in ("I prefer tabs.", "My editor is vim.", "My name is Martin.", "I write python."):
        client.remember(fact)
    root = tmp / ".agentmem"
    with Memory(root=root, working_dir=tmp, durability="normal") as mem:
        s = mem.session(context_window=window, extensions=[make_ext(client)])
        sid = s.id
        conversation(s, turns[:close_after])
        before = payloads(s)
        s.close()
        client.remember("A new fact after the close.")
        s = mem.session(sid, extensions=[make_ext(client)])
        assert payloads(s) == before
        conversation(s, turns[close_after:])
        s.close()


def test_a_turns_block_is_durable_when_start_task_returns(tmp_path: Path) -> None:
    """A crash right after start_task must not lose the block the turn's payload carries."""
    client = FakeClient()
    client.remember("I prefer tabs over spaces.")
    with Memory(root=tmp_path / ".agentmem", working_dir=tmp_path, durability="normal") as mem:
        s = mem.session(extensions=[make_ext(client)])
        s.start_task("tabs or spaces?")
        (block,) = blocks(s.context())
        stored = mem.sessions.load(s.id).state["extensions"]
        assert [pair[1] for turn in stored["turns"] for pair in turn["blocks"]] == [block]
        s.close()


def test_two_extensions_of_a_session_need_different_names(tmp_path: Path) -> None:
    from agentmem.errors import ConfigurationError

    client = FakeClient()
    with Memory(root=tmp_path / ".agentmem", working_dir=tmp_path, durability="normal") as mem:
        with pytest.raises(ConfigurationError, match="name"):
            mem.session(extensions=[make_ext(client), make_ext(client)])
        s = mem.session(extensions=[make_ext(client), make_ext(client, name="second")])
        s.close()
    with pytest.raises(ConfigurationError, match="name"):
        make_ext(client, name="")
