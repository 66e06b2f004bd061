"""Task ids and per-task LLM iteration counts of one session.

A task is one user request and the agent's work on it (DESIGN section 6:
the time machine checkpoints and restores per task). The task tree (parents,
the active task, branches) belongs to :class:`agentmem.time_machine.TimeMachine`;
:class:`TaskTracker` keeps what the tree does not: which id the next task
gets (never one a stored message or the tree carries) and how many LLM
iterations each task has taken. The facade starts each task in both.

Ids only grow: a tracker built from a stored session never hands out an id
that a stored message already carries, even when the saved tracker state is
missing or older than the messages (a crash between an append and the state
save).

The state is a JSON-safe mapping ``{"next_id", "current", "iterations"}``
that lives inside the session state (which carries the format version);
malformed entries are dropped field by field, never raised, because the
messages -- which matter most -- are intact either way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from agentmem.errors import InvalidArgumentError

__all__ = ["TaskTracker"]


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int


class TaskTracker:
    """Hands out task ids and counts LLM iterations per task. Thread-safe.

    Attributes:
        current: The running task's id, or ``None``.
    """

    def __init__(
        self, state: Mapping[str, Any] | None = None, used_ids: Iterable[object] = ()
    ) -> None:
        """Resume from ``state`` (as returned by :meth:`state`), or start fresh.

        Args:
            state: A saved tracker state; malformed fields are ignored.
            used_ids: Task ids already in use (those of stored messages);
                new ids are always larger. Non-int entries are ignored.
        """
        state = state if isinstance(state, Mapping) else {}
        used = max((i for i in used_ids if _is_int(i)), default=0)
        stored_next = state.get("next_id")
        self._next_id: int = max(stored_next if _is_int(stored_next) else 1, used + 1)
        current = state.get("current")
        self.current: int | None = current if _is_int(current) else None
        iterations = state.get("iterations")
        self._iterations: dict[str, int] = {
            str(k): v
            for k, v in (iterations.items() if isinstance(iterations, Mapping) else ())
            if _is_int(v) and v >= 0
        }
        self._lock = threading.Lock()

    @property
    def next_id(self) -> int:
        """The id :meth:`start` will accept next."""
        return self._next_id

    def skip_to(self, task_id: int) -> None:
        """Never hand out an id below ``task_id`` (one the time machine's tree already uses)."""
        with self._lock:
            if _is_int(task_id) and task_id > self._next_id:
                self._next_id = task_id

    def start(self, task_id: int) -> None:
        """Make ``task_id`` (which must be :attr:`next_id`) the running task, at 0 iterations.

        The caller reads :attr:`next_id`, stores the task's first message
        under it, and only then calls :meth:`start`, so a failed store
        consumes no id.

        Raises:
            InvalidArgumentError: ``task_id`` is not :attr:`next_id`.
        """
        with self._lock:
            if not _is_int(task_id) or task_id != self._next_id:
                raise InvalidArgumentError(
                    f"task_id must be the next id {self._next_id}, got {task_id!r}"
                )
            self._next_id = task_id + 1
            self.current = task_id
            self._iterations[str(task_id)] = 0

    def finish(self) -> int | None:
        """End the running task; returns its id (``None`` when none was running)."""
        with self._lock:
            task_id, self.current = self.current, None
            return task_id

    def count_iteration(self) -> None:
        """Count one LLM iteration of the running task (nothing when none runs)."""
        with self._lock:
            if self.current is not None:
                key = str(self.current)
                self._iterations[key] = self._iterations.get(key, 0) + 1

    def iterations(self, task_id: int | None = None) -> int:
        """LLM iterations counted for ``task_id`` (default: the running task; 0 if unknown).

        Raises:
            InvalidArgumentError: ``task_id`` is neither ``None`` nor an int.
        """
        if task_id is not None and not _is_int(task_id):
            raise InvalidArgumentError(f"task_id must be an int or None, got {task_id!r}")
        key = task_id if task_id is not None else self.current
        if key is None:
            return 0
        return self._iterations.get(str(key), 0)

    def state(self) -> dict[str, Any]:
        """JSON-safe state for the session to persist."""
        with self._lock:
            return {
                "next_id": self._next_id,
                "current": self.current,
                "iterations": dict(self._iterations),
            }

    def __repr__(self) -> str:
        return f"TaskTracker(current={self.current!r}, next_id={self._next_id})"
