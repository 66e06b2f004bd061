"""TaskTracker: task ids only grow, iterations are counted per task, state round-trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from agentmem.errors import InvalidArgumentError
from agentmem.tasks import TaskTracker


def test_fresh_tracker() -> None:
    tracker = TaskTracker()
    assert (tracker.next_id, tracker.current, tracker.iterations()) == (1, None, 0)
    tracker.count_iteration()  # nothing running: ignored
    assert tracker.state() == {"next_id": 1, "current": None, "iterations": {}}


def test_ids_never_reuse_a_stored_message_id() -> None:
    stale = {"next_id": 2, "current": 1, "iterations": {"1": 3}}
    tracker = TaskTracker(stale, used_ids=[1, 4, None, "7", True, 2])
    assert tracker.next_id == 5  # 4 is used; "7" and True are not ids
    assert tracker.current == 1
    assert tracker.iterations(1) == 3


@pytest.mark.parametrize(
    ("state", "third"),
    [
        (None, 0),
        ("garbage", 0),
        ({"next_id": "3", "current": 2.0, "iterations": [1, 2]}, 0),
        ({"next_id": None, "iterations": {"1": -4, "2": "x", 3: 5}}, 5),
    ],
)
def test_malformed_state_is_dropped_field_by_field(state: Any, third: int) -> None:
    tracker = TaskTracker(state)
    assert tracker.next_id == 1
    assert tracker.current is None
    assert tracker.iterations(1) == tracker.iterations(2) == 0
    assert tracker.iterations(3) == third  # the one well-formed entry survives


def test_start_only_accepts_the_next_id() -> None:
    tracker = TaskTracker()
    with pytest.raises(InvalidArgumentError):
        tracker.start(2)
    with pytest.raises(InvalidArgumentError):
        tracker.start(True)  # type: ignore[arg-type]
    tracker.start(1)
    assert (tracker.current, tracker.next_id) == (1, 2)
    with pytest.raises(InvalidArgumentError):
        tracker.iterations("1")  # type: ignore[arg-type]


class TrackerMachine(RuleBasedStateMachine):
    """The tracker against a plain model; a save/restore may happen at any step."""

    def __init__(self) -> None:
        super().__init__()
        self.tracker = TaskTracker()
        self.next_id = 1
        self.current: int | None = None
        self.iterations: dict[int, int] = {}
        self.used: list[int] = []

    @rule()
    def start(self) -> None:
        task_id = self.tracker.next_id
        assert task_id == self.next_id
        self.tracker.start(task_id)
        self.used.append(task_id)
        self.next_id += 1
        self.current = task_id
        self.iterations[task_id] = 0

    @rule()
    def finish(self) -> None:
        assert self.tracker.finish() == self.current
        self.current = None

    @rule(times=st.integers(min_value=1, max_value=3))
    def iterate(self, times: int) -> None:
        for _ in range(times):
            self.tracker.count_iteration()
            if self.current is not None:
                self.iterations[self.current] += 1

    @rule(lose_state=st.booleans())
    def resume(self, lose_state: bool) -> None:
        # A crash may lose the state save; the stored messages still carry their ids.
        state = None if lose_state else self.tracker.state()
        self.tracker = TaskTracker(state, used_ids=self.used)
        if lose_state:
            self.current = None
            self.iterations = {}

    @invariant()
    def agrees_with_the_model(self) -> None:
        assert self.tracker.next_id == self.next_id
        assert self.tracker.current == self.current
        for task_id in range(1, self.next_id):
            assert self.tracker.iterations(task_id) == self.iterations.get(task_id, 0)
        assert self.tracker.iterations() == (
            self.iterations.get(self.current, 0) if self.current is not None else 0
        )


TestTrackerMachine = TrackerMachine.TestCase
