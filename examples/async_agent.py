"""An asyncio agent loop on agentmem (offline: async scripted models stand in for yours).

    python examples/async_agent.py

An async host uses the async twins where agentmem may call an LLM:
``await s.acontext()`` builds the payload (a trim awaits the async summarizer),
``await s.afinish_task()`` runs the memory updater with the async model. Appends
stay synchronous: they are local writes, durable when they return. The tool calls
of one reply run concurrently with ``asyncio.gather``.

With a real model, pass ``agentmem.adapters.openai_llm(AsyncOpenAI(), "gpt-4o")``
(or ``anthropic_llm(AsyncAnthropic(), ...)``) where this file passes its fakes.
The memory lives in a temporary directory, removed when the script ends.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from agentmem import LLMSummarizer, Memory
from agentmem.testing import AsyncScriptedLLM, tool_call, tool_calls

MODEL = "gpt-4o"


async def summarize(messages: list[dict[str, Any]], tools: Any = None) -> dict[str, Any]:
    """An async model that writes the prose of the thread summary."""
    await asyncio.sleep(0)  # a real one awaits the provider here
    return {"role": "assistant", "content": "Read the db modules in pairs; no slow query yet."}


async def run_tool(call: dict[str, Any]) -> str:
    """A tool that waits on I/O: several run at once."""
    path = json.loads(call["function"]["arguments"])["path"]
    await asyncio.sleep(0.01)
    return f"# {path}\n" + "rows = db.execute(query)\n" * 30


def the_model() -> AsyncScriptedLLM:
    """Twelve replies that read two files each, then the answer."""
    replies: list[Any] = [
        tool_calls(
            [
                ("read_file", {"path": f"src/db/q{2 * i}.py"}),
                ("read_file", {"path": f"src/db/q{2 * i + 1}.py"}),
            ]
        )
        for i in range(12)
    ]
    replies.append({"role": "assistant", "content": "The slow query is in src/db/q17.py."})
    return AsyncScriptedLLM(replies)


def the_updater() -> AsyncScriptedLLM:
    """The model again, continuing the finished task: it saves what the task taught."""
    note = "# Database\n- Queries live in src/db/q*.py; q17 scans a whole table.\n"
    return AsyncScriptedLLM(
        [
            tool_call("write_memory", {"topic": "database", "content": note}),
            {"role": "assistant", "content": "Saved."},
        ]
    )


async def main(root: Path) -> None:
    model = the_model()
    with Memory(root=root, llm=the_updater(), summarizer=LLMSummarizer(summarize)) as mem:
        with mem.session(name="slow query", model=MODEL, context_window=2_500) as s:
            s.start_task("Find the slow query in src/db/.")
            tools_run = 0
            while True:
                payload = await s.acontext()
                reply = await model(payload)
                s.record_usage(usage=reply.pop("usage"))
                s.append(reply)
                if not reply.get("tool_calls"):
                    break
                outputs = await asyncio.gather(*map(run_tool, reply["tool_calls"]))
                for call, output in zip(reply["tool_calls"], outputs, strict=True):
                    s.append({"role": "tool", "tool_call_id": call["id"], "content": output})
                tools_run += len(outputs)
            model.assert_complete()
            print(f"{s.usage.requests} model calls, {tools_run} tools run two at a time")
            summary = next(m["content"] for m in payload if "<thread_summary>" in str(m["content"]))
            print(
                "the async summarizer's words are in the <thread_summary>:",
                "no slow query yet" in summary,
            )
            await s.afinish_task()
            update = s.last_memory_update
            assert update is not None, "the memory updater did not run"
            assert update.error is None, update.error
            print(f"await s.afinish_task(): the memory updater wrote {list(update.topics)}")
        print("memories/database.md:", repr(mem.topics.read("database")))
        hit = mem.recall("slow query q17", max_results=1)[0]
        print(f"recall: {hit.session_name!r}, message {hit.index}: {hit.preview!r}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp) / ".agentmem"))
