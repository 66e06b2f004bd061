"""Every file in examples/ runs offline, as a new user runs it, and says what it should.

Each example runs once, as a subprocess (``python -W error``, no API key in the
environment, an empty tiktoken cache, its own working directory), the runs in
parallel to keep the suite fast. A test per example then checks the exit code, an
empty stderr and the lines that carry its point. The quickstart's output directory
is opened again here with ``agentmem.Memory`` and each section's claim checked
against the stores themselves (and every payload of its long task against the
independent provider rules of ``provider_rules.py``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from provider_rules import openai_violations
from responses_rules import responses_violations

import agentmem
from agentmem.semantic import LocalMemoryClient

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
QUICKSTART_DIR = "agentmem-quickstart"  # the quickstart's default output directory
WINDOW = 3_000  # the quickstart's context window in section 2


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    cwd: Path


SCRATCH = ("tiktoken-cache", "tmp")


def offline_env(cwd: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and k not in ("DATA_GYM_CACHE_DIR", "AGENTMEM_ROOT")
    }
    for scratch in SCRATCH:
        (cwd / scratch).mkdir(exist_ok=True)
    return env | {
        "PYTHONPATH": str(ROOT),
        "TIKTOKEN_CACHE_DIR": str(cwd / "tiktoken-cache"),  # empty: nothing downloaded
        "TMPDIR": str(cwd / "tmp"),  # where tempfile puts its directories
    }


def run_example(name: str, cwd: Path, *args: str) -> Run:
    cwd.mkdir(parents=True, exist_ok=True)
    env = offline_env(cwd)
    if (cwd / "no-o200k").is_dir():  # a bpe_openai without its vocabulary file shadows the real one
        env["PYTHONPATH"] = os.pathsep.join([str(cwd / "no-o200k"), env["PYTHONPATH"]])
    done = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLES / f"{name}.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    return Run(done.returncode, done.stdout, done.stderr, cwd)


FOREIGN = "a user's own directory"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every example run once, plus the quickstart's refusal of a directory it did not make."""
    base = tmp_path_factory.mktemp("examples")
    # The quickstart re-runs over a directory an earlier run left (the marker, a stale file).
    earlier = base / "quickstart" / QUICKSTART_DIR
    earlier.mkdir(parents=True)
    (earlier / ".agentmem-quickstart").write_text("an earlier run\n")
    (earlier / "stale.txt").write_text("left by an earlier run\n")
    foreign = base / "refused" / "mine"
    foreign.mkdir(parents=True)
    (foreign / "notes.txt").write_text(FOREIGN)
    fake = base / "quickstart-no-o200k" / "no-o200k" / "bpe_openai"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    jobs: dict[str, tuple[str, Path, tuple[str, ...]]] = {
        "quickstart": ("quickstart", base / "quickstart", ()),  # the longest: first
        "quickstart without o200k": ("quickstart", base / "quickstart-no-o200k", ()),
        "quickstart refuses": ("quickstart", foreign.parent, ("mine",)),
    }
    for path in sorted(EXAMPLES.glob("*.py")):
        jobs.setdefault(path.stem, (path.stem, base / path.stem, ()))
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {key: pool.submit(run_example, *job[:2], *job[2]) for key, job in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


def ok(run: Run) -> str:
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr == ""
    return run.stdout


# ----------------------------------------------------------------- the quickstart


def flag(out: str, label: str) -> bool:
    """The ``True``/``False`` the quickstart printed after ``label``."""
    found = re.search(re.escape(label) + r" (True|False)", out)
    assert found, f"{label!r} not in the output"
    return found.group(1) == "True"


def check_quickstart(run: Run) -> None:
    out = ok(run)
    assert len(out.splitlines()) < 90  # a screen or two
    project = run.cwd / QUICKSTART_DIR
    root = project / ".agentmem"
    # The re-run replaced the earlier run's directory; everything it says is there is.
    assert not (project / "stale.txt").exists()
    assert (project / ".agentmem-quickstart").is_file()
    assert f"agentmem --root {QUICKSTART_DIR}/.agentmem session list" in out
    for n in range(1, 8):
        assert f"\n== {n}. " in out
    # Section 2: every payload fits and is valid, judged here independently.
    assert flag(out, "every payload fit the window:") and flag(out, "every payload valid:")
    payloads = [json.loads(line) for line in (project / "payloads.jsonl").read_text().splitlines()]
    assert len(payloads) == 41
    counter = agentmem.counter_for_model("gpt-4o")
    for payload in payloads:
        assert openai_violations(payload, internal_fields=agentmem.INTERNAL_FIELDS) == []
        assert agentmem.count_messages(payload, counter) <= WINDOW
        assert payload[0]["role"] == "system" and "make test" in payload[0]["content"]
        assert any(m["content"] == payloads[0][-1]["content"] for m in payload)  # the request
    assert "<thread_summary>" in payloads[-1][1]["content"]
    # Section 7: the resumed payload was identical (the parent compared; the history is below).
    assert flag(out, "found in session 1:") and flag(out, "the next payload is identical:")
    html = (project / "transcript.html").read_text(encoding="utf-8")
    assert "fix the parser" in html

    with agentmem.Memory(root=root, working_dir=project) as mem:
        names = {info.name: info.id for info in mem.sessions.list()}
        assert set(names) == {
            "set up the project",
            "fix the parser",
            "release 1.4",
            "release 1.5",
            "refactor the lexer",
        }
        # 1: the long-term memory entry, in the system prompt of a session opened now.
        assert any("make test" in e.text for e in mem.ltm.discoveries())
        # 3: recall finds session 1.
        hit = mem.recall("ModuleNotFoundError parser", max_results=1)[0]
        assert hit.session_id == names["set up the project"] and hit.role == "tool"
        # 5: the topic file on disk, as the updater wrote it.
        topic = (root / "memories" / "release.md").read_text(encoding="utf-8")
        assert topic.startswith("# Releases\n- `make release VERSION=x.y`")
        assert mem.topics.read("release") == topic
        # 6: the user's preference is in semantic memory.
        remembered = [r.memory for r in LocalMemoryClient(mem).get_all(user_id="ana")]
        assert any("I prefer squash merges" in text for text in remembered)
        # 7: the killed task's history is complete and finished once, in order.
        lexer = mem.sessions.load(names["refactor the lexer"]).messages
        assert [m["role"] for m in lexer] == ["user"] + ["assistant", "tool"] * 8 + ["assistant"]
        assert lexer[-1]["content"] == "The lexer is refactored."
        # 4: the time machine's snapshots undo and redo both edits again, from a new process.
        settings, changes = project / "settings.ini", project / "CHANGES.md"
        assert settings.read_text() == "debug = true\n"
        assert changes.read_text().endswith("- 1.3: faster parser\n- debug mode on\n")
        with mem.session(names["fix the parser"], create=False) as s:
            assert "make test" in s.context()[0]["content"]
            task = s.time_machine.active_task_id
            s.undo()
            assert settings.read_text() == "debug = false\n"
            assert changes.read_text() == "# Changes\n- 1.3: faster parser\n"
            s.switch_to_task(task)
            assert settings.read_text() == "debug = true\n"
            assert changes.read_text().endswith("- debug mode on\n")


def test_the_quickstart_ends_with_cli_commands_that_work(runs: dict[str, Run]) -> None:
    """Each ``agentmem`` command the quickstart prints runs, as printed, on what it left."""
    pytest.importorskip("agentmem.cli")
    run = runs["quickstart"]
    printed = ok(run).split("Look inside with the CLI:\n", 1)[1].splitlines()
    commands = [shlex.split(line) for line in printed]
    assert [c[c.index("--root") + 2] for c in commands] == [
        "session", "session", "undo-history", "memory", "topics"
    ]  # fmt: skip

    def cli(command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, cwd=run.cwd, env=offline_env(run.cwd), capture_output=True, text=True
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(cli, commands))
    for command, result in zip(commands, done, strict=True):
        assert result.returncode == 0 and result.stderr == "", (command, result.stderr)
    listing, _, history, memory, topic = (result.stdout for result in done)
    assert "fix the parser" in listing and "refactor the lexer" in listing
    assert "Turn debug mode on" in history
    assert "make test" in memory and topic.startswith("# Releases")
    exported = next(run.cwd.glob("*.html"))
    assert "fix the parser" in exported.read_text(encoding="utf-8")
    exported.unlink()  # what the other tests expect to find there


def test_the_quickstart_without_the_o200k_extra_says_so_on_stdout(runs: dict[str, Run]) -> None:
    # Without the extra, gpt-4o's counts are estimated: agentmem logs it once (per process),
    # and the demo shows it as a note in its output, not as a warning on stderr.
    out = ok(runs["quickstart without o200k"])
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, notes
    assert "'o200k_base' is not available offline" in notes[0]
    assert "pip install 'agentmem[o200k]'" in notes[0]
    assert "== 7. Kill and exact resume" in out
    assert not any(line.startswith("note: ") for line in ok(runs["quickstart"]).splitlines())


def test_the_quickstart_refuses_a_directory_it_did_not_make(runs: dict[str, Run]) -> None:
    run = runs["quickstart refuses"]
    assert run.returncode == 1 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and "was not made by this quickstart" in run.stderr
    mine = run.cwd / "mine"
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert (mine / "notes.txt").read_text() == FOREIGN


# ----------------------------------------------------------------- the other examples


def check_async_agent(run: Run) -> None:
    out = ok(run)
    assert "13 model calls, 24 tools run two at a time" in out
    assert flag(out, "the async summarizer's words are in the <thread_summary>:")
    assert "the memory updater wrote ['database']" in out
    assert "q17 scans a whole table" in out and "recall: 'slow query'" in out


def check_real_client(variable: str) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        lines = ok(run).splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{variable} is not set")
        assert "examples/quickstart.py" in lines[0]

    return check


def check_responses_api(run: Run) -> None:
    lines = ok(run).splitlines()
    items = [json.loads(line) for line in lines if line.startswith("{")]
    assert responses_violations(items) == []
    assert [i["type"] for i in items][-3:] == ["function_call", "function_call_output", "message"]
    assert lines[-1] == "recall: assistant: Paris: sunny, 21 C."


def check_anthropic_memory_tool(run: Run) -> None:
    out = ok(run)
    assert "likes tea" in out and "## user\u2215prefs" in out
    assert "[REDACTED" in out and "Zq7Zq7" not in out


def check_langchain_middleware(run: Run) -> None:
    out = ok(run)
    assert "<thread_summary>" in out and "violations: 0" in out


def check_langgraph_store(run: Run) -> None:
    out = ok(run)
    assert "second run answers: Ann drinks green tea." in out
    assert "remembered across runs: 2 visits" in out


def check_openai_agents_session(run: Run) -> None:
    out = ok(run)
    assert "turn 2 saw 5 items" in out and "instructions mention Lisbon: True" in out
    assert "resumed: 6 items, last: 'You asked about the weather in Lisbon.'" in out


CHECKS: dict[str, Callable[[Run], None]] = {
    "quickstart": check_quickstart,
    "async_agent": check_async_agent,
    "openai_client": check_real_client("OPENAI_API_KEY"),
    "anthropic_client": check_real_client("ANTHROPIC_API_KEY"),
    "responses_api": check_responses_api,
    "anthropic_memory_tool": check_anthropic_memory_tool,
    "langchain_middleware": check_langchain_middleware,
    "langgraph_store": check_langgraph_store,
    "openai_agents_session": check_openai_agents_session,
}


def test_every_example_is_checked() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_the_example_runs_offline(name: str, runs: dict[str, Run]) -> None:
    CHECKS[name](runs[name])


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_the_example_leaves_nothing_behind(name: str, runs: dict[str, Run]) -> None:
    """Only the quickstart writes where it runs (the directory it names); nothing stays in
    the temporary directory."""
    cwd = runs[name].cwd
    assert sorted(p.name for p in cwd.iterdir() if p.name not in SCRATCH) == (
        [QUICKSTART_DIR] if name == "quickstart" else []
    )
    assert list((cwd / "tmp").iterdir()) == []


@pytest.mark.parametrize("target", [".", ".."])
def test_the_quickstart_refuses_the_current_directory_and_its_parents(
    tmp_path: Path, target: str
) -> None:
    # DIR "." used to delete the directory the user stood in, then crash.
    here = tmp_path / "work" / "here"
    here.mkdir(parents=True)
    (here / "mine.txt").write_text(FOREIGN)
    run = run_example("quickstart", here, target)
    assert run.returncode == 1 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and "current directory" in run.stderr
    assert (here / "mine.txt").read_text() == FOREIGN
