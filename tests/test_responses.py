"""The OpenAI Responses API as a third provider format (issue 16, item 1).

The referee is ``responses_rules`` (the SDK's own ``ResponseInputItemParam`` types plus
the documented pairing rules, sharing no code with the codec). History-wide properties
over Chat histories live in test_history_properties (``check_payloads`` checks the
Responses payload of every history it sees); this module covers the codec itself.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from profiles import profile_name, scaled
from provider_rules import anthropic_violations, openai_violations
from responses_rules import responses_violations
from strategies import (
    odd_text,
    responses_call,
    responses_conversation,
    responses_item,
    responses_output,
    responses_reasoning,
    text_part,
)

from agentmem import (
    INTERNAL_FIELDS,
    ContextManager,
    HeuristicCounter,
    InvalidArgumentError,
    InvalidMessageError,
    Memory,
    MessageHistory,
    ShortTermMemory,
    YaRN,
    from_responses_items,
    normalize_message,
    sanitize_text,
    to_responses_items,
)
from agentmem.repair import build_payload

Items = list[dict[str, Any]]


def _many(examples: int) -> int:
    """Thousands of random histories locally (``default``), a bounded 300 in ``ci``."""
    return 200 if profile_name() == "ci" else scaled(examples)


TURN: Items = [
    {"role": "developer", "content": "Be brief."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Look it up."}],
        "encrypted_content": "gAAAAB-opaque",
        "host_note": {"model": "o4", "n": 3},  # unknown to the SDK: kept, never sent
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_a",
        "name": "weather",
        "arguments": '{"city": "Paris", "days": 3}',
        "status": "completed",
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_b",
        "name": "clock",
        "arguments": "{}",
    },
    {"type": "function_call_output", "call_id": "call_b", "output": "12:00"},
    {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "paris"},
    },
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny at noon.", "annotations": []}],
    },
]


def _sent(items: Items) -> Items:
    """What the API receives for well-formed ``items``: the SDK's keys only."""
    out = copy.deepcopy(items)
    for item in out:
        item.pop("host_note", None)
        item.setdefault("type", "message")
    return out


