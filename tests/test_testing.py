"""agentmem.testing: the scripted LLM used by examples and host tests."""

from __future__ import annotations

import json

import pytest

from agentmem import LLM, AgentMemError
from agentmem.testing import ScriptedLLM, ScriptExhaustedError, tool_call


def test_scripted_llm_replays_records_and_bills() -> None:
    llm = ScriptedLLM(
        [
            tool_call("read_file", {"path": "a.py"}, call_id="c1"),
            lambda messages: {"role": "assistant", "content": f"saw {len(messages)} messages"},
        ]
    )
    assert isinstance(llm, LLM)
    first = llm([{"role": "user", "content": "read a.py"}], tools=[{"type": "function"}])
    assert first["tool_calls"][0]["id"] == "c1"
    assert json.loads(first["tool_calls"][0]["function"]["arguments"]) == {"path": "a.py"}
    assert first["usage"]["prompt_tokens"] > 0 and first["usage"]["cost_usd"] == 0.0
    second = llm([{"role": "user", "content": "x"}, first])
    assert second["content"] == "saw 2 messages"
    assert [len(m) for m, _ in llm.calls] == [1, 2]
    assert llm.calls[0][1] == [{"type": "function"}]
    llm.assert_complete()
    with pytest.raises(ScriptExhaustedError, match="2 replies but was called 3 times"):
        llm([])


def test_unused_replies_are_reported() -> None:
    llm = ScriptedLLM(
        [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}], usage=False
    )
    assert "usage" not in llm([])
    assert llm.remaining == 1
    with pytest.raises(AgentMemError, match="1 scripted replies were never used"):
        llm.assert_complete()


def test_replies_are_fresh_copies() -> None:
    reply = {"role": "assistant", "content": "x"}
    llm = ScriptedLLM([reply], usage=False)
    out = llm([])
    out["content"] = "changed"
    assert reply["content"] == "x"


def test_tool_call_ids_are_unique() -> None:
    ids = {tool_call("f", {})["tool_calls"][0]["id"] for _ in range(5)}
    assert len(ids) == 5


def test_script_exhausted_error_lives_in_the_error_tree() -> None:
    import agentmem.errors
    import agentmem.testing

    assert agentmem.testing.ScriptExhaustedError is agentmem.errors.ScriptExhaustedError
    assert ScriptExhaustedError.__module__ == "agentmem.errors"
    assert issubclass(ScriptExhaustedError, AgentMemError)
    assert issubclass(ScriptExhaustedError, AssertionError)


def test_error_tree_in_the_docstring_matches_the_module() -> None:
    import re

    import agentmem.errors

    doc = agentmem.errors.__doc__ or ""
    drawn = re.findall(r"[├└]── (\w+)", doc)
    defined = {
        name
        for name, obj in vars(agentmem.errors).items()
        if isinstance(obj, type) and issubclass(obj, agentmem.errors.AgentMemError)
    }
    assert set(drawn) | {"AgentMemError"} == defined
    assert sorted(defined) == sorted(agentmem.errors.__all__)
