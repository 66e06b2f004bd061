"""agentmem quickstart: a scripted coding agent shows each part of the memory in turn.

    python examples/quickstart.py [DIR]

Offline, no API key, a few seconds: a scripted LLM (``agentmem.testing.ScriptedLLM``)
stands in for your model client, and the agent's tools are a few lines of Python.
Seven short sections:

1. Long-term memory learned in session 1 is in session 2's system prompt.
2. A long task in a 3,000-token window: older steps fold into a ``<thread_summary>``,
   and every payload sent fits the window and is valid for the provider.
3. Session 2 finds session 1 by recall.
4. The time machine: a file edit and a shell edit, undone and redone.
5. At the end of a long task the memory updater writes a topic file.
6. A preference the user stated is recalled by semantic memory in a later session.
7. The agent process is killed mid-task; a new process resumes it exactly.

Everything stays in DIR (default ``./agentmem-quickstart``) for you to look at: the
demo's project files, the memory root ``DIR/.agentmem``, ``transcript.html`` (session 2
as a web page) and ``payloads.jsonl`` (every request of section 2). A re-run replaces
DIR when this script made it (it holds the marker file ``.agentmem-quickstart``) and
refuses to touch any other non-empty directory.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import agentmem
from agentmem.semantic import LocalMemoryClient, SemanticMemoryExtension
from agentmem.testing import ScriptedLLM, tool_call

MARKER = ".agentmem-quickstart"
MODEL = "gpt-4o"
WINDOW = 3_000
Tool = Callable[[dict[str, Any]], str]


# ----------------------------------------------------------------- the agent


def run_agent(
    s: agentmem.Session,
    llm: ScriptedLLM,
    on_payload: Callable[[list[dict[str, Any]]], None] | None = None,
) -> int:
    """The host's agent loop: send the context, store the reply, run its tool calls.

    Returns the number of model calls; ``on_payload`` sees each payload before it is sent.
    """
    calls = 0
    while True:
        payload = s.context()
        if on_payload is not None:
            on_payload(payload)
        reply = llm(payload)
        calls += 1
        s.record_usage(usage=reply.pop("usage"))
        s.append(reply)  # durable when it returns
        if not reply.get("tool_calls"):
            return calls
        for call in reply["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            output = TOOLS[call["function"]["name"]](args)
            s.append({"role": "tool", "tool_call_id": call["id"], "content": output})


def read_file(args: dict[str, Any]) -> str:
    return f"# {args['path']}\n" + "def parse(tokens):\n    return tokens\n" * 25


def bash(args: dict[str, Any]) -> str:
    cmd = args["cmd"]
    if cmd == "pytest":
        return "E   ModuleNotFoundError: No module named 'parser'\n1 error in 0.12s"
    if cmd == "make test":
        return "PYTHONPATH=src pytest\n42 passed in 1.31s"
    if cmd.startswith("git commit"):
        message = cmd.split("'")[1]
        return f"[main {int(message.split()[-1]):02d}c0ffee] {message}\n 1 file changed"
    return "ok"


TOOLS: dict[str, Tool] = {"read_file": read_file, "bash": bash}


def shown(path: Path) -> str:
    """``path`` as the user would type it: relative to the current directory when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def agentmem_command() -> str:
    """How to run the ``agentmem`` CLI installed with the Python running this script."""
    script = Path(sys.executable).parent / "agentmem"
    if not script.is_file():
        return f"{shlex.quote(shown(Path(sys.executable)))} -m agentmem"
    on_path = shutil.which("agentmem")
    return "agentmem" if on_path and Path(on_path) == script else shlex.quote(shown(script))


def brief(text: str, items: int = 2) -> list[str]:
    """The non-empty lines of ``text``, each bullet list cut to its first ``items`` entries."""
    out: list[str] = []
    hidden = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("- ") and len(out) >= items and all(o[:2] == "- " for o in out[-items:]):
            hidden += 1
            continue
        if hidden:
            out.append(f"  ... and {hidden} more")
            hidden = 0
        out.append(line)
    return out


def header(number: int, title: str) -> None:
    print(f"\n== {number}. {title}")


def show(label: str, *lines: str) -> None:
    print(label)
    for line in lines:
        print(f"   | {line}")


