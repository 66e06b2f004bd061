"""The time machine's storage: content-addressed blobs, the ignore matcher, the stat walk.

* :class:`BlobStore`: every file content stored once, under
  ``<dir>/<sha256[:2]>/<sha256[2:]>``, zlib-compressed, and checked against
  its hash on every read (a damaged blob raises, it is never returned). A
  blob is written to a temporary file and renamed into place, so a reader
  never sees half a blob. Without a directory (incognito) blobs live in a
  dict.
* :class:`IgnoreRules`: a small ``.gitignore`` matcher (see
  docs/time-machine.md for what it understands).
* :func:`walk`: the stat walk behind ``guard()``: one ``os.scandir`` pass
  that never follows symlinks, never enters ``.git``, the memory root, or an
  ignored directory, and returns ``relative path -> Stat`` for regular files.
* :data:`Ref`, a path's value, and its markers (``!unreadable``, ``!unstable``,
  ``!unknown``, ``!large:<size>``) for content the time machine does not hold.
* :class:`IndexEntry` (the guard's stat index) and :class:`TaskRecord` (one
  task's before/after maps), as saved in a session's JSON files;
  :class:`RecordFiles` reads and writes those files (a damaged one is moved aside).
* :func:`collect_unreferenced`: the one blob collection, which removes
  nothing while any session record is unreadable; :func:`delete_stored_session`
  removes a closed session's files, then collects.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import time
import zlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agentmem._storage.files import (
    atomic_write_text,
    check_inside,
    make_dirs,
    remove_stale_temps,
    set_aside,
    temp_tag,
)
from agentmem._storage.formats import check_format
from agentmem.errors import (
    AgentMemError,
    CorruptStoreError,
    FormatVersionError,
    InvalidArgumentError,
    StorageError,
)

__all__ = [
    "GC_GRACE_SECONDS",
    "RACY_NS",
    "SESSION_FILE_SUFFIXES",
    "SYMLINK",
    "UNKNOWN",
    "UNREADABLE",
    "UNSTABLE",
    "VERSION",
    "BlobStore",
    "IgnoreRules",
    "IndexEntry",
    "RecordFiles",
    "Ref",
    "Stat",
    "TaskRecord",
    "blob_of",
    "can_copy",
    "collect_unreferenced",
    "delete_stored_session",
    "hash_bytes",
    "is_marker",
    "is_unknown",
    "json_refs",
    "marker_reason",
    "mode_of",
    "parents",
    "parse_record",
    "stat_of",
    "under",
    "walk",
]

_log = logging.getLogger("agentmem.time_machine")


def hash_bytes(data: bytes) -> str:
    """The blob id of ``data`` (sha256, hex)."""
    return hashlib.sha256(data).hexdigest()


class BlobStore:
    """Content-addressed, verified blobs: on disk, or in memory when ``directory`` is None."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._memory: dict[str, bytes] = {}

    def _path(self, blob: str) -> Path:
        assert self.directory is not None
        return self.directory / blob[:2] / blob[2:]

    def put(self, data: bytes) -> tuple[str, int]:
        """Store ``data`` (once); returns its id and the bytes newly stored (0 when known)."""
        blob = hash_bytes(data)
        if self.directory is None:
            if blob in self._memory:
                return blob, 0
            self._memory[blob] = data
            return blob, len(data)
        path = self._path(blob)
        try:
            if path.stat().st_size > 0:
                # Already stored: refresh its mtime so a concurrent collection keeps it.
                with contextlib.suppress(OSError):
                    os.utime(path)
                return blob, 0
        except FileNotFoundError:
            pass
        make_dirs(self.directory.parent.parent, path.parent)  # <root>/snapshots/blobs: no symlinks
        check_inside(self.directory.parent.parent, path)
        tmp = path.with_name(f".{path.name}.{temp_tag()}.tmp")  # see remove_stale_temps
        packed = zlib.compress(data, 1)
        try:
            with open(tmp, "wb") as handle:
                handle.write(packed)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return blob, len(packed)

    def get(self, blob: str) -> bytes:
        """The content of ``blob``, verified against its id.

        Raises:
            CorruptStoreError: the blob is missing, unreadable, or does not match its id.
        """
        if self.directory is None:
            if blob not in self._memory:
                raise CorruptStoreError(f"snapshot blob {blob} is missing")
            return self._memory[blob]
        path = self._path(blob)
        try:
            data = zlib.decompress(path.read_bytes())
        except (OSError, zlib.error) as exc:
            raise CorruptStoreError(
                f"snapshot blob {blob} cannot be read: {exc}", path=path
            ) from exc
        if hash_bytes(data) != blob:
            raise CorruptStoreError(f"snapshot blob {blob} does not match its hash", path=path)
        return data

    def stored(self) -> Iterator[tuple[str, Path]]:
        """Every (blob id, path) on disk (nothing in memory mode)."""
        if self.directory is None or not self.directory.is_dir():
            return
        for sub in self.directory.iterdir():
            if len(sub.name) != 2 or not sub.is_dir():
                continue
            for item in sub.iterdir():
                if not item.name.startswith("."):
                    yield sub.name + item.name, item

    def collect(self, keep: set[str], *, grace_seconds: float, now: float) -> int:
        """Delete blobs not in ``keep`` (older than the grace period); returns how many."""
        if self.directory is None:
            drop = [b for b in self._memory if b not in keep]
            for b in drop:
                del self._memory[b]
            return len(drop)
        removed = 0
        for sub in self.directory.iterdir() if self.directory.is_dir() else ():
            if len(sub.name) == 2 and sub.is_dir():
                remove_stale_temps(sub, root=self.directory.parent.parent)  # killed writers
        for blob, path in list(self.stored()):
            if blob in keep:
                continue
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime >= grace_seconds:
                    path.unlink()
                    removed += 1
        return removed


