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

json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=10)
)


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


@st.composite
def tool_call(draw: st.DrawFn) -> dict[str, Any]:
    args = draw(st.dictionaries(st.text(max_size=5), json_scalar, max_size=3))
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
