"""Unit tests for every public method of MessageHistory."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from profiles import scaled
from provider_rules import anthropic_violations, openai_violations
from strategies import message, odd_text

from agentmem import (
    INTERNAL_FIELDS,
    HeuristicCounter,
    InvalidArgumentError,
    InvalidMessageError,
    LearningEstimator,
    Message,
    MessageHistory,
    StorageError,
)
from agentmem.repair import MISSING_TOOL_RESULT


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def assistant(text: str | None = None, *call_ids: str, **extra: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": text, **extra}
    if call_ids:
        msg["tool_calls"] = [
            {
                "id": c,
                "type": "function",
                "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
            }
            for c in call_ids
        ]
    return msg


def tool(call_id: str, text: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text, **extra}


class RecordingObserver:
    """Keeps a persistent copy the way a store would, to check what the observer is told."""

    def __init__(self, initial: Sequence[Message] = ()) -> None:
        self.stored: list[Message] = list(initial)
        self.calls: list[str] = []
        self.fail = False

    def _maybe_fail(self) -> None:
        if self.fail:
            raise StorageError("disk full")

    def on_append(self, messages: Sequence[Message]) -> None:
        self._maybe_fail()
        self.calls.append("append")
        self.stored.extend(messages)

    def on_replace(self, index: int, message: Message) -> None:
        self._maybe_fail()
        self.calls.append("replace")
        self.stored[index] = message

    def on_rewrite(self, start: int, tail: Sequence[Message]) -> None:
        self._maybe_fail()
        self.calls.append("rewrite")
        self.stored[start:] = list(tail)


def persistent(history: MessageHistory) -> list[Message]:
    return [m for m in history if not m.get("transient")]


# --------------------------------------------------------------------------- append and friends


def test_append_returns_the_stored_copy() -> None:
    h = MessageHistory()
    original = user("hi", task_id=1)
    stored = h.append(original)
    assert stored == original
    assert stored is not original
    assert h[0] is stored
    assert len(h) == 1


def test_user_message_drops_trailing_unanswered_assistant() -> None:
    h = MessageHistory([user("do it"), assistant(None, "c1")])
    h.append(user("never mind"))
    assert [m["role"] for m in h] == ["user", "user"]


def test_user_message_keeps_partially_answered_assistant() -> None:
    h = MessageHistory([user("do it"), assistant(None, "c1", "c2"), tool("c1")])
    h.append(user("next"))
    assert [m["role"] for m in h] == ["user", "assistant", "tool", "user"]
    payload = h.to_api()
    assert payload[3] == {"role": "tool", "tool_call_id": "c2", "content": MISSING_TOOL_RESULT}


def test_non_user_message_keeps_trailing_assistant() -> None:
    h = MessageHistory([assistant(None, "c1")])
    h.append(tool("c1"))
    assert [m["role"] for m in h] == ["assistant", "tool"]


def test_extend_is_atomic() -> None:
    h = MessageHistory([user("a")])
    with pytest.raises(InvalidMessageError) as info:
        h.extend([user("b"), {"role": "tool", "content": "no id"}])
    assert info.value.index == 2  # its index in the history, not in the batch
    assert len(h) == 1


def test_extend_applies_the_drop_rule_within_the_batch() -> None:
    h = MessageHistory()
    stored = h.extend([user("a"), assistant(None, "c1"), user("b")])
    assert [m["role"] for m in stored] == ["user", "user"]
    assert [m["role"] for m in h] == ["user", "user"]


def test_append_anthropic_turn() -> None:
    h = MessageHistory([user("q"), assistant(None, "t1")])
    first = h.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                {"type": "text", "text": "go on"},
            ],
        }
    )
    assert first["role"] == "tool"
    assert [m["role"] for m in h] == ["user", "assistant", "tool", "user"]


def test_invalid_append_changes_nothing() -> None:
    h = MessageHistory([user("a")])
    with pytest.raises(InvalidMessageError):
        h.append({"role": "user", "content": 5})
    assert len(h) == 1


def test_delete_where() -> None:
    h = MessageHistory(
        [
            user("a"),
            user("b", system_injected=True),
            assistant("c"),
            user("d", system_injected=True),
        ]
    )
    assert h.delete_where(lambda m: bool(m.get("system_injected"))) == 2
    assert [m["content"] for m in h] == ["a", "c"]
    assert h.delete_where(lambda m: False) == 0


def test_replace_all_validates_first() -> None:
    h = MessageHistory([user("a")])
    h.replace_all([user("x"), assistant("y")])
    assert [m["content"] for m in h] == ["x", "y"]
    with pytest.raises(InvalidMessageError):
        h.replace_all([user("ok"), {"role": "nope"}])
    assert [m["content"] for m in h] == ["x", "y"]


def test_pop_last() -> None:
    h = MessageHistory([user("a"), assistant("b")])
    assert h.pop_last() == {"role": "assistant", "content": "b"}
    assert h.pop_last() == {"role": "user", "content": "a"}
    assert h.pop_last() is None


@pytest.mark.parametrize(
    ("index", "left", "removed"),
    [(1, 1, 2), (0, 0, 3), (3, 3, 0), (99, 3, 0), (-1, 2, 1), (-99, 0, 3)],
)
def test_truncate_from(index: int, left: int, removed: int) -> None:
    h = MessageHistory([user("a"), assistant("b"), user("c")])
    assert h.truncate_from(index) == removed
    assert len(h) == left


@pytest.mark.parametrize("bad", ["1", 1.0, None, True])
def test_truncate_from_rejects_non_int(bad: Any) -> None:
    h = MessageHistory([user("a")])
    with pytest.raises(InvalidArgumentError):
        h.truncate_from(bad)
    assert len(h) == 1


def test_rollback_before_uses_identity() -> None:
    h = MessageHistory([user("a")])
    speculative = h.append(assistant("draft"))
    h.append(user("more"))
    assert not h.rollback_before(assistant("draft"))  # equal but not the stored object
    assert len(h) == 3
    assert h.rollback_before(speculative)
    assert [m["content"] for m in h] == ["a"]


def test_replace_system_prompt() -> None:
    h = MessageHistory([user("a")])
    first = h.replace_system_prompt("v1", task_id=None)
    assert h[0] is first and first["content"] == "v1"
    h.replace_system_prompt("v2")
    assert [m["content"] for m in h] == ["v2", "a"]
    assert h.has_system_prompt()
    with pytest.raises(InvalidMessageError):
        h.replace_system_prompt(42)
    assert h[0]["content"] == "v2"


def test_mutate_last_matching_in_place_or_by_return() -> None:
    h = MessageHistory([user("a"), user("b"), assistant("c")])

    def shout(m: Message) -> None:
        m["content"] = m["content"].upper()

    new = h.mutate_last_matching(lambda m: m["role"] == "user", shout)
    assert new is not None and new["content"] == "B"
    assert h[1] is new
    assert h[0]["content"] == "a"
    h.mutate_last_matching(lambda m: m["role"] == "assistant", lambda m: {**m, "content": "C"})
    assert h[2]["content"] == "C"
    assert h.mutate_last_matching(lambda m: m["role"] == "tool", shout) is None


def test_mutate_last_matching_rejects_invalid_results() -> None:
    h = MessageHistory([user("a")])
    before = h[0]

    def break_it(m: Message) -> None:
        m["content"] = 5

    with pytest.raises(InvalidMessageError):
        h.mutate_last_matching(lambda m: True, break_it)
    assert h[0] is before and before["content"] == "a"

    def expand(m: Message) -> Message:
        return {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "x"}, {"type": "text", "text": "t"}],
        }

    with pytest.raises(InvalidMessageError, match="exactly one message"):
        h.mutate_last_matching(lambda m: True, expand)


# --------------------------------------------------------------------------- queries


def test_pending_tool_calls() -> None:
    h = MessageHistory([user("a")])
    assert h.pending_tool_calls() == []
    h.append(assistant(None, "c1", "c2", "c3"))
    assert h.pending_tool_calls() == ["c1", "c2", "c3"]
    h.append(tool("c2"))
    assert h.pending_tool_calls() == ["c1", "c3"]
    h.extend([tool("c1"), tool("c3")])
    assert h.pending_tool_calls() == []
    h.append(assistant("done"))
    assert h.pending_tool_calls() == []


def test_real_user_queries() -> None:
    h = MessageHistory(
        [
            user("a"),
            user("inj", system_injected=True),
            assistant("b"),
            user("c"),
            user("inj2", system_injected=True),
        ]
    )
    assert [m["content"] for m in h.real_user_messages()] == ["a", "c"]
    assert h.last_real_user_index() == 3
    assert MessageHistory([assistant("x")]).last_real_user_index() is None


def test_injection_queries() -> None:
    h = MessageHistory(
        [
            {
                "role": "system",
                "content": "ctx",
                "session_context": True,
                "session_date": "2026-11-21",
            },
            user("a"),
            {
                "role": "system",
                "content": "ctx",
                "session_context": True,
                "session_date": "2026-11-22",
            },
            {"role": "system", "content": "idx", "chunk_index": True, "chunk_count": 4},
            user("sub", subagent_instructions=True),
        ]
    )
    assert h.last_session_context_date() == "2026-11-22"
    assert h.last_injected_chunk_count() == 4
    instr = h.subagent_instruction_message()
    assert instr is not None and instr["content"] == "sub"
    empty = MessageHistory()
    assert empty.last_session_context_date() is None
    assert empty.last_injected_chunk_count() == 0
    assert empty.subagent_instruction_message() is None
    assert not empty.has_system_prompt()


def test_estimate_tokens_is_cached_per_message() -> None:
    calls: list[str] = []

    class CountingCounter:
        epoch = 0

        def count_text(self, text: str) -> int:
            calls.append(text)
            return len(text)

    h = MessageHistory([user("hello"), assistant("world")], token_counter=CountingCounter())
    first = h.estimate_tokens()
    assert first > 10
    n = len(calls)
    assert h.estimate_tokens() == first
    assert len(calls) == n  # nothing recounted
    h.append(user("again"))
    h.estimate_tokens()
    assert len(calls) - n == 2  # only the new message: its role and its content


def test_estimate_tokens_follows_the_counter_epoch() -> None:
    est = LearningEstimator()
    h = MessageHistory([user("x" * 4000)], token_counter=est)
    before = h.estimate_tokens()
    for _ in range(5):
        est.observe(h.to_api(), prompt_tokens=2000)
    assert est.epoch > 0
    assert h.estimate_tokens() > before * 1.5
    assert h.message_tokens(0) == h.estimate_tokens()
    assert isinstance(MessageHistory().token_counter, HeuristicCounter)


# --------------------------------------------------------------------------- output


def test_to_list_leaves_out_transient_and_copies() -> None:
    h = MessageHistory([user("a", task_id=1), user("brand skill", transient=True)])
    listed = h.to_list()
    assert listed == [{"role": "user", "content": "a", "task_id": 1}]
    listed[0]["content"] = "changed"
    assert h[0]["content"] == "a"


def test_to_api_strips_internal_fields_and_keeps_transient() -> None:
    h = MessageHistory([user("a", task_id=1, created_at=5.0, custom=1), user("t", transient=True)])
    assert h.to_api() == [{"role": "user", "content": "a"}, {"role": "user", "content": "t"}]


def test_to_api_is_a_deep_copy() -> None:
    h = MessageHistory([user([{"type": "text", "text": "a"}])])  # type: ignore[arg-type]
    payload = h.to_api()
    payload[0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert "cache_control" not in h[0]["content"][0]


def test_to_api_task_chain() -> None:
    h = MessageHistory(
        [
            {"role": "system", "content": "s"},
            user("t1", task_id=1),
            assistant("r1", task_id=1),
            user("t2", task_id=2),
            assistant(None, "c9", task_id=2),
            tool("c9", task_id=2),
            user("t3", task_id=3),
        ]
    )
    assert [m["content"] for m in h.to_api(task_chain={1, 3})] == ["s", "t1", "r1", "t3"]
    assert len(h.to_api(task_chain=[1, 2, 3])) == 7
    system, turns = h.to_api(task_chain={1}, provider="anthropic")
    assert system == "s" and len(turns) == 2


def test_to_api_reasoning_padding() -> None:
    h = MessageHistory(
        [user("a"), assistant("b"), user("c"), assistant("d", reasoning_content="why")]
    )
    out = h.to_api()
    assert [m.get("reasoning_content") for m in out if m["role"] == "assistant"] == ["", "why"]
    plain = MessageHistory([user("a"), assistant("b")])
    assert "reasoning_content" not in plain.to_api()[1]
    assert plain.to_api(force_reasoning_content_pad=True)[1]["reasoning_content"] == ""


def test_to_api_unknown_provider() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown provider 'gemini'"):
        MessageHistory().to_api(provider="gemini")


def test_to_api_repairs_a_broken_history_for_both_providers() -> None:
    h = MessageHistory(
        [
            tool("orphan"),
            assistant("thinking out loud"),
            assistant(None, "dup", "x.y"),
            tool("dup"),
            {"role": "system", "content": "mid-run note"},
            tool("x.y", "late"),
            assistant(None, "dup"),
            user("next"),
        ]
    )
    openai = h.to_api()
    assert openai_violations(openai, internal_fields=INTERNAL_FIELDS) == []
    system, turns = h.to_api(provider="anthropic")
    assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []
    assert system is None  # a system message after the first turn is not the system prompt


# ------------------------------------------------------------------- observer and concurrency


def test_observer_mirrors_every_persistent_change() -> None:
    obs = RecordingObserver()
    h = MessageHistory(observer=obs)
    h.append(user("a"))
    h.append(user("skill", transient=True))
    h.append(assistant(None, "c1"))
    h.append(user("b"))  # drops the dangling assistant: a rewrite
    h.replace_system_prompt("sys")  # insert at head: a rewrite
    h.replace_system_prompt("sys2")  # in place: a replace
    h.mutate_last_matching(
        lambda m: m["role"] == "user" and not m.get("transient"), lambda m: {**m, "content": "B"}
    )
    h.delete_where(lambda m: m["content"] == "a")
    h.truncate_from(-1)
    h.pop_last()
    assert obs.stored == persistent(h)
    assert {"append", "replace", "rewrite"} <= set(obs.calls)


def test_observer_is_not_told_about_transient_only_changes() -> None:
    obs = RecordingObserver()
    h = MessageHistory(observer=obs)
    h.append(user("t", transient=True))
    assert obs.calls == []


def test_failing_observer_leaves_history_unchanged() -> None:
    obs = RecordingObserver()
    h = MessageHistory(observer=obs)
    h.append(user("a"))
    obs.fail = True
    snapshot = list(h)
    for op in (
        lambda: h.append(user("b")),
        lambda: h.pop_last(),
        lambda: h.truncate_from(0),
        lambda: h.replace_system_prompt("s"),
        lambda: h.replace_all([user("z")]),
        lambda: h.delete_where(lambda m: True),
        lambda: h.mutate_last_matching(lambda m: True, lambda m: {**m, "content": "q"}),
    ):
        with pytest.raises(StorageError):
            op()
        assert list(h) == snapshot
    assert h.estimate_tokens() > 0


def test_concurrent_appends_are_all_kept() -> None:
    h = MessageHistory()

    def worker(n: int) -> None:
        for i in range(200):
            h.append(assistant(f"{n}-{i}"))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(h) == 800
    assert len({m["content"] for m in h}) == 800


def test_container_protocol() -> None:
    h = MessageHistory([user("a"), assistant("b")])
    assert [m["role"] for m in h] == ["user", "assistant"]
    assert h[-1]["content"] == "b"
    assert [m["content"] for m in h[0:1]] == ["a"]
    assert repr(h) == "MessageHistory(2 messages)"


class RecalibratingCounter:
    """``scale`` tokens a character; ``recalibrate`` changes counts and ``epoch`` like a learner."""

    def __init__(self) -> None:
        self.scale = 1
        self.epoch = 0

    def count_text(self, text: str) -> int:
        return len(text) * self.scale

    def recalibrate(self) -> None:
        self.scale += 1
        self.epoch += 1


def billed_pieces(msg: Mapping[str, Any]) -> list[str]:
    """The strings docs/tokens.md ("Message accounting") says a provider bills, in the test."""
    pieces: list[str] = []

    def add(value: object) -> None:
        if isinstance(value, str) and value:
            pieces.append(value)

    add(msg.get("role"))
    content = msg.get("content")
    if isinstance(content, str):
        add(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                add(part)
            elif part.get("type") in (None, "text"):
                add(part.get("text"))
            elif part.get("type") == "refusal":
                add(part.get("refusal"))
    add(msg.get("refusal"))
    add(msg.get("name"))
    add(msg.get("reasoning_content"))
    for call in msg.get("tool_calls") or []:
        add(call.get("id"))
        function = call.get("function") or {}
        add(function.get("name"))
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        add(arguments)
    if msg.get("role") == "tool":
        add(msg.get("tool_call_id"))
    return pieces


def framing_tokens(msg: Mapping[str, Any]) -> int:
    """3 per message, +1 for a name, +3 per tool call, +765 per image/audio/file part."""
    tokens = 3
    if msg.get("name"):
        tokens += 1
    tokens += 3 * len(msg.get("tool_calls") or [])
    content = msg.get("content")
    if isinstance(content, list):
        media = {"image_url", "image", "input_audio", "file"}
        tokens += 765 * sum(isinstance(p, dict) and p.get("type") in media for p in content)
    return tokens


def independent_total(h: MessageHistory, counter: RecalibratingCounter) -> int:
    return sum(
        framing_tokens(m) + sum(counter.count_text(piece) for piece in billed_pieces(m)) for m in h
    )


ROLES = ["system", "user", "assistant", "tool"]

history_operation = st.one_of(
    st.tuples(st.just("append"), message()),
    st.tuples(st.just("extend"), st.lists(message(), max_size=3)),
    st.tuples(st.just("replace_all"), st.lists(message(), max_size=4)),
    st.tuples(st.just("replace_system_prompt"), odd_text),
    st.tuples(st.just("mutate_last_matching"), st.tuples(st.sampled_from(ROLES), odd_text)),
    st.tuples(st.just("delete_where"), st.sampled_from(ROLES)),
    st.tuples(st.just("truncate_from"), st.integers(-3, 8)),
    st.tuples(st.just("pop_last"), st.none()),
    st.tuples(st.just("recalibrate"), st.none()),
)


def _apply(h: MessageHistory, counter: RecalibratingCounter, op: str, arg: Any) -> None:
    if op == "append":
        h.append(arg)
    elif op == "extend":
        h.extend(arg)
    elif op == "replace_all":
        h.replace_all(arg)
    elif op == "replace_system_prompt":
        h.replace_system_prompt(arg)
    elif op == "mutate_last_matching":
        role, text = arg
        h.mutate_last_matching(lambda m: m["role"] == role, lambda m: {**m, "content": text})
    elif op == "delete_where":
        h.delete_where(lambda m: m["role"] == arg)
    elif op == "truncate_from":
        h.truncate_from(arg)
    elif op == "pop_last":
        h.pop_last()
    else:
        counter.recalibrate()


@settings(max_examples=scaled(100))
@given(
    st.lists(message(), max_size=5),
    st.lists(st.tuples(history_operation, st.booleans()), min_size=1, max_size=12),
)
def test_estimate_tokens_running_total_matches_an_independent_count(
    initial: list[dict[str, Any]], steps: list[tuple[tuple[str, Any], bool]]
) -> None:
    """After any sequence of mutations (and recalibrations), the cached incremental total
    equals framing + billed text computed here from the documented formula."""
    counter = RecalibratingCounter()
    h = MessageHistory(initial, token_counter=counter)
    assert h.estimate_tokens() == independent_total(h, counter)
    for (op, arg), check in steps:
        note(f"{op} {arg!r}")
        with contextlib.suppress(InvalidMessageError):  # rejected: nothing changed
            _apply(h, counter, op, arg)
        if check:  # otherwise the next check spans several mutations
            assert h.estimate_tokens() == independent_total(h, counter)
    assert h.estimate_tokens() == independent_total(h, counter)
