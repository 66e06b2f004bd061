"""Hypothesis strategies for messages: every role, internal fields, odd ids and odd unicode."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# A small id pool makes matches, duplicates and orphans likely. Some ids are invalid for
# one provider or the other (dots, spaces, non-ASCII, longer than 40 characters).
TOOL_IDS = ["a", "b", "call_1", "call_2", "x.y", "has space", "ü", "z" * 50, "functions.Bash:0"]
TASK_IDS = [1, 2, 3]

odd_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            " ",
            "\n\t ",
            "plain words",
            "trailing space ",
            "\ud800 lone high surrogate",
            "lone low \udfff",
            "\ud83d\ude00 split pair",
            "emoji 😀 and CJK 漢字",
            "nul \x00 byte",
            "<|endoftext|>",
            "right-to-left \u202e text",
        ]
    ),
)

# Values at the edges of what agentmem accepts (signed 64-bit integers, finite doubles,
# escapes and astral characters), drawn often so the derandomised `ci` profile meets them.
EDGE_SCALARS: list[Any] = [
    2**63 - 1,
    -(2**63),
    2**53 + 1,
    1.7976931348623157e308,
    5e-324,
    -0.0,
    1e19,
    "\u00e9 \ud83d\ude00",
    "😀",
    "\x00",
    "",
]

json_scalar = st.one_of(
    st.sampled_from(EDGE_SCALARS),
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.text(max_size=10),
)


def nested(depth: int) -> dict[str, Any]:
    """An arguments object nested exactly ``depth`` levels (the object itself is level 1)."""
    value: Any = []
    for _ in range(depth - 2):
        value = [value]
    return {"deep": value} if depth > 1 else {}


# ---- raw JSON text for tool-call arguments, valid or not -----------------------------
# json.dumps cannot write 1e309, NaN, a lone-surrogate escape or a duplicate key, so
# argument texts are assembled from literal tokens.

EDGE_NUMBER_TOKENS = [
    "9223372036854775807",  # int64 max: valid
    "-9223372036854775808",  # int64 min: valid
    "9223372036854775808",  # one past int64: refused
    "-9223372036854775809",
    "18446744073709551615",  # uint64 max: orjson reads it exactly, it is still refused
    "18446744073709551616",  # orjson silently reads this as a float
    "1" + "0" * 30,
    "1e308",
    "1.7976931348623157e308",
    "1e309",  # overflows a double
    "-1e309",
    "1E400",
    "1e-400",  # underflows to 0.0: valid
    "5e-324",
    "-0",
    "1e19",
    "0.1",
]
EDGE_STRING_TOKENS = [
    r'"\u00e9"',
    r'"\ud83d\ude00"',  # escaped surrogate pair
    r'"\ud800"',  # escaped lone surrogate
    r'"x \udfff"',
    r'"\u0000"',
    '"😀"',
    r'"\\ \" \/"',
    '""',
]
NON_JSON_TOKENS = ["NaN", "Infinity", "-Infinity"]
KEY_TOKENS = ['"a"', '"b"', r'"\u0061"', '"path"', r'"\ud800"', '"😀"']

_leaf_text = st.one_of(
    st.sampled_from(EDGE_NUMBER_TOKENS + EDGE_STRING_TOKENS),
    st.sampled_from(["true", "false", "null", *NON_JSON_TOKENS]),
    st.integers(-(2**70), 2**70).map(str),
    st.text(max_size=6).map(lambda t: json.dumps(t, ensure_ascii=bool(len(t) % 2))),
)


def _object_text(items: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{k}:{v}" for k, v in items) + "}"


_value_text = st.recursive(
    _leaf_text,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(st.sampled_from(KEY_TOKENS), inner), max_size=3).map(_object_text),
    ),
    max_leaves=6,
)


def _deep_text(depth: int) -> str:
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


arguments_text = st.one_of(
    st.lists(st.tuples(st.sampled_from(KEY_TOKENS), _value_text), max_size=4).map(_object_text),
    st.sampled_from([99, 100, 101, 1_100, 100_000]).map(_deep_text),
    st.sampled_from(["", "  ", "[]", "1", '"s"', "null", '{"a":1,"a":2}', "{", '{"a":1}x']),
)
"""Tool-call ``arguments`` text, valid or not, biased to the edges of the argument rule."""


def text_part() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda t: {"type": "text", "text": t}, odd_text)


image_part = st.sampled_from(
    [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "image_url", "image_url": {"url": "data:image/svg+xml;base64,PHN2Zz4="}},
        # Extra keys a host or SDK may leave on a part; the payload must not carry them.
        {
            "type": "image_url",
            "image_url": {"url": "https://example.com/dog.png", "detail": "low", "uuid": "u1"},
            "cache_control": {"type": "ephemeral"},
        },
    ]
)

# Keys an assistant *reply* carries (openai-python / litellm ``model_dump()``) that a
# request may not: the payload must drop them at every level.
reply_extras = st.fixed_dictionaries(
    {},
    optional={
        "annotations": st.just([]),
        "function_call": st.none(),
        "refusal": st.none(),
        "audio": st.one_of(
            st.none(),
            st.just({"id": "audio_1", "data": "UklGRg==", "expires_at": 1, "transcript": "t"}),
        ),
        "provider_specific_fields": st.just({"citations": None}),
    },
)

internal_fields = st.fixed_dictionaries(
    {},
    optional={
        "task_id": st.sampled_from(TASK_IDS),
        "created_at": st.floats(0, 2e9, allow_nan=False),
        "system_injected": st.booleans(),
        "session_context": st.booleans(),
        "session_date": st.sampled_from(["2026-11-20", "2026-11-21"]),
        "memory_update": st.booleans(),
        "subagent_instructions": st.booleans(),
        "subagent_result": st.booleans(),
        "token_usage": st.fixed_dictionaries({"prompt_tokens": st.integers(0, 999)}),
        "compressed_summary": st.booleans(),
        "chunk_path": st.text(max_size=8),
        "truncated": st.booleans(),
        "chunk_index": st.booleans(),
        "chunk_count": st.integers(0, 9),
        "custom_host_field": json_scalar,
    },
)


# Anthropic thinking blocks as from_anthropic keeps them (an unsigned one is not sendable).
thinking_block = st.one_of(
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "c2ln"}, odd_text),
    st.just({"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}),
    st.builds(lambda t: {"type": "thinking", "thinking": t}, odd_text),
)


@st.composite
def tool_call(draw: st.DrawFn) -> dict[str, Any]:
    args = draw(st.dictionaries(st.text(max_size=5), json_scalar, max_size=3))
    if draw(st.integers(0, 9)) == 0:
        args.update(nested(draw(st.sampled_from([2, 99, 100]))))
    arguments = draw(st.sampled_from([json.dumps(args), "", "  "]))
    call: dict[str, Any] = {
        "id": draw(st.sampled_from(TOOL_IDS)),
        "type": "function",
        "function": {
            "name": draw(st.sampled_from(["read_file", "bash", "search"])),
            "arguments": arguments,
        },
    }
    if draw(st.integers(0, 3)) == 0:
        call["index"] = draw(st.integers(0, 3))  # streaming-delta index (DeepSeek, litellm)
    return call


@st.composite
def message(draw: st.DrawFn, role: str | None = None) -> dict[str, Any]:
    """One valid canonical (OpenAI-shaped) message with random internal fields."""
    role = role or draw(
        st.sampled_from(["system", "user", "user", "assistant", "assistant", "tool"])
    )
    msg: dict[str, Any] = {"role": role, **draw(internal_fields)}
    if role == "system":
        msg["content"] = draw(st.one_of(odd_text, st.lists(text_part(), max_size=2)))
    elif role == "user":
        msg["content"] = draw(
            st.one_of(odd_text, st.lists(st.one_of(text_part(), image_part), max_size=3))
        )
        if draw(st.booleans()):
            msg["name"] = draw(st.sampled_from(["alice", "bob_2"]))
    elif role == "assistant":
        calls = draw(st.lists(tool_call(), max_size=3))
        if calls:
            msg["tool_calls"] = calls
        msg["content"] = draw(st.one_of(st.none(), odd_text, st.lists(text_part(), max_size=2)))
        if draw(st.integers(0, 5)) == 0:
            msg["reasoning_content"] = draw(odd_text)
        if draw(st.integers(0, 3)) == 0:
            msg.update(draw(reply_extras))
        if draw(st.integers(0, 5)) == 0:
            msg["thinking_blocks"] = draw(st.lists(thinking_block, min_size=1, max_size=2))
    else:
        msg["tool_call_id"] = draw(st.sampled_from(TOOL_IDS))
        msg["content"] = draw(
            st.one_of(odd_text, st.lists(st.one_of(text_part(), image_part), max_size=2))
        )
    if draw(st.integers(0, 9)) == 0:
        msg["transient"] = True
    return msg


@st.composite
def conversation(draw: st.DrawFn, max_size: int = 25) -> list[dict[str, Any]]:
    """A mostly well-ordered conversation (tool calls usually answered), with noise."""
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append(draw(message("system")))
    for _ in range(draw(st.integers(0, max_size))):
        msg = draw(message())
        out.append(msg)
        if msg["role"] == "assistant" and msg.get("tool_calls") and draw(st.integers(0, 3)):
            for call in msg["tool_calls"]:
                out.append({"role": "tool", "tool_call_id": call["id"], "content": draw(odd_text)})
    return out


# ---- OpenAI Responses input items ---------------------------------------------------
# Ids come from small pools so duplicates, orphan outputs and unanswered calls are common
# in a soup; the well-formed conversation draws fresh ids.

RESPONSES_CALL_IDS = ["call_1", "call_2", "call_3", "x.y", "z" * 50]
_RS_IDS = ["rs_1", "rs_2", "rs_3"]
_MSG_IDS = ["msg_1", "msg_2"]


def _input_part(text: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(
        [
            {"type": "input_text", "text": text},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,iVBORw0KGgo=",
                "detail": "auto",
            },
            {"type": "input_image", "file_id": "file-img", "detail": "auto"},
            {"type": "input_file", "file_id": "file-1", "filename": "a.pdf"},
            {"type": "input_file", "file_url": "https://example.com/a.pdf"},
        ]
    )


@st.composite
def responses_input_message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "user", "user", "system", "developer"]))
    text = draw(odd_text)
    content: Any
    if draw(st.booleans()):
        content = text
    elif role == "user":
        content = draw(st.lists(st.deferred(lambda: _input_part(text)), min_size=1, max_size=3))
    else:
        content = [{"type": "input_text", "text": text}]
    item: dict[str, Any] = {"role": role, "content": content}
    if draw(st.booleans()):
        item["type"] = "message"
    return item


@st.composite
def responses_assistant_message(draw: st.DrawFn, msg_id: str | None = None) -> dict[str, Any]:
    """An assistant message; with ``msg_id`` (a well-formed conversation) its text is not empty."""
    text = odd_text.filter(bool) if msg_id else odd_text
    if draw(st.booleans()):
        return {"type": "message", "role": "assistant", "content": draw(text)}
    parts = draw(
        st.lists(
            st.one_of(
                st.builds(lambda t: {"type": "output_text", "text": t, "annotations": []}, text),
                st.builds(lambda t: {"type": "refusal", "refusal": t}, text),
            ),
            min_size=1,
            max_size=2,
        )
    )
    return {
        "type": "message",
        "role": "assistant",
        "id": msg_id or draw(st.sampled_from(_MSG_IDS)),
        "status": "completed",
        "content": parts,
    }


def responses_reasoning(rs_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": rs_id,
        "summary": [{"type": "summary_text", "text": text}] if text else [],
        "encrypted_content": "gAAAAB" + rs_id,
    }


def responses_call(kind: str, call_id: str, name: str = "lookup") -> dict[str, Any]:
    if kind == "function_call":
        return {"type": kind, "call_id": call_id, "name": name, "arguments": '{"q": 1}'}
    if kind == "custom_tool_call":
        return {"type": kind, "call_id": call_id, "name": name, "input": "free text"}
    if kind == "computer_call":
        return {
            "type": kind,
            "id": "cu_" + call_id,
            "call_id": call_id,
            "action": {"type": "click", "button": "left", "x": 1, "y": 2},
            "pending_safety_checks": [],
            "status": "completed",
        }
    assert kind == "local_shell_call"
    return {
        "type": kind,
        "id": "ls_" + call_id,
        "call_id": call_id,
        "action": {"type": "exec", "command": ["ls"], "env": {}},
        "status": "completed",
    }


def responses_output(kind: str, call_id: str, text: str) -> dict[str, Any]:
    if kind == "function_call":
        return {"type": "function_call_output", "call_id": call_id, "output": text}
    if kind == "custom_tool_call":
        return {"type": "custom_tool_call_output", "call_id": call_id, "output": text}
    if kind == "computer_call":
        return {
            "type": "computer_call_output",
            "call_id": call_id,
            "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA=="},
        }
    return {"type": "local_shell_call_output", "id": call_id, "output": text}


_CALL_KINDS = [
    "function_call",
    "function_call",
    "custom_tool_call",
    "computer_call",
    "local_shell_call",
]

_HOSTED = [
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    },
    {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"]},
    {"type": "mcp_call", "id": "mcp_1", "name": "t", "arguments": "{}", "server_label": "s"},
    {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "name": "t",
        "arguments": "{}",
        "server_label": "s",
    },
    {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
    {
        "type": "code_interpreter_call",
        "id": "ci_1",
        "code": "1+1",
        "container_id": "c",
        "outputs": [],
        "status": "completed",
    },
    {"type": "image_generation_call", "id": "ig_1", "result": "aGk=", "status": "completed"},
    {"type": "item_reference", "id": "msg_old"},
]


@st.composite
def responses_item(draw: st.DrawFn) -> dict[str, Any]:
    """One valid Responses input item; ids from small pools (soup material)."""
    choice = draw(st.integers(0, 9))
    if choice <= 1:
        return draw(responses_input_message())
    if choice == 2:
        return draw(responses_assistant_message())
    if choice == 3:
        return responses_reasoning(draw(st.sampled_from(_RS_IDS)), draw(odd_text))
    if choice in (4, 5):
        kind = draw(st.sampled_from(_CALL_KINDS))
        return responses_call(kind, draw(st.sampled_from(RESPONSES_CALL_IDS)))
    if choice in (6, 7):
        kind = draw(st.sampled_from(_CALL_KINDS))
        return responses_output(kind, draw(st.sampled_from(RESPONSES_CALL_IDS)), draw(odd_text))
    return dict(draw(st.sampled_from(_HOSTED)))


@st.composite
def responses_conversation(draw: st.DrawFn, max_turns: int = 6) -> list[dict[str, Any]]:
    """A well-formed Responses conversation: every call answered, fresh unique ids."""
    counter = iter(range(10_000))
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append({"role": "developer", "content": draw(odd_text)})
    for _ in range(draw(st.integers(1, max_turns))):
        items.append(draw(responses_input_message()))
        for _ in range(draw(st.integers(0, 2))):  # model steps with tool calls
            if draw(st.booleans()):
                items.append(responses_reasoning(f"rs_{next(counter)}", draw(odd_text)))
            kinds = draw(st.lists(st.sampled_from(_CALL_KINDS), min_size=1, max_size=3))
            calls = [(kind, f"call_{next(counter)}") for kind in kinds]
            items.extend(responses_call(kind, cid) for kind, cid in calls)
            answers = draw(st.permutations(calls))
            items.extend(responses_output(kind, cid, draw(odd_text)) for kind, cid in answers)
        if draw(st.booleans()):
            items.append(responses_reasoning(f"rs_{next(counter)}", draw(odd_text)))
        if draw(st.integers(0, 3)) == 0:
            n = next(counter)
            items.append(
                {
                    "type": "web_search_call",
                    "id": f"ws_{n}",
                    "status": "completed",
                    "action": {"type": "search", "query": "q"},
                }
            )
        items.append(draw(responses_assistant_message(msg_id=f"msg_{next(counter)}")))
    return items
