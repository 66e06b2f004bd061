"""How the time machine changes the working directory: what a restore may touch, and how.

A restore turns the disk from one task's end state into another's. Two
rules make it safe, and this module holds the parts of both that do not
need the task tree (:mod:`agentmem.time_machine` decides *what* to write;
this module checks and writes it):

* **Never lose what the user had.** A path whose value the time machine
  never knew (a *marker*: unreadable, being written while it was read,
  hidden in an unreadable directory, too large to snapshot) is never
  deleted or overwritten, and neither is a file whose current content
  cannot be copied first. Such a path is left alone and reported as a
  :class:`SkippedFile` with the reason (:func:`marker_reason`). Everything a
  restore does replace, it holds a copy of, so it can always be put back.
* **All or nothing.** :func:`preflight` checks every step against the disk
  before anything changes (a directory standing where a file must go, a
  file where a directory must be, a directory the process cannot write).
  :func:`apply_plan` then runs removals first (deepest first), clears the
  emptied directories that stand where files go, and writes files
  shallowest first, each atomically. The same function applied to the
  *prior* values (what the disk held, captured before the first change)
  rolls a failed restore back; an intent record holding both lets the next
  open finish or roll back a restore whose process died.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from agentmem._storage.files import move_aside, remove_stale_temps
from agentmem.errors import AgentMemError, CorruptStoreError, RestoreError, UnsafePathError
from agentmem.time_machine._snapshots import (
    BlobStore,
    IndexEntry,
    Ref,
    TaskRecord,
    blob_of,
    mode_of,
    parents,
    stat_of,
)

__all__ = [
    "INTENT_FORMAT",
    "SYMLINK",
    "UNKNOWN",
    "UNREADABLE",
    "UNSTABLE",
    "ApplyError",
    "RestoreMixin",
    "RestoreResult",
    "SkippedFile",
    "apply_plan",
    "can_copy",
    "is_marker",
    "is_unknown",
    "marker_reason",
    "preflight",
]

_log = logging.getLogger("agentmem.time_machine")

INTENT_FORMAT: Final = "agentmem.time-machine-restore"
INTENT_VERSION: Final = 1
UNREADABLE: Final = "!unreadable"
"""Marker: the file could not be read (or is not a regular file)."""
UNSTABLE: Final = "!unstable"
"""Marker: the file kept changing while it was read."""
UNKNOWN: Final = "!unknown"
"""Marker: the file vanished while read, or was hidden from the walk (an unreadable directory)."""
SYMLINK: Final = "!symlink"
"""What a restore finds at a path that is a symbolic link (never followed nor replaced)."""

_REASONS: Final = {
    UNREADABLE: "it could not be read when the time machine first saw it",
    UNSTABLE: "it was being written by another process while the time machine read it",
    UNKNOWN: "it was hidden from the time machine, or vanished while it was read",
    SYMLINK: "it is a symbolic link, never followed nor replaced",
}


def is_marker(ref: Ref) -> bool:
    """Whether ``ref`` stands for content the time machine does not hold."""
    return ref is not None and ref.startswith("!")


def is_unknown(ref: Ref) -> bool:
    """Whether ``ref`` says the content was never known (every marker but ``!large``)."""
    return is_marker(ref) and not str(ref).startswith("!large:")


def can_copy(ref: Ref) -> bool:
    """Whether a current value ``ref`` is held (a blob, or absent)."""
    return not is_marker(ref)


def marker_reason(ref: str) -> str:
    """Why a path with marker ``ref`` holds no snapshot, in words."""
    if ref.startswith("!large:"):
        return f"it is too large to snapshot ({ref.partition(':')[2]} bytes)"
    return _REASONS.get(ref, f"its content is unknown ({ref})")


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A path a restore left alone, and why."""

    path: str
    """The path, relative to the working directory (posix)."""
    reason: str
    """Why it was not restored, in words."""


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """What one restore (undo, switch, redo) did to the working directory."""

    task_id: int | None
    """The task now active (``None``: the session's initial state)."""
    restored: tuple[str, ...] = ()
    """Paths written (created or replaced)."""
    removed: tuple[str, ...] = ()
    """Paths deleted."""
    skipped: tuple[SkippedFile, ...] = ()
    """Paths left alone because their content is unknown or could not be copied first."""


