"""What `append` and the facade accept as input (issue 13, B7).

* SDK message objects (pydantic models) are read with ``model_dump(exclude_none=True)``.
  The real ``openai`` / ``anthropic`` packages are used when installed; otherwise
  pydantic models with the same fields as the SDKs' stand in for them.
* Every Anthropic reply is stored in one shape, whether or not it carries tool use.
* An invalid message's error gives its index in the history, not in the batch.
* ``start_task("")``, ``Memory(root="")`` and a missing ``working_dir`` are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from agentmem import Memory, MessageHistory, normalize_message
from agentmem.errors import ConfigurationError, InvalidArgumentError, InvalidMessageError

# --------------------------------------------------------------------------- SDK-shaped models
# Field for field the SDKs' response models (openai.types.chat.ChatCompletionMessage,
# anthropic.types.Message and its blocks), unset optional fields as None like theirs.


class Function(BaseModel):
    arguments: str
    name: str


class ChatCompletionMessageToolCall(BaseModel):
    id: str
    function: Function
    type: Literal["function"] = "function"


class ChatCompletionMessage(BaseModel):
    content: str | None = None
    refusal: str | None = None
    role: Literal["assistant"] = "assistant"
    annotations: list[dict[str, Any]] | None = None
    audio: dict[str, Any] | None = None
    function_call: dict[str, Any] | None = None
    tool_calls: list[ChatCompletionMessageToolCall] | None = None


class TextBlock(BaseModel):
    citations: list[dict[str, Any]] | None = None
    text: str
    type: Literal["text"] = "text"


class ToolUseBlock(BaseModel):
    id: str
    input: dict[str, Any]
    name: str
    type: Literal["tool_use"] = "tool_use"


class Usage(BaseModel):
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    input_tokens: int
    output_tokens: int


class AnthropicMessage(BaseModel):
    id: str
    content: list[TextBlock | ToolUseBlock]
    model: str
    role: Literal["assistant"] = "assistant"
    stop_reason: str | None = None
    stop_sequence: str | None = None
    type: Literal["message"] = "message"
    usage: Usage


def openai_reply(content: str | None, calls: list[tuple[str, str, str]] = ()) -> Any:  # type: ignore[assignment]
    """A ChatCompletionMessage: the real SDK class when installed, else the mirror."""
    try:
        from openai.types.chat import ChatCompletionMessage as Real
    except ImportError:
        Real = ChatCompletionMessage  # type: ignore[misc,assignment]
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
    ]
    return Real.model_validate(
        {"role": "assistant", "content": content, "tool_calls": tool_calls or None}
    )


def anthropic_reply(texts: list[str], uses: list[tuple[str, str, dict[str, Any]]] = ()) -> Any:  # type: ignore[assignment]
    """An anthropic Message: the real SDK class when installed, else the mirror."""
    try:
        from anthropic.types import Message as Real
    except ImportError:
        Real = AnthropicMessage  # type: ignore[misc,assignment]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in uses]
    return Real.model_validate(
        {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": blocks,
            "stop_reason": "tool_use" if uses else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 7},
        }
    )


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    with Memory(root=tmp_path / ".agentmem", working_dir=tmp_path, durability="normal") as m:
        yield m


# --------------------------------------------------------------------------- SDK objects


def test_session_append_takes_an_openai_sdk_message(mem: Memory) -> None:
    s = mem.session()
    s.start_task("list the files")
    reply = openai_reply(None, [("call_1", "bash", '{"cmd": "ls"}')])
    stored = s.append(reply)
    assert stored["role"] == "assistant"
    assert stored["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
        }
    ]
    # exclude_none: the SDK's unset fields (content, refusal, audio, ...) are not stored
    for key in ("refusal", "audio", "function_call"):
        assert key not in stored
    s.append({"role": "tool", "tool_call_id": "call_1", "content": "a.py"})
    s.append(openai_reply("There is a.py."))
    payload = s.context()
    assert payload[-1] == {"role": "assistant", "content": "There is a.py."}
    assert payload[-3]["tool_calls"][0]["id"] == "call_1"


def test_history_and_normalize_take_sdk_messages() -> None:
    h = MessageHistory()
    h.append({"role": "user", "content": "hi"})
    h.append(anthropic_reply(["hello"]))
    assert h[-1]["content"] == "hello"
    (m,) = normalize_message(openai_reply("x"))
    assert m == {"role": "assistant", "content": "x"}
    h.extend([{"role": "user", "content": "more"}, openai_reply("ok")])
    assert h[-1]["content"] == "ok"


def test_a_model_whose_dump_is_not_a_mapping_or_fails_is_a_named_error() -> None:
    class Odd:
        def model_dump(self, **_: Any) -> list[int]:
            return [1]

    class Broken:
        def model_dump(self, **_: Any) -> dict[str, Any]:
            raise RuntimeError("boom")

    h = MessageHistory([{"role": "user", "content": "hi"}])
    for bad in (Odd(), Broken(), object()):
        with pytest.raises(InvalidMessageError) as info:
            h.append(bad)  # type: ignore[arg-type]
        assert info.value.index == 1
    assert len(h) == 1
    with pytest.raises(InvalidArgumentError):
        h.extend(openai_reply("one object, not a batch"))
    with pytest.raises(InvalidMessageError) as info:
        h.append({"role": "user", "content": [{"type": "text", "text": "a"}, Broken()]})
    assert info.value.index == 1 and info.value.field == "content[1]"
    assert len(h) == 1


# --------------------------------------------------------------------------- one Anthropic shape

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)


@given(texts=st.lists(_text, min_size=1, max_size=3), sdk=st.booleans())
def test_anthropic_replies_have_one_shape_with_or_without_tool_use(
    texts: list[str], sdk: bool
) -> None:
    """The text of a reply is stored the same whether or not the reply also calls a tool."""
    uses = [("toolu_1", "bash", {"cmd": "ls"})]
    if sdk:
        plain, with_tool = anthropic_reply(texts), anthropic_reply(texts, uses)
    else:  # the blocks alone, as a host builds the dict from response.content
        blocks = [{"type": "text", "text": t} for t in texts]
        plain = {"role": "assistant", "content": blocks}
        tool = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}}
        with_tool = {"role": "assistant", "content": [*blocks, tool]}
    (a,) = normalize_message(plain)
    (b,) = normalize_message(with_tool)
    assert b.pop("tool_calls")[0]["id"] == "toolu_1"
    if sdk:
        assert b.pop("stop_reason") == "tool_use" and a.pop("stop_reason") == "end_turn"
    assert a == b
    expected: Any = texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]
    assert a["content"] == expected


def test_a_text_only_anthropic_reply_reads_like_the_adapters_reply(mem: Memory) -> None:
    """`append(resp)` and the anthropic adapter's reply agree on the content's shape."""
    from agentmem.messages import from_anthropic

    s = mem.session()
    s.start_task("hi")
    stored = s.append(anthropic_reply(["Hello there."]))
    (adapter_shape,) = from_anthropic(
        [{"role": "assistant", "content": [{"type": "text", "text": "Hello there."}]}]
    )
    assert stored["content"] == adapter_shape["content"] == "Hello there."
    _system, turns = s.context(provider="anthropic")
    assert turns[-1] == {"role": "assistant", "content": [{"type": "text", "text": "Hello there."}]}


# --------------------------------------------------------------------------- error index


@pytest.mark.parametrize("history_len", [0, 1, 100])
def test_a_batch_error_names_the_index_in_the_history(history_len: int) -> None:
    h = MessageHistory([{"role": "user", "content": f"m{i}"} for i in range(history_len)])
    batch = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "tool", "content": "no id"},
    ]
    with pytest.raises(InvalidMessageError) as info:
        h.extend(batch)
    assert info.value.index == history_len + 2
    assert f"message {history_len + 2}" in str(info.value)
    assert len(h) == history_len


def test_session_append_error_names_the_index_in_the_history(mem: Memory) -> None:
    s = mem.session()
    s.start_task("go")
    for i in range(5):
        s.append({"role": "assistant", "content": f"step {i}"})
    for bad in ({"role": "robot", "content": "x"}, {"role": "tool", "content": "no id"}):
        with pytest.raises(InvalidMessageError) as info:
            s.append(bad)
        assert info.value.index == 6 == len(s.history)
    with pytest.raises(InvalidMessageError) as info:
        s.append({"role": "assistant", "content": "x", "task_id": 999})
    assert info.value.index == 6 and info.value.field == "task_id"


# --------------------------------------------------------------------------- empty and missing


@pytest.mark.parametrize(
    "request_", ["", "   \n\t", {"role": "user", "content": ""}, {"role": "user", "content": []}]
)
def test_start_task_refuses_an_empty_request(mem: Memory, request_: Any) -> None:
    s = mem.session()
    with pytest.raises(InvalidArgumentError, match="empty"):
        s.start_task(request_)
    assert len(s.history) == 0
    assert s.open_task_id is None and not s.time_machine.has_tasks
    s.start_task("a real request")  # the session is fine afterwards
    assert len(s.history) == 1


def test_memory_refuses_an_empty_root(tmp_path: Path) -> None:
    before = sorted(tmp_path.iterdir())
    with pytest.raises(ConfigurationError, match="root"):
        Memory(root="", working_dir=tmp_path)
    with pytest.raises(ConfigurationError, match="root"):
        Memory(root="  ", working_dir=tmp_path)
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize("incognito", [False, True])
def test_memory_refuses_a_working_dir_that_does_not_exist(tmp_path: Path, incognito: bool) -> None:
    missing = tmp_path / "no" / "such" / "project"
    with pytest.raises(ConfigurationError, match="working_dir"):
        Memory(working_dir=missing, incognito=incognito)
    assert not (tmp_path / "no").exists()  # nothing created on the way
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(ConfigurationError, match="working_dir"):
        Memory(working_dir=a_file, incognito=incognito)


def test_sdk_objects_inside_a_message_dict_are_read_too(mem: Memory) -> None:
    """Anthropic's documented `{"role": "assistant", "content": response.content}` and
    OpenAI's `"tool_calls": message.tool_calls` carry SDK objects inside a dict."""
    s = mem.session()
    s.start_task("list the files")
    reply = anthropic_reply(["Let me look."], [("toolu_1", "bash", {"cmd": "ls"})])
    stored = s.append({"role": "assistant", "content": reply.content})
    assert stored["content"] == "Let me look."
    assert stored["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"cmd":"ls"}'}
    s.append({"role": "tool", "tool_call_id": "toolu_1", "content": "a.py"})
    oa = openai_reply(None, [("call_2", "bash", '{"cmd": "cat a.py"}')])
    stored = s.append({"role": "assistant", "content": oa.content, "tool_calls": oa.tool_calls})
    assert stored["tool_calls"][0]["id"] == "call_2"
