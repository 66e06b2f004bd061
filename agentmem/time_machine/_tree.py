"""The task tree: where task ids are issued, which task is active, what each task touched.

Tasks form a tree. Task ``0`` is the *root*: the session's initial state
(public API reports it as ``None``). Each task keeps two maps, ``before``
(what a path held when the task first touched it) and ``after`` (what it
held when the task stopped being the active one); a value is a
:data:`~agentmem.time_machine._snapshots.Ref`. The root's ``after`` holds the
initial content of every path any task ever touched, so the state at the
end of task ``t`` is, for each path, the ``after`` of the closest task on
``t``'s ancestor chain that touched it (:meth:`TaskTree.value`).

Only the *active* task can change: paths it touches are *dirty* until it is
left (a new task, an undo, a switch), when :meth:`TaskTree.settle` freezes
their content into its ``after``. Editing a task that already has children
(after an undo) pins the path's old value into each child that had not
touched it (:meth:`TaskTree.touch`), so no other task's state changes.

Task ids only grow (:meth:`TaskTree.check_new_id`): an id is never issued
twice, even one that retention (:meth:`TaskTree.retain`) removed or folded
into the initial state (*absorbed*).

This module does no I/O: what a path holds on disk is passed in by the
caller (:mod:`agentmem.time_machine._capture` reads it), and the record is
saved by :class:`~agentmem.time_machine._machine.TimeMachine`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from agentmem.errors import InvalidArgumentError
from agentmem.time_machine._snapshots import Ref, TaskRecord, blob_of, is_marker, parents

__all__ = ["ROOT", "TaskTree", "public"]

ROOT: Final = 0
"""The initial state's task id inside the tree (``None`` in the public API)."""


def public(task_id: int) -> int | None:
    """``task_id`` as the public API reports it (``None`` for the root)."""
    return None if task_id == ROOT else task_id


