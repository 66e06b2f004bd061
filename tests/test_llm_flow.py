"""The sans-IO LLM driver: one flow, a sync and an async runner, same results."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

from agentmem.errors import LLMError
from agentmem.llm import (
    Flow,
    LLMRequest,
    arun_flow,
    check_reply,
    is_async_llm,
    reply_usage,
    run_flow,
)


def _echo_flow(questions: list[str]) -> Flow[list[str]]:
    answers = []
    for q in questions:
        reply = yield LLMRequest([{"role": "user", "content": q}])
        answers.append(str(reply.get("content")))
    return answers


def _sync_llm(messages: list[dict[str, Any]], tools: Any = None) -> dict[str, Any]:
    return {"role": "assistant", "content": messages[-1]["content"].upper()}


async def _async_llm(messages: list[dict[str, Any]], tools: Any = None) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"role": "assistant", "content": messages[-1]["content"].upper()}


class _AsyncCallable:
    async def __call__(self, messages: list[dict[str, Any]], tools: Any = None) -> dict[str, Any]:
        return await _async_llm(messages, tools)


def test_sync_and_async_runners_give_the_same_result() -> None:
    qs = ["a", "bc", "def"]
    assert run_flow(_echo_flow(qs), _sync_llm) == ["A", "BC", "DEF"]
    assert asyncio.run(arun_flow(_echo_flow(qs), _async_llm)) == ["A", "BC", "DEF"]
    assert asyncio.run(arun_flow(_echo_flow(qs), _sync_llm)) == ["A", "BC", "DEF"]
    assert asyncio.run(arun_flow(_echo_flow(qs), _AsyncCallable())) == ["A", "BC", "DEF"]


def test_the_sync_runner_refuses_an_async_llm_without_leaking_a_coroutine() -> None:
    assert is_async_llm(_async_llm) and is_async_llm(_AsyncCallable())
    assert not is_async_llm(_sync_llm)
    with pytest.raises(LLMError, match="async"):
        run_flow(_echo_flow(["x"]), _async_llm)

    def sneaky(messages: Any, tools: Any = None) -> Any:  # sync def returning a coroutine
        return _async_llm(messages, tools)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a "never awaited" RuntimeWarning would fail here
        with pytest.raises(LLMError, match="async"):
            run_flow(_echo_flow(["x"]), sneaky)


def test_llm_exceptions_are_thrown_into_the_flow() -> None:
    def tolerant() -> Flow[str]:
        try:
            yield LLMRequest([{"role": "user", "content": "x"}])
        except RuntimeError as exc:
            return f"caught {exc}"
        return "no error"

    def boom(messages: Any, tools: Any = None) -> Any:
        raise RuntimeError("provider down")

    assert run_flow(tolerant(), boom) == "caught provider down"
    assert asyncio.run(arun_flow(tolerant(), boom)) == "caught provider down"
    with pytest.raises(RuntimeError, match="provider down"):
        run_flow(_echo_flow(["x"]), boom)

    def interrupted(messages: Any, tools: Any = None) -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_flow(tolerant(), interrupted)


@pytest.mark.parametrize(
    "reply",
    [None, "text", {"role": "user", "content": "x"}, {"content": 3}, {"tool_calls": {}}],
)
def test_bad_replies_raise_llm_error(reply: Any) -> None:
    with pytest.raises(LLMError):
        check_reply(reply)
    with pytest.raises(LLMError):
        run_flow(_echo_flow(["x"]), lambda m, t=None: reply)


def test_reply_usage_reads_only_sane_numbers() -> None:
    assert reply_usage(
        {"usage": {"prompt_tokens": 10, "completion_tokens": 2, "cost_usd": 0.5}}
    ) == (
        10,
        2,
        0.5,
    )
    assert reply_usage(
        {"usage": {"prompt_tokens": -1, "completion_tokens": "2", "cost_usd": float("nan")}}
    ) == (
        0,
        0,
        0.0,
    )
    assert reply_usage({}) == (0, 0, 0.0)
