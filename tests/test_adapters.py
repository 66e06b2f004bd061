"""agentmem.adapters against fake clients shaped like the OpenAI and Anthropic SDKs.

The fakes answer with objects (attribute access, as the SDKs' pydantic models
do) or with plain dicts, record the keyword arguments of every ``create``
call, and have a sync and an async variant. Every request the adapters make
is checked by the independent provider oracle.
"""

from __future__ import annotations

import asyncio
import functools
import json
import runpy
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled
from provider_rules import anthropic_violations, openai_violations

import agentmem
from agentmem import INTERNAL_FIELDS, AgentMemError, MessageHistory
from agentmem.adapters import anthropic_llm, anthropic_tools, openai_llm
from agentmem.errors import InvalidArgumentError, LLMError
from agentmem.llm import (
    Flow,
    LLMRequest,
    arun_flow,
    is_async_llm,
    parse_usage,
    reply_usage,
    run_flow,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is in setup.py?", "task_id": 3},
]


# --------------------------------------------------------------------------- fakes


class _Recorder:
    def __init__(self, responses: list[Any]) -> None:
        self.responses = list(responses)
        self.calls: list[dict[str, Any]] = []

    def _next(self, kwargs: dict[str, Any]) -> Any:
        self.calls.append(kwargs)
        response = self.responses.pop(0)
        if isinstance(response, BaseException):
            raise response
        return response


class FakeOpenAI:
    """``client.chat.completions.create(**kwargs)``, like ``openai.OpenAI``."""

    def __init__(self, *responses: Any) -> None:
        self.recorder = _Recorder(list(responses))
        self.chat = NS(completions=NS(create=self._create))

    def _create(self, **kwargs: Any) -> Any:
        return self.recorder._next(kwargs)


class FakeAsyncOpenAI(FakeOpenAI):
    async def _acreate(self, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return self.recorder._next(kwargs)

    def __init__(self, *responses: Any) -> None:
        super().__init__(*responses)
        self.chat = NS(completions=NS(create=self._acreate))


class FakeAnthropic:
    """``client.messages.create(**kwargs)``, like ``anthropic.Anthropic``."""

    def __init__(self, *responses: Any) -> None:
        self.recorder = _Recorder(list(responses))
        self.messages = NS(create=self._create)

    def _create(self, **kwargs: Any) -> Any:
        return self.recorder._next(kwargs)


class FakeAsyncAnthropic(FakeAnthropic):
    async def _acreate(self, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return self.recorder._next(kwargs)

    def __init__(self, *responses: Any) -> None:
        super().__init__(*responses)
        self.messages = NS(create=self._acreate)


def oa_response(
    content: str | None = None,
    calls: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
    *,
    usage: tuple[int, int] | None = (120, 30),
    **extra: Any,
) -> Any:
    """An object shaped like ``openai.types.chat.ChatCompletion``."""
    tool_calls = [
        NS(id=cid, type="function", function=NS(name=name, arguments=args), index=i)
        for i, (cid, name, args) in enumerate(calls)
    ] or None
    message = NS(role="assistant", content=content, tool_calls=tool_calls, refusal=None, **extra)
    return NS(
        id="chatcmpl-1",
        choices=[NS(index=0, message=message, finish_reason="stop")],
        usage=NS(prompt_tokens=usage[0], completion_tokens=usage[1], total_tokens=sum(usage))
        if usage
        else None,
    )


def an_response(*blocks: Any, usage: dict[str, int] | None = None) -> Any:
    """An object shaped like ``anthropic.types.Message``."""
    return NS(
        id="msg_1",
        role="assistant",
        content=list(blocks),
        stop_reason="end_turn",
        usage=NS(**(usage or {"input_tokens": 50, "output_tokens": 7})),
    )


def text_block(text: str) -> Any:
    return NS(type="text", text=text, citations=None)


def tool_use_block(cid: str, name: str, data: dict[str, Any]) -> Any:
    return NS(type="tool_use", id=cid, name=name, input=data)


def _oa_valid(kwargs: dict[str, Any]) -> None:
    assert openai_violations(kwargs["messages"], internal_fields=INTERNAL_FIELDS) == []


def _an_valid(kwargs: dict[str, Any]) -> None:
    violations = anthropic_violations(
        kwargs.get("system"), kwargs["messages"], internal_fields=INTERNAL_FIELDS
    )
    assert violations == []


# --------------------------------------------------------------------------- OpenAI


def test_openai_text_reply_usage_price_and_request() -> None:
    client = FakeOpenAI(oa_response("It pins numpy."))
    llm = openai_llm(
        client,
        "gpt-4o",
        temperature=0,
        price={"prompt_tokens": 2e-6, "completion_tokens": 1e-5},
    )
    assert not is_async_llm(llm)
    reply = llm(CONVERSATION)
    assert reply == {
        "role": "assistant",
        "content": "It pins numpy.",
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "cost_usd": pytest.approx(5.4e-4)},
    }
    assert reply_usage(reply) == (120, 30, pytest.approx(5.4e-4))
    (kwargs,) = client.recorder.calls
    assert kwargs["model"] == "gpt-4o" and kwargs["temperature"] == 0
    assert "tools" not in kwargs  # only when given
    assert kwargs["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is in setup.py?"},  # task_id stripped
    ]
    _oa_valid(kwargs)
    # No price: cost 0; no usage on the response: zeros.
    reply = openai_llm(FakeOpenAI(oa_response("x", usage=None)), "m")(CONVERSATION)
    assert reply["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}


def test_openai_tool_calls_round_trip_through_a_history() -> None:
    client = FakeOpenAI(
        oa_response(
            None,
            [("call_a", "read_file", '{"path": "setup.py"}'), ("call_b", "read_file", "")],
            reasoning_content="Two files.",
        ),
        oa_response("Both read."),
    )
    llm = openai_llm(client, "deepseek-reasoner")
    reply = llm(CONVERSATION, TOOLS)
    assert client.recorder.calls[0]["tools"] == TOOLS
    assert reply["reasoning_content"] == "Two files."
    assert reply["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "setup.py"}'},
        },
        {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": ""}},
    ]
    history = MessageHistory(CONVERSATION)
    history.append(reply)  # the reply (usage block and all) is a valid message
    history.append({"role": "tool", "tool_call_id": "call_a", "content": "numpy"})
    history.append({"role": "tool", "tool_call_id": "call_b", "content": "pandas"})
    assert llm(list(history))["content"] == "Both read."
    sent = client.recorder.calls[1]["messages"]
    _oa_valid(client.recorder.calls[1])
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert "usage" not in sent[2] and sent[2]["tool_calls"][0]["id"] == "call_a"


def test_openai_plain_dict_responses_are_read_too() -> None:
    response = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            # some compatible servers send arguments as an object
                            "function": {"name": "read_file", "arguments": {"path": "a"}},
                        }
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4},
    }
    reply = openai_llm(FakeOpenAI(response), "m")(CONVERSATION, TOOLS)
    assert json.loads(reply["tool_calls"][0]["function"]["arguments"]) == {"path": "a"}
    assert reply_usage(reply) == (9, 4, 0.0)