def _clean_text(value: Any) -> Any:
    """``value`` with lone surrogates replaced, as agentmem stores it."""
    if isinstance(value, str):
        return sanitize_text(value)
    if isinstance(value, list):
        return [_clean_text(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean_text(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- the contract


def test_items_become_chat_messages_that_keep_their_items() -> None:
    messages = from_responses_items(TURN)
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    calls = messages[2]
    assert [c["id"] for c in calls["tool_calls"]] == ["call_a", "call_b"]
    # Reasoning is not mirrored into reasoning_content: a Chat payload stays OpenAI's.
    assert "reasoning_content" not in calls
    assert messages[3]["tool_call_id"] == "call_b"
    assert messages[5]["content"] == "Sunny at noon."
    # Together the items of the messages, in order, are exactly the input (ints stay ints,
    # unknown fields stay).
    assert [i for m in messages for i in m["responses_items"]] == TURN
    assert messages[2]["responses_items"][0]["host_note"]["n"] == 3
    assert "responses_items" in INTERNAL_FIELDS


def test_the_items_are_deep_copies() -> None:
    items = copy.deepcopy(TURN)
    messages = from_responses_items(items)
    items[2]["host_note"]["n"] = 99
    assert messages[2]["responses_items"][0]["host_note"]["n"] == 3


def test_responses_payload_replays_the_items() -> None:
    history = MessageHistory(from_responses_items(TURN))
    payload = history.to_api(provider="openai-responses")
    assert payload == _sent(TURN)
    assert responses_violations(payload, internal_fields=INTERNAL_FIELDS) == []
    assert to_responses_items(from_responses_items(TURN)) == payload


def test_chat_and_anthropic_payloads_carry_no_responses_items() -> None:
    history = MessageHistory(from_responses_items(TURN))
    chat = history.to_api()
    assert openai_violations(chat, internal_fields=INTERNAL_FIELDS) == []
    assert chat[2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris", "days": 3}'
    system, turns = history.to_api(provider="anthropic")
    assert system == "Be brief."
    assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []


def test_easy_input_message_without_type() -> None:
    [msg] = from_responses_items([{"role": "user", "content": "hi"}])
    assert msg == {
        "role": "user",
        "content": "hi",
        "responses_items": [{"role": "user", "content": "hi"}],
    }
    assert to_responses_items([msg]) == [{"type": "message", "role": "user", "content": "hi"}]


def test_append_takes_responses_items_like_anthropic_messages(tmp_path: Path) -> None:
    with Memory(root=tmp_path, incognito=True) as mem, mem.session("s") as s:
        s.append({"role": "system", "content": "sys"})
        for item in TURN[1:]:
            s.append(item)
        payload = s.context(provider="openai-responses")
        assert responses_violations(payload, internal_fields=INTERNAL_FIELDS) == []
        # Appended one at a time, each function_call is its own assistant message: the
        # first is answered by a synthesised output, the real one is an orphan (documented).
        kinds = [i["type"] for i in payload]
        assert kinds.count("function_call") == kinds.count("function_call_output") == 2
        assert [i.get("id") for i in payload if i["type"] == "reasoning"] == ["rs_1"]
        assert openai_violations(s.context(), internal_fields=INTERNAL_FIELDS) == []
    with Memory(root=tmp_path, incognito=True) as mem, mem.session("t") as s:
        for msg in from_responses_items(TURN):
            s.append(msg)
        assert s.context(provider="openai-responses") == _sent(TURN)


def test_normalize_message_tells_the_three_shapes_apart() -> None:
    responses = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "a", "annotations": []}],
        "id": "m",
    }
    anthropic = {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "a"}]}
    assert "responses_items" in normalize_message(responses)[0]
    assert "responses_items" not in normalize_message(anthropic)[0]
    assert "responses_items" not in normalize_message({"role": "user", "content": "x"})[0]
    # A Chat-shaped developer message is still refused with the hint; an item is accepted.
    with pytest.raises(InvalidMessageError, match="use 'system'"):
        normalize_message({"role": "developer", "content": "x"})
    assert (
        normalize_message({"type": "message", "role": "developer", "content": "x"})[0]["role"]
        == "system"
    )


def test_internal_fields_on_an_item_ride_on_the_message() -> None:
    [msg] = normalize_message(
        {"type": "function_call_output", "call_id": "c", "output": "o", "task_id": 7}
    )
    assert msg["task_id"] == 7
    items = build_payload(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            msg,
        ],
        provider="openai-responses",
    )
    assert items[1] == {"type": "function_call_output", "call_id": "c", "output": "o"}


