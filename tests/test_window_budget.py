"""The window counts everything a request sends: messages, tool schemas and the reserved output.

The oracle here is independent of the manager: it counts the payload it was
handed (OpenAI list or Anthropic ``(system, messages)``) and the tool specs
converted to the provider's shape by this file's own code, with tiktoken's
encoder called directly -- never the manager's cached per-message counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from profiles import scaled

from agentmem import ContextOverflowError, InvalidArgumentError, Memory
from agentmem.errors import ConfigurationError
from agentmem.tokens import TiktokenCounter, cl100k_encoding

ENC = cl100k_encoding()
PER_MESSAGE = 3  # OpenAI's published framing per chat message
PRIMING = 3  # and per request, for the reply
# What docs/context.md says a tools list costs beyond its compact JSON:
TOOL_OVERHEAD_TOKENS = 8  # per tool
OPENAI_TOOLS_OVERHEAD_TOKENS = 12  # per OpenAI request with tools
ANTHROPIC_TOOL_SYSTEM_TOKENS = 346  # Anthropic's tool-use system prompt


def tok(text: str) -> int:
    return len(ENC.encode(text, disallowed_special=())) if text else 0


# --------------------------------------------------------------------------- the oracle


def openai_payload_tokens(payload: list[dict[str, Any]]) -> int:
    total = PRIMING
    for msg in payload:
        total += PER_MESSAGE + tok(msg["role"])
        content = msg.get("content")
        if isinstance(content, str):
            total += tok(content)
        elif isinstance(content, list):
            total += sum(tok(p.get("text", "")) for p in content if p.get("type") == "text")
        if msg.get("name"):
            total += 1 + tok(msg["name"])
        total += tok(msg.get("reasoning_content") or "")
        for call in msg.get("tool_calls") or ():
            total += 3 + tok(call["id"]) + tok(call["function"]["name"])
            total += tok(call["function"]["arguments"])
        if msg["role"] == "tool":
            total += tok(msg["tool_call_id"])
    return total


def anthropic_payload_tokens(system: str | None, messages: list[dict[str, Any]]) -> int:
    total = PRIMING + (PER_MESSAGE + tok("system") + tok(system) if system else 0)
    for msg in messages:
        total += PER_MESSAGE + tok(msg["role"])
        content = msg["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            kind = block["type"]
            if kind == "text":
                total += tok(block["text"])
            elif kind == "tool_use":
                total += 3 + tok(block["id"]) + tok(block["name"])
                total += tok(json.dumps(block["input"], separators=(",", ":"), ensure_ascii=False))
            elif kind == "tool_result":
                total += tok(block["tool_use_id"])
                inner = block.get("content")
                if isinstance(inner, str):
                    total += tok(inner)
                elif isinstance(inner, list):
                    total += sum(tok(p.get("text", "")) for p in inner)
            elif kind == "thinking":
                total += tok(block["thinking"])
            else:
                raise AssertionError(f"unexpected block {kind}")
    return total


def as_provider(spec: Mapping[str, Any], provider: str) -> dict[str, Any]:
    """This test's own conversion of a function tool to the provider's shape."""
    if "function" in spec:
        fn = spec["function"]
        name, desc, schema = fn["name"], fn.get("description"), fn["parameters"]
    elif "input_schema" in spec:
        name, desc, schema = spec["name"], spec.get("description"), spec["input_schema"]
    else:
        name, desc, schema = spec["name"], spec.get("description"), spec["parameters"]
    if provider == "anthropic":
        out: dict[str, Any] = {"name": name}
        if desc:
            out["description"] = desc
        out["input_schema"] = schema
        return out
    fn_out: dict[str, Any] = {"name": name}
    if desc:
        fn_out["description"] = desc
    fn_out["parameters"] = schema
    return {"type": "function", "function": fn_out}


def tools_tokens(tools: list[dict[str, Any]] | None, provider: str) -> int:
    if not tools:
        return 0
    text = json.dumps(
        [as_provider(t, provider) for t in tools], separators=(",", ":"), ensure_ascii=False
    )
    per_request = (
        ANTHROPIC_TOOL_SYSTEM_TOKENS if provider == "anthropic" else OPENAI_TOOLS_OVERHEAD_TOKENS
    )
    return tok(text) + TOOL_OVERHEAD_TOKENS * len(tools) + per_request


def payload_tokens(payload: Any, provider: str) -> int:
    if provider == "anthropic":
        system, messages = payload
        return anthropic_payload_tokens(system, messages)
    return openai_payload_tokens(payload)


# --------------------------------------------------------------------------- strategies

WORDS = st.sampled_from(["ls", "pytest", "src/app.py", "the", "error", "passed", "def", "é", "42"])


def words(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    return st.lists(WORDS, min_size=min_size, max_size=max_size).map(" ".join)


@st.composite
def tool_spec(draw: st.DrawFn, index: int) -> dict[str, Any]:
    name = f"tool_{index}_" + draw(st.sampled_from(["read", "write", "run", "search"]))
    description = draw(words(0, 60))
    props = {
        f"arg{i}": {"type": draw(st.sampled_from(["string", "integer"])), "description": d}
        for i, d in enumerate(draw(st.lists(words(0, 20), max_size=5)))
    }
    schema = {"type": "object", "properties": props, "required": sorted(props)[:1]}
    shape = draw(st.sampled_from(["chat", "responses", "anthropic"]))
    if shape == "chat":
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": schema},
        }
    if shape == "responses":
        return {"type": "function", "name": name, "description": description, "parameters": schema}
    return {"name": name, "description": description, "input_schema": schema}


@st.composite
def tool_list(draw: st.DrawFn) -> list[dict[str, Any]] | None:
    n = draw(st.integers(0, 6))
    if n == 0:
        return draw(st.sampled_from([None, []]))
    return [draw(tool_spec(i)) for i in range(n)]


@st.composite
def steps(draw: st.DrawFn) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [("user", draw(words(1, 30)))]
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(
            st.sampled_from(["user", "tool", "tool", "tool", "answer", "build", "overflow"])
        )
        if kind == "user":
            out.append(("user", draw(st.one_of(words(1, 80), words(300, 1_500)))))
        elif kind == "tool":
            out.append(("tool", draw(st.sampled_from([5, 100, 800, 3_000, 12_000]))))
        elif kind == "answer":
            out.append(("answer", draw(words(0, 60))))
        elif kind == "overflow":
            out.append(("overflow", draw(st.integers(1, 3))))
        else:
            out.append(("build", None))
    return out


def apply(session: Any, step: tuple[str, Any], n: int) -> None:
    kind, value = step
    if kind == "user":
        session.start_task(value)
    elif kind == "tool":
        call = f"call_{n}"
        session.append(
            {
                "role": "assistant",
                "content": f"step {n}",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "run", "arguments": json.dumps({"cmd": "ls -la"})},
                    }
                ],
            }
        )
        session.append({"role": "tool", "tool_call_id": call, "content": "output line\n" * value})
    elif kind == "answer":
        session.append({"role": "assistant", "content": value or "ok"})


# --------------------------------------------------------------------------- the property


def build(
    session: Any, step: tuple[str, Any], provider: str, kwargs: dict[str, Any]
) -> tuple[Any, ContextOverflowError | None]:
    """The step's payload (stage 3 after an "overflow" step), or the overflow error."""
    try:
        if step[0] == "overflow":
            return session.context_after_overflow(step[1], provider, **kwargs), None
        return session.context(provider, **kwargs), None
    except ContextOverflowError as exc:
        return None, exc