def test_openai_extra_fields_of_a_pydantic_message_are_found_in_model_extra() -> None:
    class Message:  # like a pydantic model whose unknown keys live in model_extra
        def __init__(self) -> None:
            self.content = "ok"
            self.tool_calls = None
            self.model_extra = {"reasoning_content": "thought"}

    response = NS(choices=[NS(message=Message())], usage=None)
    assert openai_llm(FakeOpenAI(response), "m")(CONVERSATION)["reasoning_content"] == "thought"


@pytest.mark.parametrize(
    ("response", "named"),
    [
        (NS(usage=None), "choices"),
        (NS(choices=[], usage=None), r"choices\[0\]"),
        (NS(choices=[NS(finish_reason="stop")]), r"choices\[0\]\.message"),
        (NS(choices="nope"), "choices"),
        ({"choices": [{"message": {"content": 3}}]}, "content"),
        (
            {"choices": [{"message": {"tool_calls": [{"id": "c", "function": {}}]}}]},
            r"tool_calls\[0\]\.function\.name",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"function": {"name": "f"}}]}}]},
            r"tool_calls\[0\]\.id",
        ),
        (  # an arguments object breaking the one JSON rule (agentmem._json)
            {
                "choices": [
                    {
                        "message": {
                            "tool_calls": [
                                {"id": "c", "function": {"name": "f", "arguments": {"n": 2**70}}}
                            ]
                        }
                    }
                ]
            },
            r"tool_calls\[0\]\.function\.arguments\.n",
        ),
    ],
)
def test_openai_unreadable_responses_raise_llm_error_naming_the_field(
    response: Any, named: str
) -> None:
    with pytest.raises(LLMError, match=named):
        openai_llm(FakeOpenAI(response), "m")(CONVERSATION)


