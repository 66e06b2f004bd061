"""Incognito: a whole session with LTM, notes and tools writes zero bytes anywhere.

Two independent checks: the root is read-only (and stays empty), and a
``sys.audit`` hook records every file opened for writing, every directory
created, every rename/remove and every SQLite database opened on disk while
the session runs, so a write that would merely have failed on a read-only
directory is caught too (the suite often runs as root, which ignores modes).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import agentmem
from agentmem.testing import ScriptedLLM, tool_call
from agentmem.tokens import HeuristicCounter
from agentmem.tools import TOOL_NAME

_WRITES: list[tuple[str, Any]] | None = None
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _WRITES is None:
        return
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writing and not (isinstance(path, int) or str(path).startswith("/dev/")):
            _WRITES.append((event, path))
    elif event in {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.truncate", "shutil.move"}:
        _WRITES.append((event, args[0]))
    elif event == "sqlite3.connect":
        database = args[0]
        if str(database) not in (":memory:", "") and "mode=memory" not in str(database):
            _WRITES.append((event, database))


sys.addaudithook(_hook)


def test_whole_incognito_session_writes_nothing(tmp_path: Path) -> None:
    global _WRITES
    root = tmp_path / "ro-root"
    root.mkdir()
    root.chmod(stat.S_IRUSR | stat.S_IXUSR)
    llm = ScriptedLLM(
        [
            tool_call(TOOL_NAME, {"operation": "store", "key": "k", "content": "password=hunter2"}),
            tool_call(TOOL_NAME, {"operation": "add_discovery", "fact": "incognito fact"}),
            tool_call(TOOL_NAME, {"operation": "ltm_stats"}),
            {"role": "assistant", "content": "ok"},
        ]
    )
    _WRITES = []
    try:
        mem = agentmem.Memory(
            root=root,
            incognito=True,
            token_counter=HeuristicCounter(),
            context={"trim_target": 0.5},
        )
        mem.ltm.add_solution("boom", "fix it", examples=["a.py"])
        mem.notes.store("direct", "note")
        with mem.session(name="private", context_window=2048) as s:
            s.start_task("remember this " + "word " * 200)
            while True:
                reply = llm(s.context())
                reply.pop("usage")
                s.append(reply)
                if not reply.get("tool_calls"):
                    break
                for call in reply["tool_calls"]:
                    s.append(mem.tools.handle(call))
            s.finish_task()
        assert mem.notes.retrieve("k") == "password=[REDACTED:password]"
        assert mem.notes.retrieve("session_progress") is None
        assert {e.text for e in mem.ltm.entries()} == {"boom", "incognito fact"}
        assert mem.ltm.stats()["path"] is None
        mem.close()
        writes = list(_WRITES)
    finally:
        _WRITES = None
        root.chmod(stat.S_IRWXU)
    assert writes == []
    assert list(root.iterdir()) == []


def test_the_audit_hook_sees_real_writes(tmp_path: Path) -> None:
    # Guards the guard: a non-incognito memory doing the same is caught.
    global _WRITES
    _WRITES = []
    try:
        mem = agentmem.Memory(root=tmp_path / "r")
        mem.ltm.add_discovery("fact")
        mem.notes.store("k", "v")
        mem.close()
        writes = list(_WRITES)
    finally:
        _WRITES = None
    kinds = {event for event, _ in writes}
    assert {"open", "os.mkdir", "sqlite3.connect"} <= kinds
    assert any(str(path).endswith("ltm.json") for _, path in writes if _ == "os.rename") or any(
        "ltm.json" in str(path) for _, path in writes
    )