# ---------------------------------------------------------------------------- ignore rules


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool


def _translate(glob: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = glob.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = glob[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        elif c == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def parse_ignore(text: str) -> list[_Pattern]:
    """Patterns of one ``.gitignore`` file (blank lines and ``#`` comments skipped)."""
    patterns: list[_Pattern] = []
    for raw in text.splitlines():
        line = raw.rstrip(" ")
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith("\\"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        try:
            regex = re.compile(_translate(line) + r"\Z")
        except re.error:
            continue
        patterns.append(_Pattern(regex, negate, dir_only, anchored))
    return patterns


class IgnoreRules:
    """The ``.gitignore`` files met on the way down: (base directory, patterns) pairs."""

    def __init__(self, layers: tuple[tuple[str, tuple[_Pattern, ...]], ...] = ()) -> None:
        self.layers = layers

    def extended(self, base: str, text: str) -> IgnoreRules:
        patterns = tuple(parse_ignore(text))
        return IgnoreRules((*self.layers, (base, patterns))) if patterns else self

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether ``rel`` (posix, relative to the working directory) is ignored."""
        result = False
        name = rel.rpartition("/")[2]
        for base, patterns in self.layers:
            if base:
                if not rel.startswith(base + "/"):
                    continue
                sub = rel[len(base) + 1 :]
            else:
                sub = rel
            for p in patterns:
                if p.dir_only and not is_dir:
                    continue
                if (p.regex.match(sub) if p.anchored else p.regex.match(name)) is not None:
                    result = not p.negate
        return result


# ---------------------------------------------------------------------------- the stat walk


Stat = tuple[int, int, int, int]
"""What the walk compares: (size, mtime_ns, permission bits, inode). A file whose four
fields are unchanged is not re-read."""


def stat_of(st: os.stat_result) -> Stat:
    return (st.st_size, st.st_mtime_ns, st.st_mode & 0o7777, st.st_ino)


def walk(
    top: Path,
    skip: Iterable[Path] = (),
    rules: IgnoreRules | None = None,
    blind: set[str] | None = None,
) -> dict[str, Stat]:
    """``relative posix path -> Stat`` of every regular file under ``top`` that is not ignored.

    Never follows symlinks, never enters ``.git``, a directory in ``skip``
    (the memory root) or an ignored directory. Unreadable directories are
    skipped; when ``blind`` is given, the relative path of every directory
    that could not be listed and every entry that could not be stat'ed is
    added to it (``""`` for ``top`` itself): what the walk could not see, so
    a file that appears there later is not taken for a new one.
    """
    skipped = {os.path.normcase(str(p)) for p in skip}
    out: dict[str, Stat] = {}
    stack: list[tuple[str, str, IgnoreRules]] = [(str(top), "", rules or IgnoreRules())]
    while stack:
        directory, prefix, layer = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            if blind is not None:
                blind.add(prefix.rstrip("/"))
            continue
        for entry in entries:
            if entry.name == ".gitignore" and entry.is_file(follow_symlinks=False):
                with (
                    contextlib.suppress(OSError, UnicodeDecodeError),
                    open(entry.path, encoding="utf-8") as handle,
                ):
                    layer = layer.extended(prefix.rstrip("/"), handle.read())
                break
        for entry in entries:
            rel = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name == ".git" or os.path.normcase(entry.path) in skipped:
                        continue
                    if layer.layers and layer.ignored(rel, True):
                        continue
                    stack.append((entry.path, rel + "/", layer))
                elif entry.is_file(follow_symlinks=False):
                    if layer.layers and layer.ignored(rel, False):
                        continue
                    out[rel] = stat_of(entry.stat(follow_symlinks=False))
            except OSError:
                if blind is not None:
                    blind.add(rel)
                continue
    return out


# ---------------------------------------------------------------------------- task records

Ref = str | None
"""A path's value: ``"<sha256>:<octal mode>"``, ``None`` (absent), or a ``"!..."`` marker."""

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


RACY_NS: Final = 2_000_000_000
"""A file modified this close to when its stat was indexed is re-hashed (racy mtime)."""


@dataclass(slots=True)
class IndexEntry:
    """What the guard's stat index holds for one file (saved as ``[*stat, indexed_ns, ref]``)."""

    stat: Stat
    """The file's (size, mtime_ns, permission bits, inode) when indexed."""
    indexed_ns: int
    """When it was indexed (``time.time_ns()``); refreshed when a re-hash finds it unchanged."""
    ref: Ref
    """Its content then: a blob reference, or a marker when it could not be read."""

    @property
    def racy(self) -> bool:
        """Modified within :data:`RACY_NS` of being indexed: its stat cannot be trusted."""
        return self.stat[1] + RACY_NS >= self.indexed_ns

    def to_json(self) -> list[Any]:
        return [*self.stat, self.indexed_ns, self.ref]

    @classmethod
    def from_json(cls, value: object) -> IndexEntry | None:
        """The entry saved as ``value``; ``None`` for anything not shaped like one."""
        if (
            isinstance(value, list)
            and len(value) == 6
            and all(type(x) is int for x in value[:5])
            and (value[5] is None or isinstance(value[5], str))
        ):
            return cls((value[0], value[1], value[2], value[3]), value[4], value[5])
        return None


@dataclass(slots=True)
class TaskRecord:
    parent: int | None
    summary: str = ""
    created_at: float = 0.0
    before: dict[str, Ref] = field(default_factory=dict)
    after: dict[str, Ref] = field(default_factory=dict)
    bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "parent": self.parent,
            "summary": self.summary,
            "created_at": self.created_at,
            "before": self.before,
            "after": self.after,
            "bytes": self.bytes,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskRecord:
        parent = data.get("parent")
        return cls(
            parent=parent if type(parent) is int else None,
            summary=str(data.get("summary", "")),
            created_at=float(data.get("created_at", 0.0)),
            before=_refs(data.get("before")),
            after=_refs(data.get("after")),
            bytes=int(data.get("bytes", 0)),
        )


def _refs(data: object) -> dict[str, Ref]:
    if not isinstance(data, Mapping):
        raise InvalidArgumentError("task record: expected a path -> ref mapping")
    return {str(k): (v if isinstance(v, str) else None) for k, v in data.items()}


def blob_of(ref: Ref) -> str | None:
    if ref is None or ref.startswith("!"):
        return None
    return ref.partition(":")[0]


def mode_of(ref: str) -> int:
    return int(ref.partition(":")[2] or "644", 8)


def under(rel: str, paths: Collection[str]) -> bool:
    """Whether ``rel`` is one of ``paths`` or lies below one of them (``""`` holds everything)."""
    if not paths:
        return False
    return rel in paths or "" in paths or any(p in paths for p in parents(rel))


def parents(rel: str) -> Iterator[str]:
    while "/" in rel:
        rel = rel.rpartition("/")[0]
        yield rel


def json_refs(data: object) -> Iterator[str]:
    """Blob ids in any stored record or index (strings ``<64 hex>:<mode>``)."""
    if isinstance(data, str):
        blob = blob_of(data)
        if blob and len(blob) == 64 and ":" in data:
            yield blob
    elif isinstance(data, Mapping):
        for value in data.values():
            yield from json_refs(value)
    elif isinstance(data, list):
        for value in data:
            yield from json_refs(value)


# ---------------------------------------------------------------------------- session files

VERSION: Final = 1
"""The version of every time-machine record (tree, index, restore intent)."""


def parse_record(path: Path, kind: str, what: str) -> dict[str, Any]:
    """Read and check one record (the one parse :class:`RecordFiles` and the doctor share).

    Raises:
        FileNotFoundError: there is none.
        OSError, ValueError: it cannot be read or is not JSON.
        AgentMemError: another format, or a malformed or newer version
            (:class:`~agentmem.errors.FormatVersionError` with ``found`` set: newer).
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    check_format(data, kind=kind, version=VERSION, what=what)
    return dict(data)


class RecordFiles:
    """One session's JSON records, ``<store_dir>/sessions/<session_id><suffix>``.

    Without a store (incognito) there are no files: :meth:`path` returns ``None``.
    A record that cannot be parsed is moved aside and reported in ``problems``
    (never silently dropped); one a newer agentmem wrote raises.
    """

    def __init__(self, store_dir: Path | None, session_id: str, problems: list[str]) -> None:
        self.store_dir = store_dir
        self.session_id = session_id
        self.problems = problems

    def path(self, suffix: str) -> Path | None:
        """The session's file with ``suffix`` (see :data:`SESSION_FILE_SUFFIXES`)."""
        if self.store_dir is None:
            return None
        return self.store_dir / "sessions" / f"{self.session_id}{suffix}"

    def read(self, path: Path, kind: str, what: str) -> dict[str, Any] | None:
        """The record at ``path`` (``None``: there is none, or it was moved aside)."""
        try:
            return parse_record(path, kind, what)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, AgentMemError) as exc:
            if isinstance(exc, FormatVersionError) and exc.found is not None:
                raise  # a newer agentmem wrote it: leave it alone
            self.set_aside(path, what, str(exc))
            return None

    def set_aside(self, path: Path, what: str, reason: str) -> None:
        """Move a damaged record aside and report it in ``problems``."""
        _, message = set_aside(path, what=f"{what} {path}", reason=reason, logger=_log)
        self.problems.append(message)

    def write(self, path: Path, doc: Mapping[str, Any]) -> None:
        """Write ``doc`` atomically (raises StorageError)."""
        assert self.store_dir is not None
        root = self.store_dir.parent  # the memory root: no symlink below it is followed
        try:
            make_dirs(root, path.parent)
            atomic_write_text(path, json.dumps(doc, separators=(",", ":")), root=root)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc}", path=path) from exc


# ---------------------------------------------------------------------------- collection

GC_GRACE_SECONDS: Final = 3600.0
"""Unreferenced blobs younger than this survive a collection (a concurrent writer's)."""

SESSION_FILE_SUFFIXES: Final = (".json", ".index.json", ".restore.json", ".guard")
"""The files ``<store_dir>/sessions/<id><suffix>`` one session's time machine keeps."""


def collect_unreferenced(store_dir: str | Path, keep: Collection[str] = ()) -> int:
    """Delete the blobs of ``<store_dir>/blobs`` that nothing refers to; returns how many.

    The one blob collection (``TimeMachine.collect_garbage`` and
    :func:`delete_stored_session` both call it). A blob survives when it is in
    ``keep`` (what an open session holds in memory), when a session record,
    index or restore intent under ``<store_dir>/sessions`` refers to it, or when
    it is younger than :data:`GC_GRACE_SECONDS` (a concurrent writer's new blob,
    before its record is saved). If any record cannot be read, no blob is
    removed: its references are unknown (logged on ``agentmem.time_machine``).

    Raises:
        UnsafePathError: a symlink under the memory root on the way (nothing is
            removed through it).
    """
    root = Path(store_dir).parent  # the memory root: no symlink below it is followed
    sessions = check_inside(root, Path(store_dir) / "sessions")
    check_inside(root, Path(store_dir) / "blobs")
    referenced = set(keep)
    try:
        docs = list(sessions.glob("*.json")) if sessions.is_dir() else []
        for doc in docs:
            try:
                referenced.update(json_refs(json.loads(doc.read_text(encoding="utf-8"))))
            except FileNotFoundError:
                continue  # deleted meanwhile: its references went with it
    except (OSError, ValueError) as exc:
        _log.warning("snapshot blobs not collected: a session record is unreadable (%s)", exc)
        return 0
    blobs = BlobStore(Path(store_dir) / "blobs")
    return blobs.collect(referenced, grace_seconds=GC_GRACE_SECONDS, now=time.time())


def delete_stored_session(
    store_dir: str | Path, session_id: str, *, keep: Collection[str] = ()
) -> int:
    """Remove a closed session's time-machine files and the blobs only it referred to.

    For a session nobody has open (the session store calls it under the
    session's lock, from :meth:`~agentmem.session_store.SessionStore.delete`):
    its task tree, stat index, restore intent and guard marker go, then the
    blobs nothing else refers to (:func:`collect_unreferenced`, with ``keep``).

    Returns:
        How many blobs were removed.

    Raises:
        StorageError: a file of the session could not be removed.
        UnsafePathError: a symlink under the memory root on the way (nothing is
            removed through it).
    """
    root = Path(store_dir).parent
    sessions = check_inside(root, Path(store_dir) / "sessions")
    for suffix in SESSION_FILE_SUFFIXES:
        path = check_inside(root, sessions / f"{session_id}{suffix}")
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"cannot remove {path}: {exc}", path=path) from exc
    return collect_unreferenced(store_dir, keep)
