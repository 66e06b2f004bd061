"""Progress events (issue 13, B9): everything that takes time or changes the user's files
is reported to the host's ProgressReporter, with the keys docs/progress.md lists.

Each test drives the operation through the facade with a recording reporter and
checks the started/finished pair (or the single event), the keys of every event
against the catalogue (agentmem._events.EVENTS), and that the catalogue and
docs/progress.md agree.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import agentmem
from agentmem._events import EVENTS
from agentmem.errors import InvalidArgumentError, StorageError

DOC = Path(__file__).resolve().parent.parent / "docs" / "progress.md"


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def report(self, event: str, data: Mapping[str, Any]) -> None:
        assert event in EVENTS, f"undocumented event {event!r}"
        assert set(data) == set(EVENTS[event]), (event, sorted(data))
        self.events.append((event, dict(data)))

    def named(self, prefix: str) -> list[tuple[str, dict[str, Any]]]:
        return [(e, d) for e, d in self.events if e.startswith(prefix)]


def _memory(tmp_path: Path, reporter: Any) -> agentmem.Memory:
    return agentmem.Memory(
        root=tmp_path / ".agentmem", working_dir=tmp_path, durability="normal", reporter=reporter
    )


def _pair(
    events: list[tuple[str, dict[str, Any]]], name: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    assert [e for e, _ in events] == [f"{name}.started", f"{name}.finished"], events
    return events[0][1], events[1][1]


# --------------------------------------------------------------------------- stage 3


def test_overflow_recovery_reports_each_attempt(tmp_path: Path) -> None:
    rec = Recorder()
    with _memory(tmp_path, rec) as mem:
        s = mem.session(context_window=2000)
        s.history.replace_system_prompt("You are an agent.")
        for i in range(12):
            s.start_task(f"request {i} " + "word " * 30)
            s.append({"role": "assistant", "content": "answer " * 30})
        for attempt in (1, 2, 3):
            rec.events.clear()
            payload = s.context_after_overflow(attempt)
            started, finished = _pair(rec.named("context.overflow"), "context.overflow")
            assert started == {"session_id": s.id, "attempt": attempt, "provider": "openai"}
            assert finished["ok"] is True and finished["error"] is None
            assert finished["messages"] == len(payload) and finished["tokens"] > 0
            trims = rec.named("context.trim")
            assert trims and all(d["stage"] == 3 for _, d in trims)
            # the trim is reported between the pair
            names = [e for e, _ in rec.events]
            assert names.index("context.overflow.started") < names.index("context.trim")
            assert names.index("context.trim") < names.index("context.overflow.finished")
        rec.events.clear()
        with pytest.raises(InvalidArgumentError):
            s.context_after_overflow(4)  # refused before anything started
        assert rec.events == []


def test_async_overflow_recovery_reports_too(tmp_path: Path) -> None:
    rec = Recorder()
    with _memory(tmp_path, rec) as mem:
        s = mem.session(context_window=2000)
        for i in range(8):
            s.start_task(f"request {i} " + "word " * 40)
        asyncio.run(s.acontext_after_overflow(2, "anthropic"))
        started, finished = _pair(rec.named("context.overflow"), "context.overflow")
        assert started["provider"] == "anthropic" and finished["ok"] is True


# --------------------------------------------------------------------------- restores


def test_undo_and_switch_report_their_restores(tmp_path: Path) -> None:
    rec = Recorder()
    project = tmp_path / "project"
    project.mkdir()
    with agentmem.Memory(
        root=tmp_path / ".agentmem", working_dir=project, durability="normal", reporter=rec
    ) as mem:
        s = mem.session()
        target = project / "a.txt"
        target.write_text("before")
        task = s.start_task("edit a.txt")
        s.time_machine.record_file_before_change(target)
        target.write_text("after")
        s.finish_task()
        rec.events.clear()
        s.undo()
        started, finished = _pair(rec.named("restore"), "restore")
        assert started == {
            "session_id": s.id,
            "operation": "undo",
            "from_task": task,
            "to_task": None,
        }
        assert finished["ok"] is True and finished["to_task"] is None
        assert target.read_text() == "before"
        rec.events.clear()
        s.switch_to_task(task)
        started, finished = _pair(rec.named("restore"), "restore")
        assert started["operation"] == "switch" and started["to_task"] == task
        assert finished["ok"] is True and target.read_text() == "after"
        rec.events.clear()
        with pytest.raises(InvalidArgumentError):
            s.switch_to_task(999)
        _, finished = _pair(rec.named("restore"), "restore")
        assert finished["ok"] is False and finished["error"].startswith("InvalidArgumentError")


# --------------------------------------------------------------------------- resume repairs


def test_resume_repairs_are_reported(tmp_path: Path) -> None:
    root = tmp_path / ".agentmem"
    with agentmem.Memory(root=root, working_dir=tmp_path, durability="normal") as mem:
        s = mem.session()
        sid = s.id
        s.start_task("one")
        s.append({"role": "assistant", "content": "two"})
        s.append({"role": "user", "content": "three"})
        s.close()
    conn = sqlite3.connect(root / "sessions.sqlite")
    with conn:
        conn.execute(
            'UPDATE messages SET body = replace(body, \'"role":"user"\', \'"role":"usr"\') '
            "WHERE seq = 2"
        )
    conn.close()
    rec = Recorder()
    with _memory(tmp_path, rec) as mem:
        s = mem.session(sid)
        assert s.repairs == {"quarantined": [2]}
        (event,) = rec.named("session.repaired")
        assert event[1]["session_id"] == sid and event[1]["repairs"] == {"quarantined": [2]}
        s.close()
        rec.events.clear()
        mem.session(sid).close()  # clean now: nothing to report
        assert rec.named("session.repaired") == []


# --------------------------------------------------------------------------- index rebuilds


def test_recall_index_rebuilds_are_reported(tmp_path: Path) -> None:
    rec = Recorder()
    with _memory(tmp_path, rec) as mem:
        s = mem.session()
        s.start_task("alpha zebra")
        s.close()
        assert mem.sessions.check_recall_index(repair=False) == []
        conn = mem.sessions._conn
        assert conn is not None
        conn.execute("UPDATE recall_docs SET text = 'stale'")
        rec.events.clear()
        problems = mem.sessions.check_recall_index()
        assert problems
        started, finished = _pair(rec.named("recall.index_rebuild"), "recall.index_rebuild")
        assert started["database"] == str(tmp_path / ".agentmem" / "sessions.sqlite")
        assert started["reason"] == "; ".join(problems)
        assert finished["ok"] is True


def test_a_recall_index_damaged_on_disk_is_rebuilt_on_open_and_reported(tmp_path: Path) -> None:
    with _memory(tmp_path, Recorder()) as mem:
        s = mem.session()
        s.start_task("alpha zebra")
        s.close()
    db = tmp_path / ".agentmem" / "sessions.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE recall_docs")  # the index's schema damaged while closed
    conn.commit()
    conn.close()
    rec = Recorder()
    with _memory(tmp_path, rec) as mem:
        started, finished = _pair(rec.named("recall.index_rebuild"), "recall.index_rebuild")
        assert started["database"] == str(db)
        assert finished["ok"] is True
        assert [hit.session_id for hit in mem.recall("zebra")] == [s.id]


# --------------------------------------------------------------------------- exports


def test_exports_are_reported(tmp_path: Path) -> None:
    rec = Recorder()
    with _memory(tmp_path, rec) as mem:
        s = mem.session()
        s.start_task("export me")
        s.close()
        for name, fmt in (("out.json", "json"), ("out.html", "html")):
            rec.events.clear()
            path = mem.sessions.export(s.id, tmp_path / name)
            steps = [d for e, d in rec.events if e == "export.progress"]
            assert [(d["done"], d["total"]) for d in steps] == [(1, 1)]
            started, finished = _pair(
                [(e, d) for e, d in rec.named("export") if e != "export.progress"], "export"
            )
            assert started == {"session_id": s.id, "path": str(path), "format": fmt}
            assert steps[0] == {**started, "done": 1, "total": 1}
            assert finished["ok"] is True and finished["bytes"] == path.stat().st_size
        rec.events.clear()
        with pytest.raises(StorageError):
            mem.sessions.export(s.id, tmp_path / "no" / "dir" / "out.json")
        events = rec.named("export")
        assert [e for e, _ in events][-1] == "export.finished"
        assert events[-1][1]["ok"] is False
        assert events[-1][1]["error"].startswith("StorageError")


def test_a_long_export_reports_progress_every_1000_messages(tmp_path: Path) -> None:
    rec, other = Recorder(), Recorder()
    with _memory(tmp_path, rec) as mem:
        sid = mem.sessions.create().id
        mem.sessions.writer(sid).on_append(
            [{"role": "user", "content": f"m{i}"} for i in range(2_500)]
        )
        for fmt in ("json", "html"):
            rec.events.clear()
            mem.sessions.export(sid, tmp_path / f"long.{fmt}")
            steps = [(d["done"], d["total"]) for e, d in rec.events if e == "export.progress"]
            assert steps == [(1_000, 2_500), (2_000, 2_500), (2_500, 2_500)]
            names = [e for e, _ in rec.events]
            assert (names[0], names[-1]) == ("export.started", "export.finished")
        # progress= goes to that reporter instead of the memory's.
        rec.events.clear()
        mem.sessions.export(sid, tmp_path / "other.html", progress=other)
        assert rec.events == []
        assert [e for e, _ in other.events].count("export.progress") == 3


# --------------------------------------------------------------------------- reporters


def test_a_failing_reporter_never_breaks_the_operation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def report(self, event: str, data: Mapping[str, Any]) -> None:
            raise RuntimeError("display gone")

    with _memory(tmp_path, Broken()) as mem, caplog.at_level(logging.WARNING):
        s = mem.session(context_window=2000)
        for i in range(6):
            s.start_task(f"request {i} " + "word " * 40)
        assert s.context_after_overflow(1)
        s.undo()
        s.close()
        assert mem.sessions.export(s.id, tmp_path / "x.json").exists()
    assert "progress reporter failed on context.overflow.started" in caplog.text


def test_docs_list_every_event_with_its_keys() -> None:
    """docs/progress.md has a row `| `event` | `key`, `key` ... |` for every event."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\|\s*`([a-z_.]+)`\s*\|([^|]*)\|", line)
        if m:
            rows[m.group(1)] = set(re.findall(r"`([a-z_]+)`", m.group(2)))
    assert set(rows) == set(EVENTS)
    for event, keys in EVENTS.items():
        assert rows[event] == set(keys), event