def test_sdk_objects_are_read_through_model_dump() -> None:
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
    from openai.types.responses.response_output_text import ResponseOutputText

    call = ResponseFunctionToolCall(
        type="function_call", call_id="c1", name="f", arguments="{}", id="fc_9"
    )
    text = ResponseOutputText(type="output_text", text="done", annotations=[])
    reply = ResponseOutputMessage(
        type="message", id="msg_9", role="assistant", status="completed", content=[text]
    )
    messages = from_responses_items([call, reply])
    assert len(messages) == 1
    assert messages[0]["tool_calls"][0]["id"] == "c1"
    assert messages[0]["content"] == "done"


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("item", "index", "field"),
    [
        ({"type": "nonsense"}, 1, "type"),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, 1, "call_id"),
        (
            {"type": "function_call", "call_id": "c", "name": "bad name", "arguments": "{}"},
            1,
            "name",
        ),
        (
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"},
            1,
            "arguments",
        ),
        (
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}},
            1,
            "arguments",
        ),
        ({"type": "function_call_output", "call_id": "", "output": "x"}, 1, "call_id"),
        ({"type": "reasoning", "id": "rs", "summary": "no"}, 1, "summary"),
        ({"type": "reasoning", "id": "rs", "summary": [{"type": "x"}]}, 1, "summary[0]"),
        ({"type": "message", "role": "tool", "content": "x"}, 1, "role"),
        (
            {"type": "message", "role": "user", "content": [{"type": "output_text", "text": "x"}]},
            1,
            "content[0].type",
        ),
        (
            {"type": "message", "role": "user", "content": [{"type": "input_image"}]},
            1,
            "content[0].file_id",
        ),
        (
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "input_text", "text": "x"}],
            },
            1,
            "content[0].type",
        ),
        ({"type": "web_search_call", "id": "ws"}, 1, "action"),
        ({"type": "local_shell_call_output", "output": "x"}, 1, "id"),
        ({"type": "message", "role": "user", "content": 5}, 1, "content"),
        (
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_file", "file_id": "f", "detail": "max"}],
            },
            1,
            "content[0].detail",
        ),
        (
            {"type": "function_call_output", "call_id": "c", "output": [{"type": "text"}]},
            1,
            "output[0].type",
        ),
        ({"type": "function_call_output", "call_id": "c", "output": 5}, 1, "output"),
        (
            {"type": "computer_call_output", "call_id": "c", "output": {"type": "png"}},
            1,
            "output.type",
        ),
        ({"type": "web_search_call", "id": "ws", "status": "done", "action": {}}, 1, "status"),
        (
            {"type": "mcp_approval_response", "approval_request_id": "r", "approve": "yes"},
            1,
            "approve",
        ),
        ({"type": "message", "role": "user", "content": "x", "status": "finished"}, 1, "status"),
        ({"type": "message", "role": ["user"], "content": "x"}, 1, "role"),
        (
            {"type": "message", "role": "user", "content": [{"type": ["input_text"]}]},
            1,
            "content[0].type",
        ),
        (
            {"type": "reasoning", "id": "rs", "summary": [], "content": [{"type": "x"}]},
            1,
            "content[0]",
        ),
    ],
)
def test_a_bad_item_names_its_index_and_field_and_nothing_is_stored(
    item: dict[str, Any], index: int, field: str, tmp_path: Path
) -> None:
    batch = [{"role": "user", "content": "fine"}, item]
    with pytest.raises(InvalidMessageError) as caught:
        from_responses_items(batch)
    assert caught.value.index == index
    assert caught.value.field == field
    history = MessageHistory([{"role": "user", "content": "keep"}])
    with pytest.raises(InvalidMessageError):
        history.extend(batch)
    assert [m["content"] for m in history] == ["keep"]


