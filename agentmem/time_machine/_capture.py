"""Where a file is captured, and where ``guard()`` decides what a command changed.

:meth:`FileCapture.capture` reads one file's current content into the blob
store and returns its :data:`~agentmem.time_machine._snapshots.Ref`. It never
raises for the file itself, nor when the blob store cannot keep the content
(disk full): what cannot be known or kept comes back as a marker, and a line
goes to the time machine's ``errors``.

The guard's *stat index* maps every regular file of the working directory to
what it held when last seen (:class:`~agentmem.time_machine._snapshots.IndexEntry`:
its stat, when it was indexed, its content). Before a command,
:meth:`FileCapture.refresh` brings the index up to date; after it,
:meth:`FileCapture.changes` walks the tree again and compares stats: a file
whose stat is unchanged is not read (like git's index), except a *racy* one
(modified within 2 s of being indexed), which is re-hashed. A file the walk
could not see (an unreadable directory) is kept in the *blind* set, so it is
never taken for a file the command created, nor for one it deleted. A file
whose ctime is older than the command's start was not changed by it.

This module knows nothing of tasks beyond the record a capture adds its new
bytes to; the task tree (:mod:`agentmem.time_machine._tree`) records what the
changes mean.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agentmem.time_machine._snapshots import (
    UNKNOWN,
    UNREADABLE,
    UNSTABLE,
    VERSION,
    BlobStore,
    IndexEntry,
    Ref,
    TaskRecord,
    blob_of,
    hash_bytes,
    is_marker,
    parents,
    stat_of,
    under,
    walk,
)

__all__ = ["CTIME_MARGIN_NS", "INDEX_FORMAT", "Changes", "FileCapture"]

_log = logging.getLogger("agentmem.time_machine")

INDEX_FORMAT: Final = "agentmem.time-machine-index"
CTIME_MARGIN_NS: Final = 50_000_000
"""A file whose ctime is this much older than a command's start was not changed by it
(the margin covers the coarse clock the kernel stamps inodes with)."""
_READ_ATTEMPTS: Final = 3
"""Reads of a file that keeps changing while read before it is marked ``!unstable``."""


@dataclass(frozen=True, slots=True)
class Changes:
    """What one command changed: path -> its value before, and what is there now."""

    before: dict[str, Ref]
    """Each changed, created (``None``) or deleted path, with what it held before."""
    exists: frozenset[str]
    """The changed paths that still exist (their content is captured as the task's)."""
    created_dirs: frozenset[str]
    """Directories the command made (they held no indexed file before)."""


class FileCapture:
    """File captures and the guard's stat index for one working directory.

    Args:
        working_dir: The (resolved) project directory.
        skip: Directories never walked (the memory root, the snapshot store).
        blobs: Where captured content goes.
        max_file_bytes: Larger files are recorded as too large (``!large:<size>``).
        note_error: Where a file's trouble is reported (logged and kept).

    Attributes:
        index: path -> what it held when last seen.
        fresh: Whether :attr:`index` is known to match the disk.
        unsaved: Whether :attr:`index` changed since it was last saved.
        blind: What the last walk could not see (unreadable directories, unstat-able entries).
        too_large: path -> size of every file that was too large to snapshot.
    """

    def __init__(
        self,
        working_dir: Path,
        skip: list[Path],
        blobs: BlobStore,
        max_file_bytes: int,
        note_error: Callable[[str], None],
    ) -> None:
        self.working_dir = working_dir
        self.skip = skip
        self.blobs = blobs
        self.max_file_bytes = max_file_bytes
        self.note_error = note_error
        self.index: dict[str, IndexEntry] = {}
        self.fresh = False
        self.unsaved = False
        self.blind: set[str] = set()
        self.too_large: dict[str, int] = {}

    # ------------------------------------------------------------------ one file

    def capture(self, rel: str, task: TaskRecord) -> Ref:
        """The current value of ``rel`` on disk (its content stored as a blob).

        New blob bytes are added to ``task.bytes``. Never raises for the file
        itself, nor when its content cannot be stored (an ``OSError`` of the
        blob store: disk full): content that cannot be known or kept comes back
        as a marker (``!unreadable``: a read or stat error, a symlink or other
        non-regular file, a snapshot that could not be stored; ``!unstable``: it
        kept changing while read; ``!unknown``: it vanished between the stat and
        the read) and a regular file that exists is always indexed, marker or
        not, so a later guard never takes it for a file its command created.
        """
        full = self.working_dir / rel
        for _ in range(_READ_ATTEMPTS):
            try:
                st: os.stat_result | None = os.lstat(full)
            except (FileNotFoundError, NotADirectoryError):  # gone, or a file took a parent's place
                st = None
            except OSError as exc:
                self.note_error(f"{rel}: cannot be examined ({exc}), not snapshotted")
                return UNREADABLE
            if st is None or stat.S_ISDIR(st.st_mode):  # no file (or a directory took its place)
                self.index.pop(rel, None)
                self.unsaved = True
                return None
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
                self.note_error(f"{rel}: not a regular file, not snapshotted")
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
                self.note_error(f"{rel}: vanished while it was read, not snapshotted")
                return self._indexed(rel, st, UNKNOWN)
            except OSError as exc:
                self.note_error(f"{rel}: cannot be read ({exc}), not snapshotted")
                return self._indexed(rel, st, UNREADABLE)
            if stat_of(after) != stat_of(st):
                continue  # written while we read it: what we hold may be torn
            try:
                blob, added = self.blobs.put(data)
            except OSError as exc:  # the store's trouble (disk full): not this call's to raise
                self.note_error(f"{rel}: its snapshot could not be stored ({exc})")
                return self._indexed(rel, st, UNREADABLE)
            task.bytes += added
            return self._indexed(rel, st, f"{blob}:{stat.S_IMODE(st.st_mode):o}")
        self.note_error(f"{rel}: changed while it was read, not snapshotted")
        return self._indexed(rel, after, UNSTABLE)

    def _indexed(self, rel: str, st: os.stat_result, ref: str) -> str:
        self.index[rel] = IndexEntry(stat_of(st), time.time_ns(), ref)
        self.unsaved = True
        return ref

    def known_value(self, rel: str, st: os.stat_result) -> Ref:
        """The indexed content of ``rel`` when its stat ``st`` can be trusted, else ``None``."""
        entry = self.index.get(rel)
        if (
            entry is not None
            and entry.stat == stat_of(st)
            and not entry.racy
            and not is_marker(entry.ref)
        ):
            return str(entry.ref)
        return None

    def written(self, rel: str, ref: Ref) -> None:
        """A restore wrote ``ref`` at ``rel`` (``None``: removed it)."""
        if ref is None or is_marker(ref):
            self.index.pop(rel, None)
        else:
            st = os.lstat(self.working_dir / rel)
            self.index[rel] = IndexEntry(stat_of(st), time.time_ns(), ref)
        self.unsaved = True

    def clear(self) -> None:
        """Forget the index (it is rebuilt by the next guard)."""
        self.index.clear()
        self.fresh = False

    def blob_refs(self) -> set[str]:
        """Blobs the index refers to."""
        return {b for b in (blob_of(e.ref) for e in self.index.values()) if b}

    # ------------------------------------------------------------------ the saved index

    def load(self, doc: Mapping[str, Any]) -> None:
        """Take the index from its saved record (entries not shaped like one are dropped)."""
        if isinstance(doc.get("blind"), list):
            self.blind = {str(p) for p in doc["blind"]}
        if isinstance(doc.get("entries"), Mapping):
            entries = {str(k): IndexEntry.from_json(v) for k, v in doc["entries"].items()}
            self.index = {k: v for k, v in entries.items() if v is not None}

    def to_json(self) -> dict[str, Any]:
        """The index as saved (``<session>.index.json``)."""
        return {
            "format": INDEX_FORMAT,
            "version": VERSION,
            "entries": {rel: entry.to_json() for rel, entry in self.index.items()},
            "blind": sorted(self.blind),
        }

    # ------------------------------------------------------------------ guard

    def refresh(self, task: TaskRecord) -> None:
        """Bring the index up to date with the disk without recording anything.

        Every file the walk sees gets an entry, a marker when its content
        cannot be read; what the walk cannot see at all is kept in the
        *blind* set, so neither is later taken for a file a command created.
        """
        blind: set[str] = set()
        seen = walk(self.working_dir, self.skip, blind=blind)
        for rel in [r for r in self.index if r not in seen and not under(r, blind)]:
            del self.index[rel]
        for rel, st in seen.items():
            entry = self.index.get(rel)
            stale = entry is None or entry.stat != st or entry.racy or is_marker(entry.ref)
            if stale and self.capture(rel, task) is None:
                # Walked, then gone before it was read (an editor's unlink-and-write?):
                # what it held is unknown, so a file there later is not a new one.
                self.index[rel] = IndexEntry(st, time.time_ns(), UNKNOWN)
        if blind != self.blind:
            self.blind = blind
            self.unsaved = True
        self.fresh = True

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

    def _unchanged_since(self, rel: str, started: int | None) -> bool:
        """Whether ``rel`` was last changed before ``started`` (its ctime, which no
        program can set back, older than the command's start by a clock tick)."""
        if started is None:
            return False
        try:
            return os.lstat(self.working_dir / rel).st_ctime_ns < started - CTIME_MARGIN_NS
        except OSError:
            return False

    def changes(self, started: int | None, task: TaskRecord) -> Changes:
        """What a command that started at ``started`` (``time.time_ns()``) changed.

        Walks the working directory and compares it with the index (updated
        as it goes). A file new to the index, or changed, whose ctime is older
        than ``started`` was not the command's: it is only captured into
        ``task`` (indexed). Capturing what the changed files hold now
        is left to the caller, after it has recorded what they held before.
        """
        blind: set[str] = set()
        seen = walk(self.working_dir, self.skip, blind=blind)
        changed: dict[str, Ref] = {}
        for rel, st in seen.items():
            entry = self.index.get(rel)
            if entry is None:
                if self._unchanged_since(rel, started):
                    self.capture(rel, task)  # there before the command: not its file
                    continue
                # New, unless it was where the walk before the command could not see.
                changed[rel] = UNKNOWN if under(rel, self.blind) else None
            elif entry.stat != st or (entry.racy and self._content_changed(rel, entry)):
                if self._unchanged_since(rel, started):
                    self.capture(rel, task)  # changed before the command: not by it
                    continue
                changed[rel] = entry.ref
        for rel in [r for r in self.index if r not in seen]:
            full = self.working_dir / rel
            if under(rel, blind):
                continue  # hidden now (an unreadable directory): unknown, not deleted
            if os.path.isfile(full) and not os.path.islink(full):
                del self.index[rel]  # still a file, just not walked (ignored)
                self.unsaved = True
            else:
                changed[rel] = self.index.pop(rel).ref
                self.unsaved = True
        if blind != self.blind:
            self.blind = blind
            self.unsaved = True
        created: set[str] = set()
        if None in changed.values():
            # A directory holding no indexed file before the command was made by it.
            known_dirs = {p for k in self.index for p in parents(k)}
            for rel, before in sorted(changed.items()):
                if before is None:
                    for parent in parents(rel):
                        if parent in known_dirs:
                            break
                        created.add(parent)
        return Changes(
            before=changed,
            exists=frozenset(r for r in changed if r in seen),
            created_dirs=frozenset(created),
        )
