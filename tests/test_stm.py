"""ShortTermMemory: whole-unit eviction, bounds, pins, re-validation, persistence."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from agentmem import HeuristicCounter, InvalidArgumentError, MessageHistory, ShortTermMemory
from agentmem.messages import Message
from agentmem.tokens import count_message


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def call(i: int, n_results: int = 1) -> list[dict[str, Any]]:
    ids = [f"c{i}_{j}" for j in range(n_results)]
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for c in ids
            ],
        },
        *({"role": "tool", "tool_call_id": c, "content": "r" * 40} for c in ids),
    ]


def test_units_start_at_every_non_tool_message() -> None:
    h = MessageHistory([user("a"), *call(1, 2), {"role": "assistant", "content": "x"}])
    stm = ShortTermMemory(h)
    assert stm.unit_starts() == [0, 1, 4]


def test_evicts_whole_units_and_keeps_the_newest() -> None:
    evicted: list[list[Message]] = []
    h = MessageHistory([user("a"), *call(1, 2), *call(2, 3)])
    stm = ShortTermMemory(h, max_messages=2, on_evict=evicted.append)
    out = stm.enforce()
    # the newest unit (4 messages) stays even though it exceeds max_messages
    assert stm.start == 4
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool"]
    assert evicted == [out]
    assert stm.pinned == (0,)  # the task anchor stays visible
    assert stm.message_count() == 5
    assert stm.enforce() == []


def test_token_bound_and_incremental_count() -> None:
    counter = HeuristicCounter()
    h = MessageHistory(token_counter=counter)
    stm = ShortTermMemory(h, max_tokens=60)
    for i in range(10):
        stm.add({"role": "assistant", "content": f"step {i} " + "x" * 60})
    assert stm.token_count() <= 60 or stm.message_count() == 1
    expected = sum(h.message_tokens(i) for i in stm.indices())
    assert stm.token_count() == expected
    assert not stm.over_budget()


def test_pins_the_newest_real_user_message_when_evicting_past_it() -> None:
    h = MessageHistory([user("old task"), user("the task"), *call(1), *call(2), *call(3)])
    stm = ShortTermMemory(h)
    stm.evict_to(max_messages=2)
    assert stm.pinned == (1,)
    assert stm.messages()[0]["content"] == "the task"
    assert stm.indices()[0] == 1
    h.append(user("new task"))
    # a later trim re-pins (here the new task is inside the window: no pin)
    stm.evict_to(max_messages=1)
    assert stm.pinned == ()


def test_system_injected_user_messages_are_not_anchors() -> None:
    h = MessageHistory([user("real"), user("injected", system_injected=True), *call(1), *call(2)])
    stm = ShortTermMemory(h)
    stm.evict_to(max_messages=1)
    assert [h[i]["content"] for i in stm.pinned] == ["real"]


def test_no_pin_when_disabled() -> None:
    h = MessageHistory([user("task"), *call(1), *call(2)])
    stm = ShortTermMemory(h)
    stm.evict_to(max_messages=1, pin_anchor=False)
    assert stm.pinned == ()


def test_sync_after_history_rewrites() -> None:
    h = MessageHistory([user("task"), *call(1, 2), *call(2, 2), *call(3, 2)])
    stm = ShortTermMemory(h)
    stm.evict_to(max_messages=3)
    assert stm.start == 7 and stm.pinned == (0,)
    h.truncate_from(5)  # the window's start is now past the end
    assert stm.start == 5
    assert stm.message_count() == 1  # the pinned task only
    h.delete_where(lambda m: m["role"] == "user")  # the pin target is gone
    assert stm.pinned == ()
    assert stm.token_count() == sum(h.message_tokens(i) for i in stm.indices())


def test_start_moves_back_to_its_unit_when_it_lands_on_a_tool_message() -> None:
    h = MessageHistory([user("task"), *call(1, 3)])
    stm = ShortTermMemory(h, start=3)
    h.replace_system_prompt("sys")  # a rewrite: positions are re-validated
    assert h[stm.start]["role"] != "tool"


def test_state_round_trip() -> None:
    h = MessageHistory([user("task"), *call(1), *call(2)])
    stm = ShortTermMemory(h)
    stm.evict_to(max_messages=2)
    state = stm.state()
    other = ShortTermMemory(h)
    other.restore(state)
    assert (other.start, other.pinned) == (stm.start, stm.pinned)
    with pytest.raises(InvalidArgumentError):
        other.restore({"format": "something else"})
    with pytest.raises(InvalidArgumentError):
        other.restore({**state, "version": 99})


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True])
def test_bounds_are_validated(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        ShortTermMemory(max_messages=bad)
    with pytest.raises(InvalidArgumentError):
        ShortTermMemory(max_tokens=bad)


def test_standalone_window_owns_a_history() -> None:
    stm = ShortTermMemory(max_messages=3)
    for i in range(5):
        stm.add(user(f"m{i}"))
    assert len(stm.history) == 5
    assert [m["content"] for m in stm.messages()] == ["m2", "m3", "m4"]
    assert "ShortTermMemory(start=2" in repr(stm)


class WindowMachine(RuleBasedStateMachine):
    """The window against an independent list model.

    The model is its own list of the messages appended (tagged by a unique
    content), not the history. Checked after every step: the window shows
    whole units, a contiguous suffix of the model plus pins that are real
    user messages before it; it fits its budget or is down to the newest
    unit; and nothing is lost: every message of the model, user messages
    included, is either shown or was handed to ``on_evict``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.counter = HeuristicCounter()
        self.history = MessageHistory(token_counter=self.counter)
        self.evicted: list[str] = []  # tags of the evicted messages, in eviction order
        self.stm = ShortTermMemory(
            self.history,
            max_tokens=120,
            on_evict=lambda batch: self.evicted.extend(m["content"] or "" for m in batch),
        )
        self.model: list[dict[str, Any]] = []  # {"tag", "role", "real_user"}
        self.n = 0

    def tag(self, kind: str, size: int) -> str:
        self.n += 1
        return f"{kind}{self.n}:" + "x" * size

    def append(self, message: dict[str, Any]) -> None:
        if message["role"] == "user" and self.model and self.model[-1]["role"] == "assistant":
            # A user message drops a trailing assistant message whose tool calls were never
            # answered (every assistant message here calls tools): a documented repair.
            self.model.pop()
        self.history.append(message)
        real = message["role"] == "user" and not any(
            message.get(f) for f in ("system_injected", "session_context", "memory_update")
        )
        self.model.append({"tag": message["content"], "role": message["role"], "real": real})

    @rule(
        size=st.integers(1, 200),
        flag=st.sampled_from([None, "system_injected", "session_context", "memory_update"]),
    )
    def add_user(self, size: int, flag: str | None) -> None:
        self.append(user(self.tag("u", size), **({flag: True} if flag else {})))
        self.stm.enforce()

    @rule(results=st.integers(0, 3), size=st.integers(1, 80))
    def add_tool_unit(self, results: int, size: int) -> None:
        ids = [f"id{self.n}_{j}" for j in range(results)] or [f"id{self.n}"]
        self.append(
            {
                "role": "assistant",
                "content": self.tag("a", 1),
                "tool_calls": [
                    {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    for c in ids
                ],
            }
        )
        for c in ids[:results]:
            self.append({"role": "tool", "tool_call_id": c, "content": self.tag("t", size)})
        self.stm.enforce()

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        k = data.draw(st.integers(0, len(self.model)))
        self.history.truncate_from(k)
        gone = {m["tag"] for m in self.model[k:]}
        del self.model[k:]
        self.evicted[:] = [t for t in self.evicted if t not in gone]

    @invariant()
    def history_matches_the_model(self) -> None:
        assert [m["content"] for m in self.history] == [m["tag"] for m in self.model]

    @invariant()
    def window_is_a_suffix_of_whole_units_plus_real_user_pins(self) -> None:
        start = self.stm.start
        shown = [m["content"] for m in self.stm.messages()]
        pins = self.stm.pinned
        suffix = [m["tag"] for m in self.model[start:]]
        assert shown == [self.model[i]["tag"] for i in pins] + suffix
        assert start == len(self.model) or self.model[start]["role"] != "tool"
        assert all(i < start and self.model[i]["real"] for i in pins)

    @invariant()
    def within_budget_or_one_unit(self) -> None:
        units = [
            i for i in range(self.stm.start, len(self.model)) if self.model[i]["role"] != "tool"
        ]
        tokens = sum(count_message(self.history[i], self.counter) for i in self.stm.indices())
        assert len(units) <= 1 or tokens <= 120

    @invariant()
    def count_matches_a_fresh_sum(self) -> None:
        assert self.stm.token_count() == sum(
            count_message(self.history[i], self.counter) for i in self.stm.indices()
        )

    @invariant()
    def nothing_is_lost(self) -> None:
        shown = {m["content"] for m in self.stm.messages()}
        evicted = set(self.evicted)
        for m in self.model:  # user messages included
            assert m["tag"] in shown or m["tag"] in evicted, m["tag"][:12]


TestWindowMachine = WindowMachine.TestCase


def test_a_tail_rewritten_below_the_start_is_shown_not_skipped() -> None:
    h = MessageHistory([user("first task"), *call(1), *call(2), *call(3)])
    stm = ShortTermMemory(h)
    stm.evict_to(max_messages=2)
    assert stm.start == 5
    h.truncate_from(2)  # back to [user, assistant-with-a-call]
    assert stm.start == 2
    h.append(user("the new task"))  # drops the unanswered assistant: the tail from 1 is new
    assert [m["content"] for m in stm.messages()] == ["first task", "the new task"]
    assert stm.start == 0 or h[stm.start - 1]["content"] == "first task"


def test_window_on_evict_receives_what_evict_to_returns() -> None:
    seen: list[list[Message]] = []
    h = MessageHistory([user("a"), *call(1), *call(2)])
    stm = ShortTermMemory(h, on_evict=seen.append)
    out = stm.evict_to(max_messages=1)
    assert seen == [out] and out == h[:3]