@pytest.mark.parametrize("items", [5, "text", {"type": "message"}, None])
def test_from_responses_items_wants_an_iterable(items: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        from_responses_items(items)


# --------------------------------------------------------------------------- repair rules


def _payload(items: Items) -> Items:
    out = MessageHistory(from_responses_items(items)).to_api(provider="openai-responses")
    assert responses_violations(out, internal_fields=INTERNAL_FIELDS) == [], out
    return out


def test_an_unanswered_call_of_each_kind_gets_an_answer_its_kind_accepts() -> None:
    for kind in ("function_call", "custom_tool_call", "computer_call", "local_shell_call"):
        out = _payload([{"role": "user", "content": "go"}, responses_call(kind, "call_1")])
        assert [i["type"] for i in out][-1] == "function_call_output"
        # A computer call cannot take a text answer: it is replayed as a function call.
        assert out[1]["type"] == "function_call"
        assert out[1]["call_id"] == out[2]["call_id"] == "call_1"


def test_a_matching_non_function_pair_is_replayed_as_is() -> None:
    for kind in ("custom_tool_call", "computer_call", "local_shell_call"):
        items = [
            {"role": "user", "content": "go"},
            responses_call(kind, "call_1"),
            responses_output(kind, "call_1", "ok"),
        ]
        assert _payload(items) == _sent(items)


def test_orphan_outputs_are_dropped() -> None:
    out = _payload(
        [{"role": "user", "content": "go"}, responses_output("function_call", "nope", "x")]
    )
    assert [i["type"] for i in out] == ["message"]


def test_a_reasoning_item_without_its_item_is_dropped() -> None:
    items = [
        {"role": "user", "content": "go"},
        responses_reasoning("rs_1", "t"),
        {"role": "user", "content": "again"},
    ]
    assert [i["type"] for i in _payload(items)] == ["message", "message"]
    trailing = [{"role": "user", "content": "go"}, responses_reasoning("rs_1", "t")]
    assert [i["type"] for i in _payload(trailing)] == ["message"]


def test_reasoning_appended_alone_stays_before_the_call_appended_after_it() -> None:
    history = MessageHistory([{"role": "user", "content": "go"}])
    for item in (
        responses_reasoning("rs_1", "t"),
        responses_call("function_call", "c1"),
        responses_output("function_call", "c1", "ok"),
    ):
        history.append(item)
    out = history.to_api(provider="openai-responses")
    assert [i["type"] for i in out] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert responses_violations(out) == []
    chat = history.to_api()
    assert [m["role"] for m in chat] == ["user", "assistant", "tool"]
    assert openai_violations(chat, internal_fields=INTERNAL_FIELDS) == []


def test_a_renamed_call_is_rebuilt_and_keeps_its_reasoning() -> None:
    long_id = "call_" + "x" * 60  # over the 40-character limit repair enforces
    items = [
        {"role": "user", "content": "go"},
        responses_reasoning("rs_1", "t"),
        {"type": "function_call", "id": "fc_1", "call_id": long_id, "name": "f", "arguments": "{}"},
        responses_output("function_call", long_id, "ok"),
    ]
    out = _payload(items)
    assert [i["type"] for i in out] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert out[2]["call_id"] == out[3]["call_id"] != long_id
    assert "id" not in out[2]


def test_a_changed_message_is_rebuilt_from_its_chat_fields() -> None:
    history = MessageHistory(from_responses_items(TURN))
    history.mutate_last_matching(
        lambda m: m["role"] == "assistant", lambda m: m.update(content="Edited.")
    )
    out = history.to_api(provider="openai-responses")
    assert out[-2:] == [TURN[-2], {"type": "message", "role": "assistant", "content": "Edited."}]
    assert responses_violations(out) == []


def test_duplicate_item_ids_are_made_unique() -> None:
    reply = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "a", "annotations": []}],
    }
    out = _payload(
        [{"role": "user", "content": "1"}, reply, {"role": "user", "content": "2"}, reply]
    )
    assert out[3] == {"type": "message", "role": "assistant", "content": "a"}


def test_a_repeated_empty_reply_is_dropped_not_sent_as_an_empty_message() -> None:
    # Found by the soup property: the repeat became {"content": ""}, which read back as
    # an empty assistant message and was dropped: the payload was not a fixed point.
    reply = {
        "type": "message",
        "id": "msg_2",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": ""}],
    }
    items = [{"role": "user", "content": "1"}, reply, {"role": "user", "content": "2"}, reply]
    out = _payload(items)
    assert out == _sent(items[:3])
    assert MessageHistory(from_responses_items(out)).to_api(provider="openai-responses") == out


def test_a_call_repeating_an_item_id_is_replayed_as_a_function_call() -> None:
    # A computer_call must carry an id; dropping the repeat would orphan its output.
    first, second = responses_call("computer_call", "c1"), responses_call("computer_call", "c2")
    second["id"] = first["id"]
    items = [
        {"role": "user", "content": "go"},
        first,
        second,
        responses_output("computer_call", "c1", ""),
        responses_output("computer_call", "c2", ""),
    ]
    out = _payload(items)
    assert [i["type"] for i in out] == [
        "message",
        "computer_call",
        "function_call",
        "computer_call_output",
        "function_call_output",
    ]
    assert out[2]["call_id"] == out[4]["call_id"] == "c2"


