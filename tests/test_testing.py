"""agentmem.testing: the scripted LLM used by examples and host tests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentmem import LLM, AgentMemError, AsyncLLM
from agentmem.llm import Flow, LLMRequest, arun_flow, is_async_llm, run_flow
from agentmem.messages import normalize_message
from agentmem.testing import (
    AsyncScriptedLLM,
    ScriptedLLM,
    ScriptExhaustedError,
    tool_call,
    tool_calls,
)


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


def test_tool_calls_builds_one_reply_with_several_calls() -> None:
    reply = tool_calls(
        [("read_file", {"path": "a"}), ("bash", {"cmd": "ls"}, "my_id")], content="Both."
    )
    assert reply["role"] == "assistant" and reply["content"] == "Both."
    names = [c["function"]["name"] for c in reply["tool_calls"]]
    assert names == ["read_file", "bash"]
    assert [json.loads(c["function"]["arguments"]) for c in reply["tool_calls"]] == [
        {"path": "a"},
        {"cmd": "ls"},
    ]
    first_id, second_id = (c["id"] for c in reply["tool_calls"])
    assert second_id == "my_id" and first_id.startswith("call_") and first_id != second_id
    # tool_call is the one-call case of the same builder.
    single = tool_call("f", {"x": 1}, call_id="c9")
    assert single == {**tool_calls([("f", {"x": 1}, "c9")]), "content": None}
    normalize_message(reply)  # a valid message a history accepts


def test_exception_items_are_raised_when_reached_and_the_script_goes_on() -> None:
    boom = RuntimeError("provider down")
    llm = ScriptedLLM([boom, {"role": "assistant", "content": "recovered"}, KeyboardInterrupt()])
    with pytest.raises(RuntimeError) as caught:
        llm([{"role": "user", "content": "1"}])
    assert caught.value is boom
    assert llm([{"role": "user", "content": "2"}])["content"] == "recovered"
    with pytest.raises(KeyboardInterrupt):
        llm([{"role": "user", "content": "3"}])
    assert [m[0]["content"] for m, _ in llm.calls] == ["1", "2", "3"]  # raising calls recorded
    llm.assert_complete()


def _script() -> list[Any]:
    return [
        tool_calls([("read_file", {"path": "a"}, "c1"), ("read_file", {"path": "b"}, "c2")]),
        ValueError("flaky"),
        lambda messages: {"role": "assistant", "content": f"{len(messages)} messages"},
    ]


def _agent() -> Flow[list[str]]:
    """Calls, answers both tool calls, retries once after an error, returns what it saw."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    first = yield LLMRequest(messages, [{"type": "function"}])
    messages = [*messages, first]
    for call in first["tool_calls"]:
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok"})
    seen = [call["id"] for call in first["tool_calls"]]
    try:
        yield LLMRequest(messages)
    except ValueError as exc:
        seen.append(f"error: {exc}")
    last = yield LLMRequest(messages)
    return [*seen, str(last["content"])]


def test_async_twin_replays_the_same_script_with_the_same_results() -> None:
    sync, asy = ScriptedLLM(_script()), AsyncScriptedLLM(_script())
    assert isinstance(asy, AsyncLLM) and is_async_llm(asy) and not is_async_llm(sync)
    expected = ["c1", "c2", "error: flaky", "4 messages"]
    assert run_flow(_agent(), sync) == expected
    assert asyncio.run(arun_flow(_agent(), asy)) == expected
    assert sync.calls == asy.calls and len(asy.calls) == 3
    assert asy.calls[0][1] == [{"type": "function"}]
    sync.assert_complete()
    asy.assert_complete()
    with pytest.raises(ScriptExhaustedError, match="AsyncScriptedLLM has 3 replies"):
        asyncio.run(asy([]))


def test_async_twin_awaits_async_callables_and_raises_interrupts() -> None:
    async def compute(messages: list[dict[str, Any]]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"role": "assistant", "content": "computed"}

    llm = AsyncScriptedLLM([compute, KeyboardInterrupt()], usage=False)
    assert asyncio.run(llm([])) == {"role": "assistant", "content": "computed"}
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(llm([]))
    assert llm.remaining == 0


items = st.lists(
    st.one_of(
        st.text(max_size=10).map(lambda t: {"role": "assistant", "content": t}),
        st.text(min_size=1, max_size=10).map(RuntimeError),
    ),
    max_size=8,
)


@given(script=items, extra=st.integers(0, 2))
def test_both_twins_follow_a_list_model_of_the_script(script: list[Any], extra: int) -> None:
    # Model: call i gets item i (a reply, or its exception); past the end, exhaustion.
    for llm in (ScriptedLLM(script, usage=False), AsyncScriptedLLM(script, usage=False)):
        outcomes: list[Any] = []
        for i in range(len(script) + extra):
            try:
                call = llm([{"role": "user", "content": str(i)}])
                outcomes.append(asyncio.run(call) if asyncio.iscoroutine(call) else call)
            except RuntimeError as exc:
                outcomes.append(exc)
            except ScriptExhaustedError:
                outcomes.append("exhausted")
        assert outcomes == [*script, *["exhausted"] * extra]
        assert len(llm.calls) == len(script) + extra and llm.remaining == 0