class TaskTree:
    """The tasks of one session, the active one, and the paths it has touched.

    Attributes:
        tasks: task id -> its record (the root included).
        active: The task whose end state is on disk.
        latest: The newest task id issued.
        dirty: Paths the active task touched since it became active.
        created_dirs: Directories a task created (removed again when emptied by a restore).
        absorbed: Ids of tasks retention folded into the initial state.
    """

    def __init__(self) -> None:
        self.tasks: dict[int, TaskRecord] = {ROOT: TaskRecord(parent=None)}
        self.active = ROOT
        self.latest = ROOT
        self.dirty: set[str] = set()
        self.created_dirs: set[str] = set()
        self.absorbed: list[int] = []
        self._chain_cache: tuple[tuple[int, int, int, int], frozenset[int], list[int]] | None = None

    # ------------------------------------------------------------------ the record

    def load(self, doc: Mapping[str, Any]) -> None:
        """Take the tree from a saved record.

        Raises:
            KeyError, TypeError, ValueError, AttributeError, InvalidArgumentError: the
                record is damaged (the tree is then left as it was).
        """
        tasks = {int(k): TaskRecord.from_json(v) for k, v in doc["tasks"].items()}
        if ROOT not in tasks:
            raise InvalidArgumentError("no root task")
        active = int(doc["active"])
        latest = int(doc.get("latest", active))
        dirty = set(doc.get("dirty", ()))
        created_dirs = set(doc.get("created_dirs", ()))
        absorbed = [int(i) for i in doc.get("absorbed", ())]
        if active not in tasks:
            raise InvalidArgumentError(f"active task {active} unknown")
        _check_links(tasks)
        if not all(isinstance(rel, str) for rel in dirty | created_dirs):
            raise InvalidArgumentError("dirty or created_dirs holds a non-string path")
        self.tasks, self.active, self.latest = tasks, active, latest
        self.dirty, self.created_dirs, self.absorbed = dirty, created_dirs, absorbed

    def to_json(self) -> dict[str, Any]:
        """The tree's part of the saved record."""
        return {
            "active": self.active,
            "latest": self.latest,
            "dirty": sorted(self.dirty),
            "created_dirs": sorted(self.created_dirs),
            "absorbed": self.absorbed,
            "tasks": {str(k): t.to_json() for k, t in self.tasks.items()},
        }

    def reset(self) -> None:
        """Forget every task: back to the initial state alone."""
        self.tasks = {ROOT: TaskRecord(parent=None)}
        self.active = self.latest = ROOT
        self.dirty.clear()
        self.absorbed.clear()

    def adopt(self, known_task_ids: Iterable[object]) -> None:
        """A session from before the time machine: its task ids become one chain."""
        parent = ROOT
        for task_id in sorted({i for i in known_task_ids if type(i) is int and i > 0}):
            self.tasks[task_id] = TaskRecord(parent=parent)
            parent = self.active = self.latest = task_id

    # ------------------------------------------------------------------ reading

    def children(self, task_id: int) -> list[int]:
        return sorted(k for k, t in self.tasks.items() if t.parent == task_id and k != ROOT)

    def chain(self, task_id: int) -> list[int]:
        """``task_id``'s ancestors, the root first, ending with ``task_id``."""
        chain = []
        node: int | None = task_id
        while node is not None:
            chain.append(node)
            node = self.tasks[node].parent
        return chain[::-1]

    def value(self, chain: list[int], rel: str) -> Ref:
        """What ``rel`` holds at the end of the last task of ``chain``."""
        for task_id in reversed(chain):
            after = self.tasks[task_id].after
            if rel in after:
                return after[rel]
        return None

    def known(self, task_id: object) -> int:
        """The tree id of a public task id (``None``: the root); raises for any other."""
        if task_id is None:
            return ROOT
        if type(task_id) is not int or task_id == ROOT or task_id not in self.tasks:
            raise InvalidArgumentError(f"task_id {task_id!r} is not a task of this session")
        return task_id

    def __contains__(self, task_id: object) -> bool:
        if type(task_id) is not int or task_id == ROOT:
            return False
        return task_id in self.tasks or task_id in self.absorbed

    @property
    def has_tasks(self) -> bool:
        return len(self.tasks) > 1 or bool(self.absorbed)

    @property
    def next_task_id(self) -> int:
        """Above every id ever issued."""
        return max([self.latest, *self.tasks, *self.absorbed]) + 1

    def active_chain(self) -> tuple[frozenset[int], list[int]]:
        """The active chain (absorbed tasks first, without the root), cached.

        A task's parent only changes when retention removes a task, so the
        chain is a function of the active task, the tree's size and the
        absorbed tasks.
        """
        key = (self.active, len(self.tasks), len(self.absorbed), id(self.tasks))
        if self._chain_cache is None or self._chain_cache[0] != key:
            chain = [*self.absorbed, *self.chain(self.active)[1:]]
            self._chain_cache = (key, frozenset(chain), chain)
        return self._chain_cache[1], self._chain_cache[2]

    def history(self, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` tasks, oldest first (see ``TimeMachine.get_task_history``)."""
        chain = set(self.chain(self.active))
        out = []
        for task_id in sorted(self.tasks)[1:][-limit:] if limit else []:
            task = self.tasks[task_id]
            status = (
                "current" if task_id == self.active else "past" if task_id in chain else "undone"
            )
            out.append(
                {
                    "task_id": task_id,
                    "parent_id": public(task.parent or ROOT),
                    "summary": task.summary,
                    "status": status,
                    "has_branches": len(self.children(task_id)) > 1,
                    "files": sorted(
                        set(task.after) | (self.dirty if status == "current" else set())
                    ),
                    "created_at": task.created_at,
                }
            )
        return out

    def blobs(self) -> set[str]:
        """Blobs the tasks' records refer to."""
        refs: set[str] = set()
        for task in self.tasks.values():
            for ref in (*task.before.values(), *task.after.values()):
                blob = blob_of(ref)
                if blob:
                    refs.add(blob)
        return refs

    # ------------------------------------------------------------------ issuing tasks

    def check_new_id(self, task_id: int | None, summary: object) -> int:
        """The id a new task gets: ``task_id``, or :attr:`next_task_id` when ``None``.

        Raises:
            InvalidArgumentError: ``task_id`` is not an int of at least
                :attr:`next_task_id`, or ``summary`` is not a string.
        """
        if task_id is None:
            task_id = self.next_task_id
        if type(task_id) is not int or task_id < self.next_task_id:
            raise InvalidArgumentError(
                f"task_id must be a new id (an int from {self.next_task_id}), got {task_id!r}"
            )
        if not isinstance(summary, str):
            raise InvalidArgumentError(f"summary must be a string, got {summary!r}")
        return task_id

    def add(self, task_id: int, summary: str) -> None:
        """Start ``task_id`` (checked by :meth:`check_new_id`) as a child of the active task."""
        self.tasks[task_id] = TaskRecord(
            parent=self.active, summary=summary[:200], created_at=time.time()
        )
        self.active = self.latest = task_id

    # ------------------------------------------------------------------ changing tasks

    def touch(self, rel: str, before: Ref, is_dir: Callable[[str], bool]) -> None:
        """``rel`` is about to change in the active task; ``before`` is its current value.

        ``is_dir(parent)`` says whether a parent directory exists now (a path
        created by the task also created the parents that do not).
        """
        if rel in self.dirty:
            return
        active = self.active
        root = self.tasks[ROOT]
        if rel not in root.after:
            root.after[rel] = before
            if before is None:
                for parent in parents(rel):
                    if is_dir(parent):
                        break
                    self.created_dirs.add(parent)
        task = self.tasks[active]
        if active != ROOT and rel not in task.before:
            task.before[rel] = before
        for child in self.children(active):
            other = self.tasks[child]
            if rel not in other.after:
                other.before[rel] = other.after[rel] = before
        self.dirty.add(rel)

    def settle(self, value_now: Callable[[str], Ref]) -> None:
        """Freeze the active task's dirty paths into its AFTER record (``value_now(rel)``)."""
        task = self.tasks[self.active]
        for rel in sorted(self.dirty):
            task.after[rel] = value_now(rel)
        self.dirty.clear()

    def seen_before(self, undoing: list[int], rel: str, value: Ref) -> Ref:
        """What ``rel`` held when the first of ``undoing`` touched it (else ``value``).

        Going back to an ancestor whose own value for ``rel`` is unknown, the
        content the first undone task found there is what the disk held in
        that state: putting it back replaces only what the undone tasks wrote.
        """
        for task_id in undoing:
            before = self.tasks[task_id].before
            if rel in before:
                return before[rel]
        return value

    def lose_track(self, target: int, rels: Iterable[str], unknown: str) -> None:
        """The disk does not hold ``target``'s value for ``rels``: mark them ``unknown`` there.

        So no later restore through this state replaces them on the strength
        of a value the disk never held again. Children of ``target`` that had
        not touched a path keep the value they had (pinned, as an edit does).
        """
        chain = self.chain(target)
        task = self.tasks[target]
        for rel in rels:
            value = self.value(chain, rel)
            if is_marker(value):
                continue
            for child in self.children(target):
                other = self.tasks[child]
                if rel not in other.after:
                    other.before[rel] = other.after[rel] = value
            task.after[rel] = unknown

    def retain(self, max_tasks: int, max_bytes: int) -> None:
        """Drop the oldest tasks off the active chain, then fold the chain's oldest into the root.

        Until at most ``max_tasks`` tasks and ``max_bytes`` new snapshot bytes are left.
        """

        def over() -> bool:
            total = sum(t.bytes for t in self.tasks.values())
            return len(self.tasks) - 1 > max_tasks or total > max_bytes

        keep = set(self.chain(self.active))
        while over():
            leaves = [k for k in sorted(self.tasks) if k not in keep and not self.children(k)]
            if leaves:
                del self.tasks[leaves[0]]
                continue
            roots = self.children(ROOT)
            if len(roots) == 1 and roots[0] != self.active:
                first = roots[0]
                squashed = self.tasks.pop(first)
                self.tasks[ROOT].after.update(squashed.after)
                self.tasks[ROOT].bytes += squashed.bytes
                for t in self.tasks.values():
                    if t.parent == first:
                        t.parent = ROOT
                self.absorbed.append(first)
                keep.discard(first)
                continue
            break


def _check_links(tasks: Mapping[int, TaskRecord]) -> None:
    """Every task's parent exists and no chain of parents loops.

    Raises:
        InvalidArgumentError: a damaged record (a missing parent, a loop).
    """
    settled: set[int] = set()
    for start in tasks:
        seen: set[int] = set()
        node: int | None = start
        while node is not None and node not in settled:
            if node in seen:
                raise InvalidArgumentError(f"task {node} is its own ancestor")
            seen.add(node)
            record = tasks.get(node)
            if record is None:
                raise InvalidArgumentError(f"task {start} has an unknown ancestor {node}")
            node = record.parent
        settled |= seen
