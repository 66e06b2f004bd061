"""Claude's memory tool (``memory_20250818``) on agentmem's topic files; runs offline.

    python examples/anthropic_memory_tool.py [ROOT]    # default: a temporary directory

``AgentMemMemoryTool(mem)`` goes where the SDK's ``BetaLocalFilesystemMemoryTool``
would: in ``client.beta.messages.tool_runner(tools=[...])``. Claude's ``/memories``
files become agentmem topics (``/memories/user/prefs.md`` is the topic
``user`` + U+2215 + ``prefs``), scrubbed of secrets, safe with several processes, on the embedded
store or PostgreSQL, and the next session finds them in its system prompt.

This script needs no API key: a scripted HTTP transport plays Claude's part (two
memory commands, then an answer). With a real key, drop ``http_client=`` and the
runner talks to the API.
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any

import httpx2
from anthropic import Anthropic

from agentmem import Memory
from agentmem.integrations.anthropic_memory import AgentMemMemoryTool

MODEL = "claude-sonnet-5-5"
KEY = "sk-proj-" + "Zq7" * 16  # a made-up key: it is redacted before it is stored

# What the scripted "Claude" does, one response per request.
SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "type": "tool_use",
            "id": "t1",
            "name": "memory",
            "input": {"command": "view", "path": "/memories"},
        }
    ],
    [
        {
            "type": "tool_use",
            "id": "t2",
            "name": "memory",
            "input": {
                "command": "create",
                "path": "/memories/user/prefs.md",
                "file_text": f"# Preferences\n- likes tea\n- api key: {KEY}\n",
            },
        }
    ],
    [{"type": "text", "text": "Noted: you like tea."}],
]


def scripted_claude() -> httpx2.Client:
    """An HTTP client whose every ``POST /v1/messages`` gets the next scripted reply."""
    replies = iter(SCRIPT)

    def answer(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        last = body["messages"][-1]["content"]
        for block in last if isinstance(last, list) else []:
            if block.get("type") == "tool_result":
                print(f"tool_result {block['tool_use_id']}: {json.dumps(block['content'])[:90]}")
        content = next(replies)
        return httpx2.Response(
            200,
            json={
                "id": "msg",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": content,
                "stop_reason": "tool_use" if content[0]["type"] == "tool_use" else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )

    return httpx2.Client(transport=httpx2.MockTransport(answer))


def main(root: str) -> None:
    with Memory(root=root) as mem:
        client = Anthropic(api_key="offline", http_client=scripted_claude())
        runner = client.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=1024,
            tools=[AgentMemMemoryTool(mem)],
            messages=[{"role": "user", "content": "Remember that I like tea."}],
        )
        final = runner.until_done()
        print("Claude:", final.content[0].text if final.content[0].type == "text" else final)
        for info in mem.topics.list():
            print(f"topic {info.topic!r}: {mem.topics.read(info.topic)!r}")

    # A later process: the file is in the next session's system prompt.
    with Memory(root=root) as later, later.session(name="next") as s:
        print("next session's system prompt has:", s.topics_prompt.splitlines()[2:5])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:  # removed when the script ends
            main(tmp)