@settings(max_examples=scaled(60))
@given(
    window=st.sampled_from([1_000, 1_500, 3_000, 4_000, 8_000]),
    tools=tool_list(),
    output=st.one_of(st.none(), st.integers(0, 1_500)),
    defaults=st.booleans(),
    provider=st.sampled_from(["openai", "anthropic"]),
    system_words=st.sampled_from([5, 60, 400]),
    script=steps(),
)
def test_payload_tools_and_output_fit_the_window_on_every_stage(
    window: int,
    tools: list[dict[str, Any]] | None,
    output: int | None,
    defaults: bool,
    provider: str,
    system_words: int,
    script: list[tuple[str, Any]],
) -> None:
    mem = Memory(incognito=True, token_counter=TiktokenCounter("cl100k_base"))
    system = " ".join(["You are a careful coding agent."] * system_words)
    if defaults and output is not None and output >= window:
        with pytest.raises(ConfigurationError, match="max_output_tokens"):
            mem.session(context_window=window, max_output_tokens=output)
        return
    if defaults:  # the same figures given once, as the session's defaults
        session = mem.session(context_window=window, tools=tools, max_output_tokens=output)
        kwargs: dict[str, Any] = {}
    else:
        session = mem.session(context_window=window)
        kwargs = {"tools": tools, "max_output_tokens": output}
    session.history.replace_system_prompt(system)
    reserved = tools_tokens(tools, provider) + (output or 0)
    budget = window - reserved
    note(f"tools cost {tools_tokens(tools, provider)}, budget {budget}")
    anchor = ""
    for n, step in enumerate(script):
        apply(session, step, n)
        anchor = step[1] if step[0] == "user" else anchor
        payload, refused = build(session, step, provider, kwargs)
        if refused is not None:
            # Only when what must stay (the system prompt, the task's request, the newest
            # unit cut to its minimum) takes much of what the tools and the output leave.
            assert refused.window == window and refused.needed > window
            assert budget < 400 or tok(system) + tok(anchor) > budget // 2
            event("ContextOverflowError")
            continue
        stats = session.context_manager.stats
        used = payload_tokens(payload, provider)
        note(f"step {n} {step[0]}: payload {used}, stats {stats}")
        assert stats.tool_tokens == tools_tokens(tools, provider)
        assert stats.reserved_output_tokens == (output or 0)
        assert used <= stats.tokens  # the manager never under-counts what it sends
        assert used + reserved <= window
        event(f"stage {max((t.stage for t in stats.trims), default=0)} trim")
        event(f"headroom {(window - used - reserved) * 10 // window * 10}%")


