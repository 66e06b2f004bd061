"""Tests of the provider-rules oracle itself (``tests/provider_rules.py``).

For every rule: at least one known-valid payload that passes and one minimal invalid
payload that is flagged, with the violation naming the right location.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.provider_rules import anthropic_violations, openai_violations

Msg = dict[str, Any]


def _flags(violations: list[str], where: str, fragment: str) -> bool:
    return any(v.startswith(where) and fragment in v for v in violations)


def assert_flagged(violations: list[str], where: str, fragment: str) -> None:
    assert _flags(violations, where, fragment), (
        f"expected a violation at {where!r} containing {fragment!r}, got {violations!r}"
    )


# ---------------------------------------------------------------------------------------
# OpenAI fixtures
# ---------------------------------------------------------------------------------------


def oa_call(call_id: str = "call_1", name: str = "lookup", args: str = '{"q": 1}') -> Msg:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def oa_tool_turn(*ids: str) -> list[Msg]:
    calls = [oa_call(i) for i in ids]
    return [{"role": "assistant", "content": None, "tool_calls": calls}] + [
        {"role": "tool", "tool_call_id": i, "content": f"result {i}"} for i in ids
    ]


OA_VALID: list[Msg] = [
    {"role": "system", "content": "You are terse.", "name": "sys"},
    {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
    {
        "role": "user",
        "name": "alice",
        "content": [
            {"type": "text", "text": "Look at these"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            {"type": "file", "file": {"file_id": "file-1", "filename": "a.pdf"}},
        ],
    },
    *oa_tool_turn("call_a", "call_b"),
    {"role": "assistant", "content": [{"type": "text", "text": "done"}], "name": "bot"},
    {"role": "user", "content": "thanks"},
    {"role": "assistant", "content": None, "refusal": "I can't help with that."},
    {"role": "user", "content": "ok"},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
    {"role": "user", "content": "again"},
    {"role": "assistant", "content": None, "audio": {"id": "audio_1"}},
    {"role": "user", "content": "bye"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [oa_call("c" * 40)],
    },
    {"role": "tool", "tool_call_id": "c" * 40, "content": [{"type": "text", "text": "42"}]},
]


# ---------------------------------------------------------------------------------------
# OpenAI: baseline and list-level rules
# ---------------------------------------------------------------------------------------


def test_openai_valid_reference_payload_passes() -> None:
    assert openai_violations(OA_VALID) == []


def test_openai_minimal_payload_passes() -> None:
    assert openai_violations([{"role": "user", "content": "hi"}]) == []


def test_openai_empty_messages_default_and_required() -> None:
    assert openai_violations([]) == []
    assert_flagged(openai_violations([], require_nonempty=True), "messages", "at least one")


def test_openai_messages_not_a_list() -> None:
    assert_flagged(openai_violations({"role": "user"}), "messages", "must be an array")  # type: ignore[arg-type]


def test_openai_message_must_be_object() -> None:
    assert_flagged(openai_violations(["hi"]), "messages[0]", "must be an object")  # type: ignore[list-item]


@pytest.mark.parametrize("role", ["function", "bot", None, 3])
def test_openai_unknown_role(role: object) -> None:
    assert_flagged(openai_violations([{"role": role, "content": "x"}]), "messages[0]", "role")


# ---------------------------------------------------------------------------------------
# OpenAI: keys per role and internal fields
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "bad_key"),
    [
        ({"role": "user", "content": "x", "id": "m1"}, "id"),
        ({"role": "system", "content": "x", "tool_calls": []}, "tool_calls"),
        ({"role": "user", "content": "x", "reasoning_content": "r"}, "reasoning_content"),
        ({"role": "tool", "content": "x", "tool_call_id": "c", "name": "f"}, "name"),
        ({"role": "assistant", "content": "x", "function_call": {}}, "function_call"),
    ],
)
def test_openai_unexpected_key_for_role(message: Msg, bad_key: str) -> None:
    messages = [message]
    if message["role"] == "tool":
        messages = [*oa_tool_turn("c")[:1], message]
    violations = openai_violations(messages)
    where = f"messages[{len(messages) - 1}]"
    assert_flagged(violations, where, repr(bad_key))


def test_openai_internal_fields_flagged_at_any_depth() -> None:
    top = [{"role": "user", "content": "x", "_seq": 1}]
    nested = [{"role": "user", "content": [{"type": "text", "text": "x", "_seq": 1}]}]
    fields = frozenset({"_seq"})
    assert_flagged(openai_violations(top, internal_fields=fields), "messages[0]._seq", "internal")
    assert_flagged(
        openai_violations(nested, internal_fields=fields), "messages[0].content[0]._seq", "internal"
    )
    assert openai_violations([{"role": "user", "content": "x"}], internal_fields=fields) == []


# ---------------------------------------------------------------------------------------
# OpenAI: content shapes
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["system", "developer", "user", "tool"])
def test_openai_content_required(role: str) -> None:
    message: Msg = {"role": role}
    messages = (
        [*oa_tool_turn("c")[:1], {**message, "tool_call_id": "c"}] if role == "tool" else [message]
    )
    assert_flagged(openai_violations(messages), f"messages[{len(messages) - 1}]", "content")


@pytest.mark.parametrize("role", ["system", "developer", "user", "assistant"])
def test_openai_empty_content_array(role: str) -> None:
    assert_flagged(openai_violations([{"role": role, "content": []}]), "messages[0]", "empty")


@pytest.mark.parametrize("content", [None, 5, {"type": "text", "text": "x"}])
def test_openai_user_content_wrong_type(content: object) -> None:
    assert_flagged(openai_violations([{"role": "user", "content": content}]), "messages[0]", "")


@pytest.mark.parametrize(
    ("role", "part"),
    [
        ("system", {"type": "image_url", "image_url": {"url": "https://x"}}),
        ("developer", {"type": "refusal", "refusal": "no"}),
        ("assistant", {"type": "image_url", "image_url": {"url": "https://x"}}),
        ("user", {"type": "refusal", "refusal": "no"}),
        ("user", {"type": "video", "video": {}}),
    ],
)
def test_openai_part_type_not_allowed_for_role(role: str, part: Msg) -> None:
    violations = openai_violations([{"role": role, "content": [part]}])
    assert_flagged(violations, "messages[0].content[0]", "not allowed")


def test_openai_tool_content_only_text_parts() -> None:
    part = {"type": "image_url", "image_url": {"url": "https://x"}}
    messages = [*oa_tool_turn("c")[:1], {"role": "tool", "tool_call_id": "c", "content": [part]}]
    assert_flagged(openai_violations(messages), "messages[1].content[0]", "not allowed")


@pytest.mark.parametrize(
    ("part", "fragment"),
    [
        ({"type": "text", "text": 3}, "string"),
        ({"type": "text"}, "string"),
        ({"type": "text", "text": "x", "cache_control": {}}, "unexpected"),
        ({"type": "image_url", "image_url": "https://x"}, "object"),
        ({"type": "image_url", "image_url": {"url": ""}}, "url"),
        ({"type": "image_url", "image_url": {"url": "https://x", "detail": "max"}}, "detail"),
        ({"type": "image_url", "image_url": {"url": "https://x", "size": 1}}, "unexpected"),
        ({"type": "input_audio", "input_audio": {"data": "AA", "format": "ogg"}}, "format"),
        ({"type": "input_audio", "input_audio": {"format": "mp3"}}, "data"),
        ({"type": "file", "file": {"filename": "a.pdf"}}, "file_data or file_id"),
        ({"type": "file", "file": {"file_id": 7}}, "file_id"),
        ("just text", "object"),
    ],
)
def test_openai_user_part_shapes(part: object, fragment: str) -> None:
    violations = openai_violations([{"role": "user", "content": [part]}])
    assert_flagged(violations, "messages[0].content[0]", fragment)


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "input_audio", "input_audio": {"data": "AA", "format": "mp3"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,AA"}},
    ],
)
def test_openai_user_part_shapes_valid(part: Msg) -> None:
    assert openai_violations([{"role": "user", "content": [part]}]) == []


def test_openai_assistant_null_content_needs_tool_calls_refusal_or_audio() -> None:
    base = [{"role": "user", "content": "hi"}]
    assert_flagged(
        openai_violations([*base, {"role": "assistant", "content": None}]), "messages[1]", "null"
    )
    assert_flagged(openai_violations([*base, {"role": "assistant"}]), "messages[1]", "null")
    assert openai_violations([*base, {"role": "assistant", "content": None, "refusal": "no"}]) == []
    assert openai_violations([*base, {"role": "assistant", "audio": {"id": "a"}}]) == []
    assert openai_violations([*base, *oa_tool_turn("c1")]) == []


def test_openai_refusal_and_audio_shapes() -> None:
    bad_refusal = [{"role": "assistant", "content": "x", "refusal": 3}]
    bad_audio = [{"role": "assistant", "content": "x", "audio": {"id": "a", "data": "AA"}}]
    assert_flagged(openai_violations(bad_refusal), "messages[0]", "refusal")
    assert_flagged(openai_violations(bad_audio), "messages[0]", "audio")
    assert openai_violations([{"role": "assistant", "content": "x", "refusal": None}]) == []


# ---------------------------------------------------------------------------------------
# OpenAI: tool calls
# ---------------------------------------------------------------------------------------


def _with_calls(tool_calls: object) -> list[Msg]:
    return [{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": tool_calls}]


@pytest.mark.parametrize("tool_calls", [[], None, "call_1", {"id": "c"}])
def test_openai_tool_calls_must_be_nonempty_array(tool_calls: object) -> None:
    assert_flagged(openai_violations(_with_calls(tool_calls)), "messages[1]", "tool_calls")


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (oa_call("c" * 41), "maximum is 40"),
        (oa_call(""), "id must be"),
        ({**oa_call(), "id": 5}, "id must be"),
        ({**oa_call(), "type": "custom"}, "type must be 'function'"),
        ({k: v for k, v in oa_call().items() if k != "type"}, "type must be 'function'"),
        (oa_call(name=""), "name must be a non-empty"),
        (oa_call(name="multi_tool_use.parallel"), "does not match"),
        (oa_call(name="n" * 65), "does not match"),
        (oa_call(args="{not json"), "not valid JSON"),
        ({**oa_call(), "function": {"name": "f", "arguments": {"q": 1}}}, "arguments must be"),
        ({**oa_call(), "function": "f"}, "function must be an object"),
        ({**oa_call(), "index": 0}, "unexpected"),
        ({**oa_call(), "function": {"name": "f", "arguments": "{}", "x": 1}}, "unexpected"),
        ("call_1", "must be an object"),
    ],
)
def test_openai_tool_call_shape(call: object, fragment: str) -> None:
    messages = _with_calls([call])
    if isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"]:
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "r"})
    assert_flagged(openai_violations(messages), "messages[1].tool_calls[0]", fragment)


def test_openai_tool_call_id_of_exactly_40_chars_is_valid() -> None:
    messages = [{"role": "user", "content": "go"}, *oa_tool_turn("x" * 40)]
    assert openai_violations(messages) == []


def test_openai_tool_call_ids_unique_across_payload() -> None:
    within = [{"role": "user", "content": "go"}, *oa_tool_turn("c1", "c1")]
    across = [
        {"role": "user", "content": "go"},
        *oa_tool_turn("c1"),
        {"role": "user", "content": "again"},
        *oa_tool_turn("c1"),
    ]
    assert_flagged(openai_violations(within), "messages[1].tool_calls[1]", "duplicate")
    assert_flagged(openai_violations(across), "messages[4].tool_calls[0]", "duplicate")


# ---------------------------------------------------------------------------------------
# OpenAI: assistant/tool pairing
# ---------------------------------------------------------------------------------------


def test_openai_pairing_valid_parallel_calls_any_order() -> None:
    turn = oa_tool_turn("a", "b", "c")
    messages = [{"role": "user", "content": "go"}, turn[0], turn[3], turn[1], turn[2]]
    assert openai_violations(messages) == []


def test_openai_tool_message_answers_unknown_id() -> None:
    messages = [
        {"role": "user", "content": "go"},
        *oa_tool_turn("a"),
        {"role": "tool", "tool_call_id": "x", "content": "?"},
    ]
    violations = openai_violations(messages)
    assert "messages[3]: tool message answers unknown id 'x'" in violations


def test_openai_tool_message_outside_run() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "tool", "tool_call_id": "a", "content": "r"},
    ]
    assert_flagged(openai_violations(messages), "messages[1]", "not inside a tool-call run")
    after_text = [
        {"role": "user", "content": "go"},
        *oa_tool_turn("a"),
        {"role": "assistant", "content": "done"},
        {"role": "tool", "tool_call_id": "a", "content": "late"},
    ]
    assert_flagged(openai_violations(after_text), "messages[4]", "not inside a tool-call run")


def test_openai_tool_message_answers_id_twice() -> None:
    messages = [
        {"role": "user", "content": "go"},
        *oa_tool_turn("a"),
        {"role": "tool", "tool_call_id": "a", "content": "again"},
    ]
    assert_flagged(openai_violations(messages), "messages[3]", "second time")


def test_openai_unanswered_tool_calls_interrupted_by_other_role() -> None:
    turn = oa_tool_turn("a", "b")
    messages = [
        {"role": "user", "content": "go"},
        turn[0],
        turn[1],
        {"role": "user", "content": "?"},
    ]
    violations = openai_violations(messages)
    assert_flagged(violations, "messages[1]", "'b'")
    assert not _flags(violations, "messages[1]", "'a'")


def test_openai_unanswered_tool_calls_at_end() -> None:
    messages = [{"role": "user", "content": "go"}, oa_tool_turn("a")[0]]
    assert_flagged(openai_violations(messages), "messages[1]", "without tool responses")


def test_openai_tool_answer_separated_by_user_message() -> None:
    turn = oa_tool_turn("a")
    messages = [
        {"role": "user", "content": "go"},
        turn[0],
        {"role": "user", "content": "x"},
        turn[1],
    ]
    violations = openai_violations(messages)
    assert_flagged(violations, "messages[1]", "without tool responses")
    assert_flagged(violations, "messages[3]", "not inside a tool-call run")


def test_openai_tool_call_id_must_be_string() -> None:
    messages = [*oa_tool_turn("a")[:1], {"role": "tool", "tool_call_id": None, "content": "r"}]
    assert_flagged(openai_violations(messages), "messages[1]", "tool_call_id")


# ---------------------------------------------------------------------------------------
# OpenAI: name, reasoning_content, UTF-8, JSON
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Alice Smith", "a<b", "a|b", "a/b", "a\\b", "a>b", "", 7])
def test_openai_name_pattern_invalid(name: object) -> None:
    assert_flagged(
        openai_violations([{"role": "user", "content": "x", "name": name}]), "messages[0]", "name"
    )


@pytest.mark.parametrize("name", ["alice", "agent-1", "名前", "a.b@c"])
def test_openai_name_pattern_valid(name: str) -> None:
    assert openai_violations([{"role": "user", "content": "x", "name": name}]) == []


def test_openai_reasoning_content_consistency() -> None:
    consistent = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "think"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "b", "reasoning_content": ""},
    ]
    assert openai_violations(consistent) == []
    partial = copy.deepcopy(consistent)
    del partial[3]["reasoning_content"]
    assert_flagged(openai_violations(partial), "messages[3]", "reasoning_content")
    not_str = copy.deepcopy(consistent)
    not_str[1]["reasoning_content"] = None
    assert_flagged(openai_violations(not_str), "messages[1]", "must be a string")


def test_openai_lone_surrogate_flagged() -> None:
    in_value = [{"role": "user", "content": "bad \ud800 text"}]
    in_key = [{"role": "user", "content": [{"type": "text", "text": "x", "\udfff": 1}]}]
    assert_flagged(openai_violations(in_value), "messages[0].content", "UTF-8")
    assert_flagged(openai_violations(in_key), "messages[0].content[0]", "UTF-8")
    assert openai_violations([{"role": "user", "content": "emoji \U0001f600 ok"}]) == []


@pytest.mark.parametrize(
    ("args_value", "fragment"),
    [
        (float("nan"), "allow_nan"),
        (float("inf"), "allow_nan"),
        ({1, 2}, "not JSON-serialisable"),
        (b"bytes", "not JSON-serialisable"),
        (object(), "not JSON-serialisable"),
    ],
)
def test_openai_json_serialisable(args_value: object, fragment: str) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": args_value}]}]
    assert_flagged(openai_violations(messages), "messages[0].content[0].text", fragment)


def test_openai_json_non_string_key_and_cycle() -> None:
    keyed = [{"role": "user", "content": "x", 1: "y"}]
    assert_flagged(openai_violations(keyed), "messages[0]", "not a string")
    cyclic: Msg = {"role": "user", "content": []}
    cyclic["content"].append({"type": "text", "text": "x", "self": cyclic})
    assert_flagged(openai_violations([cyclic]), "messages[0]", "circular")


def test_openai_tuples_are_json_arrays() -> None:
    messages = ({"role": "user", "content": ({"type": "text", "text": "x"},)},)
    assert openai_violations(messages) == []  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Anthropic fixtures
# ---------------------------------------------------------------------------------------


def an_use(tool_id: str = "toolu_1", name: str = "lookup") -> Msg:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"q": 1}}


def an_result(tool_id: str = "toolu_1", content: object = "42") -> Msg:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def an_thinking() -> Msg:
    return {"type": "thinking", "thinking": "hmm", "signature": "sig"}


PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}

AN_VALID: list[Msg] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Look", "cache_control": {"type": "ephemeral"}},
            {"type": "image", "source": PNG},
            {"type": "image", "source": {"type": "url", "url": "https://x/y.jpg"}},
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
                "title": "Doc",
            },
        ],
    },
    {
        "role": "assistant",
        "content": [
            an_thinking(),
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Let me check."},
            an_use("toolu_a"),
            an_use("toolu_b"),
        ],
    },
    {
        "role": "user",
        "content": [
            an_result("toolu_b", [{"type": "text", "text": "b"}, {"type": "image", "source": PNG}]),
            {**an_result("toolu_a", "oops"), "is_error": True},
            {"type": "text", "text": "Both done?"},
        ],
    },
    {"role": "assistant", "content": "Yes."},
    {"role": "user", "content": "Great"},
    {"role": "assistant", "content": "The answer is"},
]

AN_SYSTEM: list[Msg] = [
    {"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}}
]


def an_check(messages: list[Msg], system: object = None, **kwargs: Any) -> list[str]:
    return anthropic_violations(system, messages, **kwargs)


def test_anthropic_valid_reference_payload_passes() -> None:
    assert an_check(AN_VALID, AN_SYSTEM) == []
    assert an_check(AN_VALID, "Be terse.") == []
    assert an_check(AN_VALID, None) == []


def test_anthropic_minimal_payload_passes() -> None:
    assert an_check([{"role": "user", "content": "hi"}]) == []


def test_anthropic_empty_messages_default_and_required() -> None:
    assert an_check([]) == []
    assert_flagged(an_check([], require_nonempty=True), "messages", "at least one")


def test_anthropic_messages_not_a_list() -> None:
    assert_flagged(an_check("hi"), "messages", "must be an array")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Anthropic: system
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("system", "where"),
    [
        ("", "system"),
        (5, "system"),
        ({"type": "text", "text": "x"}, "system"),
        ([{"type": "text", "text": ""}], "system[0]"),
        ([{"type": "image", "source": PNG}], "system[0]"),
        (["plain"], "system[0]"),
        ([{"type": "text", "text": "x", "role": "system"}], "system[0]"),
    ],
)
def test_anthropic_system_invalid(system: object, where: str) -> None:
    assert_flagged(an_check([{"role": "user", "content": "hi"}], system), where, "")


def test_anthropic_system_internal_field_and_surrogate() -> None:
    system = [{"type": "text", "text": "x\ud800", "_id": 1}]
    violations = an_check(
        [{"role": "user", "content": "hi"}], system, internal_fields=frozenset({"_id"})
    )
    assert_flagged(violations, "system[0]._id", "internal")
    assert_flagged(violations, "system[0].text", "UTF-8")


# ---------------------------------------------------------------------------------------
# Anthropic: message shape, roles, alternation
# ---------------------------------------------------------------------------------------


def test_anthropic_message_must_be_object_with_role_and_content_only() -> None:
    assert_flagged(an_check(["hi"]), "messages[0]", "must be an object")  # type: ignore[list-item]
    extra = [{"role": "user", "content": "hi", "name": "alice"}]
    assert_flagged(an_check(extra), "messages[0]", "'name'")
    missing = [{"role": "user"}]
    assert_flagged(an_check(missing), "messages[0]", "missing 'content'")


@pytest.mark.parametrize("role", ["system", "tool", "model", None])
def test_anthropic_role_must_be_user_or_assistant(role: object) -> None:
    assert_flagged(an_check([{"role": role, "content": "x"}]), "messages[0]", "role")


def test_anthropic_first_message_must_be_user() -> None:
    messages = [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "yo"}]
    assert_flagged(an_check(messages), "messages[0]", "first message")


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_anthropic_roles_must_alternate(role: str) -> None:
    messages = [{"role": "user", "content": "a"}]
    if role == "assistant":
        messages.append({"role": "assistant", "content": "b"})
    messages.append({"role": role, "content": "c"})
    assert_flagged(an_check(messages), f"messages[{len(messages) - 1}]", "alternate")


def test_anthropic_internal_fields_flagged_at_any_depth() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "x", "_seq": 1}]}]
    violations = an_check(messages, internal_fields=frozenset({"_seq"}))
    assert_flagged(violations, "messages[0].content[0]._seq", "internal")
    top = [{"role": "user", "content": "x", "_seq": 1}]
    assert_flagged(
        an_check(top, internal_fields=frozenset({"_seq"})), "messages[0]._seq", "internal"
    )


# ---------------------------------------------------------------------------------------
# Anthropic: content non-empty / text blocks
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", []])
def test_anthropic_empty_content_not_allowed_except_final_assistant(content: object) -> None:
    user_empty = [{"role": "user", "content": content}]
    assert_flagged(an_check(user_empty), "messages[0]", "non-empty content")
    middle_assistant = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": content},
        {"role": "user", "content": "b"},
    ]
    assert_flagged(an_check(middle_assistant), "messages[1]", "non-empty content")
    final_assistant = [{"role": "user", "content": "a"}, {"role": "assistant", "content": content}]
    assert an_check(final_assistant) == []


@pytest.mark.parametrize("content", [None, 5, {"type": "text", "text": "x"}])
def test_anthropic_content_wrong_type(content: object) -> None:
    assert_flagged(an_check([{"role": "user", "content": content}]), "messages[0]", "content")


def test_anthropic_whitespace_only_string_content() -> None:
    assert_flagged(an_check([{"role": "user", "content": " \n"}]), "messages[0]", "non-whitespace")


@pytest.mark.parametrize(
    ("text", "fragment"), [("", "non-empty"), ("  \n\t", "non-whitespace"), (7, "string")]
)
def test_anthropic_text_block_rules(text: object, fragment: str) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": text}]}]
    assert_flagged(an_check(messages), "messages[0].content[0]", fragment)


# ---------------------------------------------------------------------------------------
# Anthropic: block types and keys
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ({"type": "video", "source": {}}, "unknown content block type"),
        ({"text": "no type"}, "unknown content block type"),
        ({"type": "text", "text": "x", "id": "b1"}, "unexpected key"),
        ({"type": "image", "source": PNG, "alt": "x"}, "unexpected key"),
        ({"type": "image"}, "missing key"),
        ({"type": "image", "source": {**PNG, "media_type": "image/bmp"}}, "media_type"),
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png"}}, "data"),
        ({"type": "image", "source": {"type": "url", "url": ""}}, "url"),
        ({"type": "image", "source": {"type": "path", "path": "/x"}}, "source type"),
        ({"type": "image", "source": {**PNG, "extra": 1}}, "unexpected key"),
        ({"type": "image", "source": "https://x"}, "must be an object"),
        (
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "text/plain", "data": "x"},
            },
            "application/pdf",
        ),
        ({"type": "document", "source": {"type": "zip"}}, "not supported"),
        ({"type": "document", "source": {"type": "content", "content": []}}, "content"),
        ("text", "must be an object"),
    ],
)
def test_anthropic_user_block_shapes(block: object, fragment: str) -> None:
    messages = [{"role": "user", "content": [block]}]
    assert_flagged(an_check(messages), "messages[0].content[0]", fragment)


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
        },
        {
            "type": "document",
            "source": {"type": "url", "url": "https://x/a.pdf"},
            "citations": {"enabled": True},
        },
        {
            "type": "document",
            "source": {"type": "content", "content": [{"type": "text", "text": "chunk"}]},
        },
        {"type": "text", "text": "cited", "citations": []},
    ],
)
def test_anthropic_user_block_shapes_valid(block: Msg) -> None:
    assert an_check([{"role": "user", "content": [block]}]) == []


@pytest.mark.parametrize(
    ("block", "role"),
    [
        (an_use(), "user"),
        (an_thinking(), "user"),
        ({"type": "redacted_thinking", "data": "x"}, "user"),
        (an_result(), "assistant"),
    ],
)
def test_anthropic_block_role_restrictions(block: Msg, role: str) -> None:
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    messages.append({"role": role, "content": [block]})
    if role == "assistant":
        messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [block]}]
    violations = an_check(messages)
    assert_flagged(violations, f"messages[{len(messages) - 1}].content[0]", "only allowed in")


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ({**an_use(), "id": "toolu.1"}, "does not match"),
        ({**an_use(), "id": ""}, "does not match"),
        ({**an_use(), "id": 3}, "does not match"),
        ({**an_use(), "name": ""}, "name"),
        ({**an_use(), "input": "{}"}, "input must be an object"),
        ({k: v for k, v in an_use().items() if k != "input"}, "missing key"),
        ({**an_thinking(), "signature": None}, "signature"),
        ({**an_thinking(), "cache_control": {"type": "ephemeral"}}, "unexpected key"),
        ({"type": "redacted_thinking", "data": 5}, "data"),
        ({"type": "redacted_thinking", "data": "x", "cache_control": {}}, "unexpected key"),
    ],
)
def test_anthropic_assistant_block_shapes(block: Msg, fragment: str) -> None:
    blocks = (
        [an_thinking(), block]
        if block["type"] == "tool_use"
        else [block, {"type": "text", "text": "ok"}]
    )
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": blocks}]
    if block["type"] == "tool_use" and isinstance(block.get("id"), str):
        messages.append({"role": "user", "content": [an_result(block["id"])]})
    index = 1 if block["type"] == "tool_use" else 0
    assert_flagged(an_check(messages), f"messages[1].content[{index}]", fragment)


def test_anthropic_cache_control_allowed_on_tool_use_and_tool_result() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{**an_use(), "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": [{**an_result(), "cache_control": {"type": "ephemeral"}}]},
    ]
    assert an_check(messages) == []


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ({"type": "text", "text": "x", "cache_control": {"type": "persistent"}}, "ephemeral"),
        ({"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "2h"}}, "ttl"),
        (
            {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "scope": "x"}},
            "unexpected key(s) ['scope']",
        ),
        ({"type": "text", "text": "x", "cache_control": "ephemeral"}, "must be an object"),
        ({"type": "text", "text": "x", "citations": {"enabled": True}}, "must be an array"),
        ({"type": "text", "text": "x", "citations": [{"type": "url"}]}, "unknown citation"),
        (
            {
                "type": "text",
                "text": "x",
                "citations": [
                    {
                        "type": "char_location",
                        "cited_text": "x",
                        "document_index": 0,
                        "document_title": None,
                        "start_char_index": 0,
                        "end_char_index": 1,
                        "file_id": None,
                    }
                ],
            },
            "unexpected key(s) ['file_id']",
        ),
        (
            {
                "type": "document",
                "source": {"type": "url", "url": "https://x/a.pdf"},
                "citations": {"enabled": True, "style": "apa"},
            },
            "unexpected key(s) ['style']",
        ),
        (
            {
                "type": "document",
                "source": {"type": "url", "url": "https://x/a.pdf"},
                "citations": {"enabled": "yes"},
            },
            "boolean",
        ),
    ],
)
def test_anthropic_nested_cache_control_and_citation_shapes(block: Msg, fragment: str) -> None:
    """Keys inside cache_control and citations are checked too, not only block keys."""
    assert_flagged(
        an_check([{"role": "user", "content": [block]}]), "messages[0].content[0]", fragment
    )
    system = [dict(block)] if block["type"] == "text" else None
    if system is not None:
        assert_flagged(
            anthropic_violations(system, [{"role": "user", "content": "q"}]), "system[0]", fragment
        )


def test_anthropic_valid_cache_control_and_citations() -> None:
    citation = {
        "type": "page_location",
        "cited_text": "x",
        "document_index": 0,
        "document_title": "Doc",
        "start_page_number": 1,
        "end_page_number": 2,
    }
    block = {
        "type": "text",
        "text": "x",
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
        "citations": [citation],
    }
    assert an_check([{"role": "user", "content": [block, {**block, "cache_control": None}]}]) == []


@pytest.mark.parametrize(
    ("message", "fragment"),
    [
        (
            {"role": "assistant", "content": None, "tool_calls": [{**oa_call(), "index": 0}]},
            "unexpected key(s) ['index'] on tool call",
        ),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{**oa_call(), "function": {**oa_call()["function"], "parsed": {}}}],
            },
            "unexpected key(s) ['parsed']",
        ),
        (
            {"role": "assistant", "content": "x", "audio": {"id": "a", "data": "AA"}},
            "audio must be an object",
        ),
        ({"role": "assistant", "content": "x", "annotations": []}, "unexpected key(s)"),
        ({"role": "assistant", "content": "x", "function_call": None}, "unexpected key(s)"),
    ],
)
def test_openai_reply_only_keys_flagged_at_every_level(message: Msg, fragment: str) -> None:
    """Keys a Chat Completions *reply* carries but a request may not are flagged."""
    messages = [{"role": "user", "content": "q"}, message]
    if message.get("tool_calls"):
        messages.append({"role": "tool", "tool_call_id": "call_1", "content": "r"})
    assert_flagged(openai_violations(messages), "messages[1]", fragment)


@pytest.mark.parametrize(
    ("result", "fragment"),
    [
        ({**an_result(), "tool_use_id": 1}, "tool_use_id"),
        ({**an_result(), "is_error": "yes"}, "is_error"),
        (an_result(content={"text": "x"}), "string or an array"),
        (
            an_result(content=[{"type": "tool_use", "id": "t", "name": "n", "input": {}}]),
            "not allowed here",
        ),
        (an_result(content=[{"type": "text", "text": ""}]), "non-empty"),
        ({**an_result(), "name": "lookup"}, "unexpected key"),
    ],
)
def test_anthropic_tool_result_shapes(result: Msg, fragment: str) -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [an_use()]},
        {"role": "user", "content": [result]},
    ]
    assert_flagged(an_check(messages), "messages[2].content[0]", fragment)


def test_anthropic_tool_result_without_content_is_valid() -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_1"}
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [an_use()]},
        {"role": "user", "content": [result]},
    ]
    assert an_check(messages) == []


# ---------------------------------------------------------------------------------------
# Anthropic: tool_use / tool_result pairing and ordering
# ---------------------------------------------------------------------------------------


def test_anthropic_tool_use_ids_unique() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [an_use("t1")]},
        {"role": "user", "content": [an_result("t1")]},
        {"role": "assistant", "content": [an_use("t1")]},
        {"role": "user", "content": [an_result("t1")]},
    ]
    assert_flagged(an_check(messages), "messages[3].content[0]", "unique")


def test_anthropic_unanswered_tool_use() -> None:
    at_end = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [an_use("t1")]}]
    assert_flagged(an_check(at_end), "messages[1]", "without tool_result")
    partial = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [an_use("t1"), an_use("t2")]},
        {"role": "user", "content": [an_result("t1")]},
    ]
    violations = an_check(partial)
    assert_flagged(violations, "messages[1]", "'t2'")
    assert not _flags(violations, "messages[1]", "'t1'")
    plain_next = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [an_use("t1")]},
        {"role": "user", "content": "never mind"},
    ]
    assert_flagged(an_check(plain_next), "messages[1]", "without tool_result")


def test_anthropic_tool_result_unknown_or_not_previous() -> None:
    unknown = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [an_use("t1")]},
        {"role": "user", "content": [an_result("t1"), an_result("zz")]},
    ]
    assert_flagged(an_check(unknown), "messages[2]", "unknown id 'zz'")
    stale = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [an_use("t1")]},
        {"role": "user", "content": [an_result("t1")]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [an_result("t1")]},
    ]
    assert_flagged(an_check(stale), "messages[4]", "unknown id 't1'")
    first = [{"role": "user", "content": [an_result("t1")]}]
    assert_flagged(an_check(first), "messages[0]", "unknown id 't1'")


def test_anthropic_tool_result_answered_twice() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [an_use("t1")]},
        {"role": "user", "content": [an_result("t1"), an_result("t1")]},
    ]
    assert_flagged(an_check(messages), "messages[2]", "answered 2 times")


def test_anthropic_tool_result_blocks_come_first() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [an_use("t1")]},
        {"role": "user", "content": [{"type": "text", "text": "here"}, an_result("t1")]},
    ]
    assert_flagged(an_check(messages), "messages[2].content[1]", "must come before")


def test_anthropic_thinking_first_block_rule() -> None:
    bad = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, an_thinking()]},
        {"role": "user", "content": "more"},
    ]
    assert_flagged(an_check(bad), "messages[1]", "first block must be thinking")
    # Interleaved thinking after a tool block is fine as long as the turn starts with one.
    interleaved = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                an_thinking(),
                {"type": "text", "text": "a"},
                an_thinking(),
                {"type": "text", "text": "b"},
            ],
        },
    ]
    assert an_check(interleaved) == []


def test_anthropic_final_block_of_final_assistant_cannot_be_thinking() -> None:
    final = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [an_thinking()]}]
    assert_flagged(an_check(final), "messages[1]", "final block")
    earlier = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [an_thinking()]},
        {"role": "user", "content": "next"},
    ]
    assert an_check(earlier) == []


@pytest.mark.parametrize(
    "content", ["Answer: ", "Answer:\n", [{"type": "text", "text": "Answer "}]]
)
def test_anthropic_final_assistant_trailing_whitespace(content: object) -> None:
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]
    assert_flagged(an_check(messages), "messages[1]", "trailing whitespace")


def test_anthropic_trailing_whitespace_allowed_on_non_final_messages() -> None:
    messages = [
        {"role": "user", "content": "q "},
        {"role": "assistant", "content": "a\n"},
        {"role": "user", "content": "b "},
    ]
    assert an_check(messages) == []


# ---------------------------------------------------------------------------------------
# Anthropic: UTF-8 and JSON
# ---------------------------------------------------------------------------------------


def test_anthropic_lone_surrogate_and_json() -> None:
    surrogate = [{"role": "user", "content": [{"type": "text", "text": "a\udc80"}]}]
    assert_flagged(an_check(surrogate), "messages[0].content[0].text", "UTF-8")
    nan = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{**an_use(), "input": {"x": float("nan")}}]},
        {"role": "user", "content": [an_result()]},
    ]
    assert_flagged(an_check(nan), "messages[1].content[0].input.x", "allow_nan")
    not_json = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{**an_use(), "input": {"when": object()}}]},
        {"role": "user", "content": [an_result()]},
    ]
    assert_flagged(an_check(not_json), "messages[1].content[0].input.when", "not JSON")