# ----------------------------------------------------------------- sections


def section_1(mem: agentmem.Memory) -> tuple[str, agentmem.Session]:
    """Session 1 runs and closes; returns its id and session 2, open."""
    header(1, "Long-term memory: learned in session 1, in session 2's system prompt")
    with mem.session(name="set up the project", model=MODEL) as s:
        s.start_task("Run the test suite.")
        llm = ScriptedLLM(
            [
                tool_call("bash", {"cmd": "pytest"}),
                tool_call("bash", {"cmd": "make test"}),
                {"role": "assistant", "content": "42 tests pass with `make test`."},
            ]
        )
        run_agent(s, llm)
        s.finish_task()
    # What the agent learned (it could also call mem.tools' add_discovery itself).
    mem.ltm.add_discovery("Run the tests with `make test`: plain pytest misses PYTHONPATH")
    print('session 1 "set up the project": pytest failed, `make test` passed; the host stored')
    print('   mem.ltm.add_discovery("Run the tests with `make test`: ...")')
    s2 = mem.session(name="fix the parser", model=MODEL, context_window=WINDOW)
    s2.history.replace_system_prompt("You are a careful coding agent.")
    s2.start_task("The parser fails on nested brackets. Find the cause, fix it, commit.")
    system_prompt = s2.context()[0]["content"]
    show('session 2 "fix the parser" opens; its system prompt:', *system_prompt.splitlines())
    return s.id, s2


def section_2(s: agentmem.Session, payloads: Path) -> None:
    header(2, f"A long task in a {WINDOW:,}-token window")
    script: list[Any] = []
    for i in range(40):
        if i % 10 == 9:
            script.append(tool_call("bash", {"cmd": f"git commit -am 'Fix parser step {i}'"}))
        else:
            script.append(tool_call("read_file", {"path": f"src/parser/part_{i}.py"}))
    script.append({"role": "assistant", "content": "Fixed: nested brackets parse; 4 commits."})
    sizes: list[int] = []
    lengths: list[int] = []
    valid: list[bool] = []
    with payloads.open("w", encoding="utf-8") as log:

        def check(payload: list[dict[str, Any]]) -> None:
            stats = s.context_manager.stats
            sizes.append(stats.tokens + stats.tool_tokens + stats.reserved_output_tokens)
            lengths.append(len(payload))
            # repair() returns its input itself when no provider rule needs fixing.
            valid.append(agentmem.repair(payload) is payload)
            log.write(json.dumps(payload) + "\n")

        requests = run_agent(s, ScriptedLLM(script), check)
    s.finish_task()
    final = s.context()
    largest = max(range(len(sizes)), key=sizes.__getitem__)
    print(f"{requests} model calls; the history grew to {len(s.history)} messages")
    print(
        f"   every payload fit the window: {max(sizes) <= WINDOW} "
        f"(largest {sizes[largest]:,} tokens, {lengths[largest]} messages)"
    )
    print(f"   every payload valid: {all(valid)} (agentmem.repair had nothing to fix)")
    summary = next(m["content"] for m in final if "<thread_summary>" in str(m["content"]))
    show("what left the window is in a <thread_summary> (long lists cut here):", *brief(summary))


def section_3(mem: agentmem.Memory, session_1: str) -> None:
    header(3, "Recall: session 2 searches the past sessions")
    hit = mem.recall("ModuleNotFoundError parser", max_results=1)[0]
    print('mem.recall("ModuleNotFoundError parser") from session 2 finds:')
    print(f"   session {hit.session_name!r}, message {hit.index} ({hit.role}): {hit.preview!r}")
    print(f"   found in session 1: {hit.session_id == session_1}")


def section_4(s: agentmem.Session, project: Path) -> None:
    header(4, "The time machine: a file edit and a shell edit, undone and redone")
    settings, changes = project / "settings.ini", project / "CHANGES.md"

    def files(label: str) -> None:
        last = changes.read_text().splitlines()[-1]
        print(
            f"{label:<28} settings.ini: {settings.read_text().strip()!r:<16} CHANGES.md: {last!r}"
        )

    files("before the task:")
    task = s.start_task("Turn debug mode on and note it in CHANGES.md.")
    s.time_machine.record_file_before_change(settings)  # the agent's edit tool, before writing
    settings.write_text("debug = true\n")
    with s.time_machine.guard():  # the agent's shell tool: whatever the command changes
        subprocess.run(
            ["sh", "-c", "echo '- debug mode on' >> CHANGES.md"], cwd=project, check=True
        )
    s.append({"role": "assistant", "content": "Debug mode is on, noted in CHANGES.md."})
    s.finish_task()
    files("after the task:")
    s.undo()
    files("after s.undo():")
    s.switch_to_task(task)
    files(f"after s.switch_to_task({task}):")


