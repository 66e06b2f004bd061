"""Each repair pass on its own: what it enforces, that it is pure, idempotent and lazy."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from provider_rules import anthropic_violations, openai_violations
from strategies import conversation

from agentmem.errors import AgentMemError, InvalidMessageError
from agentmem.messages import (
    INTERNAL_FIELDS,
    Message,
    from_anthropic,
    normalize_messages,
    to_anthropic,
)
from agentmem.repair import (
    MISSING_TOOL_RESULT,
    answer_dangling_tool_calls,
    build_payload,
    drop_empty_assistant_messages,
    drop_orphan_tool_results,
    make_tool_call_ids_unique,
    openai_view,
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


# Assistant replies as real clients return them (recorded shapes, values shortened):
# openai-python `ChatCompletionMessage.model_dump()`, the same with `exclude_none=True`
# from DeepSeek (whose tool-call deltas carry `index`), litellm `Message.model_dump()`,
# and an audio reply. Each carries keys a Chat Completions *request* rejects.
REAL_REPLIES: dict[str, dict[str, Any]] = {
    "openai_model_dump": {
        "content": None,
        "refusal": None,
        "role": "assistant",
        "annotations": [],
        "audio": None,
        "function_call": None,
        "tool_calls": [
            {
                "id": "call_Abc123",
                "function": {"arguments": '{"city":"Paris"}', "name": "get_weather"},
                "type": "function",
            }
        ],
    },
    "deepseek_exclude_none": {
        "content": "",
        "role": "assistant",
        "reasoning_content": "The user wants the weather.",
        "tool_calls": [
            {
                "index": 0,
                "id": "call_0_5c1f",
                "function": {"arguments": '{"city": "Paris"}', "name": "get_weather"},
                "type": "function",
            }
        ],
    },
    "litellm_model_dump": {
        "content": None,
        "role": "assistant",
        "tool_calls": [
            {
                "function": {"arguments": '{"city": "Paris"}', "name": "get_weather"},
                "id": "toolu_01A",
                "type": "function",
                "index": 1,
            }
        ],
        "function_call": None,
        "provider_specific_fields": {"citations": None},
        "annotations": None,
    },
    "openai_audio_reply": {
        "content": None,
        "refusal": None,
        "role": "assistant",
        "annotations": [
            {
                "type": "url_citation",
                "url_citation": {
                    "url": "https://x",
                    "title": "t",
                    "start_index": 0,
                    "end_index": 1,
                },
            }
        ],
        "audio": {
            "id": "audio_abc",
            "data": "UklGRg==",
            "expires_at": 1_763_000_000,
            "transcript": "It is sunny.",
        },
        "function_call": None,
        "tool_calls": None,
    },
}


@pytest.mark.parametrize("name", sorted(REAL_REPLIES))
def test_real_client_replies_give_payloads_with_only_api_keys(name: str) -> None:
    reply = REAL_REPLIES[name]
    user_turn = {
        "role": "user",
        "content": [
            {"type": "text", "text": "weather?", "cache_control": {"type": "ephemeral"}},
            {
                "type": "image_url",
                "image_url": {"url": "https://x/i.png", "detail": "low", "uuid": "u1"},
            },
        ],
    }
    messages = [user_turn, reply]
    for call in reply.get("tool_calls") or ():
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "sunny"})
    stored = normalize_messages(messages)
    payload = build_payload(stored)
    assert openai_violations(payload, internal_fields=INTERNAL_FIELDS) == []
    assert payload[0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://x/i.png", "detail": "low"},
    }
    assistant = payload[1]
    for call in assistant.get("tool_calls", ()):
        assert set(call) == {"id", "type", "function"}
        assert set(call["function"]) == {"name", "arguments"}
    if "audio" in assistant:
        assert assistant["audio"] == {"id": "audio_abc"}
    # Nothing is lost from the stored copy: the whitelist applies to the payload only.
    assert stored[1].get("annotations") == reply.get("annotations")
    system, turns = build_payload(stored, provider="anthropic")
    assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []


def test_openai_view_is_idempotent_and_keeps_only_schema_keys() -> None:
    (msg,) = normalize_messages([REAL_REPLIES["deepseek_exclude_none"]])
    view = openai_view(msg)
    assert openai_view(view) == view
    assert view["tool_calls"] == [
        {
            "id": "call_0_5c1f",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ]


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "assistant", "content": "x", "audio": "audio_abc"}, "audio"),
        ({"role": "assistant", "content": "x", "audio": {"data": "AA"}}, "audio.id"),
        (
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "https://x", "detail": "4k"}}
                ],
            },
            "content[0].image_url.detail",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": "AA", "format": "ogg"}}
                ],
            },
            "content[0].input_audio.format",
        ),
        (
            {"role": "user", "content": [{"type": "file", "file": {"filename": "a.pdf"}}]},
            "content[0].file",
        ),
    ],
)
def test_values_the_request_schema_rejects_are_refused(message: Message, field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        normalize_messages([message])
    assert info.value.field == field


@given(conversation())
def test_openai_views_are_idempotent(raw: list[dict[str, Any]]) -> None:
    """A whitelisted view, and a whole payload, are fixed points of their own rendering."""
    messages = normalize_messages(raw)
    for msg in repair(messages):
        view = openai_view(msg)
        assert openai_view(view) == view
    payload = build_payload(messages)
    assert build_payload(normalize_messages(payload)) == payload


@given(conversation())
def test_anthropic_payload_is_a_fixed_point_of_the_round_trip(raw: list[dict[str, Any]]) -> None:
    """Anthropic -> canonical -> Anthropic gives back the same payload, for any history."""
    system, turns = build_payload(normalize_messages(raw), provider="anthropic")
    back = from_anthropic(turns, system)
    assert to_anthropic(back) == (system, turns)
    assert build_payload(back, provider="anthropic") == (system, turns)


_not_validated = st.lists(
    st.one_of(
        st.none(),
        st.integers(),
        st.text(max_size=3),
        st.dictionaries(
            st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "task_id"]),
            st.one_of(
                st.none(),
                st.sampled_from(["user", "assistant", "tool", "system"]),
                st.lists(st.dictionaries(st.sampled_from(["id", "function"]), st.none())),
                st.lists(st.integers(), max_size=2),
            ),
            max_size=4,
        ),
    ),
    max_size=4,
)


@given(_not_validated, st.sampled_from(["openai", "anthropic"]))
def test_build_payload_refuses_unvalidated_input_with_an_agentmem_error(
    messages: list[Any], provider: str
) -> None:
    with contextlib.suppress(AgentMemError):
        build_payload(messages, provider=provider, task_chain={1})