def test_client_errors_propagate_unchanged() -> None:
    class RateLimitError(Exception):
        pass

    error = RateLimitError("429")
    for llm in (
        openai_llm(FakeOpenAI(error), "m"),
        anthropic_llm(FakeAnthropic(error), "m"),
    ):
        with pytest.raises(RateLimitError) as caught:
            llm(CONVERSATION)
        assert caught.value is error
    with pytest.raises(KeyboardInterrupt):
        openai_llm(FakeOpenAI(KeyboardInterrupt()), "m")(CONVERSATION)


def test_bad_adapter_arguments_are_refused() -> None:
    client = FakeOpenAI()
    for bad in [
        lambda: openai_llm(object(), "m"),
        lambda: openai_llm(client, ""),
        lambda: openai_llm(client, "m", stream=True),
        lambda: openai_llm(client, "m", messages=[]),
        lambda: openai_llm(client, "m", price={"input": 1.0}),
        lambda: openai_llm(client, "m", price={"prompt_tokens": -1}),
        lambda: openai_llm(client, "m", price={"prompt_tokens": float("nan")}),
        lambda: openai_llm(client, "m", price=[1, 2]),  # type: ignore[arg-type]
        lambda: anthropic_llm(FakeAnthropic(), "m", max_tokens=0),
        lambda: anthropic_llm(FakeAnthropic(), "m", system="x"),
        lambda: anthropic_llm(client, "m"),
        lambda: anthropic_tools([{"type": "web_search"}]),
        lambda: anthropic_tools([{"type": "function", "function": {}}]),
    ]:
        with pytest.raises(InvalidArgumentError):
            bad()


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_request_is_provider_valid_with_system_split_and_tools() -> None:
    client = FakeAnthropic(an_response(text_block("It pins numpy.")))
    llm = anthropic_llm(client, "claude-x", max_tokens=512, temperature=0)
    reply = llm(
        [*CONVERSATION, {"role": "system", "content": "Mid-run note."}],
        TOOLS,
    )
    assert reply == {
        "role": "assistant",
        "content": "It pins numpy.",
        "usage": {"prompt_tokens": 50, "completion_tokens": 7, "cost_usd": 0.0},
    }
    (kwargs,) = client.recorder.calls
    assert kwargs["model"] == "claude-x" and kwargs["max_tokens"] == 512
    assert kwargs["temperature"] == 0
    assert kwargs["system"] == "You are terse."
    assert kwargs["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": TOOLS[0]["function"]["parameters"],
        }
    ]
    _an_valid(kwargs)
    # No system prompt: no system key; no tools: no tools key.
    client = FakeAnthropic(an_response(text_block("hi")))
    anthropic_llm(client, "m")([{"role": "user", "content": "hi"}])
    assert "system" not in client.recorder.calls[0] and "tools" not in client.recorder.calls[0]
    assert client.recorder.calls[0]["max_tokens"] == 4096


def test_anthropic_tool_use_and_thinking_round_trip() -> None:
    thinking = NS(type="thinking", thinking="Need both files.", signature="sig-abc")
    client = FakeAnthropic(
        an_response(
            thinking,
            text_block("Reading."),
            tool_use_block("toolu_1", "read_file", {"path": "setup.py"}),
            tool_use_block("toolu_2", "read_file", {"path": "README"}),
            usage={
                "input_tokens": 10,
                "cache_creation_input_tokens": 5,
                "cache_read_input_tokens": 100,
                "output_tokens": 20,
            },
        ),
        an_response(text_block("Done.")),
    )
    llm = anthropic_llm(
        client, "claude-x", price={"prompt_tokens": 1e-6, "completion_tokens": 1e-5}
    )
    reply = llm(CONVERSATION, TOOLS)
    assert reply["content"] == "Reading."
    assert reply["reasoning_content"] == "Need both files."
    assert [json.loads(c["function"]["arguments"]) for c in reply["tool_calls"]] == [
        {"path": "setup.py"},
        {"path": "README"},
    ]
    assert [c["id"] for c in reply["tool_calls"]] == ["toolu_1", "toolu_2"]
    assert reply_usage(reply) == (115, 20, pytest.approx(115e-6 + 20e-5))
    history = MessageHistory(CONVERSATION)
    history.append(reply)
    history.append({"role": "tool", "tool_call_id": "toolu_1", "content": "numpy"})
    history.append({"role": "tool", "tool_call_id": "toolu_2", "content": "hello"})
    assert llm(list(history), TOOLS)["content"] == "Done."
    second = client.recorder.calls[1]
    _an_valid(second)
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    # The signed thinking block goes back verbatim, first, as Anthropic requires.
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "Need both files.",
        "signature": "sig-abc",
    }
    assert [b["id"] for b in assistant["content"] if b["type"] == "tool_use"] == [
        "toolu_1",
        "toolu_2",
    ]
    results = second["messages"][2]["content"]
    assert [b["tool_use_id"] for b in results if b["type"] == "tool_result"] == [
        "toolu_1",
        "toolu_2",
    ]


