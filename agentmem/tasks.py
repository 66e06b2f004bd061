"""A session's task bookkeeping: iteration counts, the finished marker, and task handles.

A task is one user request and the agent's work on it (DESIGN section 6).
Who owns what:

* The :class:`~agentmem.time_machine.TimeMachine` is the one owner of task
  ids and of the task being worked on: ``next_task_id`` (the id the next
  task gets), ``current_task_id`` (the newest id issued) and
  ``active_task_id`` (the task whose end state is on disk; later turns
  belong to it). Nothing here keeps a copy of those, so a process killed
  between two writes cannot leave two disagreeing answers behind.
* :class:`TaskTracker` keeps only what the tree does not: how many LLM
  iterations each task took, and which tasks ``finish_task()`` ended. Both
  are keyed by task id, so neither needs an update when the active task
  changes: the *open* task is the active one unless it was finished (a
  task is open from its start until it is finished; an undo or a switch
  never reopens a finished task).
* :class:`TaskGate` serialises every change of the active task with every
  write that goes through a :class:`TaskHandle`, so a writer that holds a
  handle either writes before the change or is refused with
  :class:`~agentmem.errors.StaleTaskError` after it: a slow sub-agent that
  wakes after the user undid its task or started another cannot write into
  someone else's task (the seed's "self-terminates before it can write to
  history").

The tracker's state is a JSON-safe mapping ``{"finished": [ids],
"iterations": {id: n}}`` inside the session state (which carries the
format version). Malformed entries are dropped one by one, never raised:
the messages, which matter most, are intact either way. State written
before the time machine owned the ids (``{"next_id", "current",
"iterations"}``) is read too: a ``current`` of ``None`` meant the active
task had been finished.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, TypeGuard, TypeVar

from agentmem.errors import InvalidArgumentError, InvalidMessageError, StaleTaskError
from agentmem.time_machine import TimeMachine

__all__ = ["TaskGate", "TaskHandle", "TaskTracker", "finish_interrupted_start"]

T = TypeVar("T")

_log = logging.getLogger("agentmem.memory")


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int


class TaskTracker:
    """Per-task LLM iteration counts and the finished marker. Thread-safe.

    Attributes:
        finished: The tasks ``finish_task()`` ended.
    """

    def __init__(
        self, state: Mapping[str, Any] | None = None, *, active: int | None = None
    ) -> None:
        """Resume from ``state`` (as returned by :meth:`state`), or start fresh.

        Args:
            state: A saved tracker state; malformed fields are ignored.
            active: The time machine's active task, to read a state written
                before the finished marker existed (its ``current: None``
                meant the active task was finished).
        """
        state = state if isinstance(state, Mapping) else {}
        finished = state.get("finished")
        if "finished" not in state and "current" in state:
            finished = [active] if state["current"] is None else []
        self.finished: set[int] = {
            i for i in (finished if isinstance(finished, list) else ()) if _is_int(i)
        }
        iterations = state.get("iterations")
        self._iterations: dict[str, int] = {
            str(k): v
            for k, v in (iterations.items() if isinstance(iterations, Mapping) else ())
            if _is_int(v) and v >= 0
        }
        self._lock = threading.Lock()

    def open_task(self, active: int | None) -> int | None:
        """``active`` while it is open (not finished), else ``None``."""
        return None if active is None or active in self.finished else active

    def start(self, task_id: int) -> None:
        """A new task starts at 0 iterations."""
        with self._lock:
            self._iterations[str(task_id)] = 0

    def finish(self, task_id: int) -> None:
        """Mark ``task_id`` finished: never open again, even while it stays active."""
        with self._lock:
            self.finished.add(task_id)

    def count_iteration(self, task_id: int | None) -> None:
        """Count one LLM iteration of ``task_id`` (nothing for ``None``)."""
        if task_id is None:
            return
        with self._lock:
            key = str(task_id)
            self._iterations[key] = self._iterations.get(key, 0) + 1

    def iterations(self, task_id: int | None) -> int:
        """LLM iterations counted for ``task_id`` (0 for ``None`` or an unknown task).

        Raises:
            InvalidArgumentError: ``task_id`` is neither ``None`` nor an int.
        """
        if task_id is None:
            return 0
        if not _is_int(task_id):
            raise InvalidArgumentError(f"task_id must be an int or None, got {task_id!r}")
        return self._iterations.get(str(task_id), 0)

    def state(self) -> dict[str, Any]:
        """JSON-safe state for the session to persist."""
        with self._lock:
            return {"finished": sorted(self.finished), "iterations": dict(self._iterations)}

    def __repr__(self) -> str:
        return f"TaskTracker(finished={sorted(self.finished)}, tasks={len(self._iterations)})"


def finish_interrupted_start(
    time_machine: TimeMachine,
    messages: Iterable[Mapping[str, Any]],
    summary: Callable[[Mapping[str, Any]], str],
) -> list[int]:
    """Start, in the tree, each task whose user turn is stored but which the tree lacks.

    ``Session.start_task`` stores the user turn first, then starts the task
    in the time machine; a process killed between the two leaves a turn
    tagged with an id above every id the tree issued. Its start is finished
    here, as a child of the active task (where ``start_task`` would have put
    it), so the turn is on the active chain (in the next payload) and its id
    is never issued again. Returns the ids started.
    """
    newest = time_machine.current_task_id or 0
    started: dict[int, Mapping[str, Any]] = {}
    for message in messages:
        task_id = message.get("task_id")
        if _is_int(task_id) and task_id > newest:
            started.setdefault(task_id, message)
    for task_id in sorted(started):
        time_machine.start_new_task(summary(started[task_id]), task_id=task_id)
        _log.warning(
            "session %s: finished starting task %d (its process died half-way)",
            time_machine.session_id,
            task_id,
        )
    return sorted(started)


class TaskGate:
    """Orders changes of the active task against writes through task handles.

    Args:
        active: Reads the active task id from its one owner (the time machine).

    Every change of the active task runs inside :meth:`switching`; every
    write through a handle runs inside :meth:`writing`. Both hold one
    re-entrant lock, and each switch bumps a generation number that
    handles remember, so a handle taken before a switch is stale after it,
    even when a later switch comes back to the same task.
    """

    def __init__(self, active: Callable[[], int | None]) -> None:
        self._active = active
        self._lock = threading.RLock()
        self._generation = 0
        self._tied: TaskHandle[Any] | None = None

    def tie_to(self, handle: TaskHandle[Any]) -> None:
        """Make every :meth:`writing` also hold ``handle``'s gate and check it (a sub-agent).

        Raises:
            InvalidArgumentError: ``handle`` is not a :class:`TaskHandle`.
        """
        if not isinstance(handle, TaskHandle):
            raise InvalidArgumentError(f"expected a TaskHandle, got {type(handle).__name__}")
        with self._lock:
            self._tied = handle

    @contextmanager
    def switching(self) -> Iterator[None]:
        """Hold the gate while the active task changes; handles taken before are stale after.

        The generation moves on even when the change raised: the caller
        cannot always tell whether the task on disk is still the one a
        handle was taken for, and refusing a write is the safe side.
        """
        with self._lock:
            try:
                yield
            finally:
                self._generation += 1

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the gate (no switch can happen meanwhile)."""
        with self._lock:
            yield

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the gate for one write; when tied, also hold and check the tied task's.

        Raises:
            StaleTaskError: the tied handle is stale; the write must not happen.
        """
        with self._lock:
            if self._tied is None:
                yield
            else:
                with self._tied.holding():
                    yield

    def handle(self, write: Callable[[Mapping[str, Any]], T]) -> TaskHandle[T]:
        """A handle on the active task; ``write(message)`` (run under the gate) appends."""
        with self._lock:
            return TaskHandle(self, self._active(), self._generation, write)

    def _is_current(self, handle: TaskHandle[Any]) -> bool:
        return handle._generation == self._generation and handle.task_id == self._active()


class TaskHandle(Generic[T]):
    """The right to write into one task, refused once another task became active.

    Made by :meth:`agentmem.Session.task_handle`. Give it to the thread
    (or sub-agent) that works on the task; its :meth:`append` lands in that
    task or raises :class:`~agentmem.errors.StaleTaskError`, never into
    the task the user has moved on to.

    Attributes:
        task_id: The task this handle writes into (``None``: the session's
            initial state, before any task).
    """

    def __init__(
        self,
        gate: TaskGate,
        task_id: int | None,
        generation: int,
        write: Callable[[Mapping[str, Any]], T],
    ) -> None:
        self._gate = gate
        self.task_id = task_id
        self._generation = generation
        self._write = write

    @property
    def stale(self) -> bool:
        """Whether the task changed since the handle was taken (its writes are refused)."""
        with self._gate.locked():
            return not self._gate._is_current(self)

    def check(self) -> None:
        """Raise if the handle is stale (for work about to start, not only for writes).

        Raises:
            StaleTaskError: another task became active after the handle was taken.
        """
        with self.holding():
            pass

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Check the handle and keep its task active (hold its gate) for the block.

        Raises:
            StaleTaskError: another task became active after the handle was taken.
        """
        with self._gate.locked():
            if not self._gate._is_current(self):
                raise StaleTaskError(self.task_id, self._gate._active())
            yield

    def append(self, message: Mapping[str, Any]) -> T:
        """Append ``message`` into this handle's task, unless another task became active.

        The check and the append happen under the session's task gate, so
        an undo, a switch or a new task either waits for this append or
        makes it raise; it never lands after the switch.

        Returns:
            The stored copy, as ``Session.append`` returns it.

        Raises:
            StaleTaskError: another task became active since the handle was
                taken (by ``start_task``, ``undo`` or ``switch_to_task``);
                nothing is stored.
            InvalidMessageError: as ``Session.append``, or the message names
                another ``task_id``.
        """
        if isinstance(message, Mapping) and message.get("task_id", self.task_id) != self.task_id:
            raise InvalidMessageError(
                f"a handle of task {self.task_id} cannot append into task {message['task_id']!r}",
                field="task_id",
            )
        with self.holding():
            return self._write(message)

    def __repr__(self) -> str:
        return f"TaskHandle(task_id={self.task_id!r}, stale={self.stale})"
