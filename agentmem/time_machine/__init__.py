"""TimeMachine: undo, redo and branches for the agent's file edits, shell commands included.

Tasks form a tree. Task ``0`` is the *root*: the session's initial state
(public API reports it as ``None``). Each task keeps two maps, ``before``
(what a path held when the task first touched it) and ``after`` (what it
held when the task stopped being the active one); a value is a blob
reference ``"<sha256>:<octal mode>"``, ``None`` for "absent", or a
``"!..."`` marker for content the time machine does not hold (too large,
unreadable, changing while read, hidden). The root's ``after`` holds the
initial content of every path any task ever touched, so the state at the
end of task ``t`` is, for each path: the ``after`` of the closest task on
``t``'s ancestor chain that touched it (DESIGN section 6). Only the
*active* task can change: paths it touches are *dirty* until it is left (a
new task, an undo, a switch), when their content is frozen into its
``after``. Editing a task that already has
children (after an undo) pins the path's old value into each child that had
not touched it, so no other task's state changes.

A restore writes only the paths touched by the tasks on the two chains
below their common ancestor: work proportional to the files the tasks
touched. It never deletes or overwrites a path whose content it does not
know or cannot copy first, checks every step before changing anything,
and either completes or changes nothing (rolling back, or leaving an
intent record the next open finishes or rolls back): that half lives in
:mod:`agentmem.time_machine._restore` (:class:`RestoreMixin`). Storage layout, the
guard's stat index and racy-mtime rule, retention and garbage collection
are described in docs/time-machine.md, and so is its one error rule: a bad
argument raises; one file's trouble (unreadable, or its snapshot not storable)
is a marker plus a line in :attr:`TimeMachine.errors`; a tree record not saved
is recorded around the host's edits (``record_file_before_change``,
``guard()``) and raised by what changes the active task (``start_new_task``,
the restores).

Why this module is long: the tree, the captures and ``guard()`` mutate one
state under one lock, and their invariants (dirty paths, pins, the index)
only hold together; the storage pieces that do not touch that state
(blobs, task records, the ignore matcher, the walk) are in
:mod:`agentmem.time_machine._snapshots`, and the restore in :mod:`agentmem.time_machine._restore`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from agentmem._storage.files import (
    atomic_write_bytes,
    atomic_write_text,
    check_path_text,
    make_dirs,
    remove_stale_temps,
    set_aside,
)
from agentmem._storage.formats import check_format
from agentmem.errors import (
    AgentMemError,
    FormatVersionError,
    InvalidArgumentError,
    RestoreError,
    StorageError,
    UnsafePathError,
)
from agentmem.time_machine._restore import (
    UNKNOWN,
    UNREADABLE,
    UNSTABLE,
    RestoreMixin,
    RestoreResult,
    SkippedFile,
    is_marker,
)
from agentmem.time_machine._snapshots import (
    GC_GRACE_SECONDS,
    SESSION_FILE_SUFFIXES,
    BlobStore,
    IndexEntry,
    Ref,
    TaskRecord,
    blob_of,
    collect_unreferenced,
    delete_stored_session,
    hash_bytes,
    parents,
    stat_of,
    under,
    walk,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_TASKS",
    "GC_GRACE_SECONDS",
    "SESSION_FILE_SUFFIXES",
    "RestoreError",
    "RestoreResult",
    "SkippedFile",
    "TimeMachine",
    "delete_stored_session",
]

_log = logging.getLogger("agentmem.time_machine")

FORMAT: Final = "agentmem.time-machine"
INDEX_FORMAT: Final = "agentmem.time-machine-index"
VERSION: Final = 1
DEFAULT_MAX_FILE_BYTES: Final = 50 * 1024 * 1024
"""Files larger than this are recorded as too large to snapshot (and reported)."""
DEFAULT_MAX_TASKS: Final = 1000
"""Tasks kept per session before the oldest are pruned."""
DEFAULT_MAX_BYTES: Final = 1024 * 1024 * 1024
"""New snapshot bytes kept per session before the oldest tasks are pruned."""
CTIME_MARGIN_NS: Final = 50_000_000
"""A file whose ctime is this much older than a command's start was not changed by it
(the margin covers the coarse clock the kernel stamps inodes with)."""
ROOT: Final = 0
_READ_ATTEMPTS: Final = 3
"""Reads of a file that keeps changing while read before it is marked ``!unstable``."""
MAX_ERRORS: Final = 200
""":attr:`TimeMachine.errors` keeps this many of the newest messages."""


class TimeMachine(RestoreMixin):
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
        self.max_file_bytes = max_file_bytes
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self.blobs = BlobStore(self.store_dir / "blobs" if self.store_dir is not None else None)
        self._lock = threading.RLock()
        self._tasks: dict[int, TaskRecord] = {ROOT: TaskRecord(parent=None)}
        self._active = ROOT
        self._latest = ROOT
        self._dirty: set[str] = set()
        self._created_dirs: set[str] = set()
        self._absorbed: list[int] = []
        self._chain_cache: tuple[tuple[int, int, int, int], frozenset[int], list[int]] | None = None
        # The guard's stat index: path -> what it held when last seen.
        self._index: dict[str, IndexEntry] = {}
        self._index_fresh = False
        self._index_unsaved = False
        # The intent of a restore that failed half-way and could not be rolled back.
        self._intent: dict[str, Any] | None = None
        # What the last walk could not see (unreadable directories, unstat-able entries).
        self._blind: set[str] = set()
        self.too_large: dict[str, int] = {}
        self.errors: list[str] = []
        self.problems: list[str] = []
        self._load()
        if len(self._tasks) == 1:
            parent = ROOT
            # A session from before the time machine: its tasks become one chain. Not saved
            # here (the next change saves it; until then every open rebuilds the same chain).
            for task_id in sorted({i for i in known_task_ids if type(i) is int and i > 0}):
                self._tasks[task_id] = TaskRecord(parent=parent)
                parent = self._active = self._latest = task_id
        self._finish_interrupted_restore()
        self._finish_interrupted_guard()

    # ------------------------------------------------------------------ files on disk

    def _file(self, suffix: str) -> Path | None:
        if self.store_dir is None:
            return None
        return self.store_dir / "sessions" / f"{self.session_id}{suffix}"

    def _read_json(self, path: Path, kind: str, what: str) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            check_format(data, kind=kind, version=VERSION, what=what)
            return dict(data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, AgentMemError) as exc:
            if isinstance(exc, FormatVersionError) and exc.found is not None:
                raise  # a newer agentmem wrote it: leave it alone
            self._set_aside(path, what, str(exc))
            return None

    def _set_aside(self, path: Path, what: str, reason: str) -> None:
        _, message = set_aside(path, what=f"{what} {path}", reason=reason, logger=_log)
        self.problems.append(message)

    def _load(self) -> None:
        doc_path = self._file(".json")
        if doc_path is None:
            return
        doc = self._read_json(doc_path, FORMAT, "time-machine record")
        if doc is not None:
            try:
                tasks = {int(k): TaskRecord.from_json(v) for k, v in doc["tasks"].items()}
                if ROOT not in tasks:
                    raise InvalidArgumentError("no root task")
                self._tasks = tasks
                self._active = int(doc["active"])
                self._latest = int(doc.get("latest", self._active))
                self._dirty = set(doc.get("dirty", ()))
                self._created_dirs = set(doc.get("created_dirs", ()))
                self._absorbed = [int(i) for i in doc.get("absorbed", ())]
                self.too_large = {str(k): int(v) for k, v in doc.get("too_large", {}).items()}
                if self._active not in self._tasks:
                    raise InvalidArgumentError(f"active task {self._active} unknown")
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                self._set_aside(doc_path, "time-machine record", f"damaged: {exc}")
                self._tasks = {ROOT: TaskRecord(parent=None)}
                self._active = self._latest = ROOT
        index_path = self._file(".index.json")
        assert index_path is not None
        index = self._read_json(index_path, INDEX_FORMAT, "time-machine index")
        if index is not None and isinstance(index.get("blind"), list):
            self._blind = {str(p) for p in index["blind"]}
        if index is not None and isinstance(index.get("entries"), Mapping):
            entries = {str(k): IndexEntry.from_json(v) for k, v in index["entries"].items()}
            self._index = {k: v for k, v in entries.items() if v is not None}

    def _save(self) -> None:
        path = self._file(".json")
        if path is None:
            return
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "session_id": self.session_id,
            "active": self._active,
            "latest": self._latest,
            "dirty": sorted(self._dirty),
            "created_dirs": sorted(self._created_dirs),
            "absorbed": self._absorbed,
            "too_large": self.too_large,
            "tasks": {str(k): t.to_json() for k, t in self._tasks.items()},
        }
        self._write(path, doc)

    def _save_index(self) -> None:
        path = self._file(".index.json")
        self._index_unsaved = False
        if path is not None:
            entries = {rel: entry.to_json() for rel, entry in self._index.items()}
            doc = {
                "format": INDEX_FORMAT,
                "version": VERSION,
                "entries": entries,
                "blind": sorted(self._blind),
            }
            self._write(path, doc)

    def _write(self, path: Path, doc: Mapping[str, Any]) -> None:
        assert self.store_dir is not None
        root = self.store_dir.parent  # the memory root: no symlink below it is followed
        try:
            make_dirs(root, path.parent)
            atomic_write_text(path, json.dumps(doc, separators=(",", ":")), root=root)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc}", path=path) from exc

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

    def _target(self, rel: str) -> Path:
        """Where a restore writes ``rel``; refuses a parent that is a symlink leading out."""
        full = self.working_dir / rel
        parent = Path(os.path.realpath(full.parent))
        if not (parent == self.working_dir or parent.is_relative_to(self.working_dir)):
            raise UnsafePathError(full, self.working_dir, "a symlink leads out of it")
        return full

    # ------------------------------------------------------------------ capture

    def _note_error(self, message: str) -> None:
        _log.warning(message)
        self.errors.append(message)
        del self.errors[:-MAX_ERRORS]

    def _capture(self, rel: str, task: int) -> Ref:
        """The current value of ``rel`` on disk (its content stored as a blob).

        Never raises for the file itself, nor when its content cannot be stored
        (an ``OSError`` of the blob store: disk full): content that cannot be known
        or kept comes back as a marker (``!unreadable``: a read or stat error, a
        symlink or other non-regular file, a snapshot that could not be stored;
        ``!unstable``: it kept changing while read;
        ``!unknown``: it vanished between the stat and the read) and a regular
        file that exists is always indexed, marker or not, so a later guard
        never takes it for a file its command created.
        """
        full = self.working_dir / rel
        for _ in range(_READ_ATTEMPTS):
            try:
                st: os.stat_result | None = os.lstat(full)
            except (FileNotFoundError, NotADirectoryError):  # gone, or a file took a parent's place
                st = None
            except OSError as exc:
                self._note_error(f"{rel}: cannot be examined ({exc}), not snapshotted")
                return UNREADABLE
            if st is None or stat.S_ISDIR(st.st_mode):  # no file (or a directory took its place)
                self._index.pop(rel, None)
                self._index_unsaved = True
                return None
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
                self._note_error(f"{rel}: not a regular file, not snapshotted")
                return UNREADABLE
            if st.st_size > self.max_file_bytes:
                self.too_large[rel] = st.st_size
                _log.warning("%s: %d bytes, too large to snapshot", rel, st.st_size)
                return self._indexed(rel, st, f"!large:{st.st_size}")
            try:
                with open(full, "rb") as handle:
                    data = handle.read()
                after = os.lstat(full)
            except FileNotFoundError:
                self._note_error(f"{rel}: vanished while it was read, not snapshotted")
                return self._indexed(rel, st, UNKNOWN)
            except OSError as exc:
                self._note_error(f"{rel}: cannot be read ({exc}), not snapshotted")
                return self._indexed(rel, st, UNREADABLE)
            if stat_of(after) != stat_of(st):
                continue  # written while we read it: what we hold may be torn
            try:
                blob, added = self.blobs.put(data)
            except OSError as exc:  # the store's trouble (disk full): not this call's to raise
                self._note_error(f"{rel}: its snapshot could not be stored ({exc})")
                return self._indexed(rel, st, UNREADABLE)
            self._tasks[task].bytes += added
            return self._indexed(rel, st, f"{blob}:{stat.S_IMODE(st.st_mode):o}")
        self._note_error(f"{rel}: changed while it was read, not snapshotted")
        return self._indexed(rel, after, UNSTABLE)

    def _indexed(self, rel: str, st: os.stat_result, ref: str) -> str:
        self._index[rel] = IndexEntry(stat_of(st), time.time_ns(), ref)
        self._index_unsaved = True
        return ref

    def _touch(self, rel: str, before: Ref) -> None:
        """``rel`` is about to change in the active task; ``before`` is its current value."""
        if rel in self._dirty:
            return
        active = self._active
        root = self._tasks[ROOT]
        if rel not in root.after:
            root.after[rel] = before
            if before is None:
                for parent in parents(rel):
                    if (self.working_dir / parent).is_dir():
                        break
                    self._created_dirs.add(parent)
        task = self._tasks[active]
        if active != ROOT and rel not in task.before:
            task.before[rel] = before
        for child in self._children(active):
            other = self._tasks[child]
            if rel not in other.after:
                other.before[rel] = other.after[rel] = before
        self._dirty.add(rel)

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
            if rel in self._dirty:
                return
            if (self.working_dir / rel).is_dir():
                self._note_error(f"{rel}: a directory, not snapshotted (record its files)")
                return
            try:
                before = self._capture(rel, self._active)
            except UnsafePathError:
                raise  # the snapshot store is (behind) a symlink: refuse, write nothing
            except (OSError, AgentMemError) as exc:
                self._note_error(f"{rel}: could not be snapshotted before a change ({exc})")
                before = UNREADABLE
            self._touch(rel, before)
            self._save_quietly()

    def _save_quietly(self) -> None:
        try:
            self._save()
        except StorageError as exc:
            self._note_error(f"time-machine record not saved: {exc}")

    # ------------------------------------------------------------------ guard

    def _refresh_index(self) -> None:
        """Bring the index up to date with the disk without recording anything.

        Every file the walk sees gets an entry, a marker when its content
        cannot be read; what the walk cannot see at all is kept in the
        *blind* set, so neither is later taken for a file a command created.
        """
        blind: set[str] = set()
        seen = walk(self.working_dir, self._skip, blind=blind)
        for rel in [r for r in self._index if r not in seen and not under(r, blind)]:
            del self._index[rel]
        for rel, st in seen.items():
            entry = self._index.get(rel)
            stale = entry is None or entry.stat != st or entry.racy or is_marker(entry.ref)
            if stale and self._capture(rel, self._active) is None:
                # Walked, then gone before it was read (an editor's unlink-and-write?):
                # what it held is unknown, so a file there later is not a new one.
                self._index[rel] = IndexEntry(st, time.time_ns(), UNKNOWN)
        if blind != self._blind:
            self._blind = blind
            self._index_unsaved = True
        self._index_fresh = True

    def _content_changed(self, rel: str, entry: IndexEntry) -> bool:
        if blob_of(entry.ref) is None:
            return False  # too large to hash: only its stat can tell
        try:
            data = (self.working_dir / rel).read_bytes()
        except OSError:
            return True
        if hash_bytes(data) != blob_of(entry.ref):
            return True
        entry.indexed_ns = time.time_ns()
        return False

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Record everything one shell command changes in the working directory.

        ``with tm.guard(): subprocess.run(...)``. Files the command changed,
        created or deleted are recorded as touched by the active task, with
        their state before the command. When nothing changed the cost is one
        stat walk (racy files, modified in the last 2 s, are re-hashed).
        Errors of the guard itself are logged and added to :attr:`errors`.
        """
        marker = self._file(".guard")
        with self._lock:
            try:
                if not self._index_fresh:
                    self._refresh_index()
                if self._index_unsaved:
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

    def _finish_interrupted_guard(self) -> None:
        """Record what a guarded command changed before its process died."""
        marker = self._file(".guard")
        if marker is None or not marker.exists():
            return
        try:
            self._index_fresh = True  # saved when the command started
            self._after_command(marker.stat().st_mtime_ns)  # touched as it started
            marker.unlink()
        except (OSError, AgentMemError) as exc:
            self._note_error(f"an interrupted guard could not be recorded ({exc})")
            return
        message = "recorded the changes of a shell command whose process died inside guard()"
        _log.warning("session %s: %s", self.session_id, message)
        self.problems.append(message)

    def _unchanged_since(self, rel: str, started: int | None) -> bool:
        """Whether ``rel`` was last changed before ``started`` (its ctime, which no
        program can set back, older than the command's start by a clock tick)."""
        if started is None:
            return False
        try:
            return os.lstat(self.working_dir / rel).st_ctime_ns < started - CTIME_MARGIN_NS
        except OSError:
            return False

    def _after_command(self, started: int | None) -> None:
        blind: set[str] = set()
        seen = walk(self.working_dir, self._skip, blind=blind)
        changed: dict[str, Ref] = {}
        for rel, st in seen.items():
            entry = self._index.get(rel)
            if entry is None:
                if self._unchanged_since(rel, started):
                    self._capture(rel, self._active)  # there before the command: not its file
                    continue
                # New, unless it was where the walk before the command could not see.
                changed[rel] = UNKNOWN if under(rel, self._blind) else None
            elif entry.stat != st or (entry.racy and self._content_changed(rel, entry)):
                if self._unchanged_since(rel, started):
                    self._capture(rel, self._active)  # changed before the command: not by it
                    continue
                changed[rel] = entry.ref
        for rel in [r for r in self._index if r not in seen]:
            full = self.working_dir / rel
            if under(rel, blind):
                continue  # hidden now (an unreadable directory): unknown, not deleted
            if os.path.isfile(full) and not os.path.islink(full):
                del self._index[rel]  # still a file, just not walked (ignored)
                self._index_unsaved = True
            else:
                changed[rel] = self._index.pop(rel).ref
                self._index_unsaved = True
        if blind != self._blind:
            self._blind = blind
            self._index_unsaved = True
        if not changed:
            return
        # A directory holding no indexed file before the command was made by it.
        known_dirs = (
            {p for k in self._index for p in parents(k)} if None in changed.values() else ()
        )
        for rel, before in sorted(changed.items()):
            if before is None:
                for parent in parents(rel):
                    if parent in known_dirs:
                        break
                    self._created_dirs.add(parent)
            self._touch(rel, before)
            if rel in seen:
                self._capture(rel, self._active)
        self._save()

    # ------------------------------------------------------------------ the tree

    def _children(self, task_id: int) -> list[int]:
        return sorted(k for k, t in self._tasks.items() if t.parent == task_id and k != ROOT)

    def _chain(self, task_id: int) -> list[int]:
        chain = []
        node: int | None = task_id
        while node is not None:
            chain.append(node)
            node = self._tasks[node].parent
        return chain[::-1]

    def _public(self, task_id: int) -> int | None:
        return None if task_id == ROOT else task_id

    @property
    def current_task_id(self) -> int | None:
        """The newest task id issued (``None`` before the first), active or not.

        After an undo it is still the undone task's id; a task that
        retention removed keeps its id here, so no id is ever issued twice.
        """
        return self._public(self._latest)

    @property
    def active_task_id(self) -> int | None:
        """The task being worked on: its end state is on disk and later turns belong to it.

        ``None``: the session's initial state, before any task (or after
        undoing the first). This is the one owner of the active task: the
        session reads it from here and keeps no copy, and it changes only
        together with the tree record that is saved with it (a new task, an
        undo, a switch, or the completion of an interrupted restore).
        """
        return self._public(self._active)

    @property
    def has_tasks(self) -> bool:
        return len(self._tasks) > 1 or bool(self._absorbed)

    @property
    def next_task_id(self) -> int:
        """The id :meth:`start_new_task` gives when none is passed: above every id issued."""
        with self._lock:
            return max([self._latest, *self._tasks, *self._absorbed]) + 1

    def __contains__(self, task_id: object) -> bool:
        """Whether ``task_id`` is a task of this session (the initial state is not)."""
        with self._lock:
            if type(task_id) is not int or task_id == ROOT:
                return False
            return task_id in self._tasks or task_id in self._absorbed

    def active_task_chain(self) -> list[int]:
        """Task ids from the first task to the active one (what the LLM may see).

        Asked on every context build, so it is cached: a task's parent only
        changes when retention removes a task, so the chain is a function of
        the active task, the tree's size and the absorbed tasks.
        """
        return list(self._active_chain()[1])

    def active_chain_set(self) -> frozenset[int]:
        """:meth:`active_task_chain` as a frozenset, the same object while the chain holds."""
        return self._active_chain()[0]

    def _active_chain(self) -> tuple[frozenset[int], list[int]]:
        with self._lock:
            key = (self._active, len(self._tasks), len(self._absorbed), id(self._tasks))
            if self._chain_cache is None or self._chain_cache[0] != key:
                chain = [*self._absorbed, *self._chain(self._active)[1:]]
                self._chain_cache = (key, frozenset(chain), chain)
            return self._chain_cache[1], self._chain_cache[2]

    def get_child_tasks(self, task_id: int | None) -> list[int]:
        """Ids of the tasks started from ``task_id`` (``None``: the initial state)."""
        with self._lock:
            return self._children(self._known(task_id))

    def _known(self, task_id: object) -> int:
        if task_id is None:
            return ROOT
        if type(task_id) is not int or task_id == ROOT or task_id not in self._tasks:
            raise InvalidArgumentError(f"task_id {task_id!r} is not a task of this session")
        return task_id

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
            if task_id is None:
                task_id = self.next_task_id
            if type(task_id) is not int or task_id < self.next_task_id:
                raise InvalidArgumentError(
                    f"task_id must be a new id (an int from {self.next_task_id}), got {task_id!r}"
                )
            if not isinstance(summary, str):
                raise InvalidArgumentError(f"summary must be a string, got {summary!r}")
            self._settle()
            self._tasks[task_id] = TaskRecord(
                parent=self._active, summary=summary[:200], created_at=time.time()
            )
            self._active = self._latest = task_id
            self._retain()
            self._save()
            return task_id

    def _settle(self) -> None:
        """Freeze the active task's dirty paths into its AFTER record."""
        task = self._tasks[self._active]
        for rel in sorted(self._dirty):
            try:
                task.after[rel] = self._capture(rel, self._active)
            except OSError as exc:
                self._note_error(f"{rel}: could not be snapshotted after the task ({exc})")
                task.after[rel] = UNREADABLE
        self._dirty.clear()

    def get_task_history(self, limit: int = 10) -> list[dict[str, Any]]:
        """The last ``limit`` tasks, oldest first: id, parent, summary, status, has_branches.

        ``status`` is ``"current"`` (the active task), ``"past"`` (on the
        active chain) or ``"undone"`` (any other branch).
        """
        if type(limit) is not int or limit < 0:
            raise InvalidArgumentError(f"limit must be a non-negative int, got {limit!r}")
        with self._lock:
            chain = set(self._chain(self._active))
            out = []
            for task_id in sorted(self._tasks)[1:][-limit:] if limit else []:
                task = self._tasks[task_id]
                status = (
                    "current"
                    if task_id == self._active
                    else "past"
                    if task_id in chain
                    else "undone"
                )
                out.append(
                    {
                        "task_id": task_id,
                        "parent_id": self._public(task.parent or ROOT),
                        "summary": task.summary,
                        "status": status,
                        "has_branches": len(self._children(task_id)) > 1,
                        "files": sorted(
                            set(task.after) | (self._dirty if status == "current" else set())
                        ),
                        "created_at": task.created_at,
                    }
                )
            return out

    # ------------------------------------------------------------------ restore

    @staticmethod
    def _write_file(path: Path, data: bytes) -> None:
        # The restore's one write step, looked up here at call time so a test can stand in.
        atomic_write_bytes(path, data)

    def undo_last_task(self) -> RestoreResult | None:
        """Go back to the active task's parent (see :meth:`restore_to_task_state`).

        Returns:
            What the restore did (``result.task_id`` is the task now active),
            or ``None`` at the initial state (nothing more to undo).
        """
        with self._lock:
            parent = self._tasks[self._active].parent
            if parent is None:
                return None
            return self.restore_to_task_state(self._public(parent))

    def switch_to_task(self, task_id: int | None) -> RestoreResult:
        """Make ``task_id``'s end state the disk state (redo, or another branch)."""
        return self.restore_to_task_state(task_id)

    # ------------------------------------------------------------------ retention

    def _retain(self) -> None:
        def over() -> bool:
            total = sum(t.bytes for t in self._tasks.values())
            return len(self._tasks) - 1 > self.max_tasks or total > self.max_bytes

        keep = set(self._chain(self._active))
        while over():
            leaves = [k for k in sorted(self._tasks) if k not in keep and not self._children(k)]
            if leaves:
                del self._tasks[leaves[0]]
                continue
            roots = self._children(ROOT)
            if len(roots) == 1 and roots[0] != self._active:
                first = roots[0]
                squashed = self._tasks.pop(first)
                self._tasks[ROOT].after.update(squashed.after)
                self._tasks[ROOT].bytes += squashed.bytes
                for t in self._tasks.values():
                    if t.parent == first:
                        t.parent = ROOT
                self._absorbed.append(first)
                keep.discard(first)
                continue
            break

    def referenced_blobs(self) -> set[str]:
        """Blobs this session's tree and index refer to."""
        refs: set[str] = set()
        for task in self._tasks.values():
            for ref in (*task.before.values(), *task.after.values()):
                blob = blob_of(ref)
                if blob:
                    refs.add(blob)
        for entry in self._index.values():
            blob = blob_of(entry.ref)
            if blob:
                refs.add(blob)
        return refs

    def collect_garbage(self) -> int:
        """Delete blobs no stored session refers to; returns how many went.

        A blob survives when this session's tree or index, or any session record or index
        on disk, refers to it, or when it is younger than :data:`GC_GRACE_SECONDS` (a
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
                self._tasks = {ROOT: TaskRecord(parent=None)}
                self._active = self._latest = ROOT
                self._dirty.clear()
                self._index.clear()
                self._index_fresh = False
                self._absorbed.clear()
            if self.store_dir is not None:
                delete_stored_session(self.store_dir, sid, keep=self.referenced_blobs())
            else:
                self.collect_garbage()

    def __repr__(self) -> str:
        return f"TimeMachine(active={self.active_task_id!r}, tasks={len(self._tasks) - 1})"
