"""agentmem quickstart: an agent session that outlives its context window, and a crash.

Runs offline, no API key: a scripted LLM stands in for your model client.

1. A coding agent works through 60 tool calls with a deliberately small
   3,000-token context window. Every payload it sends fits the window, keeps
   the system prompt and the user's request, and is valid for the provider;
   what falls out of the window is summarised in a <thread_summary>.
2. The agent process dies without closing anything. A new process
   resumes the session from disk: every message is there, and the next
   payload is identical to the one before the crash.
3. A broken history (interrupted tool call, stale tool result, foreign ids,
   invalid UTF-8) is repaired into valid OpenAI and Anthropic payloads.
4. Across sessions: a long task ends with the memory updater writing a topic
   file, a user's stated preference is remembered by semantic memory, and a
   later session gets both in its payload and finds the old session by recall.

    python examples/quickstart.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import agentmem
from agentmem.testing import ScriptedLLM, tool_call


def scripted_agent() -> ScriptedLLM:
    """60 tool calls (reading files, running tests, committing), then a final answer."""
    replies: list[Any] = []
    for i in range(60):
        if i % 10 == 9:
            replies.append(tool_call("bash", {"cmd": f"git commit -am 'Fix parser step {i}'"}))
        else:
            replies.append(tool_call("read_file", {"path": f"src/parser/part_{i}.py"}))
    replies.append({"role": "assistant", "content": "The parser tests pass now; 6 commits made."})
    return ScriptedLLM(replies)


def run_tool(call: dict[str, Any], step: int) -> str:
    args = json.loads(call["function"]["arguments"])
    if call["function"]["name"] == "bash":
        return f"[main {step:03d}beef] Fix parser step {step}\n 1 file changed, 3 insertions(+)"
    return f"# {args['path']}\n" + "def parse(tokens):\n    ...\n" * 25


def part_one(root: Path) -> tuple[str, list[dict[str, Any]]]:
    print("=== 1. an agent loop in a 3,000-token window ===")
    mem = agentmem.Memory(root=root, working_dir=root.parent)
    s = mem.session(name="fix the parser", model="gpt-4o", context_window=3_000)
    s.history.replace_system_prompt("You are a careful coding agent.")
    s.start_task("The parser tests fail on nested brackets. Find the cause, fix it, commit.")
    llm = scripted_agent()
    step = 0
    while True:
        payload = s.context()
        stats = s.context_manager.stats
        if stats.trims or step % 20 == 0:
            trimmed = f"  trimmed (stage {stats.trims[0].stage})" if stats.trims else ""
            print(
                f"step {step:2d}: payload {stats.tokens:5,} tokens, {stats.messages:2d} messages; "
                f"history {len(s.history):3d} messages{trimmed}"
            )
        reply = llm(payload)
        s.record_usage(usage=reply.pop("usage"))
        s.append(reply)
        if not reply.get("tool_calls"):
            break
        for call in reply["tool_calls"]:
            s.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(call, step)})
        step += 1
    llm.assert_complete()
    final = s.context()
    print(f"done after {step} tool calls; {s.usage.requests} requests billed")
    summary = next(m["content"] for m in final if "<thread_summary>" in str(m["content"]))
    print("\nthe thread summary the model now sees (first lines):")
    print("\n".join(summary.splitlines()[:12]))
    # No s.close(): the caller kills this process here. Every append was already durable.
    return s.id, final


def part_two(root: Path, session_id: str, before: list[dict[str, Any]]) -> None:
    print("\n=== 2. a new process resumes the session ===")
    mem = agentmem.Memory(root=root, working_dir=root.parent)
    with mem.session(session_id) as s:
        after = s.context()
        print(f"resumed {s.name!r}: {len(s.history)} messages, window starts at {s.window.start}")
        print(f"payload identical to the one before the crash: {after == before}")
        html = mem.sessions.export(s.id, root / "transcript.html")
        print(f"transcript exported to {html}")
    mem.close()


def part_three() -> None:
    print("\n=== 3. a broken history, repaired for both providers ===")
    history = agentmem.MessageHistory()
    history.append({"role": "user", "content": "List the repo, then read setup.py."})
    history.append(
        {
            "role": "assistant",
            "content": "Looking around first.   ",
            "tool_calls": [
                {"id": "functions.ls:0", "function": {"name": "ls", "arguments": '{"path": "."}'}},
                {"id": "functions.read:1", "function": {"name": "read_file", "arguments": ""}},
            ],
        }
    )
    # Only the first tool answered before the process died; its output had invalid UTF-8.
    ls_result = b"setup.py\nREADME \xff\n"
    history.append({"role": "tool", "tool_call_id": "functions.ls:0", "content": ls_result})
    history.append({"role": "tool", "tool_call_id": "call_gone", "content": "stale result"})
    history.append({"role": "user", "content": "Are you still there?"})
    print(json.dumps(history.to_api(), indent=1, ensure_ascii=False)[:1200])
    system, messages = history.to_api(provider="anthropic")
    print(f"... and for Anthropic: system={system!r}, {len(messages)} alternating turns")
    try:
        history.append({"role": "tool", "content": "which call was this?"})
    except agentmem.InvalidMessageError as err:
        print(f"refused: {err}")


def part_four(root: Path) -> None:
    print("\n=== 4. across sessions: topic files, semantic memory, recall ===")
    from agentmem.semantic import LocalMemoryClient, SemanticMemoryExtension

    updater = ScriptedLLM(
        [
            tool_call("list_memories", {}),
            tool_call(
                "write_memory", {"topic": "deploy", "content": "Deploy with `make release`."}
            ),
            {"role": "assistant", "content": "Saved what this task taught."},
        ]
    )
    with agentmem.Memory(root=root, llm=updater) as mem:
        ext = SemanticMemoryExtension(client=LocalMemoryClient(mem), user_id="ana", infer=False)
        with mem.session(name="release 1.4", extensions=[ext]) as s:
            s.start_task("Ship release 1.4. I prefer squash merges.")
            for step in range(12):  # twelve model calls: long enough to be worth remembering
                s.append({"role": "assistant", "content": f"Step {step}: ran make release."})
                s.record_usage(900, 40)
            s.finish_task()
            update = s.last_memory_update
            assert update is not None
            print(f"memory update: wrote {list(update.topics)} in {len(update.requests)} requests")
        ext = SemanticMemoryExtension(client=LocalMemoryClient(mem), user_id="ana", infer=False)
        with mem.session(name="release 1.5", extensions=[ext]) as s:
            s.start_task("How should I merge the 1.5 branch?")
            payload = s.context()
            print("system prompt carries the topic file:", "make release" in payload[0]["content"])
            block = next(m["content"] for m in payload if "<memory-context" in str(m["content"]))
            print("remembered for this turn:", [ln for ln in block.splitlines() if "squash" in ln])
        for hit in mem.recall("ran make release", max_results=2):
            print(f"recall: {hit.session_name!r} message {hit.index}: {hit.preview}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--agent-process":
        # Child: run the agent, leave what it sent last on disk, then die without cleanup.
        root = Path(sys.argv[2])
        session_id, payload = part_one(root)
        (root / "last_payload.json").write_text(json.dumps([session_id, payload]))
        sys.stdout.flush()
        os._exit(0)  # like a crash: no close(), no flush of anything agentmem holds
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / ".agentmem"
        subprocess.run([sys.executable, __file__, "--agent-process", str(root)], check=True)
        session_id, payload = json.loads((root / "last_payload.json").read_text())
        part_two(root, session_id, payload)
    part_three()
    with tempfile.TemporaryDirectory() as tmp:
        part_four(Path(tmp) / ".agentmem")


if __name__ == "__main__":
    main()
