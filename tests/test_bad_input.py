"""Garbage in: only AgentMemError comes out, nothing stored is lost, payloads stay valid."""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from provider_rules import anthropic_violations, openai_violations
from responses_rules import responses_violations

from agentmem import (
    INTERNAL_FIELDS,
    AgentMemError,
    ConfigurationError,
    InvalidArgumentError,
    Memory,
    MessageHistory,
    Session,
    StorageError,
)

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=8),
        st.binary(max_size=4),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "text",
                    "id",
                    "function",
                    "name",
                    "arguments",
                    "image_url",
                    "url",
                    "tool_use_id",
                    "input",
                    "content",
                    "source",
                    "call_id",
                    "output",
                    "summary",
                    "encrypted_content",
                    "action",
                ]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)

garbage_message = st.fixed_dictionaries(
    {
        "role": st.one_of(
            st.sampled_from(["system", "user", "assistant", "tool", "developer", ""]), json_values
        )
    },
    optional={
        "content": json_values,
        "tool_calls": json_values,
        "tool_call_id": json_values,
        "name": json_values,
        "reasoning_content": json_values,
        "task_id": json_values,
        "transient": json_values,
        "thinking_blocks": json_values,
    },
)


# OpenAI Responses items: a known or unknown type, any fields.
garbage_item = st.fixed_dictionaries(
    {
        "type": st.one_of(
            st.sampled_from(
                ["message", "function_call", "function_call_output", "reasoning",
                 "web_search_call", "computer_call_output", "local_shell_call_output",
                 "mcp_approval_response", "compaction_trigger", "nonsense"]
            ),
            json_values,
        )
    },
    optional={
        "role": st.one_of(st.sampled_from(["user", "assistant", "developer"]), json_values),
        "content": json_values,
        "id": json_values,
        "call_id": st.one_of(st.sampled_from(["call_1", "call_2"]), json_values),
        "name": json_values,
        "arguments": st.one_of(st.just("{}"), json_values),
        "output": json_values,
        "summary": st.one_of(st.just([]), json_values),
        "encrypted_content": json_values,
        "status": json_values,
    },
)  # fmt: skip


@given(st.lists(st.one_of(garbage_message, garbage_item, json_values), max_size=12))
def test_garbage_only_raises_agentmem_errors(items: list[Any]) -> None:
    history = MessageHistory([{"role": "user", "content": "keep me"}])
    for item in items:
        before = list(history)
        try:
            history.append(item)
        except AgentMemError:
            assert list(history) == before, "a rejected append changed the history"
    assert history[0]["content"] == "keep me"
    assert openai_violations(history.to_api(), internal_fields=INTERNAL_FIELDS) == []
    system, turns = history.to_api(provider="anthropic")
    assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []
    responses = history.to_api(provider="openai-responses")
    assert responses_violations(responses, internal_fields=INTERNAL_FIELDS) == []


@pytest.mark.parametrize("chain", [5, "12", b"1", [[1]], object()])
def test_bad_task_chain(chain: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        MessageHistory([{"role": "user", "content": "x", "task_id": 1}]).to_api(task_chain=chain)


@pytest.mark.parametrize("messages", [5, "text", {"role": "user", "content": "x"}, None])
def test_bad_batches(messages: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        MessageHistory(messages)
    with pytest.raises(InvalidArgumentError):
        MessageHistory().extend(messages)


def test_bad_callables() -> None:
    h = MessageHistory([{"role": "user", "content": "x"}])
    with pytest.raises(InvalidArgumentError):
        h.delete_where(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        h.mutate_last_matching(lambda m: True, "upper")  # type: ignore[arg-type]
    assert len(h) == 1


def test_deeply_nested_input_is_refused_not_crashed() -> None:
    deep: Any = "x"
    for _ in range(5_000):
        deep = [deep]
    h = MessageHistory()
    with pytest.raises(AgentMemError, match="nested too deeply"):
        h.append({"role": "user", "content": "x", "meta": deep})


@pytest.mark.parametrize("task_id", [[1], {"a": 1}, 1.5, True])
def test_task_id_must_be_int_or_str(task_id: Any) -> None:
    with pytest.raises(AgentMemError, match="task_id"):
        MessageHistory().append({"role": "user", "content": "x", "task_id": task_id})


# --------------------------------------------------------------------------- the facade

garbage = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 2, 3, 256, 2**31, 2**53, 2**63, -1]),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["openai", "anthropic", "", "\x00", "..", "gpt-4o"]),
    st.binary(max_size=4),
    st.lists(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.builds(object),
)

SESSION_CALLS = {
    "start_task": 1,
    "append": 1,
    "record_usage": 3,
    "task_iterations": 1,
    "finish_task": 0,
    "context": 1,
    "context_kw": 3,
    "context_after_overflow": 2,
    "overflow_kw": 2,
}