def test_the_agents_sdk_placeholders_are_not_sent() -> None:
    # What agents.models.openai_responses does before a request: the placeholder id
    # "__fake_id__" goes, and reasoning another provider produced (provider_data) too.
    fake = "__fake_id__"
    reply = {
        "type": "message",
        "id": fake,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hi", "annotations": []}],
    }
    foreign = {**responses_reasoning("rs_9", "t"), "provider_data": {"model": "claude"}}
    call = {**responses_call("function_call", "c1"), "id": fake}
    items = [
        {"role": "user", "content": "go"},
        foreign,
        call,
        responses_output("function_call", "c1", "ok"),
        {**responses_reasoning(fake, "t")},
        reply,
    ]
    out = _payload(items)
    assert fake not in json.dumps(out)
    assert [i["type"] for i in out] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert out[-1] == {"type": "message", "role": "assistant", "content": "hi"}


def test_null_part_fields_are_not_sent() -> None:
    reply = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "a", "annotations": [], "logprobs": None}],
    }
    out = _payload([{"role": "user", "content": "1"}, reply])
    assert out[1]["content"] == [{"type": "output_text", "text": "a", "annotations": []}]


def test_an_image_without_detail_gets_auto() -> None:
    part = {"type": "input_image", "image_url": "https://e.com/i.png"}
    out = _payload([{"type": "message", "role": "user", "content": [part]}])
    assert out[0]["content"] == [{**part, "detail": "auto"}]


def test_approval_response_needs_its_request_and_trigger_comes_last() -> None:
    response = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    request = {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "name": "t",
        "arguments": "{}",
        "server_label": "s",
    }
    assert [i["type"] for i in _payload([{"role": "user", "content": "1"}, response])] == [
        "message"
    ]
    out = _payload([{"role": "user", "content": "1"}, request, response])
    assert [i["type"] for i in out] == ["message", "mcp_approval_request", "mcp_approval_response"]
    trigger = {"type": "compaction_trigger"}
    out = _payload([{"role": "user", "content": "1"}, trigger, {"role": "user", "content": "2"}])
    assert [i["type"] for i in out] == ["message", "message"]


# --------------------------------------------------------------------------- properties


@settings(max_examples=_many(1_000))
@given(responses_conversation())
def test_a_well_formed_conversation_is_replayed_exactly(items: Items) -> None:
    messages = from_responses_items(items)
    assert [i for m in messages for i in m["responses_items"]] == _clean_text(items)
    payload = MessageHistory(messages).to_api(provider="openai-responses")
    note(f"payload: {payload!r}")
    assert payload == _sent(_clean_text(items))
    assert responses_violations(payload, internal_fields=INTERNAL_FIELDS) == []


@settings(max_examples=_many(2_000))
@given(st.lists(responses_item(), max_size=25), st.booleans())
def test_any_item_soup_gives_valid_payloads(items: Items, one_at_a_time: bool) -> None:
    history = MessageHistory([{"role": "user", "content": "keep me"}])
    if one_at_a_time:
        for item in items:
            # A Chat-shaped developer message is refused; as an item it needs its type.
            history.append({"type": "message", **item} if item.get("role") else item)
    else:
        history.extend(from_responses_items(items))
    payload = history.to_api(provider="openai-responses")
    note(f"payload: {payload!r}")
    assert responses_violations(payload, internal_fields=INTERNAL_FIELDS) == []
    assert history.to_api(provider="openai-responses") == payload
    assert (
        MessageHistory(from_responses_items(payload)).to_api(provider="openai-responses") == payload
    )
    assert openai_violations(history.to_api(), internal_fields=INTERNAL_FIELDS) == []
    system, turns = history.to_api(provider="anthropic")
    assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []


_plain_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20).filter(
    str.strip
)


