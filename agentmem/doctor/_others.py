"""Semantic memory (on a scratch copy) and the time machine's records and blobs (in place)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentmem.doctor._report import Finding, Sink, failure
from agentmem.doctor._scratch import copy_database, integrity_problems
from agentmem.errors import AgentMemError
from agentmem.semantic import LocalMemoryClient
from agentmem.semantic.local import SEMANTIC_FILE
from agentmem.session.wiring import SNAPSHOTS_DIR
from agentmem.time_machine import SnapshotProblem, check_snapshots

__all__ = ["check_semantic", "check_time_machine"]


def check_semantic(root: Path, scratch: Path, add: Sink) -> None:
    """Open a copy of ``semantic.sqlite`` as :class:`LocalMemoryClient` does, and check it."""
    path = root / SEMANTIC_FILE
    target = str(path)
    if not path.exists():
        add(Finding("semantic", target, "ok", "no semantic memory yet", "nothing"))
        return
    work = scratch / "semantic"
    work.mkdir()
    try:
        copy_database(path, work / SEMANTIC_FILE)
    except (OSError, sqlite3.Error) as exc:
        add(Finding("semantic", target, "damaged", f"it cannot be read ({exc})", "nothing"))
        return
    try:
        client = LocalMemoryClient(str(work), embedder=None)
    except AgentMemError as exc:
        add(failure("semantic", target, exc, str(exc).replace(str(work), str(root))))
        return
    try:
        damaged = False
        if client.recovery is not None:
            damaged = True
            add(
                Finding(
                    "semantic",
                    target,
                    "damaged",
                    f"it is not a readable SQLite database ({client.recovery.reason})",
                    f"opening moves it aside to {SEMANTIC_FILE}.corrupt-<timestamp> and "
                    f"{client.recovery.outcome or 'starts an empty one'}",
                )
            )
        for problem in integrity_problems(work / SEMANTIC_FILE):
            damaged = True
            add(
                Finding(
                    "semantic",
                    target,
                    "damaged",
                    f"PRAGMA integrity_check: {problem}",
                    "nothing on open; a query that reaches the damaged pages marks it, and "
                    "the next open checks it whole and moves it aside",
                )
            )
        for line in client.problems:
            damaged = True
            add(
                Finding(
                    "semantic",
                    target,
                    "warning",
                    line.replace(str(work), str(root)),
                    "nothing: it is reported",
                )
            )
    finally:
        client.close()
    if not damaged:
        add(Finding("semantic", target, "ok", "semantic memory opens cleanly", "nothing"))


def check_time_machine(root: Path, add: Sink) -> None:
    """Check every session's time-machine records and the blobs they refer to (read only)."""
    store = root / SNAPSHOTS_DIR
    if not store.is_dir():
        add(Finding("time-machine", str(store), "ok", "no time-machine data yet", "nothing"))
        return
    bad = 0
    blobs = 0
    for item in check_snapshots(store):
        if isinstance(item, SnapshotProblem):
            bad += item.severity == "damaged"
            add(
                Finding(
                    "time-machine", str(item.target), item.severity, item.problem, item.recovery
                )
            )
        else:
            blobs = item
    add(
        Finding(
            "time-machine",
            str(store),
            "ok" if not bad else "damaged",
            f"{blobs} referenced blobs verified against their hashes, {bad} damaged items",
            "nothing" if not bad else "see the findings above",
        )
    )
