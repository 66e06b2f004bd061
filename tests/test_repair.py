"""Each repair pass on its own: what it enforces, that it is pure, idempotent and lazy."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given
from strategies import conversation

from agentmem.messages import Message, normalize_messages
from agentmem.repair import (
    MISSING_TOOL_RESULT,
    answer_dangling_tool_calls,
    build_payload,
    drop_empty_assistant_messages,
    drop_orphan_tool_results,
    make_tool_call_ids_unique,
    pad_reasoning_content,
    repair,
    select_task_chain,
)

Pass = Callable[[Sequence[Message]], Sequence[Message]]
PASSES: list[Pass] = [
    drop_orphan_tool_results,
    answer_dangling_tool_calls,
    drop_empty_assistant_messages,
    make_tool_call_ids_unique,
    pad_reasoning_content,
    repair,
]


def asst(*ids: str, content: Any = None, **extra: Any) -> Message:
    msg: Message = {"role": "assistant", "content": content, **extra}
    if ids:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ]
    return msg


def tool(call_id: str, content: str = "r") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def user(text: str = "u") -> Message:
    return {"role": "user", "content": text}


@pytest.mark.parametrize("repair_pass", PASSES)
def test_valid_input_is_returned_as_is(repair_pass: Pass) -> None:
    messages = [user(), asst("a", "b"), tool("b"), tool("a"), asst(content="done")]
    assert repair_pass(messages) is messages


@pytest.mark.parametrize("repair_pass", PASSES)
@given(conversation())
def test_passes_are_pure_and_idempotent(repair_pass: Pass, raw: list[dict[str, Any]]) -> None:
    messages = normalize_messages(raw)
    frozen = copy.deepcopy(messages)
    once = list(repair(messages)) if repair_pass is not repair else messages
    out = repair_pass(once)
    assert messages == frozen, "a pass mutated its input"
    assert repair_pass(out) == out


def test_drop_orphan_tool_results() -> None:
    messages = [
        tool("early"),
        asst("a"),
        tool("a"),
        tool("a"),  # second answer to the same call
        tool("zzz"),  # unknown id
        user(),
        tool("a"),  # late: a user message closed the run
    ]
    assert drop_orphan_tool_results(messages) == [asst("a"), tool("a"), user()]


def test_duplicate_ids_in_one_assistant_take_one_answer_each() -> None:
    messages = [asst("a", "a"), tool("a"), tool("a"), tool("a")]
    assert drop_orphan_tool_results(messages) == messages[:3]


def test_answer_dangling_tool_calls() -> None:
    messages = [asst("a", "b", task_id=7), tool("b"), user()]
    out = answer_dangling_tool_calls(messages)
    assert out == [
        asst("a", "b", task_id=7),
        tool("b"),
        {
            "role": "tool",
            "tool_call_id": "a",
            "content": MISSING_TOOL_RESULT,
            "synthesized": True,
            "task_id": 7,
        },
        user(),
    ]


def test_trailing_assistant_gets_answers() -> None:
    out = answer_dangling_tool_calls([user(), asst("x")])
    assert [m["role"] for m in out] == ["user", "assistant", "tool"]


def test_drop_empty_assistant_messages() -> None:
    keep = [asst(content="x"), asst("a"), {"role": "assistant", "content": None, "refusal": "no"}]
    drop = [asst(content=None), asst(content=""), asst(content=[]), {"role": "assistant"}]
    assert drop_empty_assistant_messages(keep + drop) == keep


def test_make_tool_call_ids_unique() -> None:
    messages = [
        asst("ok_1", "bad.id"),
        tool("bad.id", "first"),
        tool("ok_1"),
        asst("ok_1", "x" * 41),
        tool("ok_1", "second"),
        tool("x" * 41),
    ]
    out = make_tool_call_ids_unique(messages)
    ids = [c["id"] for m in out if m["role"] == "assistant" for c in m["tool_calls"]]
    assert ids[0] == "ok_1"
    assert len(set(ids)) == 4
    assert all(len(i) <= 40 and i.replace("_", "").replace("-", "").isalnum() for i in ids)
    # answers follow their calls
    assert out[1]["tool_call_id"] == ids[1] and out[1]["content"] == "first"
    assert out[4]["tool_call_id"] == ids[2] and out[4]["content"] == "second"
    assert out[5]["tool_call_id"] == ids[3]
    # deterministic, and independent of what comes later (prompt-cache friendly)
    assert make_tool_call_ids_unique(messages) == out
    assert make_tool_call_ids_unique(messages[:2]) == out[:2]


def test_pad_reasoning_content() -> None:
    messages = [asst(content="a"), user(), asst(content="b", reasoning_content="r")]
    out = pad_reasoning_content(messages)
    assert [m.get("reasoning_content") for m in out] == ["", None, "r"]
    assert pad_reasoning_content([user()], force=True) == [user()]
    forced = pad_reasoning_content([asst(content="a")], force=True)
    assert forced[0]["reasoning_content"] == ""


def test_select_task_chain() -> None:
    messages = [user(), {**user(), "task_id": 1}, {**user(), "task_id": 2}]
    assert select_task_chain(messages, None) is messages
    assert select_task_chain(messages, {1, 2}) is messages
    assert select_task_chain(messages, [2]) == [messages[0], messages[2]]


def test_build_payload_openai_whitelists_keys_and_parts() -> None:
    messages = normalize_messages(
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
                "task_id": 1,
            },
            asst("c", refusal="no", audio={"id": "au"}, mine=1),
            {
                "role": "tool",
                "tool_call_id": "c",
                "content": [
                    {"type": "text", "text": "t"},
                    {"type": "image_url", "image_url": {"url": "https://x/i.png"}},
                ],
                "name": "dropped",
            },
        ]
    )
    out = build_payload(messages)
    assert out[0] == {"role": "user", "content": [{"type": "text", "text": "a"}]}
    assert out[1]["refusal"] == "no" and out[1]["audio"] == {"id": "au"} and "mine" not in out[1]
    assert out[2]["content"][1] == {
        "type": "text",
        "text": "[image_url omitted: tool results carry text only]",
    }
    assert "name" not in out[2]
