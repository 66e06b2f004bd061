"""TimeMachine: undo, redo and branches for the agent's file edits, shell commands included.

The class composes four parts, each in its own module, under one lock:

* the task tree, :class:`~agentmem.time_machine._tree.TaskTree` (``_tree.py``):
  where task ids are issued, which task is active, what each task touched;
* file capture and the guard's stat index,
  :class:`~agentmem.time_machine._capture.FileCapture` (``_capture.py``): what
  a file holds now, and what a shell command changed;
* restores, :class:`~agentmem.time_machine._restore.Restorer` (``_restore.py``):
  checked, all-or-nothing, finished or rolled back after a crash;
* storage, :mod:`agentmem.time_machine._snapshots`: blobs, the session's
  record files, the walk, garbage collection.

This module holds what ties them together: the public methods, the saving
of the tree record (``<session>.json``) and the index
(``<session>.index.json``), ``guard()`` around a command (with its marker
file, so the changes of a command whose process died are recorded on the
next open), and the error rule (docs/time-machine.md): a bad argument
raises; one file's trouble (unreadable, or its snapshot not storable) is a
marker plus a line in :attr:`TimeMachine.errors`; a tree record not saved
is recorded around the host's edits (``record_file_before_change``,
``guard()``) and raised by what changes the active task
(``start_new_task``, the restores).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from agentmem._storage.files import check_path_text, remove_stale_temps
from agentmem.errors import AgentMemError, InvalidArgumentError, StorageError, UnsafePathError
from agentmem.time_machine._capture import INDEX_FORMAT, FileCapture
from agentmem.time_machine._restore import Restorer, RestoreResult
from agentmem.time_machine._snapshots import (
    UNREADABLE,
    VERSION,
    BlobStore,
    RecordFiles,
    Ref,
    collect_unreferenced,
    delete_stored_session,
)
from agentmem.time_machine._tree import TaskTree, public

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_TASKS",
    "FORMAT",
    "MAX_ERRORS",
    "TimeMachine",
]

_log = logging.getLogger("agentmem.time_machine")

FORMAT: Final = "agentmem.time-machine"
DEFAULT_MAX_FILE_BYTES: Final = 50 * 1024 * 1024
"""Files larger than this are recorded as too large to snapshot (and reported)."""
DEFAULT_MAX_TASKS: Final = 1000
"""Tasks kept per session before the oldest are pruned."""
DEFAULT_MAX_BYTES: Final = 1024 * 1024 * 1024
"""New snapshot bytes kept per session before the oldest tasks are pruned."""
MAX_ERRORS: Final = 200
""":attr:`TimeMachine.errors` keeps this many of the newest messages."""


class TimeMachine:
    """File snapshots, undo/redo and the task tree of one session (see the module docstring).

    Args:
        working_dir: The project directory whose files are tracked.
        session_id: The session this tree belongs to (names its files).
        store_dir: Where snapshots live (``<root>/snapshots``); ``None``
            keeps everything in memory (incognito).
        memory_root: The memory root, never walked nor recorded.
        known_task_ids: Task ids the session's messages already carry; a
            session with no stored tree adopts them as a linear chain.
        max_file_bytes: Larger files are recorded as too large to snapshot.
        max_tasks: Retention: most tasks kept.
        max_bytes: Retention: most new snapshot bytes kept for this session.

    Attributes:
        too_large: path -> size of every file that was too large to snapshot.
        errors: What went wrong while capturing, and what restores left alone (logged
            too), oldest first; the newest ``MAX_ERRORS`` are kept.
        problems: What opening the store found damaged and moved aside.
    """

    def __init__(
        self,
        working_dir: str | Path,
        session_id: str = "default",
        store_dir: str | Path | None = None,
        *,
        memory_root: str | Path | None = None,
        known_task_ids: Iterable[object] = (),
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_tasks: int = DEFAULT_MAX_TASKS,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        for label, value in (
            ("max_file_bytes", max_file_bytes),
            ("max_tasks", max_tasks),
            ("max_bytes", max_bytes),
        ):
            if type(value) is not int or value < 1:
                raise InvalidArgumentError(f"{label} must be a positive int, got {value!r}")
        self.working_dir = Path(os.path.realpath(working_dir))
        self.session_id = session_id
        self.store_dir = Path(store_dir) if store_dir is not None else None
        self._skip = [Path(os.path.realpath(memory_root))] if memory_root is not None else []
        if self.store_dir is not None:
            self._skip.append(Path(os.path.realpath(self.store_dir)))
            # Temp files of records whose writer was killed mid-write (see remove_stale_temps).
            remove_stale_temps(self.store_dir / "sessions", root=self.store_dir.parent)
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self.blobs = BlobStore(self.store_dir / "blobs" if self.store_dir is not None else None)
        self.errors: list[str] = []
        self.problems: list[str] = []
        self._lock = threading.RLock()
        self._tree = TaskTree()
        self._files = FileCapture(
            self.working_dir, self._skip, self.blobs, max_file_bytes, self._note_error
        )
        self._records = RecordFiles(self.store_dir, session_id, self.problems)
        self._restorer = Restorer(
            tree=self._tree,
            files=self._files,
            records=self._records,
            save=self._save,
            save_quietly=self._save_quietly,
            settle=self._settle,
            note_error=self._note_error,
        )
        self._load()
        if len(self._tree.tasks) == 1:
            # A session from before the time machine: its tasks become one chain. Not saved
            # here (the next change saves it; until then every open rebuilds the same chain).
            self._tree.adopt(known_task_ids)
        self._restorer.finish_interrupted()
        self._finish_interrupted_guard()

    @property
    def too_large(self) -> dict[str, int]:
        """path -> size of every file that was too large to snapshot."""
        return self._files.too_large

    @too_large.setter
    def too_large(self, value: dict[str, int]) -> None:
        self._files.too_large = value

    @property
    def max_file_bytes(self) -> int:
        """Larger files are recorded as too large to snapshot (the captures read it)."""
        return self._files.max_file_bytes

    @max_file_bytes.setter
    def max_file_bytes(self, value: int) -> None:
        self._files.max_file_bytes = value

    # ------------------------------------------------------------------ records on disk

    def _load(self) -> None:
        doc_path = self._records.path(".json")
        if doc_path is None:
            return
        doc = self._records.read(doc_path, FORMAT, "time-machine record")
        if doc is not None:
            try:
                self._tree.load(doc)
                self._files.too_large = {
                    str(k): int(v) for k, v in doc.get("too_large", {}).items()
                }
            except (KeyError, TypeError, ValueError, AttributeError, InvalidArgumentError) as exc:
                self._records.set_aside(doc_path, "time-machine record", f"damaged: {exc}")
                self._tree.reset()
        index_path = self._records.path(".index.json")
        assert index_path is not None
        index = self._records.read(index_path, INDEX_FORMAT, "time-machine index")
        if index is not None:
            self._files.load(index)

    def _save(self) -> None:
        """Save the tree record (raises StorageError)."""
        path = self._records.path(".json")
        if path is None:
            return
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "session_id": self.session_id,
            **self._tree.to_json(),
            "too_large": self._files.too_large,
        }
        self._records.write(path, doc)

    def _save_quietly(self) -> None:
        try:
            self._save()
        except StorageError as exc:
            self._note_error(f"time-machine record not saved: {exc}")

    def _save_index(self) -> None:
        path = self._records.path(".index.json")
        self._files.unsaved = False
        if path is not None:
            self._records.write(path, self._files.to_json())

    def _note_error(self, message: str) -> None:
        _log.warning(message)
        self.errors.append(message)
        del self.errors[:-MAX_ERRORS]

    # ------------------------------------------------------------------ paths

    def _rel(self, path: str | os.PathLike[str]) -> str:
        """The safe relative posix path of ``path`` inside the working directory.

        Raises:
            UnsafePathError: outside the working directory (lexically, or through a
                symlink), inside the memory root or ``.git``.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgumentError(f"path must be a str or path, got {path!r}")
        raw = Path(path)
        full = Path(os.path.normpath(raw if raw.is_absolute() else self.working_dir / raw))
        wd = self.working_dir
        if full == wd or not full.is_relative_to(wd):
            raise UnsafePathError(raw, wd)
        real = Path(os.path.realpath(full))
        if real == wd or not real.is_relative_to(wd):
            raise UnsafePathError(raw, wd, "a symlink leads out of the working directory")
        for skip in self._skip:
            if real == skip or real.is_relative_to(skip):
                raise UnsafePathError(raw, wd, "inside the memory root")
        rel = real.relative_to(wd).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            raise UnsafePathError(raw, wd, "inside .git")
        return rel

    # ------------------------------------------------------------------ capture

    def _capture(self, rel: str) -> Ref:
        """What ``rel`` holds now, captured as the active task's."""
        return self._files.capture(rel, self._tree.tasks[self._tree.active])

    def _touch(self, rel: str, before: Ref) -> None:
        self._tree.touch(rel, before, lambda parent: (self.working_dir / parent).is_dir())

    def record_file_before_change(self, path: str | os.PathLike[str]) -> None:
        """Capture ``path`` before a tool first changes it in the active task.

        A relative ``path`` is taken relative to the working directory.

        Later calls for the same path in the same task are no-ops. A capture
        error is logged and added to :attr:`errors`, never raised.

        Raises:
            UnsafePathError: the path is outside the working directory (or a
                symlink leads out of it), or has a NUL byte or an over-long name.
        """
        check_path_text(path, root=self.working_dir)
        with self._lock:
            rel = self._rel(path)
            if rel in self._tree.dirty:
                return
            if (self.working_dir / rel).is_dir():
                self._note_error(f"{rel}: a directory, not snapshotted (record its files)")
                return
            try:
                before = self._capture(rel)
            except UnsafePathError:
                raise  # the snapshot store is (behind) a symlink: refuse, write nothing
            except (OSError, AgentMemError) as exc:
                self._note_error(f"{rel}: could not be snapshotted before a change ({exc})")
                before = UNREADABLE
            self._touch(rel, before)
            self._save_quietly()

    # ------------------------------------------------------------------ guard

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Record everything one shell command changes in the working directory.

        ``with tm.guard(): subprocess.run(...)``. Files the command changed,
        created or deleted are recorded as touched by the active task, with
        their state before the command. When nothing changed the cost is one
        stat walk (racy files, modified in the last 2 s, are re-hashed).
        Errors of the guard itself are logged and added to :attr:`errors`.
        """
        marker = self._records.path(".guard")
        with self._lock:
            try:
                if not self._files.fresh:
                    self._files.refresh(self._tree.tasks[self._tree.active])
                if self._files.unsaved:
                    self._save_index()
                if marker is not None:
                    # "A command is running": if this process dies before the command's
                    # changes are recorded, the next open diffs the disk against the index
                    # just saved. Existence is all it says, so no fsync (a kill cannot lose it).
                    marker.touch()
            except (OSError, AgentMemError) as exc:
                self._note_error(f"guard: could not index the working directory ({exc})")
        started = time.time_ns()
        try:
            yield
        finally:
            with self._lock:
                try:
                    self._after_command(started)
                    if marker is not None:
                        marker.unlink(missing_ok=True)
                except (OSError, AgentMemError) as exc:
                    self._note_error(f"guard: could not record the command's changes ({exc})")

    def _after_command(self, started: int | None) -> None:
        """Record what the command that started at ``started`` changed, as the active task's."""
        changes = self._files.changes(started, self._tree.tasks[self._tree.active])
        if not changes.before:
            return
        self._tree.created_dirs.update(changes.created_dirs)
        for rel, before in sorted(changes.before.items()):
            self._touch(rel, before)
            if rel in changes.exists:
                self._capture(rel)
        self._save()

    def _finish_interrupted_guard(self) -> None:
        """Record what a guarded command changed before its process died."""
        marker = self._records.path(".guard")
        if marker is None or not marker.exists():
            return
        try:
            self._files.fresh = True  # saved when the command started
            self._after_command(marker.stat().st_mtime_ns)  # touched as it started
            marker.unlink()
        except (OSError, AgentMemError) as exc:
            self._note_error(f"an interrupted guard could not be recorded ({exc})")
            return
        message = "recorded the changes of a shell command whose process died inside guard()"
        _log.warning("session %s: %s", self.session_id, message)
        self.problems.append(message)

    # ------------------------------------------------------------------ the tree

    @property
    def current_task_id(self) -> int | None:
        """The newest task id issued (``None`` before the first), active or not.

        After an undo it is still the undone task's id; a task that
        retention removed keeps its id here, so no id is ever issued twice.
        """
        return public(self._tree.latest)

    @property
    def active_task_id(self) -> int | None:
        """The task being worked on: its end state is on disk and later turns belong to it.

        ``None``: the session's initial state, before any task (or after
        undoing the first). This is the one owner of the active task: the
        session reads it from here and keeps no copy, and it changes only
        together with the tree record that is saved with it (a new task, an
        undo, a switch, or the completion of an interrupted restore).
        """
        return public(self._tree.active)

    @property
    def has_tasks(self) -> bool:
        return self._tree.has_tasks

    @property
    def next_task_id(self) -> int:
        """The id :meth:`start_new_task` gives when none is passed: above every id issued."""
        with self._lock:
            return self._tree.next_task_id

    def __contains__(self, task_id: object) -> bool:
        """Whether ``task_id`` is a task of this session (the initial state is not)."""
        with self._lock:
            return task_id in self._tree

    def active_task_chain(self) -> list[int]:
        """Task ids from the first task to the active one (what the LLM may see).

        Asked on every context build, so it is cached: a task's parent only
        changes when retention removes a task, so the chain is a function of
        the active task, the tree's size and the absorbed tasks.
        """
        with self._lock:
            return list(self._tree.active_chain()[1])

    def active_chain_set(self) -> frozenset[int]:
        """:meth:`active_task_chain` as a frozenset, the same object while the chain holds."""
        with self._lock:
            return self._tree.active_chain()[0]

    def get_child_tasks(self, task_id: int | None) -> list[int]:
        """Ids of the tasks started from ``task_id`` (``None``: the initial state)."""
        with self._lock:
            return self._tree.children(self._tree.known(task_id))

    def start_new_task(self, summary: str = "", *, task_id: int | None = None) -> int:
        """Start a task as a child of the active one (after an undo: a new branch).

        Args:
            summary: What the task is about (the first 200 characters are kept).
            task_id: The new task's id: :attr:`next_task_id` when omitted,
                else an id at least that large (ids only grow, so no id is
                ever issued twice, even one that retention removed).

        Returns:
            The new task's id, now both :attr:`active_task_id` and
            :attr:`current_task_id`.

        Raises:
            InvalidArgumentError: ``task_id`` is not an int of at least
                :attr:`next_task_id`, or ``summary`` is not a string.
        """
        with self._lock:
            task_id = self._tree.check_new_id(task_id, summary)
            self._settle()
            self._tree.add(task_id, summary)
            self._tree.retain(self.max_tasks, self.max_bytes)
            self._save()
            return task_id

    def _settle(self) -> None:
        """Freeze the active task's dirty paths into its AFTER record."""

        def value_now(rel: str) -> Ref:
            try:
                return self._capture(rel)
            except OSError as exc:
                self._note_error(f"{rel}: could not be snapshotted after the task ({exc})")
                return UNREADABLE

        self._tree.settle(value_now)

    def get_task_history(self, limit: int = 10) -> list[dict[str, Any]]:
        """The last ``limit`` tasks, oldest first: id, parent, summary, status, has_branches.

        ``status`` is ``"current"`` (the active task), ``"past"`` (on the
        active chain) or ``"undone"`` (any other branch).
        """
        if type(limit) is not int or limit < 0:
            raise InvalidArgumentError(f"limit must be a non-negative int, got {limit!r}")
        with self._lock:
            return self._tree.history(limit)

    # ------------------------------------------------------------------ restore

    def restore_to_task_state(self, task_id: int | None) -> RestoreResult:
        """Rebuild the disk state at the end of ``task_id`` and make it the active task.

        A path whose content the time machine never knew (see
        :mod:`agentmem.time_machine._restore`), or whose current content it cannot copy
        first, is left alone and reported in the result's ``skipped`` (and
        logged). Every other step is checked against the disk before any
        file changes; a step that still fails half-way is rolled back.

        Returns:
            What was written, removed and left alone.

        Raises:
            InvalidArgumentError: unknown task.
            RestoreError: the restore could not run; ``outcome`` says what the
                disk holds: ``"unchanged"`` (refused before any change),
                ``"rolled back"`` (failed half-way, undone) or ``"pending"``
                (failed half-way and could not be undone: the next open of
                the session finishes or rolls back the restore).
        """
        with self._lock:
            return self._restorer.restore(task_id)

    def undo_last_task(self) -> RestoreResult | None:
        """Go back to the active task's parent (see :meth:`restore_to_task_state`).

        Returns:
            What the restore did (``result.task_id`` is the task now active),
            or ``None`` at the initial state (nothing more to undo).
        """
        with self._lock:
            parent = self._tree.tasks[self._tree.active].parent
            if parent is None:
                return None
            return self.restore_to_task_state(public(parent))

    def switch_to_task(self, task_id: int | None) -> RestoreResult:
        """Make ``task_id``'s end state the disk state (redo, or another branch)."""
        return self.restore_to_task_state(task_id)

    # ------------------------------------------------------------------ blobs

    def referenced_blobs(self) -> set[str]:
        """Blobs this session's tree and index refer to."""
        return self._tree.blobs() | self._files.blob_refs()

    def collect_garbage(self) -> int:
        """Delete blobs no stored session refers to; returns how many went.

        A blob survives when this session's tree or index, or any session record or index
        on disk, refers to it, or when it is younger than ``GC_GRACE_SECONDS`` (a
        concurrent writer's). When a record on disk cannot be read, nothing is collected
        (its references are unknown; logged). Incognito: the blobs held in memory that
        this session no longer refers to go.
        """
        with self._lock:
            if self.store_dir is None:
                return self.blobs.collect(self.referenced_blobs(), grace_seconds=0.0, now=0.0)
            return collect_unreferenced(self.store_dir, self.referenced_blobs())

    def delete_session_snapshots(self, session_id: str | None = None) -> None:
        """Forget a session's snapshots (default: this one) and collect its blobs.

        Another session's files are removed with :func:`delete_stored_session`: it must
        not be open (``Memory.sessions.delete`` does this under the session's lock).
        """
        with self._lock:
            sid = self.session_id if session_id is None else session_id
            if not isinstance(sid, str) or not sid or "/" in sid or sid.startswith("."):
                raise InvalidArgumentError(f"session_id must be a session id, got {sid!r}")
            if sid == self.session_id:
                self._tree.reset()
                self._files.clear()
            if self.store_dir is not None:
                delete_stored_session(self.store_dir, sid, keep=self.referenced_blobs())
            else:
                self.collect_garbage()

    def __repr__(self) -> str:
        return f"TimeMachine(active={self.active_task_id!r}, tasks={len(self._tree.tasks) - 1})"
