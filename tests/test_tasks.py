"""TaskTracker, TaskGate and TaskHandle on their own (no session, no time machine).

The tracker counts iterations per task and remembers which task was
finished; which task is active comes from outside (the time machine). The
gate orders switches against handle writes.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from agentmem.errors import InvalidArgumentError, InvalidMessageError, StaleTaskError
from agentmem.tasks import TaskGate, TaskHandle, TaskTracker


def test_fresh_tracker() -> None:
    tracker = TaskTracker()
    assert (tracker.finished, tracker.iterations(None), tracker.iterations(1)) == (set(), 0, 0)
    tracker.count_iteration(None)  # nothing open: ignored
    assert tracker.state() == {"finished": [], "iterations": {}}
    assert tracker.open_task(None) is None and tracker.open_task(3) == 3


def test_a_finished_task_is_never_open_again() -> None:
    tracker = TaskTracker()
    tracker.start(1)
    tracker.count_iteration(1)
    tracker.finish(1)
    assert tracker.open_task(1) is None  # finished, though still active
    tracker.start(2)
    assert tracker.open_task(2) == 2  # another active task is open
    tracker.finish(2)
    assert tracker.open_task(1) is tracker.open_task(2) is None  # both stay finished
    assert tracker.iterations(1) == 1
    assert TaskTracker(tracker.state()).finished == {1, 2}


@pytest.mark.parametrize(
    ("state", "active", "finished"),
    [
        ({"next_id": 3, "current": None, "iterations": {"2": 4}}, 2, {2}),  # finished
        ({"next_id": 3, "current": 2, "iterations": {"2": 4}}, 2, set()),  # running
        ({"finished": [5, "6", True], "iterations": {"2": 4}}, 2, {5}),
    ],
)
def test_state_from_before_the_finished_tasks_is_read(
    state: dict[str, Any], active: int, finished: set[int]
) -> None:
    tracker = TaskTracker(state, active=active)
    assert tracker.finished == finished
    assert tracker.iterations(2) == 4


@pytest.mark.parametrize(
    ("state", "third"),
    [
        (None, 0),
        ("garbage", 0),
        ({"finished": "3", "iterations": [1, 2]}, 0),
        ({"finished": 2, "iterations": {"1": -4, "2": "x", 3: 5}}, 5),
    ],
)
def test_malformed_state_is_dropped_field_by_field(state: Any, third: int) -> None:
    tracker = TaskTracker(state)
    assert tracker.finished == set()
    assert tracker.iterations(1) == tracker.iterations(2) == 0
    assert tracker.iterations(3) == third  # the one well-formed entry survives


def test_iterations_refuse_a_non_int_task() -> None:
    with pytest.raises(InvalidArgumentError):
        TaskTracker().iterations("1")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        TaskTracker().iterations(True)  # type: ignore[arg-type]


class TrackerMachine(RuleBasedStateMachine):
    """The tracker against a plain model; the active task moves and a save/restore may happen."""

    def __init__(self) -> None:
        super().__init__()
        self.tracker = TaskTracker()
        self.active: int | None = None
        self.finished: set[int] = set()
        self.iterations: dict[int, int] = {}
        self.next_id = 1

    @rule()
    def start(self) -> None:
        self.active = self.next_id
        self.next_id += 1
        self.tracker.start(self.active)
        self.iterations[self.active] = 0

    @rule()
    def finish(self) -> None:
        if self.active is not None:
            self.tracker.finish(self.active)
            self.finished.add(self.active)

    @rule(data=st.data())
    def switch(self, data: st.DataObject) -> None:
        self.active = data.draw(st.sampled_from([None, *range(1, self.next_id)]))

    @rule(times=st.integers(min_value=1, max_value=3))
    def iterate(self, times: int) -> None:
        for _ in range(times):
            task = self.tracker.open_task(self.active)
            self.tracker.count_iteration(task)
            if self.active is not None and self.active not in self.finished:
                self.iterations[self.active] += 1

    @rule()
    def resume(self) -> None:
        self.tracker = TaskTracker(self.tracker.state(), active=self.active)

    @invariant()
    def agrees_with_the_model(self) -> None:
        expected_open = None if self.active in self.finished else self.active
        assert self.tracker.open_task(self.active) == expected_open
        for task_id in range(1, self.next_id):
            assert self.tracker.iterations(task_id) == self.iterations.get(task_id, 0)


TestTrackerMachine = TrackerMachine.TestCase


class Active:
    """A stand-in for the time machine's active task."""

    def __init__(self) -> None:
        self.task: int | None = 1

    def __call__(self) -> int | None:
        return self.task


def test_a_handle_is_stale_after_any_switch_even_back_to_its_task() -> None:
    active = Active()
    gate = TaskGate(active)
    written: list[dict[str, Any]] = []
    handle: TaskHandle[int] = gate.handle(lambda m: written.append(dict(m)) or len(written))
    assert handle.append({"content": "a"}) == 1 and not handle.stale
    with gate.switching():
        active.task = 2
    with gate.switching():
        active.task = 1  # back to the handle's task
    with pytest.raises(StaleTaskError) as err:
        handle.append({"content": "b"})
    assert (err.value.task_id, err.value.active_task_id) == (1, 1)
    assert written == [{"content": "a"}]
    assert "stale=True" in repr(handle)


def test_a_switch_that_raised_still_makes_handles_stale() -> None:
    gate = TaskGate(Active())
    handle = gate.handle(lambda m: None)
    with pytest.raises(RuntimeError), gate.switching():
        raise RuntimeError("the restore failed half-way")
    assert handle.stale


def test_a_task_changed_outside_the_gate_makes_handles_stale() -> None:
    active = Active()
    handle = TaskGate(active).handle(lambda m: None)
    active.task = 7  # e.g. the time machine's own undo_last_task()
    with pytest.raises(StaleTaskError):
        handle.check()


def test_a_handle_refuses_a_message_for_another_task() -> None:
    handle = TaskGate(Active()).handle(lambda m: m)
    with pytest.raises(InvalidMessageError, match="cannot append into task 2"):
        handle.append({"content": "x", "task_id": 2})
    assert handle.append({"content": "x", "task_id": 1}) == {"content": "x", "task_id": 1}


def test_tie_to_needs_a_handle_and_checks_it_on_every_write() -> None:
    parent_active = Active()
    parent = TaskGate(parent_active)
    child = TaskGate(Active())
    with pytest.raises(InvalidArgumentError):
        child.tie_to("not a handle")  # type: ignore[arg-type]
    child.tie_to(parent.handle(lambda m: None))
    with child.writing():
        pass
    with parent.switching():
        parent_active.task = 2
    with pytest.raises(StaleTaskError), child.writing():
        pytest.fail("a stale tie must not let the write run")


def test_a_write_and_a_switch_never_interleave() -> None:
    """While a handle's write runs, a switch waits; the switch's change comes after it."""
    active = Active()
    gate = TaskGate(active)
    inside, release = threading.Event(), threading.Event()
    order: list[str] = []

    def slow_write(message: Any) -> None:
        inside.set()
        assert release.wait(10)
        order.append("write")

    handle = gate.handle(slow_write)
    writer = threading.Thread(target=handle.append, args=({"content": "x"},))
    writer.start()
    assert inside.wait(10)

    def switch() -> None:
        with gate.switching():
            order.append("switch")
            active.task = 2

    switcher = threading.Thread(target=switch)
    switcher.start()
    switcher.join(0.05)  # give it time to run: without the gate it would go first
    release.set()
    writer.join(10)
    switcher.join(10)
    assert order == ["write", "switch"]
    assert handle.stale
