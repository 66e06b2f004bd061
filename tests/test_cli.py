"""The inspection CLI (``agentmem``, ``python -m agentmem``) end to end, on both backends.

A root is built with the library (two sessions with messages, billing, a
file edit under the time machine and an undone task; long-term memory,
a note, a topic file); every command's text and ``--json`` output is then
checked against what was stored. Most calls run ``main([...])`` in-process;
a handful are real ``python -m agentmem`` subprocesses (help, JSON on
stdout, each exit code, PostgreSQL), since each costs an interpreter start.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tomllib
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from test_documents import pg_uri

import agentmem
from agentmem._cli.common import Cli, Progress
from agentmem.cli import main

WORKTREE = Path(agentmem.__file__).resolve().parent.parent
TOOL_OUTPUT = "OUTPUT " * 2000
COMMANDS = ("memory", "topics", "notes", "recall", "reindex", "doctor", "session", "undo-history")


def build_root(root: Path, work: Path, backend: str | None = None) -> None:
    """The memory every test inspects (see the module docstring)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "app.py").write_text("x = 1\n")
    with agentmem.Memory(root=root, working_dir=work, backend=backend) as mem:
        s = mem.session(session_id="alpha", name="first chat", model="gpt-4o")
        s.start_task("Fix the flaky migration test")
        s.time_machine.record_file_before_change(work / "app.py")
        (work / "app.py").write_text("x = 2\n")
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "edit", "arguments": '{"path": "app.py"}'},
        }
        s.append({"role": "assistant", "content": None, "tool_calls": [call]})
        s.append({"role": "tool", "tool_call_id": "call_1", "content": TOOL_OUTPUT})
        s.append({"role": "assistant", "content": "Done: the migration test passes now."})
        s.record_usage(prompt_tokens=1200, completion_tokens=300, cost_usd=0.0125)
        s.finish_task()
        s.start_task("Rename the helper")
        s.append({"role": "assistant", "content": "Renamed."})
        s.finish_task()
        s.undo()  # task 2 becomes an undone branch; task 1 is active again
        s.close()
        b = mem.session(session_id="beta", name="long talk", model="gpt-4o")
        b.start_task("Tell me about databases")
        for i in range(30):
            text = f"Paragraph {i}: " + "postgres sqlite index btree page " * 30
            b.append({"role": "assistant", "content": text})
            b.append({"role": "user", "content": f"continue {i}"})
        b.close()
        mem.ltm.add_discovery("Tests run with pytest -q", confidence=0.9)
        mem.ltm.add_solution("ImportError: no module agentmem", "set PYTHONPATH to the worktree")
        mem.ltm.add_pattern("Writes go through atomic_write_bytes", confidence=0.2)
        mem.notes.store("build", "make all && make test")
        mem.topics.write("testing", "# Testing\nRun pytest -q before committing.\n")
    # One plain open, as any later open does: the sessions store indexes the recall
    # queue on open. The read-only check below compares against this state.
    agentmem.Memory(root=root, working_dir=work, backend=backend).close()


