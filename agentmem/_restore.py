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
import os
import stat
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agentmem._snapshots import Ref, mode_of, parents

__all__ = [
    "LINK",
    "ApplyError",
    "RestoreResult",
    "SkippedFile",
    "apply_plan",
    "can_copy",
    "is_marker",
    "is_unknown",
    "marker_reason",
    "preflight",
]

LINK: Final = "!link:"
"""Prefix of a *prior* value that is a symlink (``"!link:<target>"``); only in intent records."""

_REASONS: Final = {
    "!unreadable": "it could not be read when the time machine first saw it",
    "!unstable": "it was being written by another process while the time machine read it",
    "!unknown": "it was hidden from the time machine (in a directory it could not read)",
}


def is_marker(ref: Ref) -> bool:
    """Whether ``ref`` stands for content the time machine does not hold."""
    return ref is not None and ref.startswith("!")


def is_unknown(ref: Ref) -> bool:
    """Whether ``ref`` says the content was never known (every marker but ``!large``)."""
    return is_marker(ref) and not str(ref).startswith(("!large:", LINK))


def can_copy(ref: Ref) -> bool:
    """Whether a current value ``ref`` is held (a blob, absent, or a symlink's target)."""
    return not is_marker(ref) or str(ref).startswith(LINK)


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
    """Make the disk hold ``plan`` (path -> blob ref, ``None`` or a ``LINK`` value).

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
                os.unlink(full)
            if ref.startswith(LINK):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(full)
                os.symlink(ref[len(LINK) :], full)
            else:
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