class ApplyError(Exception):
    """A step of :func:`apply_plan` failed (``rel`` names it; ``__cause__`` is the error)."""

    def __init__(self, rel: str, exc: BaseException) -> None:
        super().__init__(f"{rel}: {exc}")
        self.rel = rel


def _lstat(full: Path) -> os.stat_result | None:
    try:
        return os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _is_dir(st: os.stat_result | None) -> bool:
    return st is not None and stat.S_ISDIR(st.st_mode)


def _writable(directory: Path) -> bool:
    return os.access(directory, os.W_OK | os.X_OK)


def _blocking(wd: Path, rel: str, removals: Collection[str]) -> str | None:
    """What under the directory ``rel`` the plan does not remove (``None``: nothing)."""
    top = wd / rel
    for dirpath, dirnames, filenames in os.walk(top, onerror=_raise):
        here = Path(dirpath)
        if not _writable(here):
            return f"{here.relative_to(wd).as_posix()} is not writable"
        for name in filenames + [d for d in dirnames if os.path.islink(here / d)]:
            sub = (here / name).relative_to(wd).as_posix()
            if sub not in removals:
                return f"it holds {sub}"
    return None


def _raise(exc: OSError) -> None:
    raise exc


def preflight(
    wd: Path, plan: Mapping[str, Ref], target: Callable[[str], Path]
) -> tuple[list[str], list[str]]:
    """Check every step of ``plan`` against the disk; nothing is changed.

    Returns:
        ``(failures, new_dirs)``: what would stop the restore (empty when it
        can run), and the directories writing the plan will create.
    """
    failures: list[str] = []
    new_dirs: set[str] = set()
    removals = {rel for rel, ref in plan.items() if ref is None}
    for rel, ref in sorted(plan.items()):
        try:
            full = target(rel)
            if ref is None:
                st = _lstat(full)
                if st is not None and not _is_dir(st) and not _writable(full.parent):
                    failures.append(f"{rel}: cannot be removed, {full.parent} is not writable")
                continue
            holder = wd
            missing = False
            for parent in reversed(list(parents(rel))):
                if missing:
                    new_dirs.add(parent)
                    continue
                pst = _lstat(wd / parent)
                if pst is None or (parent in removals and not _is_dir(pst)):
                    missing = True
                    new_dirs.add(parent)
                elif _is_dir(pst) or (stat.S_ISLNK(pst.st_mode) and (wd / parent).is_dir()):
                    holder = wd / parent
                else:
                    failures.append(f"{rel}: {parent} is a file where a directory must be")
                    break
            else:
                if not _writable(holder):
                    failures.append(f"{rel}: cannot be written, {holder} is not writable")
                    continue
                st = _lstat(full)
                if _is_dir(st):
                    why = _blocking(wd, rel, removals)
                    if why is not None:
                        failures.append(f"{rel}: a directory stands where the file goes ({why})")
        except (OSError, ValueError) as exc:
            failures.append(f"{rel}: {exc}")
    return failures, sorted(new_dirs)


def apply_plan(
    wd: Path,
    plan: Mapping[str, Ref],
    contents: Mapping[str, bytes],
    *,
    target: Callable[[str], Path],
    write: Callable[[Path, bytes], None],
    created_dirs: Collection[str],
    written: Callable[[str, Ref], None],
    removed: Callable[[str], None],
) -> tuple[list[str], list[str]]:
    """Make the disk hold ``plan`` (path -> blob ref or ``None``).

    Idempotent: a step already done is a no-op, so a half-applied plan can
    be applied again. Directories in ``created_dirs`` left empty by a
    removal are removed; an emptied directory standing where a file goes is
    removed.

    Returns:
        ``(written paths, removed paths)``.

    Raises:
        ApplyError: a step failed; earlier steps stay done.
    """
    done_w: list[str] = []
    done_r: list[str] = []
    drops = sorted((rel for rel, ref in plan.items() if ref is None), key=_deepest_first)
    for rel in drops:
        try:
            full = target(rel)
            st = _lstat(full)
            if st is None or _is_dir(st):
                continue
            os.unlink(full)
            done_r.append(rel)
            removed(rel)
            for parent in parents(rel):
                if parent not in created_dirs:
                    break
                try:
                    os.rmdir(wd / parent)
                except OSError:
                    break
        except Exception as exc:
            raise ApplyError(rel, exc) from exc
    writes = sorted((rel for rel, ref in plan.items() if ref is not None), key=_shallowest_first)
    for rel in writes:
        ref = plan[rel]
        assert ref is not None
        try:
            full = target(rel)
            if _is_dir(_lstat(full)):
                for dirpath, _, _ in sorted(
                    os.walk(full), key=lambda w: -w[0].count(os.sep)
                ):  # emptied by the removals above
                    os.rmdir(dirpath)
            full.parent.mkdir(parents=True, exist_ok=True)
            if os.path.islink(full):
                os.unlink(full)  # replaced, never followed
            write(full, contents[rel])
            os.chmod(full, mode_of(ref))
            done_w.append(rel)
            written(rel, ref)
        except Exception as exc:
            raise ApplyError(rel, exc) from exc
    return done_w, done_r