def _call(session: Session, name: str, args: list[Any]) -> None:
    if name == "context_kw":
        keys = ("injections", "task_chain", "force_reasoning_content_pad")
        session.context(**dict(zip(keys, args, strict=True)))
    elif name == "overflow_kw":
        session.context_after_overflow(1, reported_tokens=args[0], injections=args[1])
    else:
        getattr(session, name)(*args)


def _snapshot(session: Session) -> tuple[Any, ...]:
    return (list(session.history), session.usage, session.tasks.state())


@given(
    st.lists(
        st.sampled_from(sorted(SESSION_CALLS)).flatmap(
            lambda name: st.tuples(
                st.just(name),
                st.lists(garbage, min_size=SESSION_CALLS[name], max_size=SESSION_CALLS[name]),
            )
        ),
        max_size=12,
    )
)
def test_every_session_method_refuses_garbage_cleanly(calls: list[tuple[str, list[Any]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "m"
        with Memory(root=root, working_dir=tmp, durability="normal") as mem:
            s = mem.session("s", context_window=4_000)
            s.start_task("keep me")
            for name, args in calls:
                before = _snapshot(s)
                try:
                    _call(s, name, args)
                except AgentMemError:
                    assert _snapshot(s) == before, f"a refused {name} changed the session"
            assert s.history[0]["content"] == "keep me"
            kept = _snapshot(s)
        with Memory(root=root, working_dir=tmp) as mem:
            again = mem.session("s")
            assert _snapshot(again) == kept  # everything accepted is durable, nothing else


MEMORY_ARGS = [
    "root",
    "working_dir",
    "llm",
    "token_counter",
    "incognito",
    "ltm_enabled",
    "durability",
    "summarizer",
    "context",
    "reporter",
]


@given(
    st.sampled_from(MEMORY_ARGS),
    garbage,
    st.sampled_from(["session_id", "name", "model", "context_window"]),
    garbage,
)
def test_memory_and_session_arguments_refuse_garbage(
    argument: str, value: Any, session_argument: str, session_value: Any
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "m"
        with Memory(root=root, working_dir=tmp, durability="normal") as mem:
            mem.session("s").start_task("keep me")
        kwargs: dict[str, Any] = {"root": root, "working_dir": tmp, argument: value}
        message = ""
        try:
            with Memory(**kwargs) as mem:
                session_kwargs = {"session_id": "other", session_argument: session_value}
                mem.session(**session_kwargs).close()
        except AgentMemError as exc:
            message = str(exc)
        named = (argument, session_argument, session_argument.replace("_", " "))
        assert not message or any(name in message for name in named)
        with Memory(root=root, working_dir=tmp) as mem:
            assert mem.session("s").history[0]["content"] == "keep me"


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda s: s.record_usage(2**63), "prompt_tokens"),
        (lambda s: s.record_usage(1, 2**63), "completion_tokens"),
        (lambda s: s.record_usage(1, 1, math.nan), "cost_usd"),
        (lambda s: s.record_usage(1, 1, 10**400), "cost_usd"),
        (lambda s: s.context_after_overflow(1.0), "attempt"),
        (lambda s: s.context_after_overflow(1, reported_tokens="9000"), "reported_tokens"),
        (lambda s: s.context(injections="persona"), "injections"),
        (lambda s: s.context(injections=[1]), "injections[0]"),
    ],
)
def test_named_bad_session_arguments(mem_session: Session, call: Any, argument: str) -> None:
    before = _snapshot(mem_session)
    with pytest.raises(InvalidArgumentError, match=re.escape(argument)):
        call(mem_session)
    assert _snapshot(mem_session) == before


@pytest.fixture
def mem_session(tmp_path: Path) -> Any:
    with Memory(root=tmp_path / "m", working_dir=tmp_path) as mem:
        s = mem.session()
        s.start_task("keep me")
        yield s


def test_context_window_too_large_is_a_configuration_error(tmp_path: Path) -> None:
    with Memory(root=tmp_path / "m", working_dir=tmp_path) as mem:
        with pytest.raises(ConfigurationError, match="context_window"):
            mem.session(context_window=2**63)
        assert mem.sessions.list() == []


def test_root_that_is_a_file_is_a_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("precious")
    for root in (blocker, blocker / "below"):
        with pytest.raises(StorageError, match="root"):
            Memory(root=root, working_dir=tmp_path)
    assert blocker.read_text() == "precious"


@pytest.mark.parametrize(
    ("context", "field"),
    [
        ({"trim_target": 5}, "trim_target"),
        ({"no_such_setting": 1}, "no_such_setting"),
        ("fast", "context"),
        ({"context_window": "big"}, "context_window"),
    ],
)
def test_bad_context_settings_are_configuration_errors(
    tmp_path: Path, context: Any, field: str
) -> None:
    with pytest.raises(ConfigurationError, match=field):
        Memory(root=tmp_path / "m", working_dir=tmp_path, context=context)
