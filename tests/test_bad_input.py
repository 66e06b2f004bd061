"""Garbage in: only AgentMemError comes out, nothing stored is lost, payloads stay valid."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from provider_rules import anthropic_violations, openai_violations

from agentmem import INTERNAL_FIELDS, AgentMemError, InvalidArgumentError, MessageHistory

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


@given(st.lists(st.one_of(garbage_message, json_values), max_size=12))
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