def _deepest_first(rel: str) -> tuple[int, str]:
    return (-rel.count("/"), rel)


def _shallowest_first(rel: str) -> tuple[int, str]:
    return (rel.count("/"), rel)


# ---------------------------------------------------------------------------- the tree's side


class RestoreMixin:
    """The restore half of :class:`agentmem.time_machine.TimeMachine` (its state lives there).

    Plans a restore from the task tree (which paths differ between the two
    chains, which must be left alone), records its intent, applies it with
    :func:`apply_plan`, rolls it back on failure, and finishes or rolls back
    an interrupted one when the session is opened again.
    """

    working_dir: Path
    store_dir: Path | None
    session_id: str
    blobs: BlobStore
    problems: list[str]
    _lock: threading.RLock
    _tasks: dict[int, TaskRecord]
    _active: int
    _dirty: set[str]
    _created_dirs: set[str]
    _index: dict[str, IndexEntry]
    _index_unsaved: bool
    _intent: dict[str, Any] | None

    if TYPE_CHECKING:

        def _capture(self, rel: str, task: int) -> Ref: ...
        def _chain(self, task_id: int) -> list[int]: ...
        def _children(self, task_id: int) -> list[int]: ...
        def _file(self, suffix: str) -> Path | None: ...
        def _known(self, task_id: object) -> int: ...
        def _note_error(self, message: str) -> None: ...
        def _public(self, task_id: int) -> int | None: ...
        def _read_json(self, path: Path, kind: str, what: str) -> dict[str, Any] | None: ...
        def _save(self) -> None: ...
        def _save_quietly(self) -> None: ...
        def _settle(self) -> None: ...
        def _target(self, rel: str) -> Path: ...
        def _write_file(self, path: Path, data: bytes) -> None: ...
        def _write(self, path: Path, doc: Mapping[str, Any]) -> None: ...

    def _value(self, chain: list[int], rel: str) -> Ref:
        for task_id in reversed(chain):
            after = self._tasks[task_id].after
            if rel in after:
                return after[rel]
        return None

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
            target = self._known(task_id)
            if self._intent is not None:
                self._finish_interrupted_restore(self._intent)
            settled = bool(self._dirty)
            self._settle()
            old_chain, new_chain = self._chain(self._active), self._chain(target)
            common = set(old_chain) & set(new_chain)
            paths: set[str] = set()
            for t in (*old_chain, *new_chain):
                if t not in common:
                    paths.update(self._tasks[t].after)
            plan: dict[str, Ref] = {}
            prior: dict[str, Ref] = {}
            skipped: list[SkippedFile] = []
            try:
                undoing = [t for t in old_chain if t not in common] if target in common else []
                for rel in sorted(paths):
                    new, old = self._value(new_chain, rel), self._value(old_chain, rel)
                    if is_marker(new) and undoing:
                        new = self._seen_before(undoing, rel, new)
                    if new == old and not is_marker(new):
                        continue
                    self._target(rel)
                    why, current = self._why_not(rel, new, old)
                    if why is not None:
                        skipped.append(SkippedFile(rel, why))
                    elif current != new:
                        plan[rel], prior[rel] = new, current
                contents = self._contents(plan)
            except (CorruptStoreError, UnsafePathError, OSError) as exc:
                self._save_quietly()
                raise RestoreError(
                    f"cannot restore task {task_id}: {exc}; nothing was changed"
                ) from exc
            failures, new_dirs = preflight(self.working_dir, plan, self._target)
            if failures:
                self._save_quietly()
                raise RestoreError(
                    f"cannot restore task {task_id}, nothing was changed: " + "; ".join(failures)
                )
            if settled or prior:
                self._save()  # the frozen AFTER record and the copies, before any file moves
            if plan:
                self._begin_intent(
                    {
                        "format": INTENT_FORMAT,
                        "version": INTENT_VERSION,
                        "target": target,
                        "prior_active": self._active,
                        "plan": plan,
                        "prior": prior,
                        "new_dirs": new_dirs,
                    }
                )
            try:
                written, removed = self._apply(plan, contents)
            except ApplyError as exc:
                self._fail_half_way(task_id, exc, prior, new_dirs)
            self._active = target
            self._lose_track(target, [f.path for f in skipped])
            self._save()
            self._end_intent()
            result = RestoreResult(
                self._public(target), tuple(written), tuple(removed), tuple(skipped)
            )
            if skipped:
                listing = "; ".join(f"{f.path} ({f.reason})" for f in skipped)
                self._note_error(f"restore of task {task_id} left alone: {listing}")
            return result

    def _why_not(self, rel: str, new: Ref, old: Ref) -> tuple[str | None, Ref]:
        """Why ``rel`` must be left alone (``None``: it may change), and its current value."""
        if new is not None and is_marker(new):
            return f"what it held then is not known: {marker_reason(new)}", None
        current = self._current(rel)
        if current == new:
            return None, current  # already there: nothing to do
        if old is not None and is_unknown(old):
            return f"what it holds now is not known: {marker_reason(old)}", None
        if current is not None and not can_copy(current):
            return f"what it holds now cannot be copied first: {marker_reason(current)}", None
        if current is not None and current not in (old, new):
            # Content the tree never recorded here: another program (or the user) wrote it.
            # (Nothing there, or a directory, holds no such content: preflight judges those.)
            return "it changed since the time machine recorded it (not through a task)", None
        return None, current

    def _seen_before(self, undoing: list[int], rel: str, value: Ref) -> Ref:
        """What ``rel`` held when the first of ``undoing`` touched it (else ``value``).

        Going back to an ancestor whose own value for ``rel`` is unknown, the
        content the first undone task found there is what the disk held in
        that state: putting it back replaces only what the undone tasks wrote.
        """
        for task_id in undoing:
            before = self._tasks[task_id].before
            if rel in before:
                return before[rel]
        return value

    def _lose_track(self, target: int, rels: Iterable[str]) -> None:
        """The disk does not hold ``target``'s value for ``rels``: mark them unknown there.

        So no later restore through this state replaces them on the strength
        of a value the disk never held again. Children of ``target`` that had
        not touched a path keep the value they had (pinned, as an edit does).
        """
        chain = self._chain(target)
        task = self._tasks[target]
        for rel in rels:
            value = self._value(chain, rel)
            if is_marker(value):
                continue
            for child in self._children(target):
                other = self._tasks[child]
                if rel not in other.after:
                    other.before[rel] = other.after[rel] = value
            task.after[rel] = UNKNOWN

    def _current(self, rel: str) -> Ref:
        """What ``rel`` holds now, its content stored so a restore can put it back."""
        full = self.working_dir / rel
        try:
            st = os.lstat(full)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            return UNREADABLE
        if stat.S_ISLNK(st.st_mode):
            return SYMLINK
        entry = self._index.get(rel)
        if (
            entry is not None
            and entry.stat == stat_of(st)
            and not entry.racy
            and not is_marker(entry.ref)
        ):
            return str(entry.ref)
        return self._capture(rel, self._active)

    def _contents(self, plan: Mapping[str, Ref]) -> dict[str, bytes]:
        """The verified blob of every write in ``plan`` (raises CorruptStoreError)."""
        out = {}
        for rel, ref in plan.items():
            blob = blob_of(ref)
            if blob is not None:
                out[rel] = self.blobs.get(blob)
        return out

    def _apply(
        self, plan: Mapping[str, Ref], contents: Mapping[str, bytes]
    ) -> tuple[list[str], list[str]]:
        def wrote(rel: str, ref: Ref) -> None:
            if ref is None or is_marker(ref):
                self._index.pop(rel, None)
            else:
                st = os.lstat(self.working_dir / rel)
                self._index[rel] = IndexEntry(stat_of(st), time.time_ns(), ref)
            self._index_unsaved = True

        def dropped(rel: str) -> None:
            self._index.pop(rel, None)
            self._index_unsaved = True

        return apply_plan(
            self.working_dir,
            plan,
            contents,
            target=self._target,
            write=self._write_file,
            created_dirs=self._created_dirs,
            written=wrote,
            removed=dropped,
        )

    def _roll_back(self, prior: Mapping[str, Ref], new_dirs: Iterable[str]) -> Exception | None:
        """Put back what the disk held before a restore; returns what failed (``None``: done)."""
        try:
            self._apply(prior, self._contents(prior))
            for rel in sorted(new_dirs, key=lambda d: -d.count("/")):
                with contextlib.suppress(OSError):
                    os.rmdir(self.working_dir / rel)
        except (ApplyError, AgentMemError) as exc:
            return exc
        return None

    def _begin_intent(self, doc: dict[str, Any]) -> None:
        """Record a restore about to change files (on disk, and in memory for incognito)."""
        path = self._file(".restore.json")
        if path is not None:
            self._write(path, doc)
        self._intent = doc

    def _end_intent(self) -> None:
        self._intent = None
        path = self._file(".restore.json")
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _fail_half_way(
        self, task_id: int | None, exc: ApplyError, prior: Mapping[str, Ref], new_dirs: list[str]
    ) -> NoReturn:
        first = f"restore of task {task_id} failed at {exc}"
        problem = self._roll_back(prior, new_dirs)
        if problem is None:
            self._end_intent()
            self._save_quietly()
            raise RestoreError(
                f"{first}; the files it had changed were put back: nothing was changed",
                outcome="rolled back",
            ) from exc
        where = (
            "the session is opened again or the next undo/switch"
            if self.store_dir is not None
            else "the next undo/switch"
        )
        raise RestoreError(
            f"{first}, and putting the files back failed too ({problem}): the working "
            f"directory is part-way between two task states until {where} finishes the "
            f"restore (or, failing that, rolls it back)",
            outcome="pending",
        ) from exc

    def _finish_interrupted_restore(self, data: Mapping[str, Any] | None = None) -> None:
        """Finish (or, failing that, roll back) a restore whose process died or failed."""
        if data is None:
            path = self._file(".restore.json")
            if path is None:
                return
            data = self._read_json(path, INTENT_FORMAT, "time-machine restore intent")
            if data is None:
                return
        try:
            plan = _plan(data["plan"])
            prior = _plan(data["prior"]) if isinstance(data.get("prior"), Mapping) else None
            new_dirs = [str(d) for d in data.get("new_dirs", ())]
            target, before = int(data["target"]), data.get("prior_active")
        except (KeyError, AttributeError, TypeError, ValueError) as exc:
            self._give_up(f"its record is damaged ({exc})")
            return
        # A writer killed between create and rename left its temp file beside the target.
        for folder in {(self.working_dir / rel).parent for rel in [*plan, *(prior or ())]}:
            remove_stale_temps(folder, root=self.working_dir)
        if before is not None and before != self._active:
            self._give_up(f"task {self._public(self._active)} became active before it finished")
            return
        try:
            failures, _ = preflight(self.working_dir, plan, self._target)
            if failures:
                raise RestoreError("; ".join(failures))
            self._apply(plan, self._contents(plan))
        except (ApplyError, AgentMemError) as exc:
            problem = self._roll_back(prior, new_dirs) if prior is not None else exc
            if problem is not None or type(before) is not int or before not in self._tasks:
                self._give_up(f"finishing it failed ({exc}); rolling it back failed ({problem})")
                return
            self._active = before
            done = f"rolled back an interrupted restore to task {target} (finishing it: {exc})"
        else:
            if target not in self._tasks:
                self._give_up(f"its task {target} is not in the tree")
                return
            self._active = target
            done = f"completed an interrupted restore to task {target}"
        self._dirty.clear()
        self._save()
        self._end_intent()
        _log.warning("session %s: %s", self.session_id, done)
        self.problems.append(done)

    def _give_up(self, why: str) -> None:
        self._intent = None
        path = self._file(".restore.json")
        moved = move_aside(path) if path is not None and path.exists() else None
        message = (
            f"an interrupted restore could not be completed nor rolled back: {why}; "
            + (f"its record was moved to {moved} and " if moved is not None else "")
            + "the working directory may mix two task states"
        )
        _log.error("session %s: %s", self.session_id, message)
        self.problems.append(message)


def _plan(data: object) -> dict[str, Ref]:
    if not isinstance(data, Mapping):
        raise TypeError("expected a path -> value mapping")
    return {str(k): (v if isinstance(v, str) else None) for k, v in data.items()}