@st.composite
def chat_conversation(draw: st.DrawFn) -> Items:
    """A well-formed Chat history in what both APIs express: text, images, function calls."""
    out: Items = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(_plain_text)})
    n = 0
    for _ in range(draw(st.integers(1, 5))):
        content = draw(st.one_of(_plain_text, st.lists(text_part(), min_size=1, max_size=2)))
        if draw(st.booleans()) and isinstance(content, list):
            content.append(
                {"type": "image_url", "image_url": {"url": "https://e.com/i.png", "detail": "low"}}
            )
        out.append({"role": "user", "content": content})
        for _ in range(draw(st.integers(0, 2))):
            ids = [f"call_{n + k}" for k in range(draw(st.integers(1, 3)))]
            n += len(ids)
            calls = [
                {
                    "id": i,
                    "type": "function",
                    "function": {
                        "name": "f",
                        "arguments": json.dumps({"k": draw(st.integers(-(2**63), 2**63 - 1))}),
                    },
                }
                for i in ids
            ]
            out.append(
                {
                    "role": "assistant",
                    "content": draw(st.one_of(st.none(), _plain_text)),
                    "tool_calls": calls,
                }
            )
            out.extend(
                {"role": "tool", "tool_call_id": i, "content": draw(_plain_text)} for i in ids
            )
        out.append(
            {
                "role": "assistant",
                "content": draw(
                    st.one_of(
                        _plain_text,
                        st.lists(
                            st.builds(lambda t: {"type": "text", "text": t}, _plain_text),
                            min_size=2,
                            max_size=3,
                        ),
                    )
                ),
            }
        )
    return out


@settings(max_examples=_many(2_000))
@given(chat_conversation())
def test_chat_to_responses_to_chat_round_trip(messages: Items) -> None:
    chat = MessageHistory(messages).to_api()
    items = MessageHistory(messages).to_api(provider="openai-responses")
    assert responses_violations(items) == []
    back = MessageHistory(from_responses_items(items)).to_api()
    assert back == chat
    # And Responses -> Chat -> Responses: the items come back too.
    assert MessageHistory(back).to_api(provider="openai-responses") == items


@settings(max_examples=_many(2_000))
@given(
    st.lists(
        st.one_of(
            responses_item(),
            st.builds(dict, type=odd_text),
            st.builds(
                dict,
                type=st.just("function_call"),
                call_id=st.one_of(st.none(), st.integers(), odd_text),
                name=odd_text,
                arguments=st.one_of(odd_text, st.integers()),
            ),
            st.builds(
                dict,
                type=st.just("message"),
                role=odd_text,
                content=st.one_of(
                    odd_text,
                    st.lists(
                        st.dictionaries(st.sampled_from(["type", "text", "image_url"]), odd_text),
                        max_size=2,
                    ),
                ),
            ),
        ),
        max_size=10,
    )
)
def test_garbage_items_only_raise_invalid_message_errors(items: list[Any]) -> None:
    history = MessageHistory([{"role": "user", "content": "keep me"}])
    for item in items:
        before = list(history)
        try:
            history.append(item)
        except InvalidMessageError:
            assert list(history) == before
    assert history[0]["content"] == "keep me"
    payload = history.to_api(provider="openai-responses")
    assert responses_violations(payload, internal_fields=INTERNAL_FIELDS) == []


# --------------------------------------------------------------------------- the referee


def _flags(items: Items, fragment: str) -> bool:
    return any(fragment in v for v in responses_violations(items))


def test_the_referee_flags_each_rule() -> None:
    user = {"type": "message", "role": "user", "content": "x"}
    call = responses_call("function_call", "c1")
    answer = responses_output("function_call", "c1", "ok")
    assert responses_violations([user, call, answer]) == []
    assert _flags([user, call], "no function_call_output found")
    assert _flags([user, answer], "no earlier call")
    assert _flags([user, call, answer, answer], "answered twice")
    assert _flags([user, call, responses_output("custom_tool_call", "c1", "x")], "must answer")
    assert _flags([user, responses_reasoning("rs", "t")], "without its required following item")
    assert _flags([user, responses_reasoning("rs", "t"), user], "without its required following")
    assert _flags([user, {**call, "secret": 1}, answer], "unknown keys")
    assert _flags([user, {**user, "task_id": 1}], "unknown keys")
    assert _flags([{**user, "id": "a"}, {**user, "id": "a"}], "duplicate item id")
    assert _flags(
        [{"type": "message", "role": "user", "content": [{"type": "input_image"}]}],
        "does not validate",
    )
    assert _flags([{"type": "function_call", "call_id": "c"}], "does not validate")
    assert _flags([{**user, "content": "\ud800"}], "not valid UTF-8")
    assert any(
        "internal field" in v
        for v in responses_violations(
            [{**user, "responses_items": []}], internal_fields=frozenset({"responses_items"})
        )
    )