def test_anthropic_dict_response_and_unreadable_ones() -> None:
    response = {
        "content": [{"type": "text", "text": "ok"}],
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    assert anthropic_llm(FakeAnthropic(response), "m")(CONVERSATION)["content"] == "ok"
    for bad, named in [
        (NS(usage=None), "content"),
        (NS(content="text"), "content"),
        (NS(content=[NS(type="server_tool_use", id="x")]), "server_tool_use"),
        (NS(content=[NS(type="tool_use", id="t", input={})]), r"content\[0\]\.name"),
        (NS(content=[NS(type="tool_use", id="t", name="f", input=[1])]), "input"),
        (NS(content=[NS(type="text")]), r"content\[0\]\.text"),
    ]:
        with pytest.raises(LLMError, match=named):
            anthropic_llm(FakeAnthropic(bad), "m")(CONVERSATION)


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_objects = st.dictionaries(
    st.text(max_size=8),
    st.recursive(
        json_scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=8,
    ),
    max_size=4,
)


@settings(max_examples=scaled(60))
@given(inputs=st.lists(json_objects, min_size=1, max_size=3), text=st.text(max_size=30))
def test_anthropic_tool_inputs_survive_the_round_trip(
    inputs: list[dict[str, Any]], text: str
) -> None:
    blocks = [tool_use_block(f"toolu_{i}", "read_file", data) for i, data in enumerate(inputs)]
    if text:
        blocks.insert(0, text_block(text))
    client = FakeAnthropic(an_response(*blocks), an_response(text_block("ok")))
    llm = anthropic_llm(client, "m")
    reply = llm(CONVERSATION, TOOLS)
    assert [json.loads(c["function"]["arguments"]) for c in reply["tool_calls"]] == inputs
    results = [
        {"role": "tool", "tool_call_id": c["id"], "content": "r"} for c in reply["tool_calls"]
    ]
    llm([*CONVERSATION, reply, *results], TOOLS)
    second = client.recorder.calls[1]
    _an_valid(second)
    sent = [b["input"] for b in second["messages"][1]["content"] if b["type"] == "tool_use"]
    assert sent == inputs
    # The same reply sent to an OpenAI-style client is valid there too.
    oa = FakeOpenAI(oa_response("ok"))
    openai_llm(oa, "m")([*CONVERSATION, reply, *results])
    _oa_valid(oa.recorder.calls[0])


# --------------------------------------------------------------------------- async


def _two_turns() -> Flow[list[str]]:
    first = yield LLMRequest(list(CONVERSATION), TOOLS)
    calls = first.get("tool_calls") or []
    results = [{"role": "tool", "tool_call_id": c["id"], "content": "numpy"} for c in calls]
    second = yield LLMRequest([*CONVERSATION, first, *results], TOOLS)
    return [c["function"]["name"] for c in calls] + [str(second["content"])]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_async_clients_give_async_adapters_with_the_same_results(provider: str) -> None:
    def clients() -> tuple[Any, Any, Any]:
        if provider == "openai":
            script = [
                oa_response(None, [("c1", "read_file", '{"path": "a"}')]),
                oa_response("Read."),
            ]
            return FakeOpenAI(*script), FakeAsyncOpenAI(*script), openai_llm
        script = [
            an_response(tool_use_block("c1", "read_file", {"path": "a"})),
            an_response(text_block("Read.")),
        ]
        return FakeAnthropic(*script), FakeAsyncAnthropic(*script), anthropic_llm

    sync_client, async_client, make = clients()
    sync_llm, async_llm = make(sync_client, "m"), make(async_client, "m")
    assert is_async_llm(async_llm) and not is_async_llm(sync_llm)
    assert "async" in repr(async_llm)
    expected = ["read_file", "Read."]
    assert run_flow(_two_turns(), sync_llm) == expected
    assert asyncio.run(arun_flow(_two_turns(), async_llm)) == expected
    assert sync_client.recorder.calls == async_client.recorder.calls
    for kwargs in async_client.recorder.calls:
        _oa_valid(kwargs) if provider == "openai" else _an_valid(kwargs)
    # A sync runner refuses the async adapter without calling it.
    _, fresh, _ = clients()
    with pytest.raises(LLMError, match="async"):
        run_flow(_two_turns(), make(fresh, "m"))
    assert fresh.recorder.calls == []


def test_async_adapter_errors_propagate_and_bad_replies_are_llm_errors() -> None:
    error = ConnectionError("reset")
    llm = openai_llm(FakeAsyncOpenAI(error, NS(choices=[])), "m")
    with pytest.raises(ConnectionError):
        asyncio.run(llm(CONVERSATION))  # type: ignore[arg-type]
    with pytest.raises(LLMError):
        asyncio.run(llm(CONVERSATION))  # type: ignore[arg-type]
    assert issubclass(LLMError, AgentMemError)


def test_an_async_create_behind_a_sync_decorator_is_detected() -> None:
    # The SDKs wrap their async create in a plain-def decorator (functools.wraps).
    inner = FakeAsyncOpenAI(oa_response("ok"))

    @functools.wraps(inner._acreate)
    def create(**kwargs: Any) -> Any:
        return inner._acreate(**kwargs)

    client = NS(chat=NS(completions=NS(create=create)))
    llm = openai_llm(client, "m")
    assert is_async_llm(llm)
    assert asyncio.run(arun_flow(_ask(), llm)) == "ok"


def _ask() -> Flow[str]:
    reply = yield LLMRequest(list(CONVERSATION))
    return str(reply["content"])


_COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Look first.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
}


