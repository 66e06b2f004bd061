"""A read-only check of a memory's time-machine store, for ``agentmem doctor``.

It parses every session record the way opening a session does
(:func:`~agentmem.time_machine._snapshots.parse_record`, then the task tree's own
``load`` for the tree record), and verifies every blob a record or index refers to
(present, and its content matching its hash, as :meth:`BlobStore.get` checks it on
every read). Nothing is written: a damaged record is described with what opening
the session would do about it (move it aside), not moved.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agentmem.errors import AgentMemError, CorruptStoreError, FormatVersionError
from agentmem.time_machine._capture import INDEX_FORMAT
from agentmem.time_machine._machine import FORMAT
from agentmem.time_machine._restore import INTENT_FORMAT
from agentmem.time_machine._snapshots import BlobStore, json_refs, parse_record
from agentmem.time_machine._tree import TaskTree

__all__ = ["SnapshotProblem", "check_snapshots"]

_KINDS = {
    ".index.json": (INDEX_FORMAT, "time-machine index"),
    ".restore.json": (INTENT_FORMAT, "time-machine restore intent"),
    ".json": (FORMAT, "time-machine record"),
}


@dataclass(frozen=True)
class SnapshotProblem:
    """One thing :func:`check_snapshots` found wrong (or, with severity ok, a summary)."""

    target: Path
    """The record or blob file."""
    severity: str
    """``"warning"`` or ``"damaged"``."""
    problem: str
    """What is wrong."""
    recovery: str
    """What opening (or restoring) would do."""


def _kind(name: str) -> tuple[str, str, str] | None:
    for suffix, (kind, what) in _KINDS.items():
        if name.endswith(suffix):
            return name[: -len(suffix)], kind, what
    return None


def check_snapshots(store_dir: Path) -> Iterator[SnapshotProblem | int]:
    """Check ``<root>/snapshots``: yields each problem, and the count of blobs verified last.

    Args:
        store_dir: The time machine's store (``<root>/snapshots``).
    """
    sessions = store_dir / "sessions"
    refs: dict[str, Path] = {}
    names = sorted(p.name for p in sessions.iterdir()) if sessions.is_dir() else []
    for name in names:
        path = sessions / name
        if name.endswith(".guard"):
            sid = name[: -len(".guard")]
            yield SnapshotProblem(
                path,
                "warning",
                f"session {sid}: a shell command's process died inside guard()",
                f"opening session {sid} records what the command changed",
            )
            continue
        found = _kind(name)
        if found is None:
            continue
        sid, kind, what = found
        try:
            doc = parse_record(path, kind, what)
            if kind == FORMAT:
                TaskTree().load(doc)
        except FileNotFoundError:
            continue
        except FormatVersionError as exc:
            if exc.found is not None:
                yield SnapshotProblem(
                    path,
                    "damaged",
                    str(exc),
                    f"nothing: opening session {sid} fails with FormatVersionError",
                )
                continue
            yield _aside(path, sid, what, str(exc))
            continue
        except (OSError, ValueError, KeyError, TypeError, AttributeError, AgentMemError) as exc:
            yield _aside(path, sid, what, str(exc) or type(exc).__name__)
            continue
        if kind == INTENT_FORMAT:
            yield SnapshotProblem(
                path,
                "warning",
                f"session {sid}: a restore (undo, redo or switch) was interrupted",
                f"opening session {sid} finishes it or rolls it back",
            )
        for blob in json_refs(doc):
            refs.setdefault(blob, path)
    blobs = BlobStore(store_dir / "blobs")
    for blob, record in sorted(refs.items()):
        try:
            blobs.get(blob)
        except CorruptStoreError as exc:
            target = store_dir / "blobs" / blob[:2] / blob[2:]
            yield SnapshotProblem(
                target,
                "damaged",
                f"{exc} (referred to by {record.name})",
                "nothing on open; an undo, redo or switch that needs it is refused "
                "(RestoreError) and leaves the files as they are",
            )
    yield len(refs)


def _aside(path: Path, sid: str, what: str, reason: str) -> SnapshotProblem:
    return SnapshotProblem(
        path,
        "damaged",
        f"{what} is unreadable ({reason})",
        f"opening session {sid} moves it aside to {path.name}.corrupt-<timestamp>"
        + (" and starts its task tree empty" if what == "time-machine record" else ""),
    )