# --------------------------------------------------------------------------- the context


@settings(max_examples=60 if profile_name() == "ci" else scaled(300))
@given(responses_conversation(max_turns=8), st.integers(0, 2**16))
def test_the_windowed_context_stays_valid_for_the_responses_api(items: Items, seed: int) -> None:
    """Trims, truncation and summaries on a Responses history: every payload valid, fits."""
    big = " ".join(f"w{seed + k}" for k in range(2_000))  # outputs too big for the window
    for item in items:
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            item["output"] = big
    history = MessageHistory(token_counter=HeuristicCounter())
    history.replace_system_prompt("You are terse.")
    window, yarn = ShortTermMemory(history), YaRN(main_thread=history)
    manager = ContextManager({"context_window": 6_000})
    for msg in from_responses_items(items):
        history.append(msg)
        payload = manager.build(window, yarn, provider="openai-responses")
        note(f"payload: {payload!r}")
        assert responses_violations(payload, internal_fields=INTERNAL_FIELDS) == []
        assert manager.stats.tokens <= 6_000
        chat = manager.build(window, yarn)
        assert openai_violations(chat, internal_fields=INTERNAL_FIELDS) == []


# --------------------------------------------------------------------------- packaging

ROOT = Path(__file__).resolve().parent.parent


def _run(code: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def test_the_codec_does_not_import_the_sdk() -> None:
    code = (
        "import sys, agentmem\n"
        "m = agentmem.from_responses_items([{'type': 'function_call', 'call_id': 'c',"
        " 'name': 'f', 'arguments': '{}'}])\n"
        "agentmem.to_responses_items(m)\n"
        "assert 'openai' not in sys.modules, 'openai was imported'\n"
    )
    done = _run(["-c", code])
    assert done.returncode == 0, done.stderr


def _pg_uri(dsn: str) -> str:
    """The ``postgresql://`` URI of a libpq keyword DSN (what ``Memory(backend=)`` takes)."""
    import psycopg

    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = {k: str(p[k]) for k in ("host", "port") if p.get(k)}
    return f"postgresql://{p.get('user') or ''}@/{p['dbname']}?{urllib.parse.urlencode(query)}"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_items_survive_a_reopen_exactly(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    uri = _pg_uri(request.getfixturevalue("pg_dsn")) if backend == "postgresql" else None
    items = copy.deepcopy(TURN)
    items[3]["host_note"] = {"big": 2**62, "f": 1.5, "nested": [{"k": None}], "z": 1, "a": 2}
    with Memory(root=tmp_path, backend=uri) as mem, mem.session("s1") as s:
        for msg in from_responses_items(items):
            s.append(msg)
        before = s.context(provider="openai-responses")
    with Memory(root=tmp_path, backend=uri) as mem, mem.session("s1", create=False) as s:
        stored = [i for m in s.history for i in m.get("responses_items", ())]
        assert stored == items  # ints stay ints, unknown fields stay
        assert type(stored[3]["host_note"]["big"]) is int
        assert list(stored[3]["host_note"]) == ["big", "f", "nested", "z", "a"]  # key order too
        assert s.context(provider="openai-responses") == before == _sent(items)
        assert [h.role for h in mem.recall("Sunny at noon")][:1] == ["assistant"]


def test_a_payload_is_the_callers_to_modify() -> None:
    history = MessageHistory(from_responses_items(TURN))
    window, yarn = ShortTermMemory(history), YaRN(main_thread=history)
    manager = ContextManager({"context_window": 100_000})
    for build in (
        lambda: history.to_api(provider="openai-responses"),
        lambda: manager.build(window, yarn, provider="openai-responses"),
    ):
        payload = build()
        expected = copy.deepcopy(payload)
        payload[2]["summary"].append({"type": "summary_text", "text": "host edit"})
        payload[3]["status"] = "incomplete"
        payload[-1]["content"][0]["annotations"].append({"x": 1})
        assert build() == expected
    assert [i for m in history for i in m["responses_items"]] == TURN
