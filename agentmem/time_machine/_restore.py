"""How the time machine changes the working directory: what a restore may touch, and how.

A restore turns the disk from one task's end state into another's. This
module is where a restore is planned, checked and applied: the plain
functions :func:`preflight` and :func:`apply_plan` check and write a plan
without knowing about tasks, and :class:`Restorer` plans one from the task
tree (:mod:`agentmem.time_machine._tree`), applies it, and recovers. Two rules
make it safe:

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
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

from agentmem._storage.files import atomic_write_bytes, move_aside, remove_stale_temps
from agentmem.errors import AgentMemError, CorruptStoreError, RestoreError, UnsafePathError
from agentmem.time_machine._capture import FileCapture
from agentmem.time_machine._snapshots import (
    SYMLINK,
    UNKNOWN,
    UNREADABLE,
    RecordFiles,
    Ref,
    blob_of,
    can_copy,
    is_marker,
    is_unknown,
    marker_reason,
    mode_of,
    parents,
)
from agentmem.time_machine._tree import TaskTree, public

__all__ = [
    "INTENT_FORMAT",
    "ApplyError",
    "RestoreResult",
    "Restorer",
    "SkippedFile",
    "apply_plan",
    "preflight",
]

_log = logging.getLogger("agentmem.time_machine")

INTENT_FORMAT: Final = "agentmem.time-machine-restore"
INTENT_VERSION: Final = 1


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


# ------------------------------------------------------------------------ planning from the tree


class Restorer:
    """Restores for one time machine: plans them from the task tree, applies them, recovers.

    Plans a restore from the task tree (which paths differ between the two
    chains, which must be left alone), records its intent, applies it with
    :func:`apply_plan`, rolls it back on failure, and finishes or rolls back
    an interrupted one when the session is opened again. It holds no state of
    its own but the intent of a restore that failed half-way; everything else
    it is given, and the caller holds the lock.

    Args:
        tree: The task tree (its active task changes when a restore completes).
        files: Captures of what the disk holds now, and the stat index a restore updates.
        records: The session's record files (the intent is ``<session>.restore.json``).
        save: Saves the tree record (raises StorageError).
        save_quietly: Saves it, recording a failure in the errors instead.
        settle: Freezes the active task's dirty paths before the active task changes.
        note_error: Where a path left alone is reported (logged and kept).
    """

    def __init__(
        self,
        *,
        tree: TaskTree,
        files: FileCapture,
        records: RecordFiles,
        save: Callable[[], None],
        save_quietly: Callable[[], None],
        settle: Callable[[], None],
        note_error: Callable[[str], None],
    ) -> None:
        self.tree = tree
        self.files = files
        self.records = records
        self.working_dir = files.working_dir
        self._save = save
        self._save_quietly = save_quietly
        self._settle = settle
        self._note_error = note_error
        # The intent of a restore that failed half-way and could not be rolled back.
        self._intent: dict[str, Any] | None = None

    def _target(self, rel: str) -> Path:
        """Where a restore writes ``rel``; refuses a parent that is a symlink leading out."""
        full = self.working_dir / rel
        parent = Path(os.path.realpath(full.parent))
        if not (parent == self.working_dir or parent.is_relative_to(self.working_dir)):
            raise UnsafePathError(full, self.working_dir, "a symlink leads out of it")
        return full

    def restore(self, task_id: int | None) -> RestoreResult:
        """``TimeMachine.restore_to_task_state`` (documented there); the caller holds the lock."""
        target = self.tree.known(task_id)
        if self._intent is not None:
            self.finish_interrupted(self._intent)
        settled = bool(self.tree.dirty)
        self._settle()
        old_chain, new_chain = self.tree.chain(self.tree.active), self.tree.chain(target)
        common = set(old_chain) & set(new_chain)
        paths: set[str] = set()
        for t in (*old_chain, *new_chain):
            if t not in common:
                paths.update(self.tree.tasks[t].after)
        plan: dict[str, Ref] = {}
        prior: dict[str, Ref] = {}
        skipped: list[SkippedFile] = []
        try:
            undoing = [t for t in old_chain if t not in common] if target in common else []
            for rel in sorted(paths):
                new, old = self.tree.value(new_chain, rel), self.tree.value(old_chain, rel)
                if is_marker(new) and undoing:
                    new = self.tree.seen_before(undoing, rel, new)
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
                    "prior_active": self.tree.active,
                    "plan": plan,
                    "prior": prior,
                    "new_dirs": new_dirs,
                }
            )
        try:
            written, removed = self._apply(plan, contents)
        except ApplyError as exc:
            self._fail_half_way(task_id, exc, prior, new_dirs)
        self.tree.active = target
        self.tree.lose_track(target, [f.path for f in skipped], UNKNOWN)
        self._save()
        self._end_intent()
        result = RestoreResult(public(target), tuple(written), tuple(removed), tuple(skipped))
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
        known = self.files.known_value(rel, st)
        if known is not None:
            return known
        return self.files.capture(rel, self.tree.tasks[self.tree.active])

    def _contents(self, plan: Mapping[str, Ref]) -> dict[str, bytes]:
        """The verified blob of every write in ``plan`` (raises CorruptStoreError)."""
        out = {}
        for rel, ref in plan.items():
            blob = blob_of(ref)
            if blob is not None:
                out[rel] = self.files.blobs.get(blob)
        return out

    def _apply(
        self, plan: Mapping[str, Ref], contents: Mapping[str, bytes]
    ) -> tuple[list[str], list[str]]:
        return apply_plan(
            self.working_dir,
            plan,
            contents,
            target=self._target,
            write=_write_file,
            created_dirs=self.tree.created_dirs,
            written=self.files.written,
            removed=lambda rel: self.files.written(rel, None),
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
        path = self.records.path(".restore.json")
        if path is not None:
            self.records.write(path, doc)
        self._intent = doc

    def _end_intent(self) -> None:
        self._intent = None
        path = self.records.path(".restore.json")
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
            if self.records.store_dir is not None
            else "the next undo/switch"
        )
        raise RestoreError(
            f"{first}, and putting the files back failed too ({problem}): the working "
            f"directory is part-way between two task states until {where} finishes the "
            f"restore (or, failing that, rolls it back)",
            outcome="pending",
        ) from exc

    def finish_interrupted(self, data: Mapping[str, Any] | None = None) -> None:
        """Finish (or, failing that, roll back) a restore whose process died or failed."""
        if data is None:
            path = self.records.path(".restore.json")
            if path is None:
                return
            data = self.records.read(path, INTENT_FORMAT, "time-machine restore intent")
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
        if before is not None and before != self.tree.active:
            self._give_up(f"task {public(self.tree.active)} became active before it finished")
            return
        try:
            failures, _ = preflight(self.working_dir, plan, self._target)
            if failures:
                raise RestoreError("; ".join(failures))
            self._apply(plan, self._contents(plan))
        except (ApplyError, AgentMemError) as exc:
            problem = self._roll_back(prior, new_dirs) if prior is not None else exc
            if problem is not None or type(before) is not int or before not in self.tree.tasks:
                self._give_up(f"finishing it failed ({exc}); rolling it back failed ({problem})")
                return
            self.tree.active = before
            done = f"rolled back an interrupted restore to task {target} (finishing it: {exc})"
        else:
            if target not in self.tree.tasks:
                self._give_up(f"its task {target} is not in the tree")
                return
            self.tree.active = target
            done = f"completed an interrupted restore to task {target}"
        self.tree.dirty.clear()
        self._save()
        self._end_intent()
        _log.warning("session %s: %s", self.records.session_id, done)
        self.records.problems.append(done)

    def _give_up(self, why: str) -> None:
        self._intent = None
        path = self.records.path(".restore.json")
        moved = move_aside(path) if path is not None and path.exists() else None
        message = (
            f"an interrupted restore could not be completed nor rolled back: {why}; "
            + (f"its record was moved to {moved} and " if moved is not None else "")
            + "the working directory may mix two task states"
        )
        _log.error("session %s: %s", self.records.session_id, message)
        self.records.problems.append(message)


def _write_file(path: Path, data: bytes) -> None:
    # The restore's one write step, looked up in this module at call time so a test can stand in.
    atomic_write_bytes(path, data)


def _plan(data: object) -> dict[str, Ref]:
    if not isinstance(data, Mapping):
        raise TypeError("expected a path -> value mapping")
    return {str(k): (v if isinstance(v, str) else None) for k, v in data.items()}