def section_5_and_6(root: Path, project: Path) -> None:
    header(5, "The memory updater writes a topic file at the end of a long task")
    updater = ScriptedLLM(  # the model, continuing the finished task's last request
        [
            tool_call("list_memories", {}),
            tool_call(
                "write_memory",
                {
                    "topic": "release",
                    "content": "# Releases\n- `make release VERSION=x.y` tags and uploads.\n"
                    "- It stops unless CHANGES.md has an entry for the version.\n",
                },
            ),
            {"role": "assistant", "content": "Saved what this task taught."},
        ]
    )
    script: list[Any] = [tool_call("bash", {"cmd": f"make release step {i}"}) for i in range(11)]
    script.append({"role": "assistant", "content": "Release 1.4 is out."})
    with agentmem.Memory(root=root, working_dir=project, llm=updater) as mem:
        ext = SemanticMemoryExtension(client=LocalMemoryClient(mem), user_id="ana", infer=False)
        with mem.session(name="release 1.4", model=MODEL, extensions=[ext]) as s:
            s.start_task("Ship release 1.4. I prefer squash merges, please.")
            run_agent(s, ScriptedLLM(script))
            s.finish_task()  # 12 model calls: long enough for the memory updater to run
            update = s.last_memory_update
        assert update is not None, "the memory updater did not run"
        assert update.error is None, update.error
        topic_file = root / "memories" / "release.md"
        print(f"12 model calls; s.finish_task() ran the updater ({len(update.requests)} requests)")
        show(f"it wrote {shown(topic_file)}:", *topic_file.read_text().splitlines())

        header(6, "Semantic memory: a preference from session 3, recalled in session 4")
        print('session 3 began: "Ship release 1.4. I prefer squash merges, please."')
        ext = SemanticMemoryExtension(client=LocalMemoryClient(mem), user_id="ana", infer=False)
        with mem.session(name="release 1.5", model=MODEL, extensions=[ext]) as s:
            s.start_task("Merge the 1.5 branch and ship it.")
            payload = s.context()
            block = next(m["content"] for m in payload if "<memory-context" in str(m["content"]))
            lines = [line for line in block.splitlines() if "squash" in line]
            show('session 4: "Merge the 1.5 branch and ship it."; next to that turn:', *lines)
            topic_seen = "make release" in payload[0]["content"]
            print(f"and its system prompt carries memories/release.md: {topic_seen}")


def agent_process(root: Path, project: Path) -> None:
    """Section 7's child: work on a task, then die (SIGKILL) right before a model call."""
    mem = agentmem.Memory(root=root, working_dir=project)
    s = mem.session(name="refactor the lexer", model=MODEL, context_window=WINDOW)
    s.start_task("Refactor the lexer into one function per token kind.")
    script = [tool_call("read_file", {"path": f"src/lexer/part_{i}.py"}) for i in range(8)]
    llm = ScriptedLLM(script)

    def maybe_die(payload: list[dict[str, Any]]) -> None:
        if llm.remaining:
            return
        # About to send the next request: tell the parent what it is, then die.
        sent = {"session": s.id, "messages": len(s.history), "payload": payload}
        sys.stdout.write(json.dumps(sent) + "\n")
        sys.stdout.flush()
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))

    run_agent(s, llm, maybe_die)