@pytest.mark.parametrize("use_async", [False, True])
def test_the_real_openai_sdk_objects_are_read(use_async: bool) -> None:
    openai = pytest.importorskip("openai")
    httpx = pytest.importorskip("httpx")
    bodies: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=_COMPLETION)

    transport = httpx.MockTransport(handler)  # no socket is opened
    url = "http://127.0.0.1:9/v1"
    if use_async:
        client = openai.AsyncOpenAI(
            api_key="test", base_url=url, http_client=httpx.AsyncClient(transport=transport)
        )
    else:
        client = openai.OpenAI(
            api_key="test", base_url=url, http_client=httpx.Client(transport=transport)
        )
    llm = openai_llm(client, "gpt-4o", temperature=0)
    assert is_async_llm(llm) is use_async

    def flow() -> Flow[dict[str, Any]]:
        return (yield LLMRequest(list(CONVERSATION), TOOLS))

    reply = asyncio.run(arun_flow(flow(), llm)) if use_async else run_flow(flow(), llm)
    assert reply["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a"}'},
        }
    ]
    assert reply["reasoning_content"] == "Look first." and reply["content"] is None
    assert reply_usage(reply) == (11, 5, 0.0)
    (body,) = bodies
    assert body["model"] == "gpt-4o" and body["tools"] == TOOLS and body["temperature"] == 0
    assert openai_violations(body["messages"], internal_fields=INTERNAL_FIELDS) == []


@pytest.mark.parametrize("name", ["openai_client", "anthropic_client"])
def test_client_examples_do_nothing_on_import_and_skip_without_credentials(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    namespace = runpy.run_path(str(Path(__file__).parent.parent / "examples" / f"{name}.py"))
    assert capsys.readouterr().out == ""
    namespace["main"]()
    assert "skipping" in capsys.readouterr().out


def test_adapter_replies_keep_the_cached_parts_for_billing(tmp_path: Path) -> None:
    """An adapter's reply carries the cache reads/writes the provider reported, so a
    session billing ``record_usage(reply)`` keeps them apart (one parser, parse_usage)."""
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 100,
        "output_tokens": 20,
    }
    reply = anthropic_llm(FakeAnthropic(an_response(text_block("ok"), usage=usage)), "c")(
        CONVERSATION
    )
    figures = parse_usage(reply)
    assert (figures.prompt_tokens, figures.cached_prompt_tokens, figures.cache_write_tokens) == (
        115,
        100,
        5,
    )
    response = oa_response("x")
    response.usage = NS(
        prompt_tokens=120, completion_tokens=30, prompt_tokens_details=NS(cached_tokens=64)
    )
    reply = openai_llm(FakeOpenAI(response), "m")(CONVERSATION)
    assert parse_usage(reply).cached_prompt_tokens == 64
    with agentmem.Memory(root=tmp_path / "root", working_dir=tmp_path) as mem, mem.session() as s:
        s.start_task("hi")
        s.record_usage(reply)
        assert s.usage.cached_prompt_tokens == 64