@dataclass
class Built:
    root: Path
    work: Path
    backend: list[str] = field(default_factory=list)

    def run(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
        """``main()`` in-process on this root; (exit code, stdout, stderr)."""
        code = main(["--root", str(self.root), *self.backend, *args])
        out, err = capsys.readouterr()
        return code, out, err

    def json(self, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
        code, out, err = self.run(capsys, *args, "--json")
        assert (code, err) == (0, ""), err
        return json.loads(out)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def cli(*args: str, env: dict[str, str] | None = None, stdin: Any = subprocess.DEVNULL) -> Any:
    """``python -m agentmem ARGS`` in a subprocess (the worktree first on the path)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMEM_")}
    full.update(PYTHONPATH=str(WORKTREE), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "agentmem", *args],
        capture_output=True,
        text=True,
        env=full,
        stdin=stdin,
        timeout=60,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    work = tmp_path_factory.mktemp("project")
    build_root(work / ".agentmem", work)
    return Built(work / ".agentmem", work)


@pytest.fixture
def scratch(built: Built, tmp_path: Path) -> Built:
    """A copy of the built root for commands that change it (sessions keep their project)."""
    shutil.copytree(built.root, tmp_path / "root")
    return Built(tmp_path / "root", built.work)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTMEM_ROOT", raising=False)
    monkeypatch.delenv("AGENTMEM_BACKEND", raising=False)
    monkeypatch.delenv("AGENTMEM_DEBUG", raising=False)


# ---------------------------------------------------------------------- reading


def check_reads(b: Built, capsys: pytest.CaptureFixture[str]) -> None:
    """Every read-only command, text and JSON, against what build_root stored."""
    sessions = b.json(capsys, "session", "list")
    assert [s["id"] for s in sessions] and {s["id"] for s in sessions} == {"alpha", "beta"}
    by_id = {s["id"]: s for s in sessions}
    assert by_id["alpha"]["message_count"] == 6 and by_id["beta"]["message_count"] == 61
    assert by_id["alpha"]["name"] == "first chat" and by_id["alpha"]["model"] == "gpt-4o"
    assert set(by_id["alpha"]) == {
        "id", "name", "created_at", "updated_at", "working_directory", "model",
        "context_window", "message_count", "damaged",
    }  # fmt: skip
    assert b.json(capsys, "session", "list", "--limit", "1")[0]["id"] in {"alpha", "beta"}
    code, out, _ = b.run(capsys, "session", "list")
    assert code == 0 and "alpha" in out and "first chat" in out and "long talk" in out

    shown = b.json(capsys, "session", "show", "alpha")
    assert shown["session"]["id"] == "alpha"
    assert shown["usage"]["prompt_tokens"] == 1200 and shown["usage"]["cost_usd"] == 0.0125
    assert shown["billing"][0]["completion_tokens"] == 300
    messages = [m["message"] for m in shown["messages"]]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"] * 1 + [
        "user",
        "assistant",
    ]
    assert messages[2]["content"] == TOOL_OUTPUT  # JSON: whole
    code, out, _ = b.run(capsys, "session", "show", "alpha")
    assert "characters omitted" in out and len(out) < len(TOOL_OUTPUT)  # text: cut
    assert "edit(" in out and "$0.0125" in out and "1200 prompt" in out
    tail = b.json(capsys, "session", "show", "beta", "--tail", "2")
    assert [m["index"] for m in tail["messages"]] == [59, 60]
    assert tail["messages"][1]["message"]["content"] == "continue 29"

    entries = b.json(capsys, "memory", "list")
    assert {e["kind"] for e in entries} == {"discoveries", "problem_solutions", "code_patterns"}
    assert set(entries[0]) == {
        "id", "kind", "text", "detail", "confidence", "first_seen", "last_confirmed",
        "examples", "applications",
    }  # fmt: skip
    (solution,) = b.json(capsys, "memory", "list", "--kind", "solution")
    assert solution["detail"] == "set PYTHONPATH to the worktree"
    found = b.json(capsys, "memory", "search", "pytest")
    assert [e["text"] for e in found] == ["Tests run with pytest -q"]
    assert b.json(capsys, "memory", "stats")["total"] == 3
    code, out, _ = b.run(capsys, "memory", "list", "--kind", "discovery")
    assert code == 0 and "Tests run with pytest -q" in out and "ImportError" not in out

    assert b.json(capsys, "notes", "list") == [{"key": "build"}]
    assert b.json(capsys, "notes", "show", "build") == {
        "key": "build",
        "content": "make all && make test",
    }
    (topic,) = b.json(capsys, "topics", "list")
    assert topic["topic"] == "testing" and topic["size"] > 0
    code, out, _ = b.run(capsys, "topics", "show", "testing")
    assert out == "# Testing\nRun pytest -q before committing.\n"

    hits = b.json(capsys, "recall", "migration", "--max-results", "3")
    assert hits and hits[0]["session_id"] == "alpha" and "migration" in hits[0]["preview"]
    assert len(hits) <= 3
    assert b.json(capsys, "recall", "zzzunknownword") == []
    code, out, _ = b.run(capsys, "recall", "zzzunknownword")
    assert code == 0 and "nothing found" in out

    tree = b.json(capsys, "undo-history", "alpha")
    assert tree["active_task_id"] == 1 and tree["newest_task_id"] == 2
    assert tree["active_chain"] == [1]
    statuses = {t["task_id"]: (t["status"], t["can_restore"]) for t in tree["tasks"]}
    assert statuses == {1: ("current", False), 2: ("undone", True)}
    assert tree["tasks"][0]["files"] == ["app.py"]
    code, out, _ = b.run(capsys, "undo-history", "alpha")
    assert "undone" in out and "Rename the helper" in out


def test_read_only_commands_show_what_was_stored_and_write_nothing(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(built.root)
    check_reads(built, capsys)
    # The shared options also go after the command.
    assert main(["notes", "list", "--root", str(built.root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"key": "build"}]
    assert snapshot(built.root) == before


def test_reindex_reports_a_consistent_index(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    assert built.json(capsys, "reindex") == {
        "problems": [],
        "rebuilt": False,
        "rebuilt_on_open": [],
    }


# ---------------------------------------------------------------------- maintenance


def test_trim_moves_the_window_forward_and_keeps_every_message(
    scratch: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    result = scratch.json(capsys, "session", "trim", "beta", "--window", "2000")
    assert result["trimmed"] and result["archived_messages"] == 61
    assert result["after"]["window_start"] > result["before"]["window_start"] == 0
    assert result["after"]["tokens"] < result["before"]["tokens"]
    assert result["thread_summary"] is True
    progress = (scratch.root / "memory" / "session_progress.md").read_text()  # as docs/cli.md says
    assert "`beta`" in progress
    shown = scratch.json(capsys, "session", "show", "beta")
    assert len(shown["messages"]) == 61  # nothing deleted
    assert shown["window"]["start"] == result["after"]["window_start"]  # stored
    assert "Summary of" in shown["thread_summary"]
    again = scratch.json(capsys, "session", "trim", "beta", "--window", "2000")
    assert not again["trimmed"] and again["before"] == again["after"] == result["after"]
    code, out, _ = scratch.run(capsys, "session", "trim", "beta", "--window", "2000")
    assert code == 0 and "nothing to trim" in out and "all 61 messages" in out


def test_export_prune_and_delete(
    scratch: Built,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = scratch.run(capsys, "session", "export", "alpha")
    assert (code, err) == (0, "") and out == f"{tmp_path / 'alpha.html'}\n"
    assert "Fix the flaky migration test" in (tmp_path / "alpha.html").read_text()
    done = scratch.json(capsys, "session", "export", "alpha", "--out", "a.json")
    assert done["format"] == "json" and done["bytes"] == (tmp_path / "a.json").stat().st_size
    assert len(json.loads((tmp_path / "a.json").read_text())["messages"]) == 6

    dry = scratch.json(capsys, "memory", "prune", "--dry-run")
    assert [e["text"] for e in dry["removed"]] == ["Writes go through atomic_write_bytes"]
    assert scratch.json(capsys, "memory", "stats")["total"] == 3  # nothing removed
    pruned = scratch.json(capsys, "memory", "prune", "--min-confidence", "0.5")
    assert pruned["removed"] == dry["removed"] and not pruned["dry_run"]
    assert scratch.json(capsys, "memory", "stats")["total"] == 2

    monkeypatch.setattr(sys, "stdin", _Tty("n\n"))  # asks on a terminal
    code, out, err = scratch.run(capsys, "session", "delete", "alpha")
    assert code == 0 and "delete session alpha" in err and out == "nothing deleted\n"
    monkeypatch.setattr(sys, "stdin", _Tty("y\n"))
    code, out, err = scratch.run(capsys, "session", "delete", "alpha")
    assert code == 0 and out == "deleted session alpha\n"
    assert scratch.json(capsys, "session", "delete", "beta", "--yes") == {
        "session_id": "beta",
        "deleted": True,
    }
    assert scratch.json(capsys, "session", "list") == []
    assert not (scratch.root / "snapshots" / "sessions" / "alpha.json").exists()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_only(
    scratch: Built,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out_file = str(tmp_path / "x.html")
    code, _, err = scratch.run(capsys, "session", "export", "alpha", "--out", out_file)
    assert (code, err) == (0, "")  # piped (captured): nothing on stderr
    terminal = _Tty()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["--root", str(scratch.root), "session", "export", "alpha", "--out", out_file]) == 0
    drawn = terminal.getvalue()
    assert "exporting session alpha" in drawn and drawn.endswith("\r\x1b[K")  # cleared
    assert "messages" in drawn  # export.progress: done/total
    assert "\n" not in drawn  # one line, rewritten in place


# ---------------------------------------------------------------------- errors


def test_errors_in_process(
    scratch: Built, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for args, code in [
        (("session", "show", "nope"), 5),
        (("topics", "show", "nope"), 5),
        (("notes", "show", "nope"), 5),
        (("session", "trim", "beta", "--window", "100"), 2),
        (("memory", "prune", "--min-confidence", "2"), 2),
        (("memory",), 2),
        (("session", "frobnicate"), 2),
    ]:
        got, out, err = scratch.run(capsys, *args, "--json")
        assert got == code, args
        assert out == "" and err.count("\n") == 1 and err.startswith("agentmem: error: "), err
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # not a terminal: never asks
    code, out, err = scratch.run(capsys, "session", "delete", "alpha")
    assert code == 2 and "needs --yes" in err and "nothing was deleted" in err
    assert scratch.json(capsys, "session", "list")[-1]["id"] == "alpha"
    (scratch.root / "ltm.json").write_text("{")  # set aside on read, as the library does
    code, out, err = scratch.run(capsys, "memory", "list")
    assert (code, out) == (0, "no long-term memory entries\n")
    (warning,) = err.splitlines()  # reported once, never dropped
    assert warning.startswith("agentmem: warning: long-term memory") and "moved aside" in warning
    (scratch.root / "memory" / "build.json").write_text("{not json")
    code, out, err = scratch.run(capsys, "notes", "show", "build")
    assert code == 5 and out == "" and "unreadable" in err.splitlines()[-1]
    assert "Traceback" not in err
    monkeypatch.setenv("AGENTMEM_DEBUG", "1")
    code, out, err = scratch.run(capsys, "session", "show", "nope")
    assert (
        code == 5
        and "Traceback" in err
        and err.endswith("(`agentmem session list` shows the stored ids)\n")
    )


def test_doctor_renders_the_report(
    scratch: Built, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # agentmem.doctor is another module's; a stand-in checks only the rendering here.
    @dataclass(frozen=True)
    class Finding:
        store: str
        target: str
        severity: str
        problem: str
        recovery: str

    findings = (
        Finding("sessions", "sessions.sqlite", "ok", "readable, version 6", "nothing"),
        Finding("notes", "memory/x.json", "damaged", "not JSON", "moved aside on read"),
    )
    calls: list[tuple[Any, ...]] = []

    def diagnose(root: Path, *, backend: str | None = None, progress: Any = None) -> Any:
        calls.append((root, backend, progress))
        report = types.SimpleNamespace(root=str(root), backend="embedded", findings=findings)
        report.ok = False
        report.to_dict = lambda: {"root": str(root), "ok": False, "findings": ["..."]}
        return report

    fake = types.ModuleType("agentmem.doctor")
    fake.diagnose = diagnose  # type: ignore[attr-defined]
    fake.RootNotFoundError = agentmem.errors.ConfigurationError  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "agentmem.doctor", fake)
    code, out, _ = scratch.run(capsys, "doctor")
    assert code == 1 and calls[0][0] == scratch.root
    assert out.splitlines()[1:4] == [
        "sessions",
        "  ok       sessions.sqlite: readable, version 6",
        "notes",
    ]
    assert "damaged  memory/x.json: not JSON (on open: moved aside on read)" in out
    code, out, _ = scratch.run(capsys, "doctor", "--json")
    assert code == 1 and json.loads(out) == {
        "root": str(scratch.root),
        "ok": False,
        "findings": ["..."],
    }


# ---------------------------------------------------------------------- subprocesses


def test_help_at_every_level_and_the_console_entry(capsys: pytest.CaptureFixture[str]) -> None:
    top = cli("--help")
    assert top.returncode == 0 and top.stderr == ""
    assert all(c in top.stdout for c in COMMANDS) and "exit codes:" in top.stdout
    for group in ("memory", "topics", "notes", "session"):
        assert main([group, "--help"]) == 0
        assert "examples:" in capsys.readouterr().out
    assert main(["session", "trim", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--window TOKENS" in out and "examples:" in out and "--json" in out
    scripts = tomllib.loads((WORKTREE / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"agentmem": "agentmem.cli:main"}


def test_exit_codes_and_json_in_subprocesses(scratch: Built, tmp_path: Path) -> None:
    root = str(scratch.root)
    listed = cli("--json", "session", "list", env={"AGENTMEM_ROOT": root})  # the env root
    assert listed.returncode == 0 and listed.stderr == ""
    assert {s["id"] for s in json.loads(listed.stdout)} == {"alpha", "beta"}

    missing = cli("--root", str(tmp_path / "nope"), "session", "list", "--json")
    assert missing.returncode == 3 and missing.stdout == ""
    assert missing.stderr == (
        f"agentmem: error: no agentmem root at {tmp_path / 'nope'} "
        "(pass --root DIR or set AGENTMEM_ROOT)\n"
    )
    assert not (tmp_path / "nope").exists()  # never created

    with (
        agentmem.Memory(root=scratch.root, working_dir=scratch.work) as mem,
        mem.session("alpha"),  # held open by this process
    ):
        locked = cli("--root", root, "session", "trim", "alpha", "--window", "1000")
    assert locked.returncode == 4 and locked.stderr.count("\n") == 1
    assert "already open" in locked.stderr

    (scratch.root / "ltm.json").write_text('{"format": "agentmem.ltm", "version": 99}')
    damaged = cli("--root", root, "memory", "list")
    assert damaged.returncode == 5 and damaged.stdout == ""
    assert damaged.stderr.startswith("agentmem: error: ") and "Traceback" not in damaged.stderr
    assert damaged.stderr.count("\n") == 1 and "newer agentmem" in damaged.stderr


def test_postgres_backend(pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dsn = pg_uri(pg_dsn)
    work = tmp_path / "project"
    build_root(work / ".agentmem", work, backend=dsn)
    b = Built(work / ".agentmem", work, ["--backend", dsn])
    listed = cli("--root", str(b.root), "--backend", dsn, "session", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {s["id"] for s in json.loads(listed.stdout)} == {"alpha", "beta"}
    before = snapshot(b.root)
    check_reads(b, capsys)
    assert snapshot(b.root) == before
    assert b.json(capsys, "reindex")["problems"] == []
    trimmed = b.json(capsys, "session", "trim", "beta", "--window", "2000")
    assert trimmed["trimmed"] and trimmed["archived_messages"] == 61
    with (
        agentmem.Memory(root=b.root, working_dir=work, backend=dsn) as mem,
        mem.session("alpha"),  # another connection's lock
    ):
        code, out, err = b.run(capsys, "undo-history", "alpha")
    assert code == 4 and out == "" and "already open" in err
    assert b.json(capsys, "session", "delete", "alpha", "--yes")["deleted"] is True
    assert [s["id"] for s in b.json(capsys, "session", "list")] == ["beta"]


# ---------------------------------------------------------------------- review fixes


def test_doctor_decides_what_a_root_is(
    scratch: Built, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (scratch.root / "sessions.sqlite").unlink()
    (scratch.root / "sessions.sqlite").mkdir()  # not a file: the doctor's finding, not exit 3
    code, out, err = scratch.run(capsys, "doctor")
    assert code in (0, 1) and "sessions" in out, err
    code, out, err = main(["--root", str(tmp_path / "nope"), "doctor"]), *capsys.readouterr()
    assert code == 3 and out == "" and err.count("\n") == 1
    assert err.startswith("agentmem: error: ") and "does not exist" in err


def test_export_refuses_a_path_inside_the_root(
    scratch: Built, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = scratch.root / "sessions.sqlite"
    before = db.read_bytes()
    (tmp_path / "link").symlink_to(scratch.root)
    for out in (db, tmp_path / "link" / "sessions.sqlite", scratch.root / "new.json"):
        code, stdout, err = scratch.run(capsys, "session", "export", "beta", "--out", str(out))
        assert code == 2 and stdout == "" and "inside the memory root" in err, err
    assert db.read_bytes() == before and not (scratch.root / "new.json").exists()


def test_stored_text_cannot_drive_the_terminal(
    scratch: Built, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    evil = "x\x1b[31m\x9b2J\u202egnp.exe\u2066y"
    with agentmem.Memory(root=scratch.root, working_dir=scratch.work) as mem:
        mem.session(session_id="gamma", name=evil).close()
        mem.topics.write("t", f"# {evil}\n")
    shown = "x\\x1b[31m\\x9b2J\\u202egnp.exe\\u2066y"
    code, out, _ = scratch.run(capsys, "session", "list")
    assert code == 0 and shown in out
    code, out, _ = scratch.run(capsys, "topics", "show", "t")
    assert code == 0 and shown in out
    monkeypatch.setattr(sys, "stdin", _Tty("n\n"))
    code, out, err = scratch.run(capsys, "session", "delete", "gamma")
    assert code == 0 and out == "nothing deleted\n" and shown in err
    for raw in ("\x1b", "\x9b", "\u202e", "\u2066"):
        assert raw not in out + err
    stderr = io.StringIO()
    Cli(root=None, backend=None, as_json=False, stdout=stderr, stderr=stderr, stdin=stderr).warn(
        evil
    )  # every library warning line goes through this
    assert stderr.getvalue() == f"agentmem: warning: {shown}\n"
    terminal = _Tty()
    Progress(terminal).note(f"loading {evil} ...")  # the progress line too
    assert terminal.getvalue() == f"\r\x1b[Kloading {shown} ..."


def test_numbers_out_of_range_are_usage_errors(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = "9" * 23
    for args in [
        ("session", "list", "--limit", huge),
        ("recall", "x", "--max-results", huge),
        ("recall", "x", "--max-sessions", str(2**31)),
        ("session", "trim", "beta", "--window", huge),
        ("session", "show", "beta", "--tail", huge),
    ]:
        code, out, err = built.run(capsys, *args)
        assert code == 2 and out == "" and err.count("\n") == 1, (args, err)
    assert built.run(capsys, "session", "list", "--limit", str(2**31 - 1))[0] == 0


def test_undo_history_says_no_when_a_snapshot_or_the_record_is_damaged(
    scratch: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshots = scratch.root / "snapshots"
    for blob in (snapshots / "blobs").rglob("*"):
        if blob.is_file():
            blob.write_bytes(b"damaged")
    tree = scratch.json(capsys, "undo-history", "alpha")
    restore = {t["task_id"]: (t["can_restore"], t["restore_problem"]) for t in tree["tasks"]}
    assert restore == {1: (False, None), 2: (False, "blob missing")}
    assert tree["initial_state_can_restore"] is False and tree["record_damaged"] is False
    code, out, _ = scratch.run(capsys, "undo-history", "alpha")
    assert code == 0 and "no (blob missing)" in out and " yes " not in out
    (snapshots / "sessions" / "alpha.json").write_text('{"format": "x"')  # not JSON
    for _ in range(2):  # moved aside by the first open; the second still says so
        code, out, _ = scratch.run(capsys, "undo-history", "alpha")
        assert code == 0 and "record was damaged" in out and "no (record damaged)" in out
        assert " yes " not in out


def test_postgres_without_a_memory_is_not_created(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    dsn = pg_uri(pg_dsn)
    for args in (("session", "list"), ("memory", "list"), ("recall", "x")):
        code = main(["--root", str(tmp_path), "--backend", dsn, *args])
        out, err = capsys.readouterr()
        assert code == 3 and out == "", (args, err)
        assert err == (
            "agentmem: error: no agentmem memory in this database (check the --backend DSN "
            "(or AGENTMEM_BACKEND); nothing was created)\n"
        )
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT to_regnamespace('agentmem') IS NULL").fetchone()
    assert row == (True,)  # no schema was made
