"""ShortTermMemory: whole-unit eviction, bounds, pins, re-validation, persistence."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from agentmem import HeuristicCounter, InvalidArgumentError, MessageHistory, ShortTermMemory
from agentmem.messages import Message


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
    """The window against a plain list model: what it shows is a suffix of whole units
    that fits the budget (or is the newest unit), and nothing is lost."""

    def __init__(self) -> None:
        super().__init__()
        self.history = MessageHistory(token_counter=HeuristicCounter())
        self.evicted: list[Message] = []
        self.stm = ShortTermMemory(self.history, max_tokens=120, on_evict=self.evicted.extend)
        self.n = 0

    @rule(size=st.integers(1, 200))
    def add_user(self, size: int) -> None:
        self.stm.add(user("u" * size))

    @rule(results=st.integers(0, 3), size=st.integers(1, 80))
    def add_tool_unit(self, results: int, size: int) -> None:
        self.n += 1
        ids = [f"id{self.n}_{j}" for j in range(results)] or [f"id{self.n}"]
        self.history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    for c in ids
                ],
            }
        )
        for c in ids[:results]:
            self.history.append({"role": "tool", "tool_call_id": c, "content": "t" * size})
        self.stm.enforce()

    @precondition(lambda self: len(self.history) > 0)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        self.history.truncate_from(data.draw(st.integers(0, len(self.history))))
        self.evicted[:] = [m for m in self.evicted if any(m is h for h in self.history)]

    @invariant()
    def window_is_a_suffix_of_whole_units(self) -> None:
        start = self.stm.start
        assert start == len(self.history) or self.history[start]["role"] != "tool"
        assert self.stm.indices()[len(self.stm.pinned) :] == list(range(start, len(self.history)))

    @invariant()
    def within_budget_or_one_unit(self) -> None:
        units = self.stm.unit_starts()
        assert len(units) <= 1 or not self.stm.over_budget()

    @invariant()
    def count_matches_a_fresh_sum(self) -> None:
        assert self.stm.token_count() == sum(
            self.history.message_tokens(i) for i in self.stm.indices()
        )

    @invariant()
    def nothing_is_lost(self) -> None:
        shown = {id(m) for m in self.stm.messages()}
        for m in self.history:
            assert id(m) in shown or any(m is e for e in self.evicted) or m["role"] == "user"


TestWindowMachine = WindowMachine.TestCase