def test_a_4000_token_window_with_928_tokens_of_tools_is_trimmed_to_fit() -> None:
    """The trial's case: ~23% of the window in tool schemas on top of a 'fitting' payload."""
    mem = Memory(incognito=True, token_counter=TiktokenCounter("cl100k_base"))
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "Run a command in the project and return its output. " * 6,
                "parameters": {
                    "type": "object",
                    "properties": {"cmd": {"type": "string", "description": "the command " * 8}},
                },
            },
        }
        for i in range(7)
    ]
    cost = tools_tokens(tools, "openai")
    assert 700 < cost < 1_200
    s = mem.session(context_window=4_000)
    s.history.replace_system_prompt("You are a coding agent.")
    s.start_task("Fix the failing tests.")
    without, n = 0, 0
    while without < 2_800:  # grow to just under stage 1's 75% mark, without a trim
        apply(s, ("tool", 15), n)
        n += 1
        without = openai_payload_tokens(s.context())
        assert s.context_manager.stats.trims == []
    # What was sent before: a payload agentmem believed fit, the tools and the answer on top.
    assert without + cost + 500 > 4_000
    payload = s.context(tools=tools, max_output_tokens=500)
    assert s.context_manager.stats.trims  # now it trims for them
    assert openai_payload_tokens(payload) + cost + 500 <= 4_000
    assert s.context_manager.stats.budget == 4_000 - cost - 500


def test_tools_and_output_that_take_the_whole_window_raise_a_clear_error() -> None:
    mem = Memory(incognito=True)
    s = mem.session(context_window=1_000)
    s.start_task("hello")
    big = [{"name": "t", "description": "word " * 2_000, "input_schema": {"type": "object"}}]
    with pytest.raises(ContextOverflowError, match="tool schemas") as info:
        s.context(tools=big)
    assert info.value.window == 1_000 and info.value.needed > 1_000
    with pytest.raises(ContextOverflowError, match="reserved output"):
        s.context(max_output_tokens=999)
    with pytest.raises(ContextOverflowError):
        s.context_after_overflow(1, tools=big)
    # and the history is untouched: a build without them works
    assert s.context()[-1]["content"] == "hello"