def section_7(root: Path, project: Path) -> None:
    header(7, "Kill and exact resume")
    warnings = [f"-W{option}" for option in sys.warnoptions]  # as strict as this process
    child = [sys.executable, *warnings, __file__, "--agent-process", str(root), str(project)]
    agent = subprocess.run(child, stdout=subprocess.PIPE, text=True, check=False)
    before = json.loads(agent.stdout.splitlines()[-1])
    print(
        f"an agent process ran 8 tool calls and was killed (exit code {agent.returncode}) "
        "just before its next model call"
    )
    with (
        agentmem.Memory(root=root, working_dir=project) as mem,
        mem.session(before["session"], create=False) as s,
    ):
        after = s.context()
        print(
            f"this process resumes it: {len(s.history)} of {before['messages']} messages "
            f"on disk; the next payload is identical: {after == before['payload']}"
        )
        llm = ScriptedLLM([{"role": "assistant", "content": "The lexer is refactored."}])
        run_agent(s, llm)
        s.finish_task()
        print(f"the task goes on where it stopped: {s.history[-1]['content']!r}")


# ----------------------------------------------------------------- the directory


def refuse(why: str) -> NoReturn:
    print(f"quickstart: {why}; nothing was changed", file=sys.stderr)
    sys.exit(1)


def prepare(directory: Path) -> None:
    """Make ``directory`` empty, or exit 1 when it holds something this script did not make."""
    here = Path.cwd().resolve()
    if directory.resolve() in (here, *here.parents):
        refuse(f"{directory} is the current directory or holds it; name a directory inside it")
    if directory.exists() or directory.is_symlink():
        real_dir = directory.is_dir() and not directory.is_symlink()
        if not real_dir or not ((directory / MARKER).is_file() or not any(directory.iterdir())):
            refuse(
                f"{shown(directory)} exists and was not made by this quickstart "
                "(name another directory: python examples/quickstart.py DIR)"
            )
        shutil.rmtree(directory)  # an earlier run's directory (or an empty one)
    try:
        directory.mkdir(parents=True)
    except OSError as exc:
        refuse(f"cannot make {directory}: {exc.strerror or exc}")
    (directory / MARKER).write_text(
        "Made by agentmem's examples/quickstart.py: running it again replaces this directory.\n"
    )
    (directory / "settings.ini").write_text("debug = false\n")
    (directory / "CHANGES.md").write_text("# Changes\n- 1.3: faster parser\n")


def library_notes_on_stdout() -> None:
    """Show what agentmem logs (its ``agentmem`` logger) as notes in the demo's output.

    With the ``o200k`` extra nothing is logged; without it, agentmem says once
    that gpt-4o's token counts are estimated and which extra makes them exact.
    """
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("note: %(message)s"))
    logger = logging.getLogger("agentmem")
    logger.addHandler(handler)
    logger.propagate = False


def main() -> None:
    library_notes_on_stdout()
    if len(sys.argv) == 4 and sys.argv[1] == "--agent-process":
        agent_process(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__)
        return
    if len(sys.argv) > 2:
        print("usage: python examples/quickstart.py [DIR]", file=sys.stderr)
        sys.exit(2)
    project = Path(sys.argv[1] if len(sys.argv) > 1 else "agentmem-quickstart").absolute()
    prepare(project)
    root = project / ".agentmem"
    print(f"agentmem quickstart: a scripted agent, offline; it writes to {shown(project)}/")

    with agentmem.Memory(root=root, working_dir=project) as mem:
        session_1, s = section_1(mem)
        with s:
            section_2(s, project / "payloads.jsonl")
            section_3(mem, session_1)
            section_4(s, project)
            session_2 = s.id
    section_5_and_6(root, project)
    section_7(root, project)

    with agentmem.Memory(root=root, working_dir=project) as mem:
        mem.sessions.export(session_2, project / "transcript.html")
        count = len(mem.sessions.list())
    cli = f"{agentmem_command()} --root {shlex.quote(shown(root))}"
    print(f"\n== Everything is in {shown(project)}/")
    print(f"   {shown(root)}/  the memory: {count} sessions, long-term memory, memories/")
    print(
        f"   {shown(project / 'transcript.html')}  session 2 as a web page (open it in a browser)"
    )
    print(f"   {shown(project / 'payloads.jsonl')}  every request section 2 sent to the model")
    print("Look inside with the CLI:")
    print(f"   {cli} session list")
    print(f"   {cli} session export {session_2}")
    print(f"   {cli} undo-history {session_2}")
    print(f"   {cli} memory list")
    print(f"   {cli} topics show release")


if __name__ == "__main__":
    main()
