"""Offline stand-ins for the provider clients the doc samples call (tests/test_doc_samples.py).

A page's hidden ``<!-- doc-setup ... -->`` imports these so its visible sample
reads as the user would write it (``client.chat.completions.create(...)``)
and still runs offline. Each fake answers from a script of assistant messages
in agentmem's canonical (OpenAI Chat) form, wrapped in the real SDK's response
types (``openai`` and ``anthropic`` are in the test extra), so a sample that
calls ``model_dump()`` or reads ``.usage`` meets the objects it would meet in
production. Every call is recorded in ``.llm.calls``; a script that runs out
raises :class:`agentmem.testing.ScriptExhaustedError`, and the harness calls
``assert_complete()`` after the page, so a sample whose loop stopped early
fails too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from agentmem.testing import ScriptedLLM

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
"""One tool in the OpenAI Chat Completions format."""

RESPONSES_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]
"""One tool in the OpenAI Responses format."""

ANTHROPIC_TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a file of the repository.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]
"""One tool in the Anthropic Messages format."""


def run(call: Any) -> str:
    """A tool runner: the text a tool call (an SDK object or a dict) would return."""
    name = getattr(getattr(call, "function", None), "name", None) or getattr(call, "name", "tool")
    return f"{name}: ok"


def _usage(reply: dict[str, Any]) -> tuple[int, int]:
    usage = reply.pop("usage", {})
    return int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))


class _ChatCompletions:
    def __init__(self, llm: ScriptedLLM) -> None:
        self._llm = llm

    def create(
        self, *, model: str, messages: list[dict[str, Any]], tools: Any = None, **kwargs: Any
    ) -> Any:
        from openai.types.chat import ChatCompletion

        reply = self._llm(messages, tools)
        prompt, completion = _usage(reply)
        finish = "tool_calls" if reply.get("tool_calls") else "stop"
        return ChatCompletion.model_validate(
            {
                "id": f"chatcmpl-{len(self._llm.calls)}",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "finish_reason": finish, "message": reply}],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )


class _Responses:
    def __init__(self, llm: ScriptedLLM) -> None:
        self._llm = llm

    def create(self, *, model: str, input: list[Any], tools: Any = None, **kwargs: Any) -> Any:
        from openai.types.responses import Response

        reply = self._llm(list(input), tools)
        prompt, completion = _usage(reply)
        output: list[dict[str, Any]] = []
        if reply.get("content"):
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{len(self._llm.calls)}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": reply["content"], "annotations": []}
                    ],
                }
            )
        for call in reply.get("tool_calls") or []:
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{call['id']}",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                    "status": "completed",
                }
            )
        return Response.model_validate(
            {
                "id": f"resp_{len(self._llm.calls)}",
                "object": "response",
                "created_at": 0,
                "model": model,
                "output": output,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": tools or [],
                "usage": {
                    "input_tokens": prompt,
                    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                    "output_tokens": completion,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": prompt + completion,
                },
            }
        )


class FakeOpenAI:
    """``client.chat.completions.create`` and ``client.responses.create``, from a script."""

    def __init__(self, replies: Sequence[Any]) -> None:
        self.llm = ScriptedLLM(replies)
        self.chat = SimpleNamespace(completions=_ChatCompletions(self.llm))
        self.responses = _Responses(self.llm)

    def assert_complete(self) -> None:
        """Raise unless the sample used every scripted reply (the harness calls it)."""
        self.llm.assert_complete()


class _Messages:
    def __init__(self, llm: ScriptedLLM) -> None:
        self._llm = llm

    def create(
        self, *, model: str, messages: list[dict[str, Any]], system: Any = None, **kwargs: Any
    ) -> Any:
        from anthropic.types import Message

        reply = self._llm(messages, kwargs.get("tools"))
        prompt, completion = _usage(reply)
        content: list[dict[str, Any]] = []
        if reply.get("content"):
            content.append({"type": "text", "text": reply["content"]})
        for call in reply.get("tool_calls") or []:
            content.append(
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "input": json.loads(call["function"]["arguments"]),
                }
            )
        return Message.model_validate(
            {
                "id": f"msg_{len(self._llm.calls)}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": "tool_use" if reply.get("tool_calls") else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": completion},
            }
        )


class FakeAnthropic:
    """``client.messages.create``, from a script, returning ``anthropic.types.Message``."""

    def __init__(self, replies: Sequence[Any]) -> None:
        self.llm = ScriptedLLM(replies)
        self.messages = _Messages(self.llm)

    def assert_complete(self) -> None:
        """Raise unless the sample used every scripted reply (the harness calls it)."""
        self.llm.assert_complete()


def scripted_anthropic(script: Sequence[list[dict[str, Any]]]) -> type[Any]:
    """An ``anthropic.Anthropic`` whose ``POST /v1/messages`` get the next content of ``script``.

    A subclass of the real client (no API key needed, every request answered by an
    ``httpx2.MockTransport``), for a doc-setup to put in place of ``anthropic.Anthropic``.
    """
    import anthropic
    import httpx2

    replies = iter(script)

    def answer(request: httpx2.Request) -> httpx2.Response:
        content = next(replies)
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        body = {
            "id": "msg",
            "type": "message",
            "role": "assistant",
            "model": json.loads(request.content)["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        return httpx2.Response(200, json=body)

    class ScriptedAnthropic(anthropic.Anthropic):
        def __init__(self, **kwargs: Any) -> None:
            kwargs.setdefault("api_key", "offline")
            kwargs.setdefault("http_client", httpx2.Client(transport=httpx2.MockTransport(answer)))
            super().__init__(**kwargs)

    return ScriptedAnthropic


def scripted_chat_model(replies: Sequence[str]) -> Any:
    """A LangChain chat model that answers ``replies`` in order (tools bound, never called)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class ScriptedChatModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    return ScriptedChatModel(messages=iter([AIMessage(text) for text in replies]))


def offline_agents_sdk(monkeypatch: Any, replies: Sequence[str]) -> Any:
    """Make ``agents.Agent`` use the SDK's ``ScriptedModel`` (answering ``replies``) and
    ``agents.Runner.run`` trace nothing, until ``monkeypatch`` undoes it; the model."""
    import agents
    from agents.testing import ScriptedModel, assistant_message

    model = ScriptedModel([[assistant_message(text)] for text in replies])
    real_agent, real_runner = agents.Agent, agents.Runner

    def agent(**kwargs: Any) -> Any:
        return real_agent(model=model, **kwargs)

    class Runner(real_runner):  # type: ignore[misc, valid-type]
        @classmethod
        async def run(cls, *args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("run_config", agents.RunConfig(tracing_disabled=True))
            return await real_runner.run(*args, **kwargs)

    monkeypatch.setattr(agents, "Agent", agent)
    monkeypatch.setattr(agents, "Runner", Runner)
    return model