def test_tools_are_counted_once_per_distinct_list() -> None:
    counted: list[str] = []

    class Counter:
        epoch = 0

        def count_text(self, text: str) -> int:
            counted.append(text)
            return len(text) // 4 + 1

    mem = Memory(incognito=True, token_counter=Counter())
    s = mem.session(context_window=50_000)
    s.start_task("hi")
    tools = [{"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}]
    for _ in range(5):
        s.context(tools=tools)
    schema_counts = [t for t in counted if t.startswith("[{")]
    assert len(schema_counts) == 1
    tools[0]["function"]["description"] = "now described"  # mutated in place: counted again
    s.context(tools=tools)
    assert len([t for t in counted if t.startswith("[{")]) == 2
    assert "now described" in s.context_manager.last_build.tools[0]["function"]["description"]


def test_tools_are_counted_in_the_providers_shape() -> None:
    mem = Memory(incognito=True, token_counter=TiktokenCounter("cl100k_base"))
    s = mem.session(context_window=50_000)
    s.start_task("hi")
    anthropic_spec = [{"name": "f", "description": "d", "input_schema": {"type": "object"}}]
    s.context("openai", tools=anthropic_spec)
    build = s.context_manager.last_build
    assert build.tools == (
        {
            "type": "function",
            "function": {"name": "f", "description": "d", "parameters": {"type": "object"}},
        },
    )
    assert build.stats.tool_tokens == tools_tokens(anthropic_spec, "openai")
    s.context("anthropic", tools=anthropic_spec)
    build = s.context_manager.last_build
    assert build.tools == tuple(anthropic_spec)
    assert build.stats.tool_tokens == tools_tokens(anthropic_spec, "anthropic")


def test_session_defaults_apply_and_a_call_overrides_them() -> None:
    mem = Memory(incognito=True)
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    s = mem.session(context_window=8_000, tools=tools, max_output_tokens=700)
    tools[0]["name"] = "changed"  # the session keeps its own copy
    s.start_task("hi")
    s.context()
    stats = s.context_manager.stats
    assert stats.reserved_output_tokens == 700 and stats.tool_tokens > 0
    assert s.context_manager.last_build.tools[0]["function"]["name"] == "f"
    s.context(tools=[], max_output_tokens=0)
    stats = s.context_manager.stats
    assert stats.tool_tokens == 0 and stats.reserved_output_tokens == 0
    assert stats.budget == 8_000


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"tools": "not a list"}, ConfigurationError),
        (
            {"tools": [{"type": "function", "function": {"description": "no name"}}]},
            ConfigurationError,
        ),
        ({"tools": [{"name": "f", "input_schema": "not a schema"}]}, ConfigurationError),
        ({"max_output_tokens": -1}, ConfigurationError),
        ({"max_output_tokens": True}, ConfigurationError),
        ({"max_output_tokens": 1_000, "context_window": 1_000}, ConfigurationError),
    ],
)
def test_bad_session_defaults_are_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    mem = Memory(incognito=True)
    with pytest.raises(error):
        mem.session(**kwargs)
    assert mem.sessions.list() == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tools": {"name": "f"}},
        {"tools": [object()]},
        {"tools": [{"name": "f", "input_schema": {"type": "object", "x": float("nan")}}]},
        {"max_output_tokens": 1.5},
        {"max_output_tokens": -3},
    ],
)
def test_bad_call_arguments_are_refused(kwargs: dict[str, Any]) -> None:
    mem = Memory(incognito=True)
    s = mem.session()
    s.start_task("hi")
    with pytest.raises(InvalidArgumentError):
        s.context(**kwargs)


def test_text_the_anthropic_conversion_adds_is_counted() -> None:
    """A system note after the first turn goes to Anthropic as tagged user text: it costs room.

    The manager's count of what it sends (which it keeps within the budget) must
    never be below an independent count of the payload it returned.
    """
    mem = Memory(incognito=True, token_counter=TiktokenCounter("cl100k_base"))
    s = mem.session(context_window=4_000)
    s.history.replace_system_prompt("You are a careful coding agent.")
    s.start_task("fix the tests")
    for n in range(3):
        apply(s, ("tool", 5), n)
    s.append({"role": "assistant", "content": "done"})  # the note after it stands alone
    for attempt in (1, 2, 3):
        system, messages = s.context_after_overflow(attempt, "anthropic")
        assert "<system-reminder>" in messages[-1]["content"][0]["text"]
        assert anthropic_payload_tokens(system, messages) <= s.context_manager.stats.tokens


def test_the_memory_update_continues_with_the_sessions_tools(tmp_path: Any) -> None:
    """finish_task() without tools: the fork sends the session's tools (OpenAI shape)."""
    from agentmem.adapters import anthropic_tools
    from agentmem.memory_updater import PROCEED, tool_specs
    from agentmem.testing import ScriptedLLM, tool_call
    from agentmem.tools import openai_tools

    bash = {
        "type": "function",
        "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}},
    }
    host_tools = [bash, *openai_tools(), *tool_specs()]
    llm = ScriptedLLM([{"role": "assistant", "content": "Memory updated."}])
    root = tmp_path / ".agentmem"
    with (
        Memory(root=root, working_dir=tmp_path, llm=llm) as mem,
        mem.session(tools=anthropic_tools(host_tools), max_output_tokens=1_000) as s,
    ):
        s.append({"role": "system", "content": "You are a coding agent."})
        s.start_task("Deploy the app to staging.")
        for i in range(11):
            last = s.context()
            s.record_usage(100, 10, 0.0)
            s.append(tool_call("bash", {"cmd": f"make step{i}"}, call_id=f"c{i}"))
            s.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"{i}: ok"})
        last = s.context()
        assert s.context_manager.stats.tool_tokens > 0
        s.finish_task()
        assert s.last_memory_update is not None and s.last_memory_update.error is None
    messages, tools = llm.calls[0]
    assert tools == host_tools
    assert messages[: len(last)] == last
    assert messages[-1] == {"role": "user", "content": PROCEED}
